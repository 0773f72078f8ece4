package chain

import (
	"context"
	"errors"
	"math/rand"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// streamHooks answers invocations as Go hooks would, by binding name, over
// the point's primary field:
//
//	redact*  (transformer) replaces sk-[a-z0-9]+ keys with [REDACTED]
//	shout*   (transformer) replaces "please" with "PLEASE"
//	ban*     (guard) blocks text that contains "forbidden"
//	footer*  (transformer) appends " --bot" to the final window only
//	tail*    (transformer) appends "!" to every window (not local)
//	broken*  (transformer) fails
//	notify*  (guard) notifies on every window
//
// seen records every text a hook received, for the checks that no hook got
// half a character.
type streamHooks struct {
	seen []string
}

var streamKeyRE = regexp.MustCompile(`\bsk-[a-z0-9]+`)

func (h *streamHooks) invoke(_ context.Context, _ *runtime.Module, req runtime.Request) (*runtime.Result, error) {
	p, _ := abi.LookupPoint(req.Point)
	ctx := req.Context
	if ctx == nil { // the chain sends its context as canonical bytes
		var err error
		if ctx, err = req.ContextObject.Map(abi.JSONLimits{}); err != nil {
			return nil, err
		}
	}
	text, _ := ctx[p.Primary].(string)
	h.seen = append(h.seen, text)
	modify := func(s string) (*runtime.Result, error) {
		if s == text {
			return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionContinue}}, nil
		}
		return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionModify, Context: map[string]any{p.Primary: s}}}, nil
	}
	switch name := req.Hook; {
	case strings.HasPrefix(name, "redact"):
		return modify(streamKeyRE.ReplaceAllString(text, "[REDACTED]"))
	case strings.HasPrefix(name, "shout"):
		return modify(strings.ReplaceAll(text, "please", "PLEASE"))
	case strings.HasPrefix(name, "ban"):
		if strings.Contains(text, "forbidden") {
			return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionBlock, Reason: "forbidden word"}}, nil
		}
	case strings.HasPrefix(name, "footer"):
		if ctx["final"] == true {
			return modify(text + " --bot")
		}
	case strings.HasPrefix(name, "tail"):
		return modify(text + "!")
	case strings.HasPrefix(name, "notify"):
		return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionNotify, Reason: "seen"}}, nil
	case strings.HasPrefix(name, "broken"):
		f := &abi.Failure{Code: abi.FailTrap, Message: "boom"}
		return &runtime.Result{Failure: f}, f
	}
	return &runtime.Result{Decision: &abi.Decision{Action: abi.ActionContinue}}, nil
}

// streamEnv is a chain whose bindings at point are answered by a
// streamHooks.
func streamEnv(t *testing.T, bs ...Binding) (*env, *streamHooks) {
	t.Helper()
	h := &streamHooks{}
	for i := range bs {
		if bs[i].Point == "" {
			bs[i].Point = "llm.output.stream"
		}
	}
	return newEnv(t, policyConfig(t, bs...), withInvoke(t, h.invoke)), h
}

// streamAll writes chunks and closes the stream; it returns what was
// released, the outcome and the error that stopped the stream (nil if none).
func streamAll(t *testing.T, c *Chain, point string, chunks []string) (string, *StreamOutcome, error) {
	t.Helper()
	s, err := c.Stream(context.Background(), Input{Tenant: "acme", Point: point, Context: map[string]any{"model": "m"}})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var got strings.Builder
	var stopped error
	for _, ch := range chunks {
		r, err := s.Write(ch)
		got.WriteString(r)
		if err != nil {
			stopped = err
			break
		}
	}
	r, out, err := s.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	got.WriteString(r)
	if out.Text != got.String() {
		t.Errorf("outcome text %q, released %q", out.Text, got.String())
	}
	return got.String(), out, stopped
}

// whole runs the chain once over the whole text, as the streaming point's
// final window: what the stream's released text must equal.
func whole(t *testing.T, c *Chain, point, text string) *Outcome {
	t.Helper()
	p, _ := abi.LookupPoint(point)
	out, err := c.Run(context.Background(), Input{Tenant: "acme", Point: point, Context: map[string]any{
		"model": "m", p.Primary: text, "offset": 0, "final": true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// randomChunks splits s at random byte offsets (inside characters too).
func randomChunks(r *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + r.Intn(min(len(s), 1+r.Intn(40)))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// randomReply is words, keys shorter than 48 characters and, if banned,
// the word the guard blocks.
func randomReply(r *rand.Rand, banned bool) string {
	words := []string{"hello", "world", "please", "the", "key", "is", "ünïcödé", "日本語", "a", "sk", "sk-", "x", "\n", "."}
	var b strings.Builder
	n := 5 + r.Intn(120)
	ban := -1
	if banned {
		ban = r.Intn(n)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(" \n\t "[r.Intn(4)])
		}
		switch {
		case i == ban:
			b.WriteString("forbidden")
		case r.Intn(6) == 0:
			b.WriteString("sk-")
			for k := 5 + r.Intn(40); k > 0; k-- {
				b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[r.Intn(36)])
			}
		default:
			b.WriteString(words[r.Intn(len(words))])
		}
	}
	return b.String()
}

// TestStreamProperty: over random replies and random chunkings, the
// released text equals what the hooks make of the whole reply, and nothing
// a guard blocks is released (the stream stops, having released only a
// prefix of the transformers' whole output without the blocked word).
func TestStreamProperty(t *testing.T) {
	for _, point := range []string{"llm.output.stream", "message.outbound.stream"} {
		t.Run(point, func(t *testing.T) {
			trans := []Binding{
				{Name: "redact", Point: point, Phase: Transformer, Lookahead: 48},
				{Name: "shout", Point: point, Phase: Transformer, Lookahead: 8},
				{Name: "footer", Point: point, Phase: Transformer, Lookahead: 1},
			}
			guarded, _ := streamEnv(t, append(append([]Binding(nil), trans...), Binding{Name: "ban", Point: point, Phase: Guard, Lookahead: 16})...)
			open, _ := streamEnv(t, trans...)
			r := rand.New(rand.NewSource(12))
			replies := 150
			if raceEnabled {
				replies = 40 // the race detector makes each run ten times slower
			}
			for i := 0; i < replies; i++ {
				text := randomReply(r, i%3 == 0)
				want := whole(t, guarded.c, point, text)
				wantText := whole(t, open.c, point, text).Context[primaryOf(point)].(string)
				for k := 0; k < 3; k++ {
					chunks := randomChunks(r, text)
					got, out, stopped := streamAll(t, guarded.c, point, chunks)
					if strings.Contains(got, "forbidden") {
						t.Fatalf("released a blocked word: %q", got)
					}
					if out.Verdict != want.Verdict {
						t.Fatalf("verdict %s, whole reply %s (text %q, chunks %q)", out.Verdict, want.Verdict, text, chunks)
					}
					if want.Verdict == Allow {
						if stopped != nil || got != wantText {
							t.Fatalf("released %q (%v), whole reply gives %q\ntext %q\nchunks %q", got, stopped, wantText, text, chunks)
						}
						continue
					}
					if !strings.HasPrefix(wantText, got) {
						t.Fatalf("released %q, not a prefix of %q", got, wantText)
					}
					var st *StreamStopped
					if !errors.As(stopped, &st) && out.Runs > 0 && stopped != nil {
						t.Fatalf("stopped by %v, want a *StreamStopped", stopped)
					}
					if out.Binding != "ban" || out.Reason != "forbidden word" {
						t.Fatalf("outcome %+v, want a block by ban", out)
					}
				}
			}
		})
	}
}

// TestStreamRedactsKeySplitAcrossChunks: a key split over chunks, at every
// split point, is never released in part.
func TestStreamRedactsKeySplitAcrossChunks(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "redact", Phase: Transformer, Lookahead: 64})
	key := "sk-abcdefghij0123456789"
	text := strings.Repeat("some words before the key ", 5) + "use " + key + " now, " + strings.Repeat("and more words after it ", 5)
	i := strings.Index(text, key)
	for split := i; split <= i+len(key); split++ {
		got, out, err := streamAll(t, e.c, "llm.output.stream", []string{text[:split], text[split:]})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(text, key, "[REDACTED]", 1)
		if got != want || !out.Modified {
			t.Fatalf("split at %d: released %q, want %q", split, got, want)
		}
	}
}

// TestStreamReleasesAsItGoes: a long reply is released chunk by chunk,
// holding back about the look-ahead, not all at the end.
func TestStreamReleasesAsItGoes(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "redact", Phase: Transformer, Lookahead: 32})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for i := 0; i < 50; i++ {
		r, err := s.Write("word ")
		if err != nil {
			t.Fatal(err)
		}
		released += len(r)
		if held := 5*(i+1) - released; held > 32+5+1 {
			t.Fatalf("after %d chunks %d characters held, want at most the look-ahead and a chunk", i+1, held)
		}
	}
	r, out, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if released+len(r) != 250 || out.Verdict != Allow || out.Runs < 40 {
		t.Fatalf("released %d+%d, outcome %+v", released, len(r), out)
	}
}

// TestStreamBlockStops: a guard's block stops the stream; later writes are
// refused and Close reports the block.
func TestStreamBlockStops(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "ban", Phase: Guard, Lookahead: 16})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	var stopped error
	for _, ch := range []string{"all good here, ", "nothing to see. ", "but this is forb", "idden text ", "and more"} {
		r, err := s.Write(ch)
		got += r
		if err != nil {
			stopped = err
			break
		}
	}
	var st *StreamStopped
	if !errors.As(stopped, &st) || !errors.Is(stopped, ErrStreamStopped) || st.Outcome.Verdict != Block {
		t.Fatalf("Write error %v, want a *StreamStopped block", stopped)
	}
	if strings.Contains(got, "forb") {
		t.Fatalf("released %q", got)
	}
	if _, err := s.Write("more"); !errors.Is(err, ErrStreamStopped) {
		t.Fatalf("Write after the block: %v", err)
	}
	r, out, err := s.Close()
	if err != nil || r != "" || out.Verdict != Block || out.Reason != "forbidden word" || out.Text != got {
		t.Fatalf("Close = %q, %+v, %v", r, out, err)
	}
}

// TestStreamNonLocalHookHoldsToTheEnd: a hook that changes the end of every
// window agrees to nothing; the whole reply is released at Close, as the
// hook makes it of the whole reply.
func TestStreamNonLocalHookHoldsToTheEnd(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "tail", Phase: Transformer, Lookahead: 4})
	text := strings.Repeat("abc def ", 20)
	got, _, err := streamAll(t, e.c, "llm.output.stream", randomChunks(rand.New(rand.NewSource(1)), text))
	if err != nil || got != text+"!" {
		t.Fatalf("released %q, %v", got, err)
	}
}

// TestStreamNonLocalHookRunsRarely: while hooks agree to nothing, runs
// wait for the window to grow by half, so a long reply costs a few runs
// rather than one per chunk over ever more text.
func TestStreamNonLocalHookRunsRarely(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "tail", Phase: Transformer, Lookahead: 16})
	text := strings.Repeat("abc def ", 2500) // 20,000 characters
	var chunks []string
	for i := 0; i < len(text); i += 10 {
		chunks = append(chunks, text[i:i+10])
	}
	got, out, err := streamAll(t, e.c, "llm.output.stream", chunks)
	if err != nil || got != text+"!" {
		t.Fatalf("released %d bytes, %v", len(got), err)
	}
	if out.Runs > 40 {
		t.Fatalf("%d runs for %d chunks, want a few (logarithmic)", out.Runs, len(chunks))
	}
}

// TestStreamFailedHookReleasesNothing: a fail-open hook that fails agrees to
// nothing: the text is held until the end.
func TestStreamFailedHookReleasesNothing(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "broken", Phase: Transformer, Fail: FailOpen, Lookahead: 4})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if r, err := s.Write("word "); r != "" || err != nil {
			t.Fatalf("Write = %q, %v", r, err)
		}
	}
	r, out, err := s.Close()
	if err != nil || r != strings.Repeat("word ", 10) || out.Verdict != Allow {
		t.Fatalf("Close = %q, %+v, %v", r, out, err)
	}
}

// TestStreamSplitCharacter: a chunk that ends inside a character never
// sends half of it to a hook.
func TestStreamSplitCharacter(t *testing.T) {
	e, h := streamEnv(t, Binding{Name: "shout", Phase: Transformer, Lookahead: 8})
	text := "日本語 please 日本語 ünïcödé please"
	var chunks []string
	for i := 0; i < len(text); i++ {
		chunks = append(chunks, text[i:i+1])
	}
	got, _, err := streamAll(t, e.c, "llm.output.stream", chunks)
	if want := strings.ReplaceAll(text, "please", "PLEASE"); err != nil || got != want {
		t.Fatalf("released %q, %v; want %q", got, err, want)
	}
	for _, s := range h.seen {
		if !utf8.ValidString(s) {
			t.Fatalf("a hook got %q", s)
		}
	}
}

// TestStreamNoBindings: with no binding at the point, text is released as
// it comes.
func TestStreamNoBindings(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "redact", Point: "llm.after", Phase: Transformer})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Write("sk-abcdefgh"); r != "sk-abcdefgh" || err != nil {
		t.Fatalf("Write = %q, %v", r, err)
	}
}

// TestStreamInputs: Stream refuses a point that does not stream, and the
// configuration refuses a lookahead out of range or off a streaming point.
func TestStreamInputs(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "redact", Phase: Transformer})
	for _, in := range []Input{
		{Tenant: "acme", Point: "llm.after"},
		{Tenant: "acme", Point: "no.such.point"},
		{Point: "llm.output.stream"},
	} {
		if _, err := e.c.Stream(context.Background(), in); err == nil {
			t.Errorf("Stream(%+v) accepted", in)
		}
	}
	for _, b := range []Binding{
		{Name: "a", Module: "policy", Point: "llm.after", Phase: Transformer, Lookahead: 10},
		{Name: "a", Module: "policy", Point: "llm.output.stream", Phase: Transformer, Lookahead: -1},
		{Name: "a", Module: "policy", Point: "llm.output.stream", Phase: Transformer, Lookahead: MaxLookahead + 1},
	} {
		err := e.c.Reload(context.Background(), policyConfig(t, b))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "lookahead") {
			t.Errorf("Reload with %+v: %v", b, err)
		}
	}
}

// TestStreamTooLarge: a stream that would hold back more than
// MaxStreamHeld stops with ErrStreamTooLarge.
func TestStreamTooLarge(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "tail", Phase: Transformer, Lookahead: 4})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(strings.Repeat("a", MaxStreamHeld+1)); !errors.Is(err, ErrStreamTooLarge) {
		t.Fatalf("Write: %v", err)
	}
	if _, _, err := s.Close(); !errors.Is(err, ErrStreamStopped) {
		t.Fatalf("Close: %v", err)
	}
}

func TestStreamCutPoint(t *testing.T) {
	for _, tc := range []struct {
		window, after string
		l, want       int
	}{
		{"hello world", "hello world", 3, 6},    // after the space
		{"helloworld", "helloworld", 3, 7},      // no space: exactly l before the end
		{"hello world", "HELLO world", 5, 6},    // the change is out of the tail
		{"hello world", "hello worlD", 3, -1},   // the change is in the tail
		{"abc", "abc", 3, -1},                   // nothing before the tail
		{"abcde", "abcde", 3, -1},               // too little to look for a space
		{"abcdefgh", "Xbcdefgh", 4, -1},         // nor past a change
		{"xy abcdefgh", "xy abcdefgh", 3, 8},    // no space in l characters
		{"ab 日本語x", "ab 日本語x", 2, len("ab 日本")}, // characters, not bytes
	} {
		if got := cutPoint(tc.window, tc.after, tc.l); got != tc.want {
			t.Errorf("cutPoint(%q, %q, %d) = %d, want %d", tc.window, tc.after, tc.l, got, tc.want)
		}
	}
}

func primaryOf(point string) string {
	p, _ := abi.LookupPoint(point)
	return p.Primary
}

// TestStreamByteChunksCostLinear: a reply sent a byte a chunk while the hooks
// agree to nothing (or fail) is held, and each Write must not copy all that
// is held: the bytes allocated stay linear in the reply (quadratic when
// every Write made the held text anew: 2 GiB for these 64 KiB).
func TestStreamByteChunksCostLinear(t *testing.T) {
	for _, b := range []Binding{
		{Name: "tail", Phase: Transformer, Lookahead: 16},
		{Name: "broken", Phase: Transformer, Fail: FailOpen, Lookahead: 16},
	} {
		t.Run(b.Name, func(t *testing.T) {
			e, _ := streamEnv(t, b)
			s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
			if err != nil {
				t.Fatal(err)
			}
			const n = 64 << 10
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			for i := 0; i < n; i++ {
				if _, err := s.Write("a"); err != nil {
					t.Fatal(err)
				}
			}
			goruntime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > 256*n {
				t.Fatalf("%d bytes allocated writing %d one-byte chunks (%d a byte), want linear", got, n, got/n)
			}
			if r, _, err := s.Close(); err != nil || len(r) < n {
				t.Fatalf("Close released %d bytes, %v", len(r), err)
			}
		})
	}
}

// TestStreamOutcomeBounded: a stream that never ends keeps a bounded
// outcome: at most MaxStreamText bytes of the text it released (every piece
// went to the caller already) and MaxStreamNotifications notifications, the
// rest counted. Both grew with the reply, a notification per run.
func TestStreamOutcomeBounded(t *testing.T) {
	e, _ := streamEnv(t, Binding{Name: "notify", Phase: Guard, Lookahead: 4})
	s, err := e.c.Stream(context.Background(), Input{Tenant: "acme", Point: "llm.output.stream"})
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("word ", 1<<10)
	released := 0
	runs := 0
	for released <= MaxStreamText+len(chunk) || runs <= MaxStreamNotifications {
		r, err := s.Write(chunk)
		if err != nil {
			t.Fatal(err)
		}
		released += len(r)
		runs++
	}
	r, out, err := s.Close()
	if err != nil {
		t.Fatal(err)
	}
	released += len(r)
	if len(out.Text) > MaxStreamText || !out.TextTruncated || !strings.HasPrefix(chunk+chunk, out.Text[:len(chunk)]) {
		t.Errorf("outcome text %d bytes (truncated %t) of %d released; want at most %d", len(out.Text), out.TextTruncated, released, MaxStreamText)
	}
	if len(out.Notifications) != MaxStreamNotifications || out.NotificationsDropped != out.Runs-MaxStreamNotifications {
		t.Errorf("%d notifications kept, %d dropped, of %d runs", len(out.Notifications), out.NotificationsDropped, out.Runs)
	}
}

// TestStreamReleasesWhatHooksSaw: bytes that are not UTF-8 reach the hooks
// as U+FFFD (the text they are sent), and so are they released: the stream
// released the raw bytes, so "forb\xffidden" passed a guard of "forbidden"
// that a reader dropping the byte then read.
func TestStreamReleasesWhatHooksSaw(t *testing.T) {
	e, h := streamEnv(t, Binding{Name: "ban", Phase: Guard, Lookahead: 4})
	for _, chunks := range [][]string{
		{"all is fine, forb\xffidden words here and more"},
		{"all is fine, forb\xe6", "idden words here and more"}, // a lead byte, then no continuation
		{"all is fine, words here and more\xe6"},               // the reply ends inside a character
	} {
		got, _, err := streamAll(t, e.c, "llm.output.stream", chunks)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%q: released %q, which no hook saw", chunks, got)
		}
		for _, s := range h.seen {
			if !utf8.ValidString(s) {
				t.Fatalf("a hook got %q", s)
			}
		}
	}
}
