// Command redact-secrets is a wasmhooks hook that replaces secrets (API keys,
// tokens, private keys, email addresses) in the text at its hook point with
// a placeholder. It calls no capability. See README.md.
package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

// main is never run: a -buildmode=c-shared reactor runs init, not main.
func main() {}

// DefaultReplacement is what a secret is replaced with unless the
// "replacement" setting says otherwise.
const DefaultReplacement = "[REDACTED]"

// DefaultPatterns are the patterns used unless the "patterns" setting
// replaces them. A pattern with a group named "secret" has only that group
// replaced, so "Bearer abc..." becomes "Bearer [REDACTED]".
//
// A format with a prefix of its own asks for no word boundary: a key glued
// to other characters ("x" + key, key + "0") is still found, where a \b
// let it through, and each match runs to the end of the run of the key's
// characters it ends in, so that a prefix glued before a key ("AKIA" + 15
// characters + a key) cannot end the match inside the key and leave the
// rest of it. An unglued sk- and bearer keep their \b, which ordinary
// words need (README, "Default patterns": what each pattern catches and
// misses). The C, Rust and AssemblyScript ports hold copies
// of this list, checked and rewritten by TestPortsHoldTheDefaultPatterns.
var DefaultPatterns = []string{
	// PEM private key blocks, whole.
	`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`,
	// AWS access key IDs: long-term (AKIA) and temporary (ASIA).
	`(?:AKIA|ASIA)[0-9A-Z]{16,}`,
	// OpenAI-, Anthropic- and OpenRouter-style secret keys: sk-...,
	// sk-proj-..., sk-ant-..., sk-or-v1-... After a non-word character,
	// any; glued to a word character, only what a word chain
	// (task-force-...) is not: 32 letters and digits in a row, a known
	// sub-prefix and 40 key characters, or OpenRouter's sub-prefix and its
	// 64 hex digits (not 40 key characters: task-or-v2- and a slug of
	// joined words is no key). Two patterns, not one alternation, so that
	// the ports' engines see the bytes "sk-" every match of each holds (a
	// text without a k skips them).
	`\bsk-[A-Za-z0-9_-]{20,}`,
	`sk-(?:[A-Za-z0-9]{32,}[A-Za-z0-9_-]*|(?:proj|svcacct|admin|ant-[a-z]+[0-9]+)-[A-Za-z0-9_-]{40,}|or-v[0-9]+-[0-9a-f]{64}[A-Za-z0-9_-]*)`,
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
	`gh[pousr]_[A-Za-z0-9]{36}[A-Za-z0-9_]*`,
	`github_pat_[A-Za-z0-9_]{22,}`,
	// Slack tokens.
	`xox[abposr]-[A-Za-z0-9-]{10,}`,
	// Google API keys.
	`AIza[0-9A-Za-z_-]{35,}`,
	// JSON Web Tokens: the last part runs over further dot-joined segments.
	`eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*`,
	// Bearer tokens, as in an Authorization header: the token only. The
	// \b spares the word after torchbearer or cupbearer.
	`(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)`,
	// Email addresses (with _ in the local part, which a \b before it cut).
	// The domain is bounded as RFC 1035 bounds it: labels of at most 63
	// characters, and at most 16 of them (Go refuses a count nested in a
	// count past 1,000 repetitions: 14 x 63 is 882), so that a match is at most
	// 1,024 bytes past the "@" and the prefilter reads a window around it,
	// not the whole run (README, "Cost"); the local part is left unbounded,
	// the prefilter reading it without the regexp.
	`[A-Za-z0-9_.%+-]+@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,14}\.[A-Za-z]{2,63}`,
}

// handle redacts the point's primary field: a string, or every string inside
// a JSON value (tool arguments and results). Invalid settings are an error,
// which fails the hook so that the operator's failure policy decides; a
// redactor that silently ran with the wrong patterns would leak.
func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	patterns := inv.SettingStrings("patterns")
	if patterns == nil {
		patterns = DefaultPatterns
	}
	patterns = append(slices.Clip(patterns), inv.SettingStrings("extra_patterns")...)
	replacement := inv.SettingString("replacement", DefaultReplacement)
	if err := inv.SettingsErr(); err != nil {
		return sdk.Decision{}, err
	}
	res, err := compile(patterns)
	if err != nil {
		return sdk.Decision{}, err
	}

	value, ok := inv.ContextValue(inv.PrimaryField())
	if !ok || inv.PrimaryField() == "" {
		return sdk.Continue(), nil
	}
	r := redactor{res: res, replacement: replacement}
	redacted := r.value(value)
	if r.count == 0 {
		return sdk.Continue(), nil
	}
	return sdk.ModifyPrimary(redacted).WithReason(fmt.Sprintf("redacted %d %s", r.count, plural(r.count, "secret", "secrets"))), nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cache holds the last compiled pattern list. An instance serves one hook
// with one set of settings, so this almost always hits.
var cache struct {
	sync.Mutex // guards the fields below
	key        string
	res        []pattern
}

// compile compiles patterns and their prefilters, reusing the last result
// for the same list.
func compile(patterns []string) ([]pattern, error) {
	key := strings.Join(patterns, "\x00")
	cache.Lock()
	defer cache.Unlock()
	if cache.res != nil && cache.key == key {
		return cache.res, nil
	}
	res := make([]pattern, 0, len(patterns))
	for i, p := range patterns {
		pat, err := newPattern(p)
		if err != nil {
			return nil, fmt.Errorf("setting patterns: pattern %d (%q) is not a valid Go regular expression: %w", i, p, err)
		}
		res = append(res, pat)
	}
	cache.key, cache.res = key, res
	return res, nil
}

type redactor struct {
	res         []pattern
	replacement string
	count       int
	scratch     []int // for findAll
}

// value redacts every string in v, a JSON value, and returns the result;
// object keys are left alone.
func (r *redactor) value(v any) any {
	switch v := v.(type) {
	case string:
		return r.text(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = r.value(e)
		}
		return out
	}
	return v
}

type span struct{ start, end int }

// text replaces every span any pattern matches in s. Spans are found in the
// original text and merged where they overlap, so each secret counts once
// whatever the order of the patterns and whatever the replacement.
func (r *redactor) text(s string) string {
	var spans []span
	for i := range r.res {
		p := &r.res[i]
		g := p.re.SubexpIndex("secret")
		p.findAll(s, &r.scratch, func(m []int, off int) {
			sp := span{off + m[0], off + m[1]}
			if g > 0 && m[2*g] >= 0 {
				sp = span{off + m[2*g], off + m[2*g+1]}
			}
			if sp.end > sp.start {
				spans = append(spans, sp)
			}
		})
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		b.WriteString(s[last:cur.start])
		b.WriteString(r.replacement)
		last = cur.end
		r.count++
	}
	b.WriteString(s[last:])
	return b.String()
}
