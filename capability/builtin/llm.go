package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// LLMName is the name of the LLM capability.
const LLMName = "llm.run"

// Defaults of LLMConfig and Pricing.
const (
	// DefaultMaxTokens is the output budget of a call that gives no
	// max_tokens, when LLMConfig.DefaultMaxTokens is zero.
	DefaultMaxTokens = 256
	// MaxTokensLimit is the largest max_tokens a payload may ask for.
	MaxTokensLimit = 4096
	// DefaultMaxPromptChars bounds the prompt, in characters, when
	// LLMConfig.MaxPromptChars is zero.
	DefaultMaxPromptChars = 65536
	// DefaultInputTokenPrice is the credit per input token when
	// Pricing.InputToken is zero.
	DefaultInputTokenPrice = 1
	// DefaultOutputTokenPrice is the credit per output token when
	// Pricing.OutputToken is zero.
	DefaultOutputTokenPrice = 2
)

// CompletionRequest is what llm.run asks a Provider for. It is a plain value,
// safe to copy.
type CompletionRequest struct {
	// Prompt is the user message, as the hook sent it.
	Prompt string
	// MaxTokens bounds the completion's output tokens (1 to 4096).
	MaxTokens int
}

// Completion is a Provider's answer. It is a plain value, safe to copy.
type Completion struct {
	// Text is the completion.
	Text string
	// Model is the model that produced it.
	Model string
	// Provider names the provider ("openai", "offline-extractive").
	Provider string
	// InputTokens and OutputTokens are what the provider counted.
	InputTokens  int64
	OutputTokens int64
}

// Provider completes prompts for llm.run. Its errors go to the operator's log
// only; the hook sees "capability llm.run failed".
//
// Implementations must be safe for concurrent use by multiple goroutines and
// must honour ctx.
type Provider interface {
	Complete(ctx context.Context, req CompletionRequest) (Completion, error)
}

// Pricing is what llm.run costs, in credit per token. The zero value uses the
// defaults. To make llm.run free, give it no CreditGate. It is a plain value,
// safe to copy.
type Pricing struct {
	// InputToken is the credit per input token. Zero means 1.
	InputToken int64
	// OutputToken is the credit per output token. Zero means 2.
	OutputToken int64
}

func (p Pricing) withDefaults() Pricing {
	if p.InputToken <= 0 {
		p.InputToken = DefaultInputTokenPrice
	}
	if p.OutputToken <= 0 {
		p.OutputToken = DefaultOutputTokenPrice
	}
	return p
}

// LLMConfig configures llm.run. The zero value works: the offline provider,
// default pricing, no gates (free). It is read once by LLM; the Provider and
// Gates must be safe for concurrent use.
type LLMConfig struct {
	// Provider completes prompts. Nil means OfflineProvider.
	Provider Provider
	// Pricing is the credit per token. The zero value is the defaults.
	Pricing Pricing
	// DefaultMaxTokens is the output budget when the payload gives none.
	// Zero means DefaultMaxTokens (256).
	DefaultMaxTokens int
	// MaxPromptChars bounds the prompt, in characters. Zero means
	// DefaultMaxPromptChars (65536).
	MaxPromptChars int
	// Gates guard the capability, typically a *capability.CreditGate.
	Gates []capability.Gate
}

// LLM returns the llm.run capability.
//
// Payload: {"prompt": string (1 to MaxPromptChars characters), "max_tokens":
// integer 1..4096 (optional)}, nothing else. Result: {"text": string,
// "model": string, "provider": string, "usage": {"input_tokens": n,
// "output_tokens": n}}.
//
// Cost reserves the worst case: EstimateInputTokens(prompt) input tokens plus
// max_tokens output tokens at the configured prices. After the call the
// provider's actual token counts are settled; the unused part of the
// reservation is released.
func LLM(cfg LLMConfig) capability.Capability {
	provider := cfg.Provider
	if provider == nil {
		provider = OfflineProvider{}
	}
	price := cfg.Pricing.withDefaults()
	defMax := cfg.DefaultMaxTokens
	if defMax <= 0 {
		defMax = DefaultMaxTokens
	}
	defMax = min(defMax, MaxTokensLimit)
	maxChars := cfg.MaxPromptChars
	if maxChars <= 0 {
		maxChars = DefaultMaxPromptChars
	}
	schema := fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "prompt": {"type": "string", "minLength": 1, "maxLength": %d},
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": %d}
  },
  "required": ["prompt"],
  "additionalProperties": false
}`, maxChars, MaxTokensLimit)

	parse := func(payload any) (prompt string, maxTokens int, ok bool) {
		m, ok := payload.(map[string]any)
		if !ok {
			return "", 0, false
		}
		prompt, ok = m["prompt"].(string)
		if !ok {
			return "", 0, false
		}
		maxTokens = defMax
		if n, present := m["max_tokens"]; present {
			v, ok := wholeNumber(n)
			if !ok || v < 1 || v > MaxTokensLimit {
				return "", 0, false
			}
			maxTokens = int(v)
		}
		return prompt, maxTokens, true
	}

	return capability.Capability{
		Name:        LLMName,
		Description: "Completes a prompt with the operator's language model and returns the text and token usage.",
		Schema:      schema,
		Gates:       cfg.Gates,
		Cost: func(payload any) int64 {
			prompt, maxTokens, ok := parse(payload)
			if !ok {
				return 0
			}
			return credit(price, EstimateInputTokens(prompt), int64(maxTokens))
		},
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			prompt, maxTokens, ok := parse(req.Payload)
			if !ok { // the schema makes this unreachable
				return nil, abi.NewError(abi.StatusInvalidRequest, "llm.run needs a prompt and an integer max_tokens")
			}
			c, err := provider.Complete(ctx, CompletionRequest{Prompt: prompt, MaxTokens: maxTokens})
			if err != nil {
				return nil, err
			}
			in, out := max(c.InputTokens, 0), max(c.OutputTokens, 0)
			if c.Provider == "" {
				c.Provider = "unknown"
			}
			return &capability.Result{
				Value: map[string]any{
					"text":     c.Text,
					"model":    c.Model,
					"provider": c.Provider,
					"usage":    map[string]any{"input_tokens": in, "output_tokens": out},
				},
				Usage: capability.Usage{
					Credit: credit(price, in, out),
					Units:  map[string]int64{"input_tokens": in, "output_tokens": out},
				},
			}, nil
		},
	}
}

// EstimateInputTokens is the input-token count llm.run reserves for a prompt:
// half its length in bytes, rounded up, plus 8 for the chat framing.
// Byte-level tokenizers produce at most one token per byte and about one per
// four bytes of English, so this over-reserves English about 2x (released at
// settlement) while still covering scripts without spaces, and it is never
// below the prompt's whitespace-separated word count (each word takes at least
// two bytes with its separator). A provider that counts more than the
// reservation is charged only the reservation; see
// RATIONALE.md#why-is-an-overage-not-charged.
func EstimateInputTokens(prompt string) int64 {
	return int64(len(prompt)+1)/2 + 8
}

// credit prices in input and out output tokens, saturating at the largest
// int64 instead of overflowing into a negative (free) amount.
func credit(p Pricing, in, out int64) int64 {
	a, okA := mul(p.InputToken, in)
	b, okB := mul(p.OutputToken, out)
	if !okA || !okB || a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mul returns a*b for non-negative a and b, and whether it did not overflow.
func mul(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt64/b {
		return 0, false
	}
	return a * b, true
}

// wholeNumber returns v as an integer if it is a json.Number with no
// fractional part. JSON Schema's "integer" accepts 100.0 and 1e2, so this
// must too.
func wholeNumber(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// errNoChoices is returned for a provider response without a completion.
var errNoChoices = errors.New("response has no choices")
