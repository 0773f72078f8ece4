package chain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/abi"
)

// DefaultLookahead is the look-ahead, in characters, of a binding at a
// streaming point that does not set Binding.Lookahead: longer than every
// secret redact-secrets knows by default (an sk-proj key is about 170
// characters) but a PEM private key block, which needs a look-ahead as long
// as the block (4096 covers a 2048-bit RSA key).
const DefaultLookahead = 256

// MaxLookahead bounds Binding.Lookahead: the window a Stream holds back is
// at least this long, and every chunk runs the hooks over it.
const MaxLookahead = 64 << 10

// MaxStreamHeld bounds the bytes a Stream holds back: the text hooks keep
// rewriting near its end is held until they stop (or the reply ends), and
// past this the hooks' input limit (1 MiB by default) would refuse it anyway.
// A Write that would hold more stops the stream with ErrStreamTooLarge.
const MaxStreamHeld = 1 << 20

// MaxStreamText bounds StreamOutcome.Text: a stream keeps at most that many
// bytes of what it released (each piece went to the caller from Write or
// Close already) and past them sets TextTruncated, so a reply that never
// ends holds no more than this and MaxStreamHeld.
const MaxStreamText = 4 << 20

// MaxStreamNotifications bounds StreamOutcome.Notifications: a stream keeps
// the first ones and counts the rest in NotificationsDropped (a hook may
// notify once per window, and a reply has as many windows as chunks).
const MaxStreamNotifications = 1024

// Errors of a Stream.
var (
	// ErrStreamStopped is returned by Write after a guard blocked or asked
	// (a *StreamStopped says which), and by Write and Close after an
	// error stopped the stream.
	ErrStreamStopped = errors.New("chain: stream stopped")
	// ErrStreamTooLarge stops a stream that would hold back more than
	// MaxStreamHeld bytes.
	ErrStreamTooLarge = errors.New("chain: stream holds back too much text")
	// ErrNotStreamPoint is returned by Stream for a point that is not a
	// streaming point (abi.IsStreamPoint).
	ErrNotStreamPoint = errors.New("chain: not a streaming point")
)

// StreamStopped is the error of the Write that a guard's block or ask
// stopped: the held text is never released. Outcome is that window's run.
type StreamStopped struct {
	Outcome *Outcome
}

func (e *StreamStopped) Error() string {
	o := e.Outcome
	return fmt.Sprintf("chain: stream stopped: %s by %s (%s): %s", o.Verdict, o.Binding, o.By, o.Reason)
}

// Is makes errors.Is(err, ErrStreamStopped) true.
func (e *StreamStopped) Is(target error) bool { return target == ErrStreamStopped }

// StreamOutcome is the result of a whole stream (Stream.Close).
type StreamOutcome struct {
	// Verdict is allow when the whole reply was released, block or
	// pending when a guard stopped the stream.
	Verdict Verdict `json:"verdict"`
	// Binding, By, Reason and UserMessage are those of the run that
	// stopped the stream (Outcome's).
	Binding     string `json:"binding,omitempty"`
	By          string `json:"by,omitempty"`
	Reason      string `json:"reason,omitempty"`
	UserMessage string `json:"user_message,omitempty"`
	// Text is everything the stream released, in order: its first
	// MaxStreamText bytes (cut on a character boundary), TextTruncated
	// set when there was more.
	Text          string `json:"text"`
	TextTruncated bool   `json:"text_truncated,omitempty"`
	// Modified reports whether a hook rewrote any of it.
	Modified bool `json:"modified"`
	// Runs counts the chain runs over the stream's windows.
	Runs int `json:"runs"`
	// Notifications gathers the notifies of every run, in order (a hook
	// that notifies on a phrase may notify once per window that holds
	// it): the first MaxStreamNotifications, NotificationsDropped
	// counting the others.
	Notifications        []Notification `json:"notifications,omitempty"`
	NotificationsDropped int            `json:"notifications_dropped,omitempty"`
	// Last is the last run's outcome (nil when none ran): the one that
	// stopped the stream, or that of the final window.
	Last *Outcome `json:"last,omitempty"`
}

// Stream is one streamed reply passing a streaming point (abi.IsStreamPoint):
// the caller Writes the reply's chunks as they arrive and sends on the text
// each Write releases; Close flushes the rest. It is not safe for concurrent
// use.
//
// The host holds back a window of the reply. Each Write appends its chunk
// to the window and, once the window is longer than the look-ahead L (the
// largest Binding.Lookahead at the point), runs the chain over it
// (Chain.Run, with the context's primary field set to the window, "offset"
// to the characters released before it and "final" false). Then:
//
//   - a block or an ask stops the stream: the window is never released and
//     Write returns a *StreamStopped;
//   - if a hook failed (its fail policy continued), nothing is released;
//   - otherwise the window's last L characters or more must have come out of
//     the hooks unchanged (the hooks agree that what precedes them is
//     final): the text before them, as the hooks left it, is released and
//     they stay held, as the hooks received them, to be seen again with
//     what follows. The cut falls just after the last whitespace at least L
//     characters from the end, if one is within L characters of that point,
//     else exactly there when L characters without whitespace precede it.
//     If the hooks changed text within L characters of the end, nothing is
//     released yet; once the window is longer than 4L bytes, the next run
//     then waits until it has grown by half (so hooks that never agree cost
//     work linear in the reply, not quadratic).
//
// A chunk may end inside a character, whose rest comes with the next; bytes
// that are not UTF-8 are held, sent and released as U+FFFD, the text the
// hooks see.
//
// Close runs the chain once more over what is held, with "final" true, and
// releases all it leaves. Released text is never sent to a hook again, so no
// hook can change it. When the released text equals what the hooks make of
// the whole reply: see
// RATIONALE.md#why-a-hold-back-window-and-when-is-a-streamed-reply-the-same-as-the-whole-one.
type Stream struct {
	c       *Chain
	ctx     context.Context
	in      Input
	primary string
	n       int // runs so far
	// held is the text held back, appended to in place: a Write that
	// made it anew would copy all of it, a reply sent a byte a chunk
	// costing work quadratic in what is held.
	held    []byte
	partial string // an incomplete UTF-8 sequence ending the last chunk
	offset  int    // characters released so far
	// next is the held bytes the next run waits for, after a run that
	// released nothing (0: run as soon as the window exceeds L).
	next   int
	text   strings.Builder
	out    StreamOutcome
	err    error // set once the stream stopped
	closed bool
}

// Stream starts a stream at in.Point, which must be a streaming point, for
// in.Tenant. in.Context holds the point's other fields (the model and prompt,
// say); its primary field, "offset" and "final" are the stream's. in.Run
// names the stream: its windows run as in.Run + ".1", ".2", ... (empty: a
// random id). ctx bounds every run of the stream.
func (c *Chain) Stream(ctx context.Context, in Input) (*Stream, error) {
	if in.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalidInput)
	}
	p, ok := c.points.Lookup(in.Point)
	if !ok {
		return nil, fmt.Errorf("%w: unknown hook point %q", ErrInvalidInput, in.Point)
	}
	if !abi.IsStreamPoint(in.Point) || p.Primary == "" {
		return nil, fmt.Errorf("%w: %q (streaming points: llm.output.stream, message.outbound.stream)", ErrNotStreamPoint, in.Point)
	}
	if in.Run == "" {
		in.Run = newID()
	}
	base := make(map[string]any, len(in.Context)+3)
	for k, v := range in.Context {
		base[k] = v
	}
	in.Context = base
	return &Stream{c: c, ctx: ctx, in: in, primary: p.Primary, out: StreamOutcome{Verdict: Allow}}, nil
}

// lookahead is the look-ahead of the bindings at point in the configuration
// in force (the largest), and whether any binding is there.
func (c *Chain) lookahead(point string) (int, bool, error) {
	s := c.acquire()
	if s == nil {
		return 0, false, ErrClosed
	}
	defer s.release(context.Background())
	l := 0
	list := s.points[point]
	for _, b := range list {
		bl := b.Lookahead
		if bl == 0 {
			bl = DefaultLookahead
		}
		l = max(l, bl)
	}
	return l, len(list) > 0, nil
}

// Write adds chunk to the stream and returns the text it releases (often
// none). After a guard's block or ask it returns a *StreamStopped; after
// that, or any error, every Write returns ErrStreamStopped.
func (s *Stream) Write(chunk string) (string, error) {
	if s.err != nil {
		return "", fmt.Errorf("%w: %w", ErrStreamStopped, s.err)
	}
	if s.closed {
		return "", fmt.Errorf("%w: closed", ErrStreamStopped)
	}
	chunk = s.partial + chunk
	s.partial = ""
	if cut := incompleteTail(chunk); cut < len(chunk) {
		// Hooks see text, not half a character: a chunk may end inside
		// one (a byte-level tokenizer's), whose rest comes next.
		chunk, s.partial = chunk[:cut], chunk[cut:]
	}
	// Bytes that are not UTF-8 reach the hooks as U+FFFD; so they are
	// held and released, or the text released would not be the text the
	// hooks passed.
	chunk = strings.ToValidUTF8(chunk, string(utf8.RuneError))
	if len(s.held)+len(chunk)+len(s.partial) > MaxStreamHeld {
		return "", s.stop(fmt.Errorf("%w: more than %d bytes held back", ErrStreamTooLarge, MaxStreamHeld))
	}
	s.held = append(s.held, chunk...)
	l, bound, err := s.c.lookahead(s.in.Point)
	if err != nil {
		return "", s.stop(err)
	}
	if !bound {
		// No hook to wait for.
		return s.release(string(s.held), ""), nil
	}
	if len(s.held) < s.next || utf8.RuneCount(s.held) <= l {
		return "", nil // nothing could be released yet
	}
	window := string(s.held)
	out, err := s.run(window, false)
	if err != nil {
		return "", err
	}
	if out.Verdict != Allow {
		return "", s.stop(&StreamStopped{Outcome: out})
	}
	// Once the window is past 4L bytes (hooks local within L agree well
	// before), a run that releases nothing waits for the window to grow by
	// half before the next: hooks that keep changing its end would
	// otherwise be run over the whole held text at every chunk, work
	// quadratic in the reply. Waiting longer only delays release.
	wait := 0
	if len(window) > 4*l {
		wait = len(window) + len(window)/2
	}
	for i := range out.Trace {
		if out.Trace[i].Failure != nil {
			s.next = wait
			return "", nil // a hook that failed did not agree
		}
	}
	after, _ := out.Context[s.primary].(string)
	keep := cutPoint(window, after, l)
	if keep < 0 {
		s.next = wait
		return "", nil
	}
	s.next = 0
	return s.release(after[:len(after)-(len(window)-keep)], window[keep:]), nil
}

// Close ends the stream: it runs the chain over the held text with "final"
// true and returns what that releases, and the stream's outcome. After a
// guard stopped the stream it releases nothing and returns the outcome
// (its Verdict block or pending) with a nil error. Close after Close returns
// the outcome again.
func (s *Stream) Close() (string, *StreamOutcome, error) {
	if s.closed || (s.err != nil && errors.Is(s.err, ErrStreamStopped)) {
		s.closed = true
		return "", s.outcome(), nil
	}
	if s.err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrStreamStopped, s.err)
	}
	s.closed = true
	s.held = append(s.held, strings.ToValidUTF8(s.partial, string(utf8.RuneError))...)
	s.partial = ""
	_, bound, err := s.c.lookahead(s.in.Point)
	if err != nil {
		s.err = err
		return "", nil, err
	}
	if !bound {
		return s.release(string(s.held), ""), s.outcome(), nil
	}
	out, err := s.run(string(s.held), true)
	if err != nil {
		return "", nil, err
	}
	if out.Verdict != Allow {
		s.stop(&StreamStopped{Outcome: out})
		return "", s.outcome(), nil
	}
	after, _ := out.Context[s.primary].(string)
	return s.release(after, ""), s.outcome(), nil
}

func (s *Stream) outcome() *StreamOutcome {
	o := s.out
	o.Text = s.text.String()
	return &o
}

// run runs the chain over window.
func (s *Stream) run(window string, final bool) (*Outcome, error) {
	s.n++
	ctx := make(map[string]any, len(s.in.Context)+3)
	for k, v := range s.in.Context {
		ctx[k] = v
	}
	ctx[s.primary] = window
	ctx["offset"] = s.offset
	ctx["final"] = final
	out, err := s.c.Run(s.ctx, Input{Tenant: s.in.Tenant, Point: s.in.Point, Context: ctx, Run: s.in.Run + "." + strconv.Itoa(s.n)})
	if err != nil {
		s.err = err
		return nil, err
	}
	s.out.Runs = s.n
	s.out.Last = out
	s.out.Modified = s.out.Modified || out.Modified
	keep := min(len(out.Notifications), MaxStreamNotifications-len(s.out.Notifications))
	s.out.Notifications = append(s.out.Notifications, out.Notifications[:keep]...)
	s.out.NotificationsDropped += len(out.Notifications) - keep
	return out, nil
}

// stop stops the stream with err and returns it.
func (s *Stream) stop(err error) error {
	s.err = err
	s.held = nil
	var st *StreamStopped
	if errors.As(err, &st) {
		o := st.Outcome
		s.out.Verdict, s.out.Binding, s.out.By, s.out.Reason, s.out.UserMessage = o.Verdict, o.Binding, o.By, o.Reason, o.UserMessage
	}
	return err
}

// release releases text and holds held.
func (s *Stream) release(text, held string) string {
	if text != "" {
		kept := text
		if room := MaxStreamText - s.text.Len(); len(kept) > room {
			for room > 0 && !utf8.RuneStart(kept[room]) {
				room--
			}
			kept, s.out.TextTruncated = kept[:room], true
		}
		s.text.WriteString(kept)
		s.offset += utf8.RuneCountInString(text)
	}
	s.held = append(s.held[:0], held...)
	return text
}

// cutPoint returns where to cut window, the text the hooks received, given
// after, what they made of it: the byte offset in window from which at least
// l characters came out unchanged (the window's tail and after's), or -1 if
// there is none. It cuts just after the last whitespace character within l
// characters before the latest possible cut, so a window begins where a word
// does; with no whitespace in those l characters, at the latest cut; and
// with fewer than l characters there to look through, not yet.
func cutPoint(window, after string, l int) int {
	// common is the length of the longest common suffix, on a character
	// boundary.
	common := 0
	for common < len(window) && common < len(after) && window[len(window)-1-common] == after[len(after)-1-common] {
		common++
	}
	for common > 0 && !utf8.RuneStart(window[len(window)-common]) {
		common--
	}
	// latest is the byte offset l characters before the end.
	latest := len(window)
	for i := 0; i < l && latest > 0; i++ {
		_, size := utf8.DecodeLastRuneInString(window[:latest])
		latest -= size
	}
	if latest == 0 || len(window)-latest > common {
		return -1
	}
	floor := len(window) - common // the cut may not go before it
	p := latest
	for i := 0; i < l; i++ {
		if p <= floor {
			// Fewer than l characters to look through: wait for more
			// text rather than cut a word that may go on.
			return -1
		}
		r, size := utf8.DecodeLastRuneInString(window[:p])
		if unicode.IsSpace(r) {
			return p
		}
		p -= size
	}
	return latest
}

// incompleteTail returns the offset at which s ends with an incomplete UTF-8
// sequence (len(s) when it does not).
func incompleteTail(s string) int {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return i
			}
			return len(s)
		}
	}
	return len(s)
}
