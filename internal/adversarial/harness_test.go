package adversarial

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// ---------------------------------------------------------------------------
// The corpus.

var corpusCache testutil.ByteCache

// corpus returns testdata/adversarial/name assembled with wat2wasm, once per
// process.
func corpus(tb testing.TB, name string) []byte {
	tb.Helper()
	return corpusCache.Get(name, func() []byte {
		return testutil.WAT(tb, string(testutil.ReadFile(tb, "testdata/adversarial/"+name)))
	})
}

// ---------------------------------------------------------------------------
// The script of testdata/adversarial/hostile.wat. See that file for the ops.

// Scratch addresses in hostile.wat's memory that its interpreter does not use.
const (
	namePtr = testutil.ScriptNamePtr
	inPtr   = testutil.ScriptInPtr
	outPtr  = testutil.ScriptOutPtr
	rawPtr  = 0x6000 // raw bytes a test writes and returns or prints

	hostileMemory = 8 * 65536 // hostile.wat's initial memory, in bytes
)

func hx(v uint32) string { return fmt.Sprintf("%08x", v) }

func opCall(p1, p2, p3, p4, p5, p6 uint32) string { return testutil.OpCall(p1, p2, p3, p4, p5, p6) }
func opWrite(addr uint32, b []byte) string        { return testutil.OpWrite(addr, b) }

func opFill(addr, n uint32, c byte) string { return "F" + hx(addr) + hx(n) + fmt.Sprintf("%02x", c) }
func opGrow(pages uint32) string           { return "G" + hx(pages) }
func opStore(addr uint32) string           { return "S" + hx(addr) }
func opBusy(n uint32) string               { return "B" + hx(n) }
func opRecurse(depth uint32) string        { return "R" + hx(depth) }
func opTree(level uint32) string           { return "X" + hx(level) }
func opOutput(ptr, n uint32) string        { return "O" + hx(ptr) + hx(n) }

// opPrint writes [ptr, ptr+n) to fd (1 stdout, 2 stderr) times times.
func opPrint(fd, ptr, n, times uint32) string { return "P" + hx(fd) + hx(ptr) + hx(n) + hx(times) }

// opStash remembers s (letters and digits only) in the instance.
func opStash(s string) string { return "M" + hx(uint32(len(s))) + s }

const (
	opTrap   = "U"
	opLoop   = "L"
	opQuote  = "Q" // log the stash
	opServed = "I" // log the instance's invocation count
	opZero   = "Z"
)

// opHostCall writes name and payload into scratch memory and calls host_call
// with an output buffer of outCap bytes.
func opHostCall(name, payload string, outCap uint32) string {
	return testutil.OpHostCall(name, payload, outCap)
}

func opTake(outCap uint32) string { return testutil.OpTake(outCap) }

// opReturnRaw makes the hook return b, whatever it is, as its decision.
func opReturnRaw(b []byte) string {
	return opWrite(rawPtr, b) + opOutput(rawPtr, uint32(len(b)))
}

// entries splits the hook's log (its decision's reason) into entries.
func entries(reason string) []string {
	reason = strings.TrimSuffix(reason, ".")
	if reason == "" {
		return []string{""}
	}
	return strings.Split(reason, ".")
}

// hostResult is one logged host_call.
type hostResult struct {
	status abi.Status
	length uint32
	body   string // the written body, if any
}

func decodeCall(t testing.TB, e string) hostResult {
	t.Helper()
	v, body := testutil.DecodeLogEntry(t, e)
	s, n := abi.UnpackResult(v)
	return hostResult{status: s, length: n, body: string(body)}
}

// calls decodes a log made of host_call results only.
func calls(t testing.TB, res *runtime.Result) []hostResult {
	t.Helper()
	if res == nil || res.Decision == nil {
		t.Fatalf("no decision: %+v", res)
	}
	var out []hostResult
	for _, e := range entries(res.Decision.Reason) {
		out = append(out, decodeCall(t, e))
	}
	return out
}

// ---------------------------------------------------------------------------
// The world: a runtime and a runner wired together, with counters.

// secret is what a capability's failure carries that a hook must never see.
const secret = "sk-live-0123456789SECRET"

// fakeProvider backs llm.run. Its behaviour is chosen by the prompt's prefix.
type fakeProvider struct {
	calls  atomic.Int64
	lateBy time.Duration // how long the LATE-* prompts keep the call
}

func (p *fakeProvider) Complete(ctx context.Context, req builtin.CompletionRequest) (builtin.Completion, error) {
	p.calls.Add(1)
	ok := builtin.Completion{Text: "ok", Model: "fake", Provider: "fake", InputTokens: 1, OutputTokens: 1}
	switch {
	case strings.HasPrefix(req.Prompt, "PANIC"):
		panic("provider blew up: api_key=" + secret + " config=/etc/wasmhooks/provider.conf")
	case strings.HasPrefix(req.Prompt, "FAIL"):
		return builtin.Completion{}, fmt.Errorf("upstream said 500; request had Authorization: Bearer %s", secret)
	case strings.HasPrefix(req.Prompt, "OVERAGE"):
		ok.InputTokens, ok.OutputTokens = 100_000, 100_000
	case strings.HasPrefix(req.Prompt, "LATE-HONOUR"):
		<-ctx.Done()
		return builtin.Completion{}, ctx.Err()
	case strings.HasPrefix(req.Prompt, "LATE-IGNORE"):
		time.Sleep(p.lateBy)
	case strings.HasPrefix(req.Prompt, "LATE-FAIL"):
		time.Sleep(p.lateBy)
		return builtin.Completion{}, errors.New("upstream timed out")
	}
	return ok, nil
}

// llmCost is what llm.run reserves for a prompt and max_tokens at the default
// prices.
func llmCost(prompt string, maxTokens int64) int64 {
	return builtin.EstimateInputTokens(prompt)*builtin.DefaultInputTokenPrice + maxTokens*builtin.DefaultOutputTokenPrice
}

// llmPayload is a well-formed llm.run payload.
func llmPayload(prompt string, maxTokens int) string {
	return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d}`, prompt, maxTokens)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes: the operator's
// log.
type syncBuffer = testutil.SyncBuffer

// probeSeen is what the probe capability saw of one call.
type probeSeen struct {
	payload    any  // what Execute received
	sameAsCost bool // whether Cost was given the very same value
}

// identity returns the address of a map or slice value, zero for others.
func identity(v any) uintptr {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		return uintptr(rv.UnsafePointer())
	}
	return 0
}

// world is one runtime and one runner wired together, with the counters the
// invariants need. Its methods are safe for concurrent use by the goroutines
// of one test.
type world struct {
	rt      *runtime.Runtime
	runner  *capability.Runner
	ledger  *countingLedger
	usage   *capability.MemoryUsageSink
	llm     *fakeProvider
	oplog   *syncBuffer // the operator's log, JSON lines
	hostile *runtime.Module
	maxIdle int

	cheap atomic.Int64 // executions of "cheap"

	mu       sync.Mutex
	costSaw  map[uintptr]any       // the payloads probe's Cost saw, by identity (kept alive so no address is reused)
	probes   map[string]*probeSeen // by idempotency key
	reported map[string]int64      // credit the hooks' reports say was charged, by tenant
	tenantOf map[string]string     // invocation -> tenant
	seq      atomic.Int64

	baseGoroutines int
}

// options configure a world.
type options struct {
	cfg    runtime.Config
	runner capability.RunnerOptions
	lateBy time.Duration
	caps   []capability.Capability // registered besides the world's own
}

// allGrants grants every capability of the world.
var allGrants = []string{builtin.LLMName, builtin.KVGetName, builtin.KVSetName, builtin.LogWriteName, "cheap", "echo", "probe"}

// newWorld wires a runtime and a runner as cmd/wasmhooks does: the built-in
// capabilities (llm.run billed through a CreditGate on a counting ledger,
// backed by fakeProvider; kv.*; log.write into the operator's log), plus
// "cheap" (billable, cost 1), "echo" (free) and "probe" (records what its
// Cost and Execute see). When the test ends it checks the invariants
// (checkInvariants) before closing the runtime.
func newWorld(t *testing.T, opt ...func(*options)) *world {
	t.Helper()
	o := options{lateBy: 300 * time.Millisecond}
	for _, f := range opt {
		f(&o)
	}
	ctx := context.Background()
	w := &world{
		ledger:   newCountingLedger(),
		usage:    &capability.MemoryUsageSink{},
		llm:      &fakeProvider{lateBy: o.lateBy},
		oplog:    &syncBuffer{},
		costSaw:  map[uintptr]any{},
		probes:   map[string]*probeSeen{},
		reported: map[string]int64{},
		tenantOf: map[string]string{},
	}
	logger := slog.New(slog.NewJSONHandler(w.oplog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := capability.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Provider: w.llm, Ledger: w.ledger, Logs: builtin.SlogSink{Logger: logger}}); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(capability.Capability{
		Name: "cheap", Description: "costs 1 and uses 1", Schema: `{}`,
		Gates: []capability.Gate{&capability.CreditGate{Ledger: w.ledger}},
		Cost:  func(any) int64 { return 1 },
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			w.cheap.Add(1)
			return &capability.Result{Value: true, Usage: capability.Usage{Credit: 1}}, nil
		},
	})
	reg.MustRegister(capability.Capability{
		Name: "echo", Description: "returns its payload", Schema: `{}`,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			return &capability.Result{Value: req.Payload}, nil
		},
	})
	reg.MustRegister(capability.Capability{
		Name: "probe", Description: "records what Cost and Execute see",
		Schema: `{"type":"object","properties":{"model":{"enum":["small","large"]},"max_tokens":{"type":"integer","minimum":1,"maximum":100}},"required":["max_tokens"],"additionalProperties":false}`,
		Gates:  []capability.Gate{&capability.CreditGate{Ledger: w.ledger}},
		Cost: func(p any) int64 {
			w.mu.Lock()
			w.costSaw[identity(p)] = p
			w.mu.Unlock()
			n, _ := p.(map[string]any)["max_tokens"].(interface{ Int64() (int64, error) })
			if n == nil {
				return 1
			}
			v, err := n.Int64()
			if err != nil {
				return 100 // 1e1, 10.0: an integer to the schema, not to Int64
			}
			return v
		},
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			w.mu.Lock()
			w.probes[req.IdempotencyKey] = &probeSeen{payload: req.Payload, sameAsCost: w.costSaw[identity(req.Payload)] != nil}
			w.mu.Unlock()
			return &capability.Result{Value: req.Payload, Usage: capability.Usage{Credit: 1}}, nil
		},
	})
	for _, c := range o.caps {
		reg.MustRegister(c)
	}
	o.runner.Logger = logger
	o.runner.Usage = w.usage
	runner, err := capability.NewRunner(reg, o.runner)
	if err != nil {
		t.Fatal(err)
	}
	w.runner = runner
	o.cfg.HostCaller = runner
	o.cfg.Logger = logger
	w.maxIdle = o.cfg.MaxIdlePerPool
	if w.maxIdle == 0 {
		w.maxIdle = runtime.DefaultMaxIdlePerPool
	}
	w.rt, err = runtime.New(ctx, o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.rt.Close(ctx) })
	w.hostile = w.load(t, corpus(t, "hostile.wat"))
	t.Cleanup(func() { w.checkInvariants(t) }) // runs before the Close above
	w.baseGoroutines = goruntime.NumGoroutine()
	return w
}

func (w *world) load(t *testing.T, wasm []byte) *runtime.Module {
	t.Helper()
	m, err := w.rt.Load(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// fund gives tenant credit.
func (w *world) fund(t *testing.T, tenant string, amount int64) {
	t.Helper()
	if err := w.ledger.Credit(tenant, amount); err != nil {
		t.Fatal(err)
	}
}

// acmeWorld is a new world whose tenant "acme" holds credit.
func acmeWorld(t *testing.T, credit int64) *world {
	t.Helper()
	w := newWorld(t)
	w.fund(t, "acme", credit)
	return w
}

// run invokes hostile.wat for tenant with script.
func (w *world) run(t *testing.T, tenant string, lim runtime.Limits, script string) (*runtime.Result, error) {
	t.Helper()
	return w.invoke(t, w.hostile, runtime.Request{Tenant: tenant, Limits: lim,
		Context: map[string]any{"outgoing": "@@" + script}})
}

// runWithin is run for acme that fails t if it errs, and reports (within)
// if it takes longer than d.
func (w *world) runWithin(t *testing.T, d time.Duration, what string, lim runtime.Limits, script string) *runtime.Result {
	t.Helper()
	var res *runtime.Result
	var err error
	within(t, d, what, func() { res, err = w.run(t, "acme", lim, script) })
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// invoke runs one invocation with every capability granted, and records who
// it ran for and what its report says was charged. A failed invocation must
// carry no decision, must not be reused and must not leak a host stack trace.
func (w *world) invoke(t *testing.T, m *runtime.Module, req runtime.Request) (*runtime.Result, error) {
	t.Helper()
	id := fmt.Sprintf("inv-%d", w.seq.Add(1))
	req.InvocationID = id
	if req.Grants == nil {
		req.Grants = allGrants
	}
	w.mu.Lock()
	w.tenantOf[id] = req.Tenant
	w.mu.Unlock()
	res, err := w.rt.Invoke(context.Background(), m, req)
	if res != nil {
		w.mu.Lock()
		w.reported[req.Tenant] += res.CreditCharged
		w.mu.Unlock()
		if res.Failure != nil {
			if res.Decision != nil || res.Reused {
				t.Errorf("failed invocation: decision %v, reused %v; want none, discarded", res.Decision, res.Reused)
			}
			checkSanitised(t, "failure message", res.Failure.Message)
		}
	}
	return res, err
}

// hostCall calls the runner directly, as the runtime does, for payloads too
// large to carry in a script. Its charge is recorded like an invocation's.
func (w *world) hostCall(tenant, name string, payload []byte) abi.Reply {
	id := fmt.Sprintf("direct-%d", w.seq.Add(1))
	w.mu.Lock()
	w.tenantOf[id] = tenant
	w.mu.Unlock()
	reply := w.runner.HostCall(context.Background(), &abi.Call{Name: name, Payload: payload, Seq: 1,
		MaxResultBytes: runtime.DefaultMaxResultBytes,
		Caller:         abi.Caller{Tenant: tenant, Hook: "direct", Invocation: id, Granted: allGrants}})
	w.mu.Lock()
	w.reported[tenant] += reply.Charged
	w.mu.Unlock()
	return reply
}

// checkSanitised fails if s carries host details: a Go or wasm stack trace, a
// host path, or the provider's secret.
func checkSanitised(t testing.TB, what, s string) {
	t.Helper()
	for _, bad := range []string{"goroutine ", ".go:", "wasm stack trace", "/etc/", "/work/", "/home/", secret, "api_key", "Bearer"} {
		if strings.Contains(s, bad) {
			t.Errorf("%s leaks %q: %q", what, bad, s)
		}
	}
}

// wantFailure fails unless err is a hook failure of one of codes.
func wantFailure(t testing.TB, res *runtime.Result, err error, codes ...abi.FailureCode) *abi.Failure {
	t.Helper()
	f, ok := abi.AsFailure(err)
	if !ok {
		t.Fatalf("err = %v, want a hook failure %v", err, codes)
	}
	for _, c := range codes {
		if f.Code == c {
			if res == nil || res.Failure == nil || res.Failure.Code != f.Code {
				t.Fatalf("result %+v does not carry the failure %v", res, f)
			}
			return f
		}
	}
	t.Fatalf("failure %s (%s), want one of %v", f.Code, f.Message, codes)
	return nil
}

// within fails if f takes longer than d.
func within(t testing.TB, d time.Duration, what string, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	el := time.Since(start)
	if el > d {
		t.Errorf("%s took %v, over the bound of %v", what, el, d)
	}
	return el
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkInvariants is run after every test of the suite. See the package
// documentation.
func (w *world) checkInvariants(t *testing.T) {
	t.Helper()
	// The host is fine: a fresh tenant's invocation still reaches a decision,
	// on a fresh instance.
	canary := fmt.Sprintf("canary-%d", w.seq.Add(1))
	res, err := w.run(t, canary, runtime.Limits{}, opServed)
	if err != nil || res.Decision == nil || res.Decision.Reason != "00000001." {
		t.Errorf("invariant: the canary invocation failed: %v %+v", err, res)
	}

	// Every instance is back in its pool or closed.
	if !waitFor(2*time.Second, func() bool { s := w.rt.Stats(); return s.Instances == s.Idle }) {
		t.Errorf("invariant: instances still busy after every invocation returned: %+v", w.rt.Stats())
	}
	if s := w.rt.Stats(); s.Idle > s.Pools*w.maxIdle {
		t.Errorf("invariant: %d idle instances in %d pools, over %d per pool", s.Idle, s.Pools, w.maxIdle)
	}

	// Goroutines are back to their baseline.
	if !waitFor(3*time.Second, func() bool { return goruntime.NumGoroutine() <= w.baseGoroutines }) {
		buf := make([]byte, 1<<16)
		n := goruntime.Stack(buf, true)
		t.Errorf("invariant: %d goroutines, baseline %d\n%s", goruntime.NumGoroutine(), w.baseGoroutines, buf[:n])
	}

	// Credit: every reservation resolved exactly once, no negative balance,
	// and the ledger, the usage records and the reports agree.
	charged := w.ledger.check(t)
	fromUsage := map[string]int64{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.usage.Records() {
		if r.Charged < 0 || (r.Charged > 0 && r.Charged > r.Reserved) {
			t.Errorf("invariant: usage record charged %d of %d reserved: %+v", r.Charged, r.Reserved, r)
		}
		if r.Charged > 0 && r.Status != abi.StatusOK && r.Status != abi.StatusResultTooLarge {
			t.Errorf("invariant: charged %d for a call answered %v", r.Charged, r.Status)
		}
		if tenant, ok := w.tenantOf[r.Invocation]; !ok || tenant != r.Tenant {
			t.Errorf("invariant: usage record of invocation %q says tenant %q, the invocation ran for %q", r.Invocation, r.Tenant, tenant)
		}
		fromUsage[r.Tenant] += r.Charged
	}
	for _, m := range []map[string]int64{charged, fromUsage, w.reported} {
		for k, v := range m {
			if v == 0 {
				delete(m, k)
			}
		}
	}
	if !reflect.DeepEqual(charged, fromUsage) || !reflect.DeepEqual(charged, w.reported) {
		t.Errorf("invariant: charged by tenant: ledger %v, usage records %v, invocation reports %v", charged, fromUsage, w.reported)
	}
}

// ---------------------------------------------------------------------------
// countingLedger wraps a MemoryLedger and checks, call by call, that no
// balance goes negative and that every reservation is resolved exactly once.

type countingLedger struct {
	mem *capability.MemoryLedger

	mu       sync.Mutex
	credited map[string]int64
	res      map[string]*reservation // by id
	problems []string
}

type reservation struct {
	account           string
	amount            int64
	settles, releases int
	charged           int64
}

func newCountingLedger() *countingLedger {
	return &countingLedger{mem: capability.NewMemoryLedger(), credited: map[string]int64{}, res: map[string]*reservation{}}
}

func (l *countingLedger) Credit(account string, amount int64) error {
	if err := l.mem.Credit(account, amount); err != nil {
		return err
	}
	l.mu.Lock()
	l.credited[account] += amount
	l.mu.Unlock()
	return nil
}

func (l *countingLedger) observe(account string) {
	avail, pending, err := l.mem.Balance(context.Background(), account)
	if err != nil || avail < 0 || pending < 0 {
		l.mu.Lock()
		l.problems = append(l.problems, fmt.Sprintf("account %q: available %d, pending %d, err %v", account, avail, pending, err))
		l.mu.Unlock()
	}
}

func (l *countingLedger) Reserve(ctx context.Context, account string, amount int64, key string) (string, error) {
	id, err := l.mem.Reserve(ctx, account, amount, key)
	if err == nil {
		l.mu.Lock()
		if l.res[id] == nil {
			l.res[id] = &reservation{account: account, amount: amount}
		}
		l.mu.Unlock()
	}
	l.observe(account)
	return id, err
}

func (l *countingLedger) Settle(ctx context.Context, id string, amount int64) (int64, error) {
	charged, err := l.mem.Settle(ctx, id, amount)
	l.mu.Lock()
	r := l.res[id]
	if r == nil {
		l.problems = append(l.problems, "settle of unknown reservation "+id)
		l.mu.Unlock()
		return charged, err
	}
	r.settles++
	r.charged += charged
	account := r.account
	l.mu.Unlock()
	l.observe(account)
	return charged, err
}

func (l *countingLedger) Release(ctx context.Context, id string) error {
	err := l.mem.Release(ctx, id)
	l.mu.Lock()
	r := l.res[id]
	if r == nil {
		l.problems = append(l.problems, "release of unknown reservation "+id)
		l.mu.Unlock()
		return err
	}
	r.releases++
	account := r.account
	l.mu.Unlock()
	l.observe(account)
	return err
}

func (l *countingLedger) Balance(ctx context.Context, account string) (int64, int64, error) {
	return l.mem.Balance(ctx, account)
}

// counts returns how many reservations were made, settled and released.
func (l *countingLedger) counts() (reserved, settled, released int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.res {
		reserved++
		settled += r.settles
		released += r.releases
	}
	return
}

// available returns the credit account can spend.
func (l *countingLedger) available(t testing.TB, account string) int64 {
	t.Helper()
	a, _, err := l.mem.Balance(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// check checks the ledger's invariants and returns what was charged, by
// account.
func (l *countingLedger) check(t *testing.T) map[string]int64 {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.problems {
		t.Errorf("invariant: ledger: %s", p)
	}
	charged := map[string]int64{}
	for id, r := range l.res {
		if r.settles+r.releases != 1 {
			t.Errorf("invariant: reservation %s (%d on %q) settled %d times and released %d times, want exactly one resolution",
				id, r.amount, r.account, r.settles, r.releases)
		}
		if r.charged > r.amount {
			t.Errorf("invariant: reservation %s charged %d of %d reserved", id, r.charged, r.amount)
		}
		charged[r.account] += r.charged
	}
	if n := l.mem.Outstanding(); n != 0 {
		t.Errorf("invariant: %d reservations unresolved", n)
	}
	for account, credited := range l.credited {
		avail, pending, _ := l.mem.Balance(context.Background(), account)
		if avail < 0 || pending != 0 || avail != credited-charged[account] {
			t.Errorf("invariant: account %q: available %d, pending %d; credited %d, charged %d",
				account, avail, pending, credited, charged[account])
		}
	}
	return charged
}

var _ capability.Ledger = (*countingLedger)(nil)

// faultOnWarmInstance warms an instance of hostile.wat for tenant and leaves
// a stash in it, runs fault (a script that must fail with one of codes) on
// that very instance, and checks that the next invocation gets a fresh
// instance: an empty stash and a first invocation. Reusing the faulted
// instance would show the stash, or fail.
func (w *world) faultOnWarmInstance(t *testing.T, tenant string, lim runtime.Limits, fault string, codes ...abi.FailureCode) (*runtime.Result, *abi.Failure) {
	t.Helper()
	same := runtime.Limits{MemoryPages: lim.MemoryPages} // instances are pooled by memory limit too
	warm, err := w.run(t, tenant, same, opStash("warm"))
	if err != nil || !warm.Reused {
		t.Fatalf("warming: %v %+v", err, warm)
	}
	res, err := w.run(t, tenant, lim, fault)
	f := wantFailure(t, res, err, codes...)
	next, err := w.run(t, tenant, same, opQuote+opServed)
	if err != nil {
		t.Fatalf("the invocation after the fault: %v", err)
	}
	if next.Decision.Reason != ".00000001." {
		t.Fatalf("after a %s failure the next invocation saw stash and count %q; want a fresh instance (\".00000001.\")", f.Code, next.Decision.Reason)
	}
	return res, f
}

// heapInuse returns the bytes of the Go heap in use.
func heapInuse() uint64 {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// totalAlloc returns the bytes allocated on the Go heap so far.
func totalAlloc() uint64 {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestCorpusIsUsed keeps testdata/adversarial honest: every file in it is
// assembled by some test of this package, and every file a test names
// exists.
func TestCorpusIsUsed(t *testing.T) {
	dir := filepath.Join(testutil.Root(t), "testdata", "adversarial")
	files, err := filepath.Glob(filepath.Join(dir, "*.wat"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", dir, err)
	}
	sources, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, s := range sources {
		all.Write(testutil.ReadFile(t, filepath.Join("internal", "adversarial", s)))
	}
	for _, f := range files {
		name := filepath.Base(f)
		if !strings.Contains(all.String(), `"`+name+`"`) {
			t.Errorf("testdata/adversarial/%s is used by no test", name)
		}
		corpus(t, name) // and it assembles
	}
}
