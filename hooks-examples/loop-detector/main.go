// Command loop-detector is a wasmhooks hook that watches an agent's tool
// calls, per conversation, for the four loop patterns of seed 000:
// repetition (the same tool with the same arguments N times), oscillation
// (alternating between two calls, A-B-A-B), drift (small changes to the
// arguments without progress) and redundant calls (a call whose result was
// already obtained). By severity it warns (soft intervention) or blocks the
// call (hard intervention). It keeps a bounded window of recent calls through
// the kv.get and kv.set capabilities. See README.md.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

// main is never run: a -buildmode=c-shared reactor runs init, not main.
func main() {}

// Defaults of the settings (README.md, "Settings"). A threshold of 0 turns
// that level of that pattern off.
const (
	DefaultWindow            = 16
	DefaultRepetitionWarnAt  = 3
	DefaultRepetitionBlockAt = 5
	DefaultOscillationWarnAt = 4
	DefaultOscillationBlock  = 6
	DefaultDriftWarnAt       = 3
	DefaultDriftBlockAt      = 6
	DefaultRedundantWarnAt   = 1
	DefaultRedundantBlockAt  = 0
	DefaultDriftMaxChanged   = 1
	DefaultDriftMaxEdit      = 0
	DefaultBuckets           = 64
)

// DefaultConversationFields are the context fields the conversation's id is
// read from, first present wins. ABI 1.x's tool points carry no conversation
// id; a platform that sends one (a host may add context fields) gets one
// window per conversation, the others one window per tenant and binding.
var DefaultConversationFields = []string{"conversation", "session"}

// Bounds of the state (README.md, "State").
const (
	// MaxWindow bounds the window setting.
	MaxWindow = 32
	// MaxBuckets bounds the buckets setting.
	MaxBuckets = 256
	// ConversationsPerBucket is how many conversations one kv key holds;
	// the least recently active one is forgotten first.
	ConversationsPerBucket = 8
	// MaxStateBytes bounds one kv value, under the host's default limit of
	// 64 KiB (capability/builtin DefaultMaxValueBytes): conversations are
	// forgotten, least recently active first, until a bucket fits.
	MaxStateBytes = 48 << 10
	// maxToolBytes, maxLeaves, maxPathBytes and maxLeafString bound what
	// one call costs in the state.
	maxToolBytes  = 64
	maxLeaves     = 16
	maxPathBytes  = 128
	maxLeafString = 128
	// bigResult is the encoded size from which an identical result of a
	// different call of the same tool counts as already obtained; smaller
	// results ("ok", true) are too common to mean anything.
	bigResult = 64
	// stateVersion is the version of the stored state; another version
	// is dropped and started afresh.
	stateVersion = 1
)

// Flags of a recorded call.
const (
	// flagSmall: a small step from the call before it (same tool, same
	// argument paths, at most drift_max_changed values changed a little).
	flagSmall = 1 << iota
	// flagBlocked: this hook blocked the call, so it never ran.
	flagBlocked
	// flagProgress: the call's result was new in the window (tool.after).
	flagProgress
)

// call is one recorded tool call.
type call struct {
	Tool  string `json:"t"`           // the tool's name, cut to maxToolBytes
	Sig   string `json:"s"`           // hash of the tool and its arguments
	Res   string `json:"r,omitempty"` // hash of the result (tool.after only)
	Flags int    `json:"f,omitempty"`
}

// conversation is one conversation's window.
type conversation struct {
	ID    string `json:"id"`   // hash of the conversation's id
	Seen  uint64 `json:"seen"` // the bucket's clock when last active
	Calls []call `json:"calls"`
	// Last holds the leaves of the last call's arguments, for the next
	// call's drift step; nil when they were too many or too long.
	Last []string `json:"last,omitempty"`
}

// bucket is the value of one kv key.
type bucket struct {
	V     int            `json:"v"`
	Clock uint64         `json:"clock"`
	Convs []conversation `json:"convs"`
}

// config is the hook's settings.
type config struct {
	window                 int
	rep, osc, drift, redun thresholds
	driftMaxChanged        int
	driftMaxEdit           int
	ignore                 []string
	convFields             []string
	buckets                int
}

type thresholds struct{ warn, block int }

func readConfig(inv *sdk.Invocation) (config, error) {
	c := config{
		window:          inv.SettingInt("window", DefaultWindow),
		rep:             thresholds{inv.SettingInt("repetition_warn_at", DefaultRepetitionWarnAt), inv.SettingInt("repetition_block_at", DefaultRepetitionBlockAt)},
		osc:             thresholds{inv.SettingInt("oscillation_warn_at", DefaultOscillationWarnAt), inv.SettingInt("oscillation_block_at", DefaultOscillationBlock)},
		drift:           thresholds{inv.SettingInt("drift_warn_at", DefaultDriftWarnAt), inv.SettingInt("drift_block_at", DefaultDriftBlockAt)},
		redun:           thresholds{inv.SettingInt("redundant_warn_at", DefaultRedundantWarnAt), inv.SettingInt("redundant_block_at", DefaultRedundantBlockAt)},
		driftMaxChanged: inv.SettingInt("drift_max_changed", DefaultDriftMaxChanged),
		driftMaxEdit:    inv.SettingInt("drift_max_edit", DefaultDriftMaxEdit),
		ignore:          inv.SettingStrings("ignore_tools"),
		convFields:      inv.SettingStrings("conversation_fields"),
		buckets:         inv.SettingInt("buckets", DefaultBuckets),
	}
	if c.convFields == nil {
		c.convFields = DefaultConversationFields
	}
	var errs []error
	if err := inv.SettingsErr(); err != nil {
		errs = append(errs, err)
	}
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("setting %q: must be from %d to %d, got %d", name, lo, hi, v))
		}
	}
	check("window", c.window, 2, MaxWindow)
	check("repetition_warn_at", c.rep.warn, 0, MaxWindow)
	check("repetition_block_at", c.rep.block, 0, MaxWindow)
	check("drift_warn_at", c.drift.warn, 0, MaxWindow)
	check("drift_block_at", c.drift.block, 0, MaxWindow)
	check("redundant_warn_at", c.redun.warn, 0, MaxWindow)
	check("redundant_block_at", c.redun.block, 0, MaxWindow)
	for _, o := range []struct {
		name string
		v    int
	}{{"oscillation_warn_at", c.osc.warn}, {"oscillation_block_at", c.osc.block}} {
		// Two different calls in a row are not an oscillation yet.
		if o.v != 0 && (o.v < 3 || o.v > MaxWindow) {
			errs = append(errs, fmt.Errorf("setting %q: must be 0 (off) or from 3 to %d, got %d", o.name, MaxWindow, o.v))
		}
	}
	check("drift_max_changed", c.driftMaxChanged, 1, maxLeaves)
	check("drift_max_edit", c.driftMaxEdit, 0, maxLeafString)
	check("buckets", c.buckets, 1, MaxBuckets)
	return c, errors.Join(errs...)
}

// handle records the tool call at tool.before or tool.after in its
// conversation's window and looks for loops. At tool.before (bind it as a
// guard) a hard finding blocks the call and a soft one continues with a
// reason; at tool.after (bind it as a transformer) any finding injects a
// warning into the result the agent reads next. Invalid settings and a kv
// capability that is not granted fail the hook (the operator must fix them);
// another kv failure lets the call through, saying why in the reason.
func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	cfg, err := readConfig(inv)
	if err != nil {
		return sdk.Decision{}, err
	}
	after := inv.Point == "tool.after"
	if !after && inv.Point != "tool.before" {
		return sdk.Continue(), nil
	}
	tool := inv.ContextString("tool")
	if tool == "" || slices.Contains(cfg.ignore, tool) {
		return sdk.Continue(), nil
	}
	args, _ := inv.ContextValue("arguments")

	convKey := conversationOf(inv, cfg.convFields)
	h := sha256.Sum256([]byte(convKey))
	key := fmt.Sprintf("loop-detector/v%d/%s/%02x", stateVersion, map[bool]string{false: "before", true: "after"}[after],
		binary.BigEndian.Uint64(h[:8])%uint64(cfg.buckets))
	convID := hex.EncodeToString(h[8:16])

	b, err := load(key)
	if err != nil {
		if errors.Is(err, sdk.ErrDenied) {
			return sdk.Decision{}, fmt.Errorf("loop-detector needs kv.get and kv.set granted: %w", err)
		}
		return sdk.Continue().WithReason("loop detector: state unavailable, not checked: " + explain(err)), nil
	}
	b.Clock++
	conv := b.conversation(convID)
	conv.Seen = b.Clock

	cur := call{Tool: cut(tool, maxToolBytes), Sig: digest(tool, args)}
	leaves := leavesOf(args, cfg.driftMaxEdit > 0)
	if len(conv.Calls) > 0 && smallStep(conv.Calls[len(conv.Calls)-1].Tool, conv.Last, cur.Tool, leaves, cfg.driftMaxChanged, cfg.driftMaxEdit) {
		cur.Flags |= flagSmall
	}
	resultBytes := 0
	if after {
		result, _ := inv.ContextValue("result")
		enc, _ := json.Marshal(result)
		resultBytes = len(enc)
		cur.Res = digest("result", result)
		cur.Flags |= flagProgress
		for _, c := range conv.Calls {
			if c.Tool == cur.Tool && c.Res == cur.Res {
				cur.Flags &^= flagProgress
				break
			}
		}
	}
	conv.Calls = append(conv.Calls, cur)
	if n := len(conv.Calls) - cfg.window; n > 0 {
		conv.Calls = slices.Delete(conv.Calls, 0, n)
	}
	conv.Last = leaves

	found := detect(conv.Calls, after, resultBytes, cfg)
	lvl := none
	for _, f := range found {
		lvl = max(lvl, f.level)
	}

	var dec sdk.Decision
	switch {
	case lvl == none:
		dec = sdk.Continue()
	case after:
		result, _ := inv.ContextValue("result")
		dec = sdk.Modify("result", withWarning(result, warning(found, lvl))).WithReason(summary(found, lvl))
	case lvl == hard:
		conv.Calls[len(conv.Calls)-1].Flags |= flagBlocked
		dec = sdk.Block(summary(found, lvl)).WithUserMessage("The assistant was stopped from repeating the same action.")
	default:
		dec = sdk.Continue().WithReason(summary(found, lvl))
	}
	if err := save(key, b); err != nil {
		if errors.Is(err, sdk.ErrDenied) {
			return sdk.Decision{}, fmt.Errorf("loop-detector needs kv.get and kv.set granted: %w", err)
		}
		fmt.Fprintln(os.Stderr, "loop-detector: state not saved:", explain(err))
	}
	return dec, nil
}

// conversationOf returns the conversation's id: the first of fields that the
// context holds as a non-empty string, or "" (one window for the tenant and
// binding).
func conversationOf(inv *sdk.Invocation, fields []string) string {
	for _, f := range fields {
		if s := inv.ContextString(f); s != "" {
			return "conversation:" + s
		}
	}
	return ""
}

// conversation returns the window of conversation id, making it (and
// forgetting the least recently active conversation when the bucket is full).
func (b *bucket) conversation(id string) *conversation {
	for i := range b.Convs {
		if b.Convs[i].ID == id {
			return &b.Convs[i]
		}
	}
	if len(b.Convs) >= ConversationsPerBucket {
		b.Convs = slices.Delete(b.Convs, b.oldest(), b.oldest()+1)
	}
	b.Convs = append(b.Convs, conversation{ID: id})
	return &b.Convs[len(b.Convs)-1]
}

func (b *bucket) oldest() int {
	o := 0
	for i, c := range b.Convs {
		if c.Seen < b.Convs[o].Seen {
			o = i
		}
	}
	return o
}

// load reads a bucket. A missing, corrupt or other-version value is an
// empty bucket: the detector forgets, it never fails on its own state.
func load(key string) (*bucket, error) {
	var res struct {
		Found bool            `json:"found"`
		Value json.RawMessage `json:"value"`
	}
	if err := sdk.Call("kv.get", map[string]any{"key": key}, &res); err != nil {
		return nil, err
	}
	b := &bucket{}
	if res.Found && len(res.Value) > 0 {
		if err := json.Unmarshal(res.Value, b); err != nil || b.V != stateVersion || !b.valid() {
			fmt.Fprintln(os.Stderr, "loop-detector: dropping unreadable state under", key)
			b = &bucket{}
		}
	}
	b.V = stateVersion
	return b, nil
}

// valid reports whether a loaded bucket keeps the bounds this code keeps, so
// state written with other settings (or by hand) cannot make a window or a
// bucket larger than its limits.
func (b *bucket) valid() bool {
	if len(b.Convs) > ConversationsPerBucket {
		return false
	}
	for _, c := range b.Convs {
		if len(c.Calls) > MaxWindow || len(c.Last) > maxLeaves {
			return false
		}
	}
	return true
}

// save writes a bucket, forgetting the least recently active conversations
// until it is at most MaxStateBytes encoded.
func save(key string, b *bucket) error {
	for {
		enc, err := json.Marshal(b)
		if err != nil {
			return err
		}
		if len(enc) <= MaxStateBytes || len(b.Convs) <= 1 {
			return sdk.KVSet(key, json.RawMessage(enc))
		}
		o := b.oldest()
		b.Convs = slices.Delete(b.Convs, o, o+1)
	}
}

// explain says in a few words why a kv call failed.
func explain(err error) string {
	var e *sdk.Error
	if errors.As(err, &e) {
		return e.Capability + " failed (" + e.Code + ")"
	}
	return err.Error()
}

// digest is a short hash of a tag and a JSON value (encoding/json sorts
// object keys, so equal values hash equally).
func digest(tag string, v any) string {
	enc, _ := json.Marshal(v)
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write([]byte{0})
	h.Write(enc)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// cut returns at most the first n bytes of s, cut at a character boundary
// (so the stored name reads back as it was written).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// leavesOf flattens a tool's arguments into sorted "PATH\x00TYPE:VALUE"
// strings, for the drift step of the next call. PATH is a hash of the leaf's
// path; VALUE is a hash of the value, except for strings of at most
// maxLeafString bytes when keepStrings (drift_max_edit > 0 needs the text to
// measure an edit). So by default the state holds no argument text. It
// returns nil when there are more than maxLeaves leaves or a path is longer
// than maxPathBytes: such a call is never a small step.
func leavesOf(args any, keepStrings bool) []string {
	var out []string
	ok := true
	var walk func(path string, v any)
	walk = func(path string, v any) {
		if !ok {
			return
		}
		if len(path) > maxPathBytes || len(out) >= maxLeaves {
			ok = false
			return
		}
		var leaf string
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"/"+strings.ReplaceAll(k, "/", "~1"), e)
			}
			return
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
			return
		case string:
			if keepStrings && len(v) <= maxLeafString {
				leaf = "s:" + v
			} else {
				leaf = "h:" + digest("s", v)
			}
		case json.Number:
			leaf = "n:" + digest("n", v.String())
		default:
			enc, _ := json.Marshal(v)
			leaf = "j:" + string(enc)
		}
		out = append(out, digest("p", path)+"\x00"+leaf)
	}
	walk("", args)
	if !ok || len(out) == 0 {
		return nil
	}
	sort.Strings(out)
	return out
}

// smallStep reports whether a call (tool, leaves) is a small step from the
// call before it: the same tool, the same argument paths, and from 1 to
// maxChanged values changed, each a number or a string edited in at most
// maxEdit bytes.
func smallStep(prevTool string, prev []string, tool string, cur []string, maxChanged, maxEdit int) bool {
	if prevTool != tool || prev == nil || len(prev) != len(cur) {
		return false
	}
	changed := 0
	for i := range cur {
		pp, pv, _ := strings.Cut(prev[i], "\x00")
		cp, cv, _ := strings.Cut(cur[i], "\x00")
		if pp != cp {
			return false
		}
		if pv == cv {
			continue
		}
		changed++
		switch {
		case strings.HasPrefix(pv, "n:") && strings.HasPrefix(cv, "n:"):
		case strings.HasPrefix(pv, "s:") && strings.HasPrefix(cv, "s:"):
			if editSize(pv[2:], cv[2:]) > maxEdit {
				return false
			}
		default:
			return false
		}
	}
	return changed >= 1 && changed <= maxChanged
}

// editSize is the length of the part of a and b outside their common prefix
// and suffix, in bytes of the longer: a cheap bound on how much an edit
// changed.
func editSize(a, b string) int {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return max(len(a), len(b)) - p - s
}

// The levels of a finding.
type level int

const (
	none level = iota
	soft       // warn
	hard       // block
)

func (l level) String() string {
	return [...]string{"none", "warn", "block"}[l]
}

// finding is one pattern found in the window.
type finding struct {
	pattern string
	measure int
	at      int // the threshold reached
	level   level
	text    string
}

func grade(t thresholds, m int) (level, int) {
	switch {
	case t.block > 0 && m >= t.block:
		return hard, t.block
	case t.warn > 0 && m >= t.warn:
		return soft, t.warn
	}
	return none, 0
}

// detect looks for the four patterns at the end of calls (the current call
// last). after says whether results are known; resultBytes is the size of
// the current result's encoding.
func detect(calls []call, after bool, resultBytes int, cfg config) []finding {
	n := len(calls)
	cur := calls[n-1]
	var out []finding
	add := func(pattern string, t thresholds, m int, text string) {
		if l, at := grade(t, m); l != none {
			out = append(out, finding{pattern: pattern, measure: m, at: at, level: l, text: text})
		}
	}

	// Repetition: the same tool and arguments, anywhere in the window.
	rep := 0
	for _, c := range calls {
		if c.Sig == cur.Sig {
			rep++
		}
	}
	add("repetition", cfg.rep, rep, fmt.Sprintf("%s called with the same arguments %d times in the last %d calls", cur.Tool, rep, n))

	// Oscillation: the tail alternates between two different calls.
	osc := 0
	if n >= 3 && calls[n-2].Sig != cur.Sig {
		osc = 2
		for i := n - 3; i >= 0 && calls[i].Sig == calls[i+2].Sig; i-- {
			osc++
		}
		if osc < 3 {
			osc = 0
		}
	}
	other := ""
	if n >= 2 {
		other = calls[n-2].Tool
	}
	oscText := fmt.Sprintf("alternating between %s and %s for the last %d calls", other, cur.Tool, osc)
	if other == cur.Tool {
		oscText = fmt.Sprintf("alternating between two calls of %s for the last %d calls", cur.Tool, osc)
	}
	add("oscillation", cfg.osc, osc, oscText)

	// Drift: small steps in a row, none of which brought a new result.
	drift := 0
	for i := n - 1; i >= 0 && calls[i].Flags&flagSmall != 0 && calls[i].Flags&flagProgress == 0; i-- {
		drift++
	}
	progress := "without progress"
	if after {
		progress = "without a new result"
	}
	add("drift", cfg.drift, drift, fmt.Sprintf("%d small changes in a row to the arguments of %s %s", drift, cur.Tool, progress))

	// Redundant: the result was already obtained.
	redun := 0
	var redunText string
	if after {
		// Known: an earlier call of the tool returned this very result
		// (the same call, or any call when the result is substantial).
		for _, c := range calls[:n-1] {
			if c.Tool == cur.Tool && c.Res == cur.Res && (c.Sig == cur.Sig || resultBytes >= bigResult) {
				redun++
			}
		}
		redunText = fmt.Sprintf("this result of %s was already obtained %d %s in the last %d calls", cur.Tool, redun, times(redun), n)
	} else {
		// Presumed: the same call ran before (it was not blocked) and
		// the agent went on to other calls since, so it had the
		// result. Back-to-back repeats are repetition's.
		run := n - 1
		for run > 0 && calls[run-1].Sig == cur.Sig {
			run--
		}
		for _, c := range calls[:run] {
			if c.Sig == cur.Sig && c.Flags&flagBlocked == 0 {
				redun++
			}
		}
		redunText = fmt.Sprintf("%s with these arguments already ran %d %s in the last %d calls, and other calls used its result since", cur.Tool, redun, times(redun), n)
	}
	add("redundant", cfg.redun, redun, redunText)

	sort.SliceStable(out, func(i, j int) bool { return out[i].level > out[j].level })
	return out
}

func times(n int) string {
	if n == 1 {
		return "time"
	}
	return "times"
}

// summary is the decision's reason: "loop detected (block): repetition: ...
// (block at 5); drift: ... (warn at 3)".
func summary(found []finding, l level) string {
	parts := make([]string, len(found))
	for i, f := range found {
		parts[i] = fmt.Sprintf("%s: %s (%s at %d)", f.pattern, f.text, f.level, f.at)
	}
	return fmt.Sprintf("loop detected (%s): %s", l, strings.Join(parts, "; "))
}

// warning is the text injected into a tool's result for the agent.
func warning(found []finding, l level) string {
	parts := make([]string, len(found))
	for i, f := range found {
		parts[i] = f.pattern + ": " + f.text
	}
	advice := "Use the results you already have, or try a different approach, instead of repeating this call."
	if l == hard {
		advice = "Stop repeating this call: further calls like it will be blocked. " + advice
	}
	return "[loop detector] Warning: you may be in a loop (" + strings.Join(parts, "; ") + "). " + advice
}

// withWarning returns a tool result with the warning added: before the text
// of a string result; around any other value as {"loop_warning", "result"}.
func withWarning(result any, w string) any {
	if s, ok := result.(string); ok {
		return w + "\n\n" + s
	}
	return map[string]any{"loop_warning": w, "result": result}
}
