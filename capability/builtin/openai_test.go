package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

const goodCompletion = `{"id": "c1", "model": "gpt-test-2024", "choices": [{"index": 0,
	"message": {"role": "assistant", "content": "A short summary."}, "finish_reason": "stop"}],
	"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}`

func TestOpenAIProviderRequest(t *testing.T) {
	var got struct {
		method, path, auth, ctype string
		body                      map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path = r.Method, r.URL.Path
		got.auth, got.ctype = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got.body); err != nil {
			t.Errorf("request body %s: %v", b, err)
		}
		fmt.Fprint(w, goodCompletion)
	}))
	defer srv.Close()

	p := &OpenAIProvider{BaseURL: srv.URL + "/v1/", APIKey: "sk-test-123", Model: "gpt-test", HTTPClient: srv.Client()}
	c, err := p.Complete(context.Background(), CompletionRequest{Prompt: "Summarize: hello", MaxTokens: 42})
	if err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPost || got.path != "/v1/chat/completions" {
		t.Errorf("%s %s", got.method, got.path)
	}
	if got.auth != "Bearer sk-test-123" || got.ctype != "application/json" {
		t.Errorf("Authorization %q, Content-Type %q", got.auth, got.ctype)
	}
	wantBody := `{"max_tokens":42,"messages":[{"content":"Summarize: hello","role":"user"}],"model":"gpt-test"}`
	if b, _ := abi.Marshal(got.body); string(b) != wantBody {
		t.Errorf("body %s, want %s", b, wantBody)
	}
	want := Completion{Text: "A short summary.", Model: "gpt-test-2024", Provider: "openai", InputTokens: 12, OutputTokens: 4}
	if c != want {
		t.Errorf("completion %+v, want %+v", c, want)
	}
}

func TestOpenAIProviderDefaults(t *testing.T) {
	var model string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		model = body.Model
		if r.Header.Get("Authorization") != "" {
			t.Error("Authorization sent without a key")
		}
		fmt.Fprint(w, `{"choices": [{"message": {"content": ""}}]}`)
	}))
	defer srv.Close()
	c, err := (&OpenAIProvider{BaseURL: srv.URL}).Complete(context.Background(), CompletionRequest{Prompt: "p", MaxTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	if model != DefaultOpenAIModel || c.Model != DefaultOpenAIModel || c.Text != "" {
		t.Errorf("model sent %q, completion %+v", model, c)
	}
}

func TestOpenAIProviderFailures(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		maxBytes   int64
		wantStatus int
		wantReason string
	}{
		{name: "unauthorized", status: 401, body: `{"error": {"message": "Incorrect API key provided: sk-te***23"}}`,
			wantStatus: 401, wantReason: "Incorrect API key"},
		{name: "rate limited", status: 429, body: `{"error": {"message": "Rate limit reached"}}`, wantStatus: 429},
		{name: "server error without json", status: 502, body: `<html>bad gateway</html>`, wantStatus: 502, wantReason: "non-2xx"},
		{name: "malformed json", status: 200, body: `{"choices": [`, wantStatus: 200, wantReason: "malformed"},
		{name: "no choices", status: 200, body: `{"choices": []}`, wantStatus: 200, wantReason: "malformed"},
		{name: "null content", status: 200, body: `{"choices": [{"message": {"content": null}}]}`, wantStatus: 200, wantReason: "malformed"},
		{name: "negative tokens", status: 200, body: `{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": -1}}`, wantStatus: 200, wantReason: "negative"},
		{name: "oversize body", status: 200, body: `{"choices": [{"message": {"content": "` + strings.Repeat("x", 4096) + `"}}]}`,
			maxBytes: 1024, wantStatus: 200, wantReason: "over 1024 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Secret-Header", "leaky")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			p := &OpenAIProvider{BaseURL: srv.URL, APIKey: "sk-test-123", HTTPClient: srv.Client(), MaxResponseBytes: tc.maxBytes}
			_, err := p.Complete(context.Background(), CompletionRequest{Prompt: "p", MaxTokens: 1})
			var pe *ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ProviderError", err)
			}
			if pe.StatusCode != tc.wantStatus || !strings.Contains(err.Error(), tc.wantReason) {
				t.Errorf("error %q (status %d), want status %d and %q", err, pe.StatusCode, tc.wantStatus, tc.wantReason)
			}
			if strings.Contains(err.Error(), "sk-test-123") || strings.Contains(err.Error(), "leaky") {
				t.Errorf("error leaks the key or a header: %v", err)
			}

			// Through the runner the hook learns nothing of it.
			reg := capability.NewRegistry()
			reg.MustRegister(LLM(LLMConfig{Provider: p}))
			r, _ := capability.NewRunner(reg, capability.RunnerOptions{})
			reply := r.HostCall(context.Background(), llmCall(`{"prompt": "p"}`))
			if reply.Status != abi.StatusCapabilityFailed || string(reply.Body) != `{"code":"capability_failed","message":"capability llm.run failed"}` {
				t.Errorf("reply %v %s", reply.Status, reply.Body)
			}
		})
	}
}

func TestOpenAIProviderCancellation(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	t.Run("context cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := (&OpenAIProvider{BaseURL: srv.URL, HTTPClient: srv.Client()}).Complete(ctx, CompletionRequest{Prompt: "p", MaxTokens: 1})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v is not context.Canceled", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("took %v", time.Since(start))
		}
	})
	t.Run("timeout", func(t *testing.T) {
		_, err := (&OpenAIProvider{BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: 50 * time.Millisecond}).
			Complete(context.Background(), CompletionRequest{Prompt: "p", MaxTokens: 1})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v is not context.DeadlineExceeded", err)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := (&OpenAIProvider{BaseURL: srv.URL, HTTPClient: srv.Client()}).Complete(ctx, CompletionRequest{Prompt: "p", MaxTokens: 1})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v", err)
		}
	})
}

func TestOpenAIProviderUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := (&OpenAIProvider{BaseURL: url, Timeout: 2 * time.Second}).Complete(context.Background(), CompletionRequest{Prompt: "p", MaxTokens: 1})
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 0 {
		t.Errorf("error %v", err)
	}
}
