// Command block-prompt-injection is a wasmhooks hook that blocks text that
// looks like a prompt-injection attempt, scored with cheap heuristics:
// known phrases, chat-template tokens, role markers, invisible characters,
// and base64 blobs. It calls no capability. See README.md.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

// main is never run: a -buildmode=c-shared reactor runs init, not main.
func main() {}

// Defaults of the settings.
const (
	DefaultThreshold   = 1.0
	DefaultUserMessage = "This message was blocked because it looks like an attempt to manipulate the assistant."
	// maxGap is how many other words may stand between two words of a
	// phrase: "ignore previous instructions" also matches "ignore all of
	// the previous instructions".
	maxGap = 3
)

// Phrase is a phrase to look for and what it adds to the score.
type Phrase struct {
	// Text is the phrase, matched word by word after normalisation.
	Text string
	// Weight is what the phrase adds to the score when found.
	Weight float64
}

// DefaultPhrases are used unless the "phrases" setting replaces them.
var DefaultPhrases = []Phrase{
	{"ignore previous instructions", 1},
	{"ignore prior instructions", 1},
	{"ignore the above", 0.5},
	{"disregard all prior", 1},
	{"disregard previous instructions", 1},
	{"disregard the above", 0.5},
	{"forget your instructions", 1},
	{"forget everything above", 1},
	{"override your instructions", 1},
	{"new instructions", 0.5},
	{"you are now", 0.5},
	{"pretend you are", 0.5},
	{"from now on you", 0.5},
	{"system prompt", 0.5},
	{"reveal your instructions", 1},
	{"reveal your prompt", 1},
	{"print your instructions", 1},
	{"repeat the text above", 0.5},
	{"developer mode", 0.7},
	{"do anything now", 1},
	{"jailbreak", 0.7},
}

// Weights of the signals other than phrases.
const (
	weightTemplateTokens = 1.0 // <|im_start|>, [INST], ... never occur in normal text
	weightRoleMarkers    = 0.5 // two or more lines starting "system:", "assistant:", ...
	weightInvisible      = 0.5 // zero-width or bidi-control characters
	weightHiddenASCII    = 1.0 // text smuggled in Unicode tag characters
	weightBase64         = 0.5 // a long base64 blob that decodes to text
)

// handle scores the point's primary text (every string in it, if it is a
// JSON value) and blocks when the score reaches the threshold. Invalid
// settings fail the hook, so that the operator's failure policy decides.
func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	s, err := readSettings(inv)
	if err != nil {
		return sdk.Decision{}, err
	}
	v, _ := inv.ContextValue(inv.PrimaryField())
	var b strings.Builder
	collect(&b, v)
	r := score(b.String(), s.phrases)
	if r.total == 0 {
		return sdk.Continue(), nil
	}
	summary := r.summary()
	if r.total < s.threshold {
		return sdk.Continue().WithReason(fmt.Sprintf("prompt-injection score %s is below the threshold %s: %s",
			num(r.total), num(s.threshold), summary)), nil
	}
	return sdk.Block(fmt.Sprintf("prompt injection suspected (score %s, threshold %s): %s",
		num(r.total), num(s.threshold), summary)).WithUserMessage(s.userMessage), nil
}

type settings struct {
	phrases     []Phrase
	threshold   float64
	userMessage string
}

func readSettings(inv *sdk.Invocation) (settings, error) {
	s := settings{
		phrases:     DefaultPhrases,
		threshold:   inv.SettingFloat("threshold", DefaultThreshold),
		userMessage: inv.SettingString("user_message", DefaultUserMessage),
	}
	if err := inv.SettingsErr(); err != nil {
		return s, err
	}
	if s.threshold <= 0 {
		return s, fmt.Errorf("setting \"threshold\": must be greater than 0, got %s", num(s.threshold))
	}
	if v, ok := inv.Setting("phrases"); ok {
		p, err := parsePhrases("phrases", v)
		if err != nil {
			return s, err
		}
		s.phrases = p
	}
	if v, ok := inv.Setting("extra_phrases"); ok {
		p, err := parsePhrases("extra_phrases", v)
		if err != nil {
			return s, err
		}
		s.phrases = append(append([]Phrase(nil), s.phrases...), p...)
	}
	return s, nil
}

// parsePhrases reads an array whose items are strings (weight 1) or objects
// {"phrase": "...", "weight": 0.5}.
func parsePhrases(key string, v any) ([]Phrase, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("setting %q: want an array of phrases", key)
	}
	out := make([]Phrase, 0, len(arr))
	for i, e := range arr {
		p := Phrase{Weight: 1}
		switch e := e.(type) {
		case string:
			p.Text = e
		case map[string]any:
			p.Text, _ = e["phrase"].(string)
			if w, ok := e["weight"]; ok {
				f, ok := number(w)
				if !ok || f <= 0 {
					return nil, fmt.Errorf("setting %q: item %d: \"weight\" must be a number greater than 0", key, i)
				}
				p.Weight = f
			}
		default:
			return nil, fmt.Errorf("setting %q: item %d: want a string or {\"phrase\", \"weight\"}", key, i)
		}
		if len(words(p.Text)) == 0 {
			return nil, fmt.Errorf("setting %q: item %d: the phrase has no words", key, i)
		}
		out = append(out, p)
	}
	return out, nil
}

// number returns v as a float64 if it is a JSON number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// collect writes every string in v, a JSON value, to b, one per line.
func collect(b *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		b.WriteString(v)
		b.WriteByte('\n')
	case []any:
		for _, e := range v {
			collect(b, e)
		}
	case map[string]any:
		for _, e := range v {
			collect(b, e)
		}
	}
}

// signal is one reason the score went up.
type signal struct {
	what   string
	weight float64
}

type result struct {
	total   float64
	signals []signal
}

func (r *result) add(what string, weight float64) {
	r.signals = append(r.signals, signal{what, weight})
	r.total += weight
}

func (r *result) summary() string {
	parts := make([]string, len(r.signals))
	for i, s := range r.signals {
		parts[i] = fmt.Sprintf("%s (+%s)", s.what, num(s.weight))
	}
	return strings.Join(parts, ", ")
}

// num formats a score without trailing zeros.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// templateTokens are chat-template control tokens of common model families.
var templateTokens = []string{
	"<|im_start|>", "<|im_end|>", "<|system|>", "<|assistant|>", "<|user|>",
	"<|endoftext|>", "<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>",
	"[inst]", "[/inst]", "<<sys>>", "<</sys>>",
}

// roleLabels start a line that pretends to be another chat turn.
var roleLabels = []string{"system:", "assistant:", "user:", "developer:", "### system", "### instruction", "### assistant", "<system>", "</system>"}

// score computes the prompt-injection score of text.
func score(text string, phrases []Phrase) result {
	var r result
	lower := strings.ToLower(text)

	n := 0
	for _, t := range templateTokens {
		n += strings.Count(lower, t)
	}
	if n > 0 {
		r.add(fmt.Sprintf("%d chat-template %s", n, plural(n, "token", "tokens")), weightTemplateTokens)
	}

	n = 0
	for _, line := range strings.Split(lower, "\n") {
		line = strings.TrimSpace(line)
		for _, l := range roleLabels {
			if strings.HasPrefix(line, l) {
				n++
				break
			}
		}
	}
	if n >= 2 {
		r.add(fmt.Sprintf("%d role markers", n), weightRoleMarkers)
	}

	visible, invisible, hidden := splitInvisible(text)
	if invisible > 0 {
		r.add(fmt.Sprintf("%d invisible %s", invisible, plural(invisible, "character", "characters")), weightInvisible)
	}
	// A subdivision flag emoji (England, Scotland, Wales) uses up to 6 tag
	// characters; more is smuggled text.
	scan := visible
	if utf8.RuneCountInString(hidden) > 6 {
		r.add("text hidden in Unicode tag characters", weightHiddenASCII)
		scan += "\n" + hidden
	}

	if blobs := base64Blobs(visible); len(blobs) > 0 {
		r.add(fmt.Sprintf("%d base64-encoded %s", len(blobs), plural(len(blobs), "text", "texts")), weightBase64)
		for _, b := range blobs {
			scan += "\n" + b
		}
	}

	tokens := words(scan)
	for _, p := range phrases {
		if containsPhrase(tokens, words(p.Text)) {
			r.add(strconv.Quote(p.Text), p.Weight)
		}
	}
	return r
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// splitInvisible removes invisible format characters from s. It returns the
// rest, how many zero-width and bidi-control characters it removed, and the
// ASCII text encoded in Unicode tag characters (U+E0020 to U+E007E), which
// renders as nothing.
func splitInvisible(s string) (visible string, invisible int, hidden string) {
	var v, h strings.Builder
	for _, r := range s {
		switch {
		case r >= 0xE0000 && r <= 0xE007F:
			if r >= 0xE0020 && r <= 0xE007E {
				h.WriteRune(r - 0xE0000)
			}
		case r == 0x200D:
			// The zero-width joiner builds emoji sequences; keep it.
			v.WriteRune(r)
		case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E,
			r >= 0x2060 && r <= 0x2064, r >= 0x2066 && r <= 0x2069, r == 0xFEFF, r == 0x00AD:
			invisible++
		default:
			v.WriteRune(r)
		}
	}
	return v.String(), invisible, h.String()
}

// base64Blobs returns the decoded text of every run of at least 40 base64
// characters that mixes upper case, lower case and digits (so that long
// words and hex digests are not tried) and decodes to mostly printable text.
// Blobs of binary data (images, keys) are not returned: they hide no
// instructions.
func base64Blobs(s string) []string {
	var out []string
	isB64 := func(c byte) bool {
		return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
	}
	for i := 0; i < len(s); {
		if !isB64(s[i]) {
			i++
			continue
		}
		j := i
		var upper, lower, digit bool
		for j < len(s) && isB64(s[j]) {
			c := s[j]
			upper = upper || c >= 'A' && c <= 'Z'
			lower = lower || c >= 'a' && c <= 'z'
			digit = digit || c >= '0' && c <= '9'
			j++
		}
		if j-i >= 40 && upper && lower && digit {
			if text := decodeText(s[i:j]); text != "" {
				out = append(out, text)
			}
		}
		for j < len(s) && s[j] == '=' {
			j++
		}
		i = j
	}
	return out
}

func decodeText(b64 string) string {
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(b64)
		if err != nil || !utf8.Valid(b) {
			continue
		}
		printable := 0
		for _, r := range string(b) {
			if unicode.IsPrint(r) || unicode.IsSpace(r) {
				printable++
			}
		}
		if printable*10 >= utf8.RuneCount(b)*9 {
			return string(b)
		}
	}
	return ""
}

// words normalises s for matching: lower case, invisible characters
// dropped, and split into runs of letters and digits, so that punctuation,
// line breaks and repeated spaces do not matter.
func words(s string) []string {
	s, _, _ = splitInvisible(s)
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// containsPhrase reports whether the words of phrase occur in text in order,
// each at most maxGap other words after the previous one.
func containsPhrase(text, phrase []string) bool {
	if len(phrase) == 0 {
		return false
	}
	for i, w := range text {
		if w != phrase[0] {
			continue
		}
		if matchFrom(text, i+1, phrase[1:]) {
			return true
		}
	}
	return false
}

func matchFrom(text []string, pos int, rest []string) bool {
	if len(rest) == 0 {
		return true
	}
	for j := pos; j < len(text) && j <= pos+maxGap; j++ {
		if text[j] == rest[0] && matchFrom(text, j+1, rest[1:]) {
			return true
		}
	}
	return false
}
