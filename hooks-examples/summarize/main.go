// Command summarize is a wasmhooks hook that replaces a long reply with a
// summary written by the host's llm.run capability. Summarising is optional,
// so the hook fails soft: when the model cannot be called it lets the reply
// through unchanged and says why in the decision's reason. See README.md.
package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

// main is never run: a -buildmode=c-shared reactor runs init, not main.
func main() {}

// Defaults of the settings.
const (
	DefaultMinChars     = 400
	DefaultMaxTokens    = 120
	DefaultPromptPrefix = "Summarize the following text in a few sentences. Keep every fact, number, name and instruction the reader needs, and answer with the summary only.\n\n"
)

// handle summarises the point's primary text when it is at least min_chars
// characters long. Invalid settings fail the hook (the operator must fix
// them); a failed llm.run does not.
func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	minChars := inv.SettingInt("min_chars", DefaultMinChars)
	maxTokens := inv.SettingInt("max_tokens", DefaultMaxTokens)
	prefix := inv.SettingString("prompt_prefix", DefaultPromptPrefix)
	if err := inv.SettingsErr(); err != nil {
		return sdk.Decision{}, err
	}
	if minChars < 0 {
		return sdk.Decision{}, fmt.Errorf("setting \"min_chars\": must be at least 0, got %d", minChars)
	}
	if maxTokens < 1 {
		return sdk.Decision{}, fmt.Errorf("setting \"max_tokens\": must be at least 1, got %d", maxTokens)
	}

	text := inv.PrimaryText()
	n := utf8.RuneCountInString(text)
	if n == 0 || n < minChars {
		return sdk.Continue(), nil
	}
	summary, err := sdk.LLMRun(prefix+text, maxTokens)
	if err != nil {
		return sdk.Continue().WithReason("not summarized: " + explain(err)), nil
	}
	summary = strings.TrimSpace(summary)
	m := utf8.RuneCountInString(summary)
	switch {
	case m == 0:
		return sdk.Continue().WithReason("not summarized: the model returned an empty summary"), nil
	case m >= n:
		return sdk.Continue().WithReason(fmt.Sprintf("not summarized: the summary (%d characters) is not shorter than the text (%d)", m, n)), nil
	}
	return sdk.ModifyPrimary(summary).WithReason(fmt.Sprintf("summarized %d characters to %d", n, m)), nil
}

// explain says in a few words why llm.run failed, for the decision's reason.
func explain(err error) string {
	var e *sdk.Error
	switch {
	case errors.Is(err, sdk.ErrInsufficientCredit):
		return "insufficient credit for llm.run"
	case errors.Is(err, sdk.ErrDenied):
		return "llm.run is not granted to this hook"
	case errors.Is(err, sdk.ErrRateLimited):
		return "llm.run is rate limited"
	case errors.As(err, &e):
		return "llm.run failed (" + e.Code + ")"
	}
	return "llm.run returned a malformed result"
}
