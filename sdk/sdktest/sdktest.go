//go:build !wasip1

// Package sdktest runs a hook natively, under `go test`, against a fake host
// with the semantics of hook ABI v1: the invocation document is parked and
// taken, capability replies that do not fit the SDK's buffer are parked and
// taken, and the hook's output is decoded with abi.DecodeDecision exactly as
// the real host decodes it. The hook's own SDK code (buffering, takes, error
// decoding, panic recovery) runs unchanged; only the host is fake.
//
//	func TestRedact(t *testing.T) {
//		h := sdktest.NewHost()
//		dec, err := h.Run(sdktest.Invocation{
//			Point:   "message.outbound",
//			Context: map[string]any{"outgoing": "key AKIAABCDEFGHIJKLMNOP"},
//		})
//		// dec.Action == abi.ActionModify, ...
//	}
//
// The fake host has no capabilities of its own except log.write, kv.get and
// kv.set (see NewHost); register the others, such as llm.run, with
// Host.Register. It does not validate settings against the manifest's
// settings_schema.
//
// The SDK's state is process-wide, as a wasm instance's is, so runs are
// serialised across all Hosts of a test binary: parallel tests are safe but
// do not run hooks concurrently. Never call Run from inside a handler or a
// Capability: it deadlocks.
//
// The package builds for the host only (not GOOS=wasip1), so a hook's test
// file that imports it starts with `//go:build !wasip1`: without it,
// `GOOS=wasip1 go vet ./...` (or a wasip1 `go test`) fails on the file
// (`wasmhooks new --lang go` writes the tag).
package sdktest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/sdk"
	"github.com/wasmhooks/wasmhooks/sdk/internal/hostcall"
)

// ErrHookFailed is wrapped by the error of a run in which the hook failed:
// hook_v1_handle would have returned 0 (a handler error or panic, an
// invocation the SDK could not decode), or its output is not a valid
// decision for the point. The real host applies the hook's failure policy in
// these cases.
var ErrHookFailed = errors.New("sdktest: hook failed")

// Capability is a fake capability. payload is the request payload, decoded
// with abi.ParseJSON (numbers are json.Number); a payload that is not a JSON
// object never reaches it (the host answers INVALID_REQUEST).
//
// The result is encoded with abi.Marshal; a json.RawMessage is sent as is,
// which lets a test send a malformed result. An error fails the call: an
// *abi.Error or *sdk.Error with its own status (abi.NewError(
// abi.StatusInsufficientCredit, "balance 0")), anything else with
// CAPABILITY_FAILED and the error's text. A panic is CAPABILITY_FAILED too.
type Capability func(payload map[string]any) (result any, err error)

// Call records one capability call a hook made (takes are not calls).
type Call struct {
	// Name is the capability name.
	Name string
	// Payload is the request payload as the hook sent it.
	Payload []byte
	// Status is the status the host answered.
	Status abi.Status
	// Body is the reply: the result, or the error object.
	Body []byte
	// Parked is true if the reply did not fit the hook's buffer, so the
	// host parked it.
	Parked bool
	// Takes counts the takes the hook made while this call's reply was
	// the last one (1 after a parked reply was fetched).
	Takes int
}

// LogEntry is one line written through the log.write capability.
type LogEntry struct {
	// Level is the payload's "level", "" if it had none.
	Level string
	// Message is the payload's "message".
	Message string
}

// Invocation is the invocation document a run parks for the hook.
type Invocation struct {
	// Point is the hook point. Run needs a point abi knows.
	Point string
	// Context is the traffic at the point. It is encoded to JSON and
	// decoded by the hook's SDK, so Go values arrive as JSON values (an int
	// arrives as a json.Number).
	Context map[string]any
	// Settings are the hook's settings.
	Settings map[string]any
	// Meta identifies the invocation. Empty fields get defaults: hook
	// "sdktest", tenant "test", invocation "sdktest-N".
	Meta sdk.Meta
}

// Host is a fake host. Create it with NewHost; the zero value is not usable.
// A Host is safe for concurrent use by multiple goroutines.
type Host struct {
	// runMu serialises this host's runs; the invocation state below
	// belongs to the one that holds it.
	runMu sync.Mutex

	mu sync.Mutex // guards every field below

	caps     map[string]Capability
	costs    map[string]int64
	credit   int64
	metered  bool            // SetCredit was called
	granted  map[string]bool // nil: everything is granted
	manifest *abi.Manifest   // nil: no manifest, grants alone decide
	maxCalls int             // per invocation; 0 means no limit
	kv       map[string]any
	logs     []LogEntry
	calls    []Call
	runs     int

	// State of the running invocation.
	invCalls      int
	parked        []byte
	parkedStatus  abi.Status
	hasParked     bool
	lastCallIndex int // index in calls of the last call this invocation, or -1
}

// NewHost returns a fake host with three built-in capabilities, each of which
// Register can replace:
//
//   - log.write {"level", "message"} records a LogEntry (see Logs);
//   - kv.get {"key"} answers {"found", "value"} from an in-memory store;
//   - kv.set {"key", "value"} writes to it (see SetKV and KV).
func NewHost() *Host {
	h := &Host{
		caps:  map[string]Capability{},
		costs: map[string]int64{},
		kv:    map[string]any{},

		lastCallIndex: -1,
	}
	h.caps["log.write"] = h.logWrite
	h.caps["kv.get"] = h.kvGet
	h.caps["kv.set"] = h.kvSet
	return h
}

// Register adds or replaces capability name.
func (h *Host) Register(name string, fn Capability) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.caps[name] = fn
}

// RegisterError registers capability name as one that always fails with
// status s and message.
func (h *Host) RegisterError(name string, s abi.Status, message string) {
	h.Register(name, func(map[string]any) (any, error) { return nil, abi.NewError(s, message) })
}

// Grant limits the capabilities the operator grants the hook to names; a call
// to any other is DENIED. Without Grant, every capability is granted.
func (h *Host) Grant(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.granted = map[string]bool{}
	for _, n := range names {
		h.granted[n] = true
	}
}

// TB is the part of testing.TB that HostFor uses.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// HostFor returns a new Host that applies the manifest file at path (see
// UseManifest), failing tb when the manifest cannot be read or is invalid:
// the usual first line of a hook's test, newHost(t).
func HostFor(tb TB, path string) *Host {
	tb.Helper()
	h := NewHost()
	if err := h.UseManifest(path); err != nil {
		tb.Fatal(err)
	}
	return h
}

// UseManifest reads a manifest file (such as the hook's manifest.json),
// checks it with abi.DecodeManifest, and applies it as the real host does: a
// call passes only if the manifest asks for the capability (and the operator
// granted it, see Grant), and Run refuses a point the manifest does not list.
func (h *Host) UseManifest(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := abi.DecodeManifest(data)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.manifest = m
	return nil
}

// SetCredit turns on a credit ledger with balance n. A call to a capability
// that costs more than the balance answers INSUFFICIENT_CREDIT without
// running it; a successful call is charged its cost (see SetCost), a failed
// one is not.
func (h *Host) SetCredit(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.credit, h.metered = n, true
}

// SetCost sets the credit a call to capability name costs. Costs apply only
// once SetCredit was called.
func (h *Host) SetCost(name string, cost int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.costs[name] = cost
}

// Credit returns the balance of the credit ledger.
func (h *Host) Credit() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.credit
}

// SetMaxCalls limits the capability calls of one invocation to n; further
// calls answer QUOTA_EXCEEDED. Zero means no limit.
func (h *Host) SetMaxCalls(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.maxCalls = n
}

// SetKV stores value under key in the store behind kv.get and kv.set, as a
// JSON value (it is encoded and decoded, so an int becomes a json.Number).
func (h *Host) SetKV(key string, value any) error {
	v, err := roundTripJSON(value)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[key] = v
	return nil
}

// KV returns the value stored under key and whether it is set.
func (h *Host) KV(key string) (any, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.kv[key]
	return v, ok
}

// Calls returns the capability calls made in all runs so far, in order.
func (h *Host) Calls() []Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Call(nil), h.calls...)
}

// Logs returns the lines written through log.write in all runs so far.
func (h *Host) Logs() []LogEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]LogEntry(nil), h.logs...)
}

// Run runs the hook's registered handler (see sdk.Handle) on inv and returns
// its decision as the real host would see it: decoded and normalised by
// abi.DecodeDecision for inv.Point. If the hook failed, the error wraps
// ErrHookFailed and says why.
func (h *Host) Run(inv Invocation) (*abi.Decision, error) {
	return h.run(inv, nil)
}

// RunHandler is Run with handler instead of the registered handler, for
// testing a handler without registering it (a test binary can register only
// one). Wrap a plain handler: func(inv *sdk.Invocation) (sdk.Decision, error)
// { return plain(inv), nil }.
func (h *Host) RunHandler(handler func(*sdk.Invocation) (sdk.Decision, error), inv Invocation) (*abi.Decision, error) {
	if handler == nil {
		return nil, errors.New("sdktest: RunHandler(nil)")
	}
	return h.run(inv, handler)
}

func (h *Host) run(inv Invocation, handler any) (*abi.Decision, error) {
	point, ok := abi.LookupPoint(inv.Point)
	if !ok {
		return nil, fmt.Errorf("sdktest: unknown hook point %q", inv.Point)
	}
	out, err := h.runRaw(inv, handler)
	if err != nil {
		return nil, err
	}
	d, err := abi.DecodeDecision(out, point, abi.JSONLimits{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHookFailed, err)
	}
	return d, nil
}

// RunRaw is Run without decoding: it returns the hook's output bytes, the
// canonical decision document the SDK encoded.
func (h *Host) RunRaw(inv Invocation) ([]byte, error) {
	return h.runRaw(inv, nil)
}

func (h *Host) runRaw(inv Invocation, handler any) ([]byte, error) {
	h.mu.Lock()
	h.runs++
	n := h.runs
	m := h.manifest
	h.mu.Unlock()
	if !m.AllowsPoint(inv.Point) {
		return nil, fmt.Errorf("sdktest: the manifest does not allow point %q (points: %v)", inv.Point, m.Points)
	}
	meta := inv.Meta
	if meta.Hook == "" {
		meta.Hook = "sdktest"
	}
	if meta.Tenant == "" {
		meta.Tenant = "test"
	}
	if meta.Invocation == "" {
		meta.Invocation = fmt.Sprintf("sdktest-%d", n)
	}
	doc, err := (&abi.Invocation{
		ABI:      abi.Major,
		Point:    inv.Point,
		Context:  inv.Context,
		Settings: inv.Settings,
		Meta:     abi.Meta{Hook: meta.Hook, Invocation: meta.Invocation, Tenant: meta.Tenant},
	}).Encode()
	if err != nil {
		return nil, fmt.Errorf("sdktest: encoding the invocation: %w", err)
	}
	return h.invoke(doc, handler)
}

// RunDocument runs the registered handler with doc as the invocation
// document, as is, and returns the hook's output bytes. It is for testing
// how a hook (or the SDK) treats documents Invocation cannot express.
func (h *Host) RunDocument(doc []byte) ([]byte, error) {
	return h.invoke(append([]byte(nil), doc...), nil)
}

func (h *Host) invoke(doc []byte, handler any) ([]byte, error) {
	h.runMu.Lock()
	defer h.runMu.Unlock()
	h.mu.Lock()
	h.invCalls = 0
	h.lastCallIndex = -1
	// Per ABI.md the host parks the invocation document before calling
	// hook_v1_handle(in_len); the guest takes it.
	h.parked, h.parkedStatus, h.hasParked = doc, abi.StatusOK, true
	h.mu.Unlock()

	out, failure, err := hostcall.Invoke(adapter{h}, uint32(len(doc)), handler)

	h.mu.Lock()
	h.parked, h.hasParked = nil, false // the end of the invocation drops it
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sdktest: %w", err)
	}
	if failure != "" {
		return nil, fmt.Errorf("%w: %s", ErrHookFailed, failure)
	}
	return out, nil
}

// adapter implements hostcall.Host without adding HostCall to Host's API.
type adapter struct{ h *Host }

// HostCall is hook_v1.host_call; see Host.hostCall.
func (a adapter) HostCall(name string, payload, out []byte) (abi.Status, uint32) {
	return a.h.hostCall(name, payload, out)
}

// hostCall implements hook_v1.host_call. See ABI.md.
func (h *Host) hostCall(name string, payload, out []byte) (abi.Status, uint32) {
	h.mu.Lock()
	if abi.IsTake(uint32(len(name)), uint32(len(payload))) {
		defer h.mu.Unlock()
		if h.lastCallIndex >= 0 {
			h.calls[h.lastCallIndex].Takes++
		}
		if !h.hasParked {
			return abi.StatusNoPending, 0
		}
		n := uint32(len(h.parked))
		if n > uint32(len(out)) {
			return abi.StatusBufferTooSmall, n
		}
		copy(out, h.parked)
		s := h.parkedStatus
		h.parked, h.hasParked = nil, false
		return s, n
	}
	// A new call drops whatever was parked.
	h.parked, h.hasParked = nil, false
	h.calls = append(h.calls, Call{Name: name, Payload: append([]byte(nil), payload...)})
	idx := len(h.calls) - 1
	h.lastCallIndex = idx
	h.invCalls++
	over := h.maxCalls > 0 && h.invCalls > h.maxCalls
	h.mu.Unlock()

	var status abi.Status
	var body []byte
	if over {
		status, body = abi.StatusQuotaExceeded, abi.NewError(abi.StatusQuotaExceeded, "this invocation's host-call limit is spent").Encode()
	} else {
		status, body = h.execute(name, payload)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	n := uint32(len(body))
	c := &h.calls[idx]
	c.Status, c.Body = status, body
	if n <= uint32(len(out)) {
		copy(out, body)
	} else {
		h.parked, h.parkedStatus, h.hasParked = body, status, true
		c.Parked = true
	}
	return status, n
}

// execute runs the capability runner's steps: resolve, grant, validate,
// gate, execute, settle.
func (h *Host) execute(name string, payload []byte) (abi.Status, []byte) {
	fail := func(s abi.Status, format string, args ...any) (abi.Status, []byte) {
		return s, abi.Errorf(s, format, args...).Encode()
	}
	if len(name) > 128 {
		return fail(abi.StatusRequestTooLarge, "capability name is %d bytes, over the limit of 128", len(name))
	}
	h.mu.Lock()
	fn, ok := h.caps[name]
	denied := (h.granted != nil && !h.granted[name]) || (h.manifest != nil && !h.manifest.Requests(name))
	cost := h.costs[name]
	short := h.metered && cost > h.credit
	h.mu.Unlock()
	switch {
	case !ok:
		return fail(abi.StatusUnknownCapability, "no capability named %q", name)
	case denied:
		return fail(abi.StatusDenied, "capability %q is not granted to this hook", name)
	}
	v, err := abi.ParseJSON(payload, abi.JSONLimits{})
	if err != nil {
		return fail(abi.StatusInvalidRequest, "payload: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fail(abi.StatusInvalidRequest, "payload must be a JSON object")
	}
	if short {
		return fail(abi.StatusInsufficientCredit, "capability %q costs %d, the balance is lower", name, cost)
	}
	result, err := safeCall(fn, obj)
	if err != nil {
		var ae *abi.Error
		var se *sdk.Error
		switch {
		case errors.As(err, &ae):
			return ae.Status, abi.NewError(ae.Status, ae.Message).Encode()
		case errors.As(err, &se):
			return se.Status, abi.NewError(se.Status, se.Message).Encode()
		}
		return fail(abi.StatusCapabilityFailed, "%v", err)
	}
	var body []byte
	if raw, ok := result.(json.RawMessage); ok {
		body = append([]byte(nil), raw...)
	} else if body, err = abi.Marshal(result); err != nil {
		return fail(abi.StatusCapabilityFailed, "encoding the result: %v", err)
	}
	if h.metered {
		h.mu.Lock()
		h.credit -= cost
		h.mu.Unlock()
	}
	return abi.StatusOK, body
}

func safeCall(fn Capability, payload map[string]any) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("capability panicked: %v", r)
		}
	}()
	return fn(payload)
}

func (h *Host) logWrite(p map[string]any) (any, error) {
	level, _ := p["level"].(string)
	msg, ok := p["message"].(string)
	if !ok {
		return nil, abi.NewError(abi.StatusInvalidRequest, `"message" must be a string`)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, LogEntry{Level: level, Message: msg})
	return map[string]any{}, nil
}

func (h *Host) kvGet(p map[string]any) (any, error) {
	key, ok := p["key"].(string)
	if !ok {
		return nil, abi.NewError(abi.StatusInvalidRequest, `"key" must be a string`)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, found := h.kv[key]
	if !found {
		return map[string]any{"found": false}, nil
	}
	return map[string]any{"found": true, "value": v}, nil
}

func (h *Host) kvSet(p map[string]any) (any, error) {
	key, ok := p["key"].(string)
	if !ok {
		return nil, abi.NewError(abi.StatusInvalidRequest, `"key" must be a string`)
	}
	value, ok := p["value"]
	if !ok {
		return nil, abi.NewError(abi.StatusInvalidRequest, `"value" is required`)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kv[key] = value
	return map[string]any{}, nil
}

func roundTripJSON(v any) (any, error) {
	b, err := abi.Marshal(v)
	if err != nil {
		return nil, err
	}
	return abi.ParseJSON(b, abi.JSONLimits{})
}
