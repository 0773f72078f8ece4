package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/capabilitytest"
)

// fakeProvider returns a fixed completion, or err, and counts calls.
type fakeProvider struct {
	calls atomic.Int64
	c     Completion
	err   error
	last  atomic.Pointer[CompletionRequest]
}

func (p *fakeProvider) Complete(ctx context.Context, req CompletionRequest) (Completion, error) {
	p.calls.Add(1)
	p.last.Store(&req)
	if err := ctx.Err(); err != nil {
		return Completion{}, err
	}
	return p.c, p.err
}

var llmCases = []capabilitytest.Case{
	{Name: "prompt", Payload: `{"prompt": "Summarize: The cat sat on the mat. The cat was happy. Dogs bark."}`, Valid: true},
	{Name: "max_tokens 1", Payload: `{"prompt": "x", "max_tokens": 1}`, Valid: true},
	{Name: "max_tokens 4096", Payload: `{"prompt": "x", "max_tokens": 4096}`, Valid: true},
	{Name: "max_tokens 1e2", Payload: `{"prompt": "x", "max_tokens": 1e2}`, Valid: true},
	{Name: "no prompt", Payload: `{}`},
	{Name: "empty prompt", Payload: `{"prompt": ""}`},
	{Name: "prompt not a string", Payload: `{"prompt": 1}`},
	{Name: "max_tokens 0", Payload: `{"prompt": "x", "max_tokens": 0}`},
	{Name: "max_tokens 4097", Payload: `{"prompt": "x", "max_tokens": 4097}`},
	{Name: "max_tokens as a string", Payload: `{"prompt": "x", "max_tokens": "100"}`},
	{Name: "max_tokens fractional", Payload: `{"prompt": "x", "max_tokens": 1.5}`},
	{Name: "max_tokens negative", Payload: `{"prompt": "x", "max_tokens": -1}`},
	{Name: "model chosen by the hook", Payload: `{"prompt": "x", "model": "gpt-4-expensive"}`},
	{Name: "tenant chosen by the hook", Payload: `{"prompt": "x", "tenant": "other"}`},
	{Name: "not an object", Payload: `"prompt"`},
}

func TestLLMConformanceOffline(t *testing.T) {
	capabilitytest.Run(t, LLM(LLMConfig{}), llmCases...)
}

func TestLLMConformanceOpenAI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model": "m-1", "choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}`)
	}))
	defer srv.Close()
	capabilitytest.Run(t, LLM(LLMConfig{Provider: &OpenAIProvider{BaseURL: srv.URL, APIKey: "k", HTTPClient: srv.Client()}}), llmCases...)
}

func TestLLMCost(t *testing.T) {
	tests := []struct {
		name    string
		cfg     LLMConfig
		payload string
		want    int64
	}{
		// "hello world": 11 bytes -> 6 + 8 = 14 input tokens.
		{"defaults", LLMConfig{}, `{"prompt": "hello world"}`, 14*1 + 256*2},
		{"max_tokens", LLMConfig{}, `{"prompt": "hello world", "max_tokens": 10}`, 14 + 10*2},
		{"max_tokens as 1e1", LLMConfig{}, `{"prompt": "hello world", "max_tokens": 1e1}`, 14 + 10*2},
		{"pricing", LLMConfig{Pricing: Pricing{InputToken: 3, OutputToken: 5}}, `{"prompt": "hello world", "max_tokens": 10}`, 14*3 + 10*5},
		{"default max tokens", LLMConfig{DefaultMaxTokens: 100}, `{"prompt": "hello world"}`, 14 + 100*2},
		{"default max tokens over the limit", LLMConfig{DefaultMaxTokens: 99999}, `{"prompt": "hello world"}`, 14 + 4096*2},
		{"no spaces", LLMConfig{}, `{"prompt": "` + strings.Repeat("中文", 50) + `"}`, 158 + 256*2}, // 300 bytes
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := abi.ParseJSON([]byte(tc.payload), abi.JSONLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if got := LLM(tc.cfg).Cost(p); got != tc.want {
				t.Errorf("Cost = %d, want %d", got, tc.want)
			}
		})
	}
}

// llmRunner is a runner with llm.run billed on a MemoryLedger.
func llmRunner(t *testing.T, p Provider, funds int64) (*capability.Runner, *capability.MemoryLedger, *capability.MemoryUsageSink) {
	t.Helper()
	ledger := capability.NewMemoryLedger()
	if funds > 0 {
		if err := ledger.Credit("acme", funds); err != nil {
			t.Fatal(err)
		}
	}
	reg := capability.NewRegistry()
	if err := Register(reg, Config{Provider: p, Ledger: ledger}); err != nil {
		t.Fatal(err)
	}
	usage := &capability.MemoryUsageSink{}
	r, err := capability.NewRunner(reg, capability.RunnerOptions{Usage: usage})
	if err != nil {
		t.Fatal(err)
	}
	return r, ledger, usage
}

func llmCall(payload string) *abi.Call {
	return &abi.Call{Name: LLMName, Payload: []byte(payload), Seq: 1, Caller: abi.Caller{
		Tenant: "acme", Hook: "h", Invocation: "inv-1", Granted: []string{LLMName}}}
}

func balance(t *testing.T, l capability.Ledger) (avail, pending int64) {
	t.Helper()
	avail, pending, err := l.Balance(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return avail, pending
}

func TestLLMBilling(t *testing.T) {
	const funds = 10000
	tests := []struct {
		name          string
		provider      *fakeProvider
		funds         int64
		payload       string
		want          abi.Status
		wantCharged   int64
		wantUncharged int64
		wantCalls     int64
		wantBody      string
	}{
		{name: "actual usage is settled", funds: funds,
			provider: &fakeProvider{c: Completion{Text: "hi", Model: "m", Provider: "fake", InputTokens: 5, OutputTokens: 7}},
			payload:  `{"prompt": "hello there", "max_tokens": 20}`,
			want:     abi.StatusOK, wantCharged: 5 + 7*2, wantCalls: 1,
			wantBody: `{"model":"m","provider":"fake","text":"hi","usage":{"input_tokens":5,"output_tokens":7}}`},
		{name: "a provider over-reporting is charged the reservation only", funds: funds,
			// reservation: (11+1)/2+8 = 14 input + 20*2 output = 54
			provider: &fakeProvider{c: Completion{Text: "hi", Model: "m", Provider: "fake", InputTokens: 100, OutputTokens: 100}},
			payload:  `{"prompt": "hello there", "max_tokens": 20}`,
			want:     abi.StatusOK, wantCharged: 54, wantUncharged: 300 - 54, wantCalls: 1},
		{name: "insufficient credit: the provider gets no call", funds: 53,
			provider: &fakeProvider{c: Completion{Text: "hi", InputTokens: 1, OutputTokens: 1}},
			payload:  `{"prompt": "hello there", "max_tokens": 20}`,
			want:     abi.StatusInsufficientCredit, wantCalls: 0},
		{name: "zero balance", funds: 0,
			provider: &fakeProvider{},
			payload:  `{"prompt": "hello"}`,
			want:     abi.StatusInsufficientCredit, wantCalls: 0},
		{name: "provider failure charges nothing and leaks nothing", funds: funds,
			provider: &fakeProvider{err: &ProviderError{Provider: "openai", StatusCode: 401, Reason: "provider said: Incorrect API key provided: sk-abc***"}},
			payload:  `{"prompt": "hello"}`,
			want:     abi.StatusCapabilityFailed, wantCalls: 1,
			wantBody: `{"code":"capability_failed","message":"capability llm.run failed"}`},
		{name: "negative token counts count as zero", funds: funds,
			provider: &fakeProvider{c: Completion{Text: "x", Model: "m", InputTokens: -5, OutputTokens: -1}},
			payload:  `{"prompt": "hello"}`,
			want:     abi.StatusOK, wantCharged: 0, wantCalls: 1,
			wantBody: `{"model":"m","provider":"unknown","text":"x","usage":{"input_tokens":0,"output_tokens":0}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ledger, usage := llmRunner(t, tc.provider, tc.funds)
			reply := r.HostCall(context.Background(), llmCall(tc.payload))
			if reply.Status != tc.want {
				t.Fatalf("status %v %s, want %v", reply.Status, reply.Body, tc.want)
			}
			if tc.wantBody != "" && string(reply.Body) != tc.wantBody {
				t.Errorf("body %s, want %s", reply.Body, tc.wantBody)
			}
			if reply.Charged != tc.wantCharged {
				t.Errorf("charged %d, want %d", reply.Charged, tc.wantCharged)
			}
			if got := tc.provider.calls.Load(); got != tc.wantCalls {
				t.Errorf("provider called %d times, want %d", got, tc.wantCalls)
			}
			avail, pending := balance(t, ledger)
			if avail != tc.funds-tc.wantCharged || pending != 0 {
				t.Errorf("balance %d pending %d, want %d, 0", avail, pending, tc.funds-tc.wantCharged)
			}
			recs := usage.Records()
			if len(recs) != 1 || recs[0].Uncharged != tc.wantUncharged {
				t.Errorf("records %+v, want uncharged %d", recs, tc.wantUncharged)
			}
		})
	}
}

func TestLLMPassesMaxTokens(t *testing.T) {
	tests := []struct {
		payload string
		want    int
	}{
		{`{"prompt": "p"}`, DefaultMaxTokens},
		{`{"prompt": "p", "max_tokens": 7}`, 7},
		{`{"prompt": "p", "max_tokens": 7.0}`, 7},
	}
	for _, tc := range tests {
		t.Run(tc.payload, func(t *testing.T) {
			p := &fakeProvider{c: Completion{Text: "x"}}
			r, _, _ := llmRunner(t, p, 100000)
			if reply := r.HostCall(context.Background(), llmCall(tc.payload)); reply.Status != abi.StatusOK {
				t.Fatalf("status %v %s", reply.Status, reply.Body)
			}
			if got := p.last.Load(); got.MaxTokens != tc.want || got.Prompt != "p" {
				t.Errorf("request %+v, want max_tokens %d", got, tc.want)
			}
		})
	}
}

func TestWholeNumber(t *testing.T) {
	tests := []struct {
		in   any
		want int64
		ok   bool
	}{
		{jsonNumber("5"), 5, true},
		{jsonNumber("5.0"), 5, true},
		{jsonNumber("1e3"), 1000, true},
		{jsonNumber("5.5"), 0, false},
		{"5", 0, false},
		{nil, 0, false},
	}
	for _, tc := range tests {
		got, ok := wholeNumber(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("wholeNumber(%v) = %d, %v", tc.in, got, ok)
		}
	}
}

func TestRegisterBuiltins(t *testing.T) {
	reg := capability.NewRegistry()
	if err := Register(reg, Config{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"kv.get", "kv.set", "llm.run", "log.write"}
	if got := reg.Names(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if err := Register(reg, Config{}); !errors.Is(err, capability.ErrDuplicateCapability) {
		t.Errorf("second Register: %v", err)
	}
	c, _ := reg.Lookup(LLMName)
	if len(c.Gates) != 0 {
		t.Errorf("llm.run has gates without a ledger")
	}
	reg2 := capability.NewRegistry()
	if err := Register(reg2, Config{Ledger: capability.NewMemoryLedger()}); err != nil {
		t.Fatal(err)
	}
	if c, _ := reg2.Lookup(LLMName); len(c.Gates) != 1 {
		t.Errorf("llm.run has %d gates with a ledger, want 1", len(c.Gates))
	}
}

func jsonNumber(s string) json.Number { return json.Number(s) }

func TestCreditSaturates(t *testing.T) {
	p := Pricing{InputToken: 1, OutputToken: 2}
	tests := []struct {
		in, out, want int64
	}{
		{0, 0, 0},
		{5, 7, 19},
		{math.MaxInt64, 0, math.MaxInt64},
		{0, math.MaxInt64 / 2, math.MaxInt64 - 1},
		{0, math.MaxInt64/2 + 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
	}
	for _, tc := range tests {
		if got := credit(p, tc.in, tc.out); got != tc.want {
			t.Errorf("credit(%d, %d) = %d, want %d", tc.in, tc.out, got, tc.want)
		}
	}
}
