package builtin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

const article = `The city council approved the new bicycle lane plan on Tuesday.
The plan adds forty kilometres of protected bicycle lanes across the city.
Council members said the bicycle lanes will make commuting safer.
Lunch was served at noon.
Construction of the lanes starts in the spring and the city expects the plan to finish in two years.`

func TestSummarize(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		maxWords int
		want     string
	}{
		{"empty", "", 10, ""},
		{"only space", " \n\t ", 10, ""},
		{"zero budget", "One two three.", 0, ""},
		{"one sentence fits", "The cat sat on the mat.", 10, "The cat sat on the mat."},
		{"one sentence cut to the budget", "The cat sat on the mat.", 3, "The cat sat"},
		{"drops the off-topic sentence and keeps the order", article, 40,
			"The city council approved the new bicycle lane plan on Tuesday. " +
				"The plan adds forty kilometres of protected bicycle lanes across the city. " +
				"Council members said the bicycle lanes will make commuting safer."},
		{"tight budget keeps the best sentence", article, 12,
			"The plan adds forty kilometres of protected bicycle lanes across the city."},
		{"white space collapsed", "A  b\tc.\n\nD e.", 10, "A b c. D e."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.text, tc.maxWords)
			if got != tc.want {
				t.Errorf("Summarize = %q\nwant        %q", got, tc.want)
			}
			if n := len(strings.Fields(got)); n > tc.maxWords {
				t.Errorf("%d words over a budget of %d", n, tc.maxWords)
			}
			if again := Summarize(tc.text, tc.maxWords); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestSplitSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"One. Two! Three? Four", []string{"One.", "Two!", "Three?", "Four"}},
		{`He said "hi." Then left.`, []string{`He said "hi."`, "Then left."}},
		{"Pi is 3.14 or so. Yes.", []string{"Pi is 3.14 or so.", "Yes."}},
		{"Wait... what?! ok", []string{"Wait...", "what?!", "ok"}},
		{"line one\nline two\r\nline three", []string{"line one", "line two", "line three"}},
		{"Ünïcødé works. 中文没有空格。", []string{"Ünïcødé works.", "中文没有空格。"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := splitSentences(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStripInstruction(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Summarize: The cat sat.", " The cat sat."},
		{"Summarise this reply: hi", " hi"},
		{"TL;DR: long text", " long text"},
		{"Note: keep me", "Note: keep me"},
		{"The summary. Of things: here", "The summary. Of things: here"},
		{"no colon at all", "no colon at all"},
	}
	for _, tc := range tests {
		if got := stripInstruction(tc.in); got != tc.want {
			t.Errorf("stripInstruction(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOfflineProvider(t *testing.T) {
	prompt := "Summarize: " + article
	c, err := OfflineProvider{}.Complete(context.Background(), CompletionRequest{Prompt: prompt, MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	if c.Provider != "offline-extractive" || c.Model != "extractive-v1" {
		t.Errorf("identity %q %q", c.Provider, c.Model)
	}
	if strings.Contains(c.Text, "Summarize") {
		t.Errorf("the instruction leaked into the summary: %q", c.Text)
	}
	if c.InputTokens != int64(len(strings.Fields(prompt))) || c.OutputTokens != int64(len(strings.Fields(c.Text))) || c.OutputTokens > 12 {
		t.Errorf("tokens %d in, %d out for %q", c.InputTokens, c.OutputTokens, c.Text)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (OfflineProvider{}).Complete(ctx, CompletionRequest{Prompt: "x", MaxTokens: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if c, _ := (OfflineProvider{}).Complete(context.Background(), CompletionRequest{Prompt: strings.Repeat("word ", 1000)}); c.OutputTokens > DefaultMaxTokens {
		t.Errorf("default budget: %d output tokens", c.OutputTokens)
	}
}
