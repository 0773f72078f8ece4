package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of OpenAIProvider.
const (
	// DefaultOpenAIBaseURL is used when OpenAIProvider.BaseURL is empty.
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	// DefaultOpenAIModel is used when OpenAIProvider.Model is empty.
	DefaultOpenAIModel = "gpt-4o-mini"
	// DefaultOpenAITimeout is used when OpenAIProvider.Timeout is zero.
	DefaultOpenAITimeout = 60 * time.Second
	// DefaultMaxResponseBytes is used when
	// OpenAIProvider.MaxResponseBytes is zero.
	DefaultMaxResponseBytes = 1 << 20
)

// OpenAIProvider is a Provider for any OpenAI-compatible chat completions
// API. It sends POST {BaseURL}/chat/completions with
// {"model", "messages": [{"role": "user", "content": prompt}], "max_tokens"}
// and a bearer token, and reads choices[0].message.content and
// usage.prompt_tokens / usage.completion_tokens.
//
// Its errors describe the HTTP status and at most a short excerpt of the
// provider's error message, never headers or the key; they go to the
// operator's log, and the hook sees only "capability llm.run failed".
//
// Set the fields before first use; an OpenAIProvider is then safe for
// concurrent use by multiple goroutines.
type OpenAIProvider struct {
	// BaseURL is the API root, without a trailing slash. Empty means
	// DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer APIKey". Empty sends none.
	APIKey string
	// Model is the model requested. Empty means DefaultOpenAIModel.
	Model string
	// HTTPClient sends the requests. Nil means http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds one request, on top of the call's context. Zero
	// means DefaultOpenAITimeout (60 s).
	Timeout time.Duration
	// MaxResponseBytes bounds the response body read, in bytes. Zero
	// means DefaultMaxResponseBytes (1 MiB).
	MaxResponseBytes int64
}

// ProviderError reports a failed provider request, for the operator. It is not
// modified after it is returned.
type ProviderError struct {
	// Provider names the provider.
	Provider string
	// StatusCode is the HTTP status, or 0 if the request did not get one.
	StatusCode int
	// Reason says what went wrong.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *ProviderError) Error() string {
	msg := e.Provider + ": " + e.Reason
	if e.StatusCode != 0 {
		msg = fmt.Sprintf("%s: HTTP %d: %s", e.Provider, e.StatusCode, e.Reason)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Err.
func (e *ProviderError) Unwrap() error { return e.Err }

type openAIRequest struct {
	Model     string          `json:"model"`
	Messages  []openAIMessage `json:"messages"`
	MaxTokens int             `json:"max_tokens"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIResponse struct {
	Model   string `json:"model"`
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

type openAIError struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Complete implements Provider.
func (p *OpenAIProvider) Complete(ctx context.Context, req CompletionRequest) (Completion, error) {
	perr := func(status int, reason string, err error) (Completion, error) {
		return Completion{}, &ProviderError{Provider: "openai", StatusCode: status, Reason: reason, Err: err}
	}
	base := strings.TrimRight(p.BaseURL, "/")
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	model := p.Model
	if model == "" {
		model = DefaultOpenAIModel
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultOpenAITimeout
	}
	limit := p.MaxResponseBytes
	if limit <= 0 {
		limit = DefaultMaxResponseBytes
	}
	client := p.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}

	body, err := json.Marshal(openAIRequest{
		Model:     model,
		Messages:  []openAIMessage{{Role: "user", Content: req.Prompt}},
		MaxTokens: req.MaxTokens,
	})
	if err != nil {
		return perr(0, "encoding the request", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return perr(0, "building the request", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if p.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return perr(0, "request failed", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return perr(resp.StatusCode, "reading the response", err)
	}
	if int64(len(data)) > limit {
		return perr(resp.StatusCode, fmt.Sprintf("response body over %d bytes", limit), nil)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		reason := "non-2xx response"
		var e openAIError
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			reason = "provider said: " + excerpt(e.Error.Message, 200)
		}
		return perr(resp.StatusCode, reason, nil)
	}
	var out openAIResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return perr(resp.StatusCode, "malformed response", err)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
		return perr(resp.StatusCode, "malformed response", errNoChoices)
	}
	if out.Usage.PromptTokens < 0 || out.Usage.CompletionTokens < 0 {
		return perr(resp.StatusCode, "malformed response: negative token counts", nil)
	}
	if out.Model == "" {
		out.Model = model
	}
	return Completion{
		Text:         *out.Choices[0].Message.Content,
		Model:        out.Model,
		Provider:     "openai",
		InputTokens:  out.Usage.PromptTokens,
		OutputTokens: out.Usage.CompletionTokens,
	}, nil
}

// excerpt returns at most n bytes of s, valid UTF-8, on one line.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}
