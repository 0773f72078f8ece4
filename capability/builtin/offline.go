package builtin

import (
	"context"
	"math"
	"sort"
	"strings"
	"unicode"
)

// OfflineProvider is a Provider that needs no network and no model: an
// honest extractive summariser. It does not generate text; it picks sentences
// of the prompt.
//
// It drops a leading instruction such as "Summarize:" or "TL;DR:", splits the
// rest into sentences (at '.', '!' or '?' followed by a space, and at line
// breaks), scores each sentence by how frequent its words are in the whole
// prompt (common English stop words ignored, normalised by the square root of
// the sentence's length), and returns the best sentences, in their original
// order, that fit in MaxTokens words; sentences scoring below the average are
// never picked. If even the best sentence does not fit it is cut to MaxTokens
// words. The output is deterministic.
//
// Tokens are approximated as whitespace-separated words, for both the input
// (the whole prompt) and the output; a real tokenizer counts more. The result
// reports provider "offline-extractive" and model "extractive-v1".
//
// An OfflineProvider is stateless and safe for concurrent use by multiple
// goroutines.
type OfflineProvider struct{}

// Offline provider identity.
const (
	OfflineProviderName = "offline-extractive"
	OfflineModel        = "extractive-v1"
)

// Complete implements Provider.
func (OfflineProvider) Complete(ctx context.Context, req CompletionRequest) (Completion, error) {
	if err := ctx.Err(); err != nil {
		return Completion{}, err
	}
	budget := req.MaxTokens
	if budget <= 0 {
		budget = DefaultMaxTokens
	}
	text := Summarize(stripInstruction(req.Prompt), budget)
	if err := ctx.Err(); err != nil {
		return Completion{}, err
	}
	return Completion{
		Text:         text,
		Model:        OfflineModel,
		Provider:     OfflineProviderName,
		InputTokens:  int64(len(strings.Fields(req.Prompt))),
		OutputTokens: int64(len(strings.Fields(text))),
	}, nil
}

// stripInstruction drops a leading "Summarize ...:" / "TL;DR:" instruction.
func stripInstruction(p string) string {
	t := strings.TrimSpace(p)
	i := strings.IndexByte(t, ':')
	if i < 0 || i > 80 {
		return p
	}
	head := strings.ToLower(t[:i])
	for _, w := range []string{"summar", "tl;dr", "tldr", "condense", "shorten"} {
		if strings.HasPrefix(head, w) && !strings.ContainsAny(head, ".!?\n") {
			return t[i+1:]
		}
	}
	return p
}

// Summarize returns the highest-scoring sentences of text, in their original
// order, that fit in maxWords whitespace-separated words. See OfflineProvider.
func Summarize(text string, maxWords int) string {
	if maxWords <= 0 {
		return ""
	}
	sents := splitSentences(text)
	if len(sents) == 0 {
		return ""
	}
	type sentence struct {
		text  string
		words int
		score float64
		index int
	}
	freq := make(map[string]int)
	content := make([][]string, len(sents))
	for i, s := range sents {
		for _, w := range wordsOf(s) {
			if !stopWords[w] {
				content[i] = append(content[i], w)
				freq[w]++
			}
		}
	}
	maxFreq := 1
	for _, n := range freq {
		maxFreq = max(maxFreq, n)
	}
	ss := make([]sentence, len(sents))
	for i, s := range sents {
		var sum float64
		for _, w := range content[i] {
			sum += float64(freq[w]) / float64(maxFreq)
		}
		score := 0.0
		if n := len(content[i]); n > 0 {
			score = sum / math.Sqrt(float64(n))
		}
		ss[i] = sentence{text: s, words: len(strings.Fields(s)), score: score, index: i}
	}
	order := make([]int, len(ss))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ss[order[a]].score > ss[order[b]].score })

	// Only sentences scoring at least the average are summary material;
	// the rest are filler however much budget is left.
	var mean float64
	for _, s := range ss {
		mean += s.score
	}
	mean /= float64(len(ss))

	picked := make([]bool, len(ss))
	used, found := 0, false
	for _, i := range order {
		if ss[i].score < mean {
			break
		}
		if used+ss[i].words <= maxWords {
			picked[i] = true
			used += ss[i].words
			found = true
		}
		if used == maxWords {
			break
		}
	}
	if !found {
		return strings.Join(strings.Fields(ss[order[0]].text)[:maxWords], " ")
	}
	var out []string
	for i, s := range ss {
		if picked[i] {
			out = append(out, s.text)
		}
	}
	return strings.Join(out, " ")
}

// splitSentences splits text at sentence-ending punctuation followed by
// white space (closing quotes and brackets stay with their sentence) and at
// line breaks. Sentences are trimmed and runs of white space collapsed.
func splitSentences(text string) []string {
	var out []string
	add := func(s string) {
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			out = append(out, s)
		}
	}
	rs := []rune(text)
	start := 0
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if r == '\n' || r == '\r' {
			add(string(rs[start:i]))
			start = i + 1
			continue
		}
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		j := i + 1
		for j < len(rs) && strings.ContainsRune(`.!?"')]”’»`, rs[j]) {
			j++
		}
		if j == len(rs) || unicode.IsSpace(rs[j]) {
			add(string(rs[start:j]))
			start = j
			i = j - 1
		}
	}
	add(string(rs[start:]))
	return out
}

// wordsOf returns the lower-case words (letters and digits, with inner
// apostrophes) of s.
func wordsOf(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
	out := f[:0]
	for _, w := range f {
		if w = strings.Trim(w, "'"); w != "" {
			out = append(out, w)
		}
	}
	return out
}

var stopWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
		because been before being below between both but by can could did do does doing down during each
		few for from further had has have having he her here hers herself him himself his how i if in into
		is it it's its itself just me more most my myself no nor not now of off on once only or other our
		ours ourselves out over own same she should so some such than that the their theirs them
		themselves then there these they this those through to too under until up very was we were what
		when where which while who whom why will with would you your yours yourself yourselves`) {
		m[w] = true
	}
	return m
}()
