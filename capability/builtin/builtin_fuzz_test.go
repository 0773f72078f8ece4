package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// fuzzCapabilities are the built-in capabilities, picked by the fuzzer's
// first argument.
var fuzzCapabilities = []string{builtin.LLMName, builtin.KVGetName, builtin.KVSetName, builtin.LogWriteName}

// FuzzBuiltins sends any payload to any built-in capability (llm.run,
// kv.get, kv.set, log.write: what a hook's host_call decodes), through the
// runner, llm.run billed on a credit gate and behind an OpenAI-compatible
// provider that answers any status and body (the provider's response is
// decoded too). Whatever the bytes: a known status, an error body that
// decodes to its status's code, a JSON body when OK; no charge unless OK and
// no reservation left pending; llm.run's answer is the provider's content
// and non-negative token counts, as encoding/json reads its response; and a
// value kv.set took, kv.get gives back the same.
func FuzzBuiltins(f *testing.F) {
	for _, s := range []struct {
		capability uint8
		payload    string
		status     uint16
		provider   string
	}{
		{0, `{"prompt":"hello","max_tokens":16}`, 200, `{"model":"m","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`},
		{0, `{"prompt":"hello"}`, 200, `{"choices":[{"message":{"content":null}}]}`},
		{0, `{"prompt":"hello"}`, 200, `{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1,"completion_tokens":9223372036854775807}}`},
		{0, `{"prompt":"hello"}`, 200, `{"choices":[]}`},
		{0, `{"prompt":"hello"}`, 429, `{"error":{"message":"slow down\n\tplease"}}`},
		{0, `{"prompt":"hello"}`, 500, `<html>`},
		{0, `{"prompt":"","max_tokens":0}`, 200, `{}`},
		{0, `{"prompt":"a","max_tokens":4096.0}`, 200, `{"choices":[{"message":{"content":"\ud800"}}]}`},
		{1, `{"key":"a"}`, 200, ``},
		{2, `{"key":"a","value":{"n":[1.50,-0,1e300,"\u2028"]}}`, 200, ``},
		{2, `{"key":"\u00ff","value":null}`, 200, ``},
		{3, `{"level":"info","message":"hello"}`, 200, ``},
		{3, `{"level":"shout","message":"x"}`, 200, ``},
		{3, `null`, 200, ``},
	} {
		f.Add(s.capability, []byte(s.payload), s.status, []byte(s.provider))
	}

	var (
		mu     sync.Mutex // guards answer
		answer struct {
			status int
			body   []byte
		}
	)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		status, body := answer.status, answer.body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	f.Cleanup(provider.Close)

	const funds = 1 << 62
	ledger := capability.NewMemoryLedger()
	if err := ledger.Credit("acme", funds); err != nil {
		f.Fatal(err)
	}
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{
		Provider: &builtin.OpenAIProvider{BaseURL: provider.URL, APIKey: "k", HTTPClient: provider.Client()},
		Ledger:   ledger,
		Logger:   slog.New(slog.DiscardHandler),
	}); err != nil {
		f.Fatal(err)
	}
	runner, err := capability.NewRunner(reg, capability.RunnerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	var seq int
	var charged int64
	call := func(t *testing.T, name string, payload []byte) abi.Reply {
		seq++
		reply := runner.HostCall(context.Background(), &abi.Call{Name: name, Payload: payload, Seq: seq, Caller: abi.Caller{
			Tenant: "acme", Hook: "fuzz", Invocation: "fuzz", Granted: fuzzCapabilities}})
		if !reply.Status.Known() {
			t.Fatalf("%s %s: unknown status %d", name, payload, reply.Status)
		}
		if reply.Status == abi.StatusOK {
			if !json.Valid(reply.Body) {
				t.Fatalf("%s %s: OK with body %s", name, payload, reply.Body)
			}
		} else {
			if reply.Charged != 0 {
				t.Fatalf("%s %s: status %v charged %d", name, payload, reply.Status, reply.Charged)
			}
			if e := abi.DecodeError(reply.Status, reply.Body); e.Code != reply.Status.Code() || e.Message == "malformed error body" {
				t.Fatalf("%s %s: status %v with body %s", name, payload, reply.Status, reply.Body)
			}
		}
		charged += reply.Charged
		avail, pending, err := ledger.Balance(context.Background(), "acme")
		if err != nil || pending != 0 || avail != funds-charged {
			t.Fatalf("%s %s: balance %d pending %d err %v; want %d, 0", name, payload, avail, pending, err, funds-charged)
		}
		return reply
	}

	f.Fuzz(func(t *testing.T, which uint8, payload []byte, status uint16, body []byte) {
		name := fuzzCapabilities[int(which)%len(fuzzCapabilities)]
		mu.Lock()
		answer.status, answer.body = 200+int(status)%400, body
		mu.Unlock()
		reply := call(t, name, payload)
		if reply.Status != abi.StatusOK {
			return
		}
		switch name {
		case builtin.LLMName:
			var want struct {
				Choices []struct {
					Message struct {
						Content *string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
				Usage struct {
					PromptTokens     int64 `json:"prompt_tokens"`
					CompletionTokens int64 `json:"completion_tokens"`
				} `json:"usage"`
			}
			var got struct {
				Text  string `json:"text"`
				Usage struct {
					In  int64 `json:"input_tokens"`
					Out int64 `json:"output_tokens"`
				} `json:"usage"`
			}
			if answer.status/100 != 2 || json.Unmarshal(body, &want) != nil || len(want.Choices) == 0 || want.Choices[0].Message.Content == nil {
				t.Fatalf("llm.run OK on the provider's %d %s", answer.status, body)
			}
			if err := json.Unmarshal(reply.Body, &got); err != nil || got.Text != *want.Choices[0].Message.Content ||
				got.Usage.In != want.Usage.PromptTokens || got.Usage.Out != want.Usage.CompletionTokens || got.Usage.In < 0 || got.Usage.Out < 0 {
				t.Fatalf("llm.run answered %s (%v) for the provider's %s", reply.Body, err, body)
			}
		case builtin.KVSetName:
			sent, err := abi.ParseJSON(payload, abi.JSONLimits{})
			if err != nil {
				t.Fatalf("kv.set took %s: %v", payload, err)
			}
			m := sent.(map[string]any)
			key, _ := json.Marshal(map[string]any{"key": m["key"]})
			back := call(t, builtin.KVGetName, key)
			got, err := abi.ParseJSON(back.Body, abi.JSONLimits{})
			if back.Status != abi.StatusOK || err != nil {
				t.Fatalf("kv.get %s after kv.set %s: %v %s", key, payload, back.Status, back.Body)
			}
			g := got.(map[string]any)
			if g["found"] != true || !reflect.DeepEqual(fuzzCanonical(t, g["value"]), fuzzCanonical(t, m["value"])) {
				t.Fatalf("kv.set %s, kv.get gives %s", payload, back.Body)
			}
		}
	})
}

// fuzzCanonical is v's canonical JSON (abi.Marshal), as a string.
func fuzzCanonical(t *testing.T, v any) string {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
