package capability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// denyGate refuses every call with a DeniedError.
type denyGate struct{ status abi.Status }

func (denyGate) Name() string { return "entitlement" }
func (g denyGate) Admit(context.Context, *Request, int64) (Hold, error) {
	return nil, &DeniedError{Status: g.status, Reason: "tenant is not entitled to this model"}
}

// brokenGate cannot decide: its backend is down.
type brokenGate struct{}

func (brokenGate) Name() string { return "broken" }
func (brokenGate) Admit(context.Context, *Request, int64) (Hold, error) {
	return nil, errors.New("dial tcp 10.1.2.3:5432: password authentication failed for user billing")
}

// panicGate panics in Admit.
type panicGate struct{}

func (panicGate) Name() string { return "panicky" }
func (panicGate) Admit(context.Context, *Request, int64) (Hold, error) {
	panic("gate exploded at /srv/gate.go")
}

// pipelineFixture is a registry exercising every step's refusal.
type pipelineFixture struct {
	reg     *Registry
	ledger  *MemoryLedger
	execs   map[string]*counter
	logs    *logBuffer
	runner  *Runner
	usage   *MemoryUsageSink
	limiter *RateGate
}

func newPipelineFixture(t *testing.T) *pipelineFixture {
	f := &pipelineFixture{
		reg:     NewRegistry(),
		ledger:  NewMemoryLedger(),
		execs:   map[string]*counter{},
		logs:    &logBuffer{},
		usage:   &MemoryUsageSink{},
		limiter: NewRateGate(0.001, 1),
	}
	if err := f.ledger.Credit("acme", 5); err != nil {
		t.Fatal(err)
	}
	cnt := func(name string) *counter {
		c := &counter{}
		f.execs[name] = c
		return c
	}
	echoExecs := cnt("echo")
	f.reg.MustRegister(Capability{
		Name:        "echo",
		Description: "returns its payload",
		Schema: `{"type": "object", "properties": {
			"n": {"type": "integer", "maximum": 100},
			"s": {"type": "string", "pattern": "^[a-z]*$"},
			"deep": true},
			"additionalProperties": false}`,
		Execute: func(_ context.Context, req *Request) (*Result, error) {
			echoExecs.inc()
			return &Result{Value: req.Payload}, nil
		},
	})
	f.reg.MustRegister(meteredCap("paid", 10, cnt("paid"), &CreditGate{Ledger: f.ledger}))
	f.reg.MustRegister(meteredCap("boom", 0, cnt("boom")))
	pickyExecs := cnt("picky")
	f.reg.MustRegister(Capability{
		Name: "picky", Description: "refuses odd numbers", Schema: `{"type": "integer"}`,
		Execute: func(_ context.Context, req *Request) (*Result, error) {
			pickyExecs.inc()
			return nil, fmt.Errorf("checking: %w", abi.NewError(abi.StatusInvalidRequest, "the number must be even"))
		},
	})
	rogueExecs := cnt("rogue")
	f.reg.MustRegister(Capability{
		Name: "rogue", Description: "answers with a status that is not its to give", Schema: `{}`,
		Execute: func(context.Context, *Request) (*Result, error) {
			rogueExecs.inc()
			return nil, abi.NewError(abi.StatusBufferTooSmall, "internal buffer at 0xdeadbeef")
		},
	})
	f.reg.MustRegister(meteredCap("limited", 0, cnt("limited"), f.limiter))
	f.reg.MustRegister(meteredCap("entitled", 0, cnt("entitled"), denyGate{abi.StatusDenied}))
	f.reg.MustRegister(meteredCap("broken", 0, cnt("broken"), brokenGate{}))
	f.reg.MustRegister(meteredCap("panicky", 0, cnt("panicky"), &CreditGate{Ledger: f.ledger}, panicGate{}))
	costExecs := cnt("badcost")
	f.reg.MustRegister(Capability{
		Name: "badcost", Description: "has a negative cost", Schema: `{}`,
		Cost: func(any) int64 { return -1 },
		Execute: func(context.Context, *Request) (*Result, error) {
			costExecs.inc()
			return &Result{}, nil
		},
	})
	f.runner = mustRunner(t, f.reg, RunnerOptions{Logger: f.logs.logger(), Usage: f.usage, MaxPayloadBytes: 4096})
	return f
}

// secrets are strings the fixture's capabilities put in panics and errors;
// none may ever reach a hook.
var secrets = []string{"secret", "sk-live", "/srv", "10.1.2.3", "password", "0xdeadbeef", "goroutine", ".go:"}

func TestRunnerPipelineRefusals(t *testing.T) {
	deep := `{"deep": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`
	tests := []struct {
		name     string
		call     func() *abi.Call
		want     abi.Status
		wantMsg  string // substring of the error message
		notInMsg string // must not be in the message
		wantErr  error  // errors.Is target for Run's error
		exec     string // capability whose Execute count is checked
		execs    int64  // Execute calls expected
	}{
		{name: "ok", call: func() *abi.Call { return newCall("echo", `{"n": 7}`) },
			want: abi.StatusOK, exec: "echo", execs: 1},

		// 1. Resolve.
		{name: "resolve/unknown", call: func() *abi.Call { return newCall("nope", `{}`) },
			want: abi.StatusUnknownCapability, wantMsg: `no capability named "nope"`, wantErr: ErrUnknownCapability},
		{name: "resolve/malformed name", call: func() *abi.Call { return newCall("Echo!", `{}`) },
			want: abi.StatusUnknownCapability, wantMsg: "invalid capability name", wantErr: ErrUnknownCapability},
		{name: "resolve/empty name", call: func() *abi.Call { return newCall("", `{}`) },
			want: abi.StatusUnknownCapability, wantErr: ErrUnknownCapability},
		{name: "resolve/name too long", call: func() *abi.Call { return newCall(strings.Repeat("a", 129), `{}`) },
			want: abi.StatusRequestTooLarge, wantErr: ErrRequestTooLarge},

		// 2. Grant.
		{name: "grant/not granted", call: func() *abi.Call {
			c := newCall("echo", `{}`)
			c.Caller.Granted = []string{"kv.get"}
			return c
		}, want: abi.StatusDenied, wantMsg: "not granted", wantErr: ErrNotGranted, exec: "echo"},
		{name: "grant/granted but not requested by the manifest", call: func() *abi.Call {
			c := newCall("echo", `{}`)
			c.Caller.HasManifest = true
			c.Caller.Requested = []string{"kv.get"}
			return c
		}, want: abi.StatusDenied, wantMsg: "not requested", wantErr: ErrNotGranted, exec: "echo"},
		{name: "grant/requested but not granted", call: func() *abi.Call {
			c := newCall("echo", `{}`)
			c.Caller.Granted = nil
			c.Caller.HasManifest = true
			c.Caller.Requested = []string{"echo"}
			return c
		}, want: abi.StatusDenied, wantErr: ErrNotGranted, exec: "echo"},
		{name: "grant/granted and requested", call: func() *abi.Call {
			c := newCall("echo", `{}`)
			c.Caller.HasManifest = true
			c.Caller.Requested = []string{"echo"}
			return c
		}, want: abi.StatusOK, exec: "echo", execs: 1},
		{name: "grant/no manifest: grants decide", call: func() *abi.Call {
			c := newCall("echo", `{}`)
			c.Caller.HasManifest = false
			c.Caller.Requested = nil
			return c
		}, want: abi.StatusOK, exec: "echo", execs: 1},

		// 3. Validate: strict JSON first.
		{name: "validate/duplicate keys", call: func() *abi.Call { return newCall("echo", `{"n": 1, "n": 200}`) },
			want: abi.StatusInvalidRequest, wantMsg: "duplicate key", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/invalid utf-8", call: func() *abi.Call { return newCall("echo", "{\"s\": \"ab\xffc\"}") },
			want: abi.StatusInvalidRequest, wantMsg: "UTF-8", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/lone surrogate", call: func() *abi.Call { return newCall("echo", `{"s": "\udc00"}`) },
			want: abi.StatusInvalidRequest, wantMsg: "surrogate", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/deep nesting", call: func() *abi.Call { return newCall("echo", deep) },
			want: abi.StatusInvalidRequest, wantMsg: "nesting", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/not json", call: func() *abi.Call { return newCall("echo", `{n: 1}`) },
			want: abi.StatusInvalidRequest, wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/empty payload", call: func() *abi.Call { return newCall("echo", ``) },
			want: abi.StatusInvalidRequest, wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/huge integer", call: func() *abi.Call { return newCall("echo", `{"n": 9007199254740993}`) },
			want: abi.StatusInvalidRequest, wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/payload too large", call: func() *abi.Call {
			return newCall("echo", `{"s": "`+strings.Repeat("a", 5000)+`"}`)
		}, want: abi.StatusRequestTooLarge, wantErr: ErrRequestTooLarge, exec: "echo"},

		// 3. Validate: then the schema.
		{name: "validate/type confusion", call: func() *abi.Call { return newCall("echo", `{"n": "100"}`) },
			want: abi.StatusInvalidRequest, wantMsg: "at /n: expected integer, but got string", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/maximum names the rule, not the value", call: func() *abi.Call { return newCall("echo", `{"n": 98765}`) },
			want: abi.StatusInvalidRequest, wantMsg: "at /n: must be <= 100", notInMsg: "98765", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/pattern does not echo the value", call: func() *abi.Call { return newCall("echo", `{"s": "SECRETVALUE"}`) },
			want: abi.StatusInvalidRequest, wantMsg: "at /s: does not match pattern", notInMsg: "SECRETVALUE", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/additional property", call: func() *abi.Call { return newCall("echo", `{"tenant": "other"}`) },
			want: abi.StatusInvalidRequest, wantMsg: "not allowed", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/array for object", call: func() *abi.Call { return newCall("echo", `[1, 2]`) },
			want: abi.StatusInvalidRequest, wantMsg: "at the top level: expected object, but got array", wantErr: ErrInvalidRequest, exec: "echo"},
		{name: "validate/null", call: func() *abi.Call { return newCall("echo", `null`) },
			want: abi.StatusInvalidRequest, wantErr: ErrInvalidRequest, exec: "echo"},

		// 4. Gate.
		{name: "gate/insufficient credit: no execute", call: func() *abi.Call { return newCall("paid", `{"use": 1}`) },
			want: abi.StatusInsufficientCredit, wantMsg: "not enough credit", wantErr: ErrInsufficientCredit, exec: "paid"},
		{name: "gate/rate limited", call: func() *abi.Call { return newCall("limited", `{}`) },
			want: abi.StatusRateLimited, wantMsg: "retry later", wantErr: ErrRateLimited, exec: "limited"},
		{name: "gate/denied by a gate", call: func() *abi.Call { return newCall("entitled", `{}`) },
			want: abi.StatusDenied, wantMsg: "not entitled", wantErr: &abi.Error{Status: abi.StatusDenied}, exec: "entitled"},
		{name: "gate/broken gate fails closed", call: func() *abi.Call { return newCall("broken", `{}`) },
			want: abi.StatusCapabilityFailed, wantMsg: "capability broken failed", wantErr: ErrCapabilityFailed, exec: "broken"},
		{name: "gate/panicking gate", call: func() *abi.Call { return newCall("panicky", `{}`) },
			want: abi.StatusCapabilityFailed, wantMsg: "capability panicky failed", wantErr: ErrCapabilityFailed, exec: "panicky"},
		{name: "gate/negative cost", call: func() *abi.Call { return newCall("badcost", `{}`) },
			want: abi.StatusCapabilityFailed, wantErr: ErrCapabilityFailed, exec: "badcost"},

		// 5. Execute.
		{name: "execute/panic", call: func() *abi.Call { return newCall("boom", `{"panic": true}`) },
			want: abi.StatusCapabilityFailed, wantMsg: "capability boom failed", wantErr: ErrCapabilityFailed, exec: "boom", execs: 1},
		{name: "execute/error", call: func() *abi.Call { return newCall("boom", `{"fail": true}`) },
			want: abi.StatusCapabilityFailed, wantMsg: "capability boom failed", wantErr: ErrCapabilityFailed, exec: "boom", execs: 1},
		{name: "execute/deliberate status", call: func() *abi.Call { return newCall("picky", `3`) },
			want: abi.StatusInvalidRequest, wantMsg: "the number must be even", exec: "picky", execs: 1},
		{name: "execute/status not the capability's to give", call: func() *abi.Call { return newCall("rogue", `{}`) },
			want: abi.StatusCapabilityFailed, wantMsg: "capability rogue failed", exec: "rogue", execs: 1},

		// 6. Dispatch.
		{name: "dispatch/result too large", call: func() *abi.Call {
			c := newCall("boom", `{"size": 500}`)
			c.MaxResultBytes = 100
			return c
		}, want: abi.StatusResultTooLarge, wantMsg: "over the limit of 100", wantErr: ErrResultTooLarge, exec: "boom", execs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newPipelineFixture(t)
			if tc.exec == "limited" { // use up the one token
				if r := f.runner.HostCall(context.Background(), newCall("limited", `{}`)); r.Status != abi.StatusOK {
					t.Fatalf("first limited call: %v %s", r.Status, r.Body)
				}
			}
			before := int64(0)
			if tc.exec != "" {
				before = f.execs[tc.exec].get()
			}
			reply, err := f.runner.Run(context.Background(), tc.call())
			if reply.Status != tc.want {
				t.Fatalf("status = %v (%s), want %v", reply.Status, reply.Body, tc.want)
			}
			if (err == nil) != (tc.want == abi.StatusOK) {
				t.Errorf("Run error = %v with status %v", err, reply.Status)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Run error %v is not %v", err, tc.wantErr)
			}
			if tc.want != abi.StatusOK {
				e := abi.DecodeError(reply.Status, reply.Body)
				if e.Code != tc.want.Code() {
					t.Errorf("body code %q, want %q", e.Code, tc.want.Code())
				}
				if !strings.Contains(e.Message, tc.wantMsg) {
					t.Errorf("message %q does not contain %q", e.Message, tc.wantMsg)
				}
				if tc.notInMsg != "" && strings.Contains(e.Message, tc.notInMsg) {
					t.Errorf("message %q leaks %q", e.Message, tc.notInMsg)
				}
				if len(e.Message) > maxMessageBytes {
					t.Errorf("message is %d bytes", len(e.Message))
				}
			}
			for _, s := range secrets {
				if strings.Contains(string(reply.Body), s) {
					t.Errorf("body %s leaks %q", reply.Body, s)
				}
			}
			if reply.Status != abi.StatusOK && reply.Status != abi.StatusResultTooLarge && reply.Charged != 0 {
				t.Errorf("charged %d for status %v", reply.Charged, reply.Status)
			}
			if tc.exec != "" {
				if got := f.execs[tc.exec].get() - before; got != tc.execs {
					t.Errorf("Execute of %s ran %d times, want %d", tc.exec, got, tc.execs)
				}
			}
			checkBalance(t, f.ledger, "acme", 5)
			if n := f.ledger.Outstanding(); n != 0 {
				t.Errorf("%d reservations outstanding", n)
			}
		})
	}
}

func TestRunnerLogsDetailsForTheOperator(t *testing.T) {
	tests := []struct {
		name    string
		call    *abi.Call
		wantLog []string
	}{
		{"panic", newCall("boom", `{"panic": true}`), []string{"panic recovered", "secret panic detail", "stack", "goroutine"}},
		{"error", newCall("boom", `{"fail": true}`), []string{"call failed", "sk-live-secret"}},
		{"broken gate", newCall("broken", `{}`), []string{"password authentication failed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newPipelineFixture(t)
			reply := f.runner.HostCall(context.Background(), tc.call)
			if reply.Status != abi.StatusCapabilityFailed {
				t.Fatalf("status %v", reply.Status)
			}
			log := f.logs.String()
			for _, w := range tc.wantLog {
				if !strings.Contains(log, w) {
					t.Errorf("operator log lacks %q:\n%s", w, log)
				}
			}
			for _, attr := range []string{`"tenant":"acme"`, `"hook":"redact"`, `"invocation":"inv-1"`} {
				if !strings.Contains(log, attr) {
					t.Errorf("operator log lacks %s", attr)
				}
			}
		})
	}
}

func TestRunnerSameValueValidatedAndExecuted(t *testing.T) {
	// The schema and Execute must see one parsed value. Record the value
	// Cost, the gate and Execute receive and compare identities.
	var seen []any
	var mu sync.Mutex
	note := func(v any) {
		mu.Lock()
		seen = append(seen, v)
		mu.Unlock()
	}
	gate := gateFunc(func(_ context.Context, req *Request, _ int64) (Hold, error) { note(req.Payload); return nil, nil })
	r := runnerWith(t, RunnerOptions{}, Capability{
		Name: "same", Description: "records", Schema: `{"type": "object"}`,
		Gates: []Gate{gate},
		Cost:  func(p any) int64 { note(p); return 0 },
		Execute: func(_ context.Context, req *Request) (*Result, error) {
			note(req.Payload)
			return &Result{}, nil
		},
	})
	if reply := r.HostCall(context.Background(), newCall("same", `{"a": [1, 2]}`)); reply.Status != abi.StatusOK {
		t.Fatalf("status %v", reply.Status)
	}
	if len(seen) != 3 {
		t.Fatalf("seen %d values", len(seen))
	}
	for i := 1; i < len(seen); i++ {
		if fmt.Sprintf("%p", seen[i]) != fmt.Sprintf("%p", seen[0]) {
			t.Errorf("value %d is a different map from value 0", i)
		}
	}
}

// gateFunc adapts a function to Gate.
type gateFunc func(ctx context.Context, req *Request, cost int64) (Hold, error)

func (gateFunc) Name() string { return "func" }
func (g gateFunc) Admit(ctx context.Context, req *Request, cost int64) (Hold, error) {
	return g(ctx, req, cost)
}

// TestRunnerConcurrentCreditRace is the reserve-then-settle race: 100
// goroutines call a billable capability against a balance that covers
// exactly one call.
func TestRunnerConcurrentCreditRace(t *testing.T) {
	const (
		callers = 100
		charge  = 10
	)
	ledger := fundedLedger(t, charge)
	counting := newCountingLedger(ledger)
	execs := &counter{}
	usage := &MemoryUsageSink{}
	r := runnerWith(t, RunnerOptions{Usage: usage}, meteredCap("llm.run", charge, execs, &CreditGate{Ledger: counting}))

	start := make(chan struct{})
	replies := make([]abi.Reply, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			c := newCall("llm.run", fmt.Sprintf(`{"use": %d}`, charge))
			c.Caller.Invocation = fmt.Sprintf("inv-%d", i)
			<-start
			replies[i] = r.HostCall(context.Background(), c)
		})
	}
	close(start)
	wg.Wait()

	statuses := map[abi.Status]int{}
	var charged int64
	for _, rep := range replies {
		statuses[rep.Status]++
		charged += rep.Charged
	}
	if statuses[abi.StatusOK] != 1 || statuses[abi.StatusInsufficientCredit] != callers-1 || len(statuses) != 2 {
		t.Errorf("statuses = %v, want 1 OK and %d INSUFFICIENT_CREDIT", statuses, callers-1)
	}
	if charged != charge {
		t.Errorf("charged %d in total, want %d", charged, charge)
	}
	if got := execs.get(); got != 1 {
		t.Errorf("Execute ran %d times, want 1", got)
	}
	checkBalance(t, ledger, "acme", 0)
	if n := ledger.Outstanding(); n != 0 {
		t.Errorf("%d reservations outstanding", n)
	}
	counting.checkResolvedOnce(t)
	if n := len(usage.Records()); n != callers {
		t.Errorf("%d usage records, want %d", n, callers)
	}
}

func TestRunnerSettlement(t *testing.T) {
	const (
		funds = 100
		cost  = 10
	)
	tests := []struct {
		name         string
		payload      string
		maxResult    int
		cancel       bool
		want         abi.Status
		wantCharged  int64
		wantUncharge int64
		wantExecs    int64
		wantReleases int
		wantSettles  int
	}{
		{name: "settle less than reserved releases the rest", payload: `{"use": 4}`,
			want: abi.StatusOK, wantCharged: 4, wantExecs: 1, wantSettles: 1},
		{name: "settle exactly the reservation", payload: `{"use": 10}`,
			want: abi.StatusOK, wantCharged: 10, wantExecs: 1, wantSettles: 1},
		{name: "settle more than reserved charges only the reservation", payload: `{"use": 15}`,
			want: abi.StatusOK, wantCharged: 10, wantUncharge: 5, wantExecs: 1, wantSettles: 1},
		{name: "nothing used", payload: `{"use": 0}`,
			want: abi.StatusOK, wantCharged: 0, wantExecs: 1, wantSettles: 1},
		{name: "failed execute releases everything", payload: `{"use": 7, "fail": true}`,
			want: abi.StatusCapabilityFailed, wantCharged: 0, wantUncharge: 7, wantExecs: 1, wantReleases: 1},
		{name: "panic releases everything", payload: `{"use": 7, "panic": true}`,
			want: abi.StatusCapabilityFailed, wantCharged: 0, wantExecs: 1, wantReleases: 1},
		{name: "result too large still settles", payload: `{"use": 6, "size": 300}`, maxResult: 50,
			want: abi.StatusResultTooLarge, wantCharged: 6, wantExecs: 1, wantSettles: 1},
		{name: "cancelled before execute releases and does not run", payload: `{"use": 6}`, cancel: true,
			want: abi.StatusCapabilityFailed, wantCharged: 0, wantExecs: 0, wantReleases: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ledger := fundedLedger(t, funds)
			counting := newCountingLedger(ledger)
			execs := &counter{}
			reg := NewRegistry()
			// The cancel case cancels the context from the gate,
			// after the credit is reserved.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			gates := []Gate{&CreditGate{Ledger: counting}}
			if tc.cancel {
				gates = append(gates, gateFunc(func(context.Context, *Request, int64) (Hold, error) {
					cancel()
					return nil, nil
				}))
			}
			reg.MustRegister(meteredCap("metered", cost, execs, gates...))
			usage := &MemoryUsageSink{}
			r := mustRunner(t, reg, RunnerOptions{Usage: usage})
			c := newCall("metered", tc.payload)
			c.MaxResultBytes = tc.maxResult
			reply, err := r.Run(ctx, c)
			if reply.Status != tc.want {
				t.Fatalf("status %v (%s), want %v", reply.Status, reply.Body, tc.want)
			}
			if tc.cancel && !errors.Is(err, ErrCancelled) {
				t.Errorf("Run error %v is not ErrCancelled", err)
			}
			if reply.Charged != tc.wantCharged {
				t.Errorf("Reply.Charged = %d, want %d", reply.Charged, tc.wantCharged)
			}
			if got := execs.get(); got != tc.wantExecs {
				t.Errorf("Execute ran %d times, want %d", got, tc.wantExecs)
			}
			checkBalance(t, ledger, "acme", funds-tc.wantCharged)
			counting.checkResolvedOnce(t)
			if counting.settles != tc.wantSettles || counting.releases != tc.wantReleases {
				t.Errorf("settles %d, releases %d; want %d, %d", counting.settles, counting.releases, tc.wantSettles, tc.wantReleases)
			}
			recs := usage.Records()
			if len(recs) != 1 {
				t.Fatalf("%d usage records", len(recs))
			}
			rec := recs[0]
			if rec.Charged != tc.wantCharged || rec.Uncharged != tc.wantUncharge || rec.Status != tc.want {
				t.Errorf("record charged %d uncharged %d status %v; want %d %d %v",
					rec.Charged, rec.Uncharged, rec.Status, tc.wantCharged, tc.wantUncharge, tc.want)
			}
			if tc.wantExecs == 1 && rec.Reserved != cost {
				t.Errorf("record reserved %d, want %d", rec.Reserved, cost)
			}
		})
	}
}

func TestRunnerUsageRecords(t *testing.T) {
	f := newPipelineFixture(t)
	if err := f.ledger.Credit("acme", 95); err != nil {
		t.Fatal(err)
	}
	calls := []*abi.Call{
		newCall("paid", `{"use": 3}`),
		newCall("paid", `{"use": 3, "fail": true}`),
		newCall("nope", `{}`),
		newCall("echo", `{"n": "x"}`),
	}
	calls[1].Seq = 2
	for _, c := range calls {
		f.runner.HostCall(context.Background(), c)
	}
	recs := f.usage.Records()
	if len(recs) != len(calls) {
		t.Fatalf("%d records, want %d", len(recs), len(calls))
	}
	want := []struct {
		capability string
		status     abi.Status
		reserved   int64
		charged    int64
		seq        int
	}{
		{"paid", abi.StatusOK, 10, 3, 1},
		{"paid", abi.StatusCapabilityFailed, 10, 0, 2},
		{"nope", abi.StatusUnknownCapability, 0, 0, 1},
		{"echo", abi.StatusInvalidRequest, 0, 0, 1},
	}
	for i, w := range want {
		r := recs[i]
		if r.Capability != w.capability || r.Status != w.status || r.Reserved != w.reserved || r.Charged != w.charged || r.Seq != w.seq {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
		if r.Tenant != "acme" || r.Hook != "redact" || r.Module != "abc123" || r.Invocation != "inv-1" {
			t.Errorf("record %d identity = %q %q %q %q", i, r.Tenant, r.Hook, r.Module, r.Invocation)
		}
		if r.Time.IsZero() || r.Duration < 0 {
			t.Errorf("record %d time %v duration %v", i, r.Time, r.Duration)
		}
	}
	if got := recs[0].Units["widgets"]; got != 3 {
		t.Errorf("units = %v", recs[0].Units)
	}
	// Records are copies.
	recs[0].Units["widgets"] = 99
	if f.usage.Records()[0].Units["widgets"] != 3 {
		t.Error("Records shares its Units maps")
	}
}

func TestRunnerReplayedCallIsNotRunTwice(t *testing.T) {
	ledger := fundedLedger(t, 100)
	r, execs := creditRunner(t, ledger, RunnerOptions{})
	c := newCall("llm.run", `{"use": 10}`)
	first := r.HostCall(context.Background(), c)
	second, err := r.Run(context.Background(), c) // same invocation and seq
	if first.Status != abi.StatusOK || second.Status != abi.StatusDenied {
		t.Fatalf("statuses %v, %v; want OK, DENIED", first.Status, second.Status)
	}
	if !errors.Is(err, ErrReservationResolved) {
		t.Errorf("replay error %v is not ErrReservationResolved", err)
	}
	if execs.get() != 1 {
		t.Errorf("Execute ran %d times, want 1", execs.get())
	}
	checkBalance(t, ledger, "acme", 90)
}

func TestRunnerSpendCap(t *testing.T) {
	ledger := fundedLedger(t, 1000)
	r, _ := creditRunner(t, ledger, RunnerOptions{MaxCreditPerInvocation: 25})
	call := func(inv string, seq int, use int) (abi.Reply, error) {
		c := newCall("llm.run", fmt.Sprintf(`{"use": %d}`, use))
		c.Caller.Invocation = inv
		c.Seq = seq
		return r.Run(context.Background(), c)
	}
	steps := []struct {
		inv  string
		use  int
		want abi.Status
	}{
		{"a", 10, abi.StatusOK},            // a: 10 of 25
		{"a", 10, abi.StatusOK},            // a: 20
		{"a", 10, abi.StatusQuotaExceeded}, // 20 + 10 > 25
		{"b", 10, abi.StatusOK},            // another invocation has its own budget
		{"c", 1, abi.StatusOK},             // c: reserve 10, charged 1
		{"c", 1, abi.StatusOK},             // c: 2
		{"c", 1, abi.StatusOK},             // c: 3 (settling frees the unused hold)
	}
	for i, s := range steps {
		reply, err := call(s.inv, i+1, s.use)
		if reply.Status != s.want {
			t.Errorf("step %d: status %v, want %v", i, reply.Status, s.want)
		}
		if s.want == abi.StatusQuotaExceeded && !errors.Is(err, ErrSpendCapExceeded) {
			t.Errorf("step %d: error %v is not ErrSpendCapExceeded", i, err)
		}
	}
	checkBalance(t, ledger, "acme", 1000-10-10-10-3)
}

func TestRunnerSettleFailureWithholdsResult(t *testing.T) {
	logs := &logBuffer{}
	ledger := fundedLedger(t, 100)
	r := runnerWith(t, RunnerOptions{Logger: logs.logger()}, meteredCap("llm.run", 10, &counter{}, &CreditGate{Ledger: failingSettle{ledger}}))
	reply, err := r.Run(context.Background(), newCall("llm.run", `{"use": 5}`))
	if reply.Status != abi.StatusCapabilityFailed || reply.Charged != 0 {
		t.Fatalf("status %v charged %d", reply.Status, reply.Charged)
	}
	if strings.Contains(string(reply.Body), "ledger") {
		t.Errorf("body leaks the ledger error: %s", reply.Body)
	}
	var xe *ExecuteError
	if !errors.As(err, &xe) || xe.Stage != "settle" {
		t.Errorf("error %v is not a settle ExecuteError", err)
	}
	if !strings.Contains(logs.String(), "reconcile the ledger") {
		t.Errorf("no reconcile log: %s", logs.String())
	}
}

// failingSettle is a ledger whose Settle always fails.
type failingSettle struct{ *MemoryLedger }

func (failingSettle) Settle(context.Context, string, int64) (int64, error) {
	return 0, errors.New("ledger: write timeout on shard 7")
}

func TestRunnerHoldsReleasedWhenALaterGateRefuses(t *testing.T) {
	ledger := fundedLedger(t, 100)
	counting := newCountingLedger(ledger)
	execs := &counter{}
	r := runnerWith(t, RunnerOptions{},
		meteredCap("a", 10, execs, &CreditGate{Ledger: counting}, denyGate{abi.StatusDenied}),
		meteredCap("b", 10, execs, &CreditGate{Ledger: counting}, panicGate{}),
		meteredCap("c", 10, execs, &CreditGate{Ledger: counting}, denyGate{abi.StatusBufferTooSmall}))
	for _, tc := range []struct {
		name string
		want abi.Status
	}{{"a", abi.StatusDenied}, {"b", abi.StatusCapabilityFailed}, {"c", abi.StatusDenied}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCall(tc.name, `{}`)
			c.Caller.Invocation = "inv-" + tc.name // a distinct idempotency key per call
			if reply := r.HostCall(context.Background(), c); reply.Status != tc.want {
				t.Errorf("status %v, want %v", reply.Status, tc.want)
			}
		})
	}
	if execs.get() != 0 {
		t.Errorf("Execute ran %d times", execs.get())
	}
	checkBalance(t, ledger, "acme", 100)
	counting.checkResolvedOnce(t)
	if counting.releases != 3 {
		t.Errorf("%d releases, want 3", counting.releases)
	}
}

func TestRunnerContextDoneBeforeStart(t *testing.T) {
	execs := &counter{}
	r := runnerWith(t, RunnerOptions{}, meteredCap("x", 0, execs))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reply, err := r.Run(ctx, newCall("x", `{}`))
	if reply.Status != abi.StatusCapabilityFailed || !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("status %v err %v", reply.Status, err)
	}
	if execs.get() != 0 {
		t.Error("Execute ran for a cancelled context")
	}
}

func TestRunnerExecuteSeesDeadline(t *testing.T) {
	r := runnerWith(t, RunnerOptions{}, Capability{
		Name: "slow", Description: "waits for its context", Schema: `{}`,
		Execute: func(ctx context.Context, _ *Request) (*Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	reply, err := r.Run(ctx, newCall("slow", `{}`))
	if reply.Status != abi.StatusCapabilityFailed || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("status %v err %v", reply.Status, err)
	}
	if strings.Contains(string(reply.Body), "deadline") {
		t.Errorf("body leaks the Go error: %s", reply.Body)
	}
}

func TestRunnerNilCallAndNilResult(t *testing.T) {
	r := runnerWith(t, RunnerOptions{}, Capability{
		Name: "nothing", Description: "returns nothing", Schema: `{}`,
		Execute: func(context.Context, *Request) (*Result, error) { return nil, nil },
	}, Capability{
		Name: "unencodable", Description: "returns a channel", Schema: `{}`,
		Execute: func(context.Context, *Request) (*Result, error) { return &Result{Value: make(chan int)}, nil },
	})
	if reply := r.HostCall(context.Background(), nil); reply.Status != abi.StatusUnknownCapability {
		t.Errorf("nil call: %v", reply.Status)
	}
	if reply := r.HostCall(context.Background(), newCall("nothing", `{}`)); reply.Status != abi.StatusOK || string(reply.Body) != "null" {
		t.Errorf("nil result: %v %s", reply.Status, reply.Body)
	}
	if reply := r.HostCall(context.Background(), newCall("unencodable", `{}`)); reply.Status != abi.StatusCapabilityFailed {
		t.Errorf("unencodable result: %v %s", reply.Status, reply.Body)
	}
}

func TestNewRunnerOptions(t *testing.T) {
	tests := []struct {
		name    string
		reg     *Registry
		opts    RunnerOptions
		wantErr bool
	}{
		{"zero options", NewRegistry(), RunnerOptions{}, false},
		{"nil registry", nil, RunnerOptions{}, true},
		{"negative payload limit", NewRegistry(), RunnerOptions{MaxPayloadBytes: -1}, true},
		{"negative depth", NewRegistry(), RunnerOptions{MaxDepth: -1}, true},
		{"negative spend cap", NewRegistry(), RunnerOptions{MaxCreditPerInvocation: -1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRunner(tc.reg, tc.opts)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestRunnerDepthOption(t *testing.T) {
	r := runnerWith(t, RunnerOptions{MaxDepth: 3}, Capability{Name: "any", Description: "accepts anything", Schema: `{}`,
		Execute: func(context.Context, *Request) (*Result, error) { return &Result{}, nil }})
	for _, tc := range []struct {
		payload string
		want    abi.Status
	}{{`[[[1]]]`, abi.StatusOK}, {`[[[[1]]]]`, abi.StatusInvalidRequest}} {
		if reply := r.HostCall(context.Background(), newCall("any", tc.payload)); reply.Status != tc.want {
			t.Errorf("%s: %v, want %v", tc.payload, reply.Status, tc.want)
		}
	}
}

func TestSchemaFailureMessages(t *testing.T) {
	r := runnerWith(t, RunnerOptions{}, Capability{
		Name: "shapes", Description: "many rules", Execute: func(context.Context, *Request) (*Result, error) { return &Result{}, nil },
		Schema: `{"type": "object", "properties": {
			"email": {"type": "string", "format": "email"},
			"step": {"type": "number", "multipleOf": 5},
			"tag": {"enum": ["a", "b"]},
			"items": {"type": "array", "maxItems": 2},
			"never": false,
			"nested": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 10}}}},
			"required": ["must"]}`,
	})
	tests := []struct {
		payload string
		want    string
		secret  string
	}{
		{`{"must": 1, "email": "hunter2-not-an-email"}`, "at /email: is not a valid 'email'", "hunter2"},
		{`{"must": 1, "step": 7}`, "at /step: must be a multiple of 5", ""},
		{`{"must": 1, "tag": "zzz-secret"}`, "at /tag: value must be one of", "zzz-secret"},
		{`{"must": 1, "items": [1, 2, 3]}`, "at /items: maximum 2 items", ""},
		{`{"must": 1, "never": 1}`, "at /never: no value is allowed here", ""},
		{`{"must": 1, "nested": {"x": 3}}`, "at /nested/x: must be >= 10", ""},
		{`{}`, "at the top level: missing properties: 'must'", ""},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			reply := r.HostCall(context.Background(), newCall("shapes", tc.payload))
			msg := errorMessage(reply)
			if reply.Status != abi.StatusInvalidRequest || !strings.Contains(msg, tc.want) {
				t.Errorf("got %v %q, want INVALID_REQUEST containing %q", reply.Status, msg, tc.want)
			}
			if tc.secret != "" && strings.Contains(msg, tc.secret) {
				t.Errorf("message %q echoes the payload", msg)
			}
		})
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"this is too long", 10, "this is..."},
		{"ééééé", 8, "éé..."}, // never cuts a rune
	}
	for _, tc := range tests {
		if got := clip(tc.in, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestSpendCapConcurrentAndPrune(t *testing.T) {
	ledger := fundedLedger(t, 1000)
	r, _ := creditRunner(t, ledger, RunnerOptions{MaxCreditPerInvocation: 25})
	ok := admitted(20, 1, func(i int) bool {
		c := newCall("llm.run", `{"use": 10}`)
		c.Seq = i + 1
		return r.HostCall(context.Background(), c).Status == abi.StatusOK
	})
	if ok != 2 {
		t.Errorf("%d calls admitted under a cap of 25 at 10 each, want 2", ok)
	}
	checkBalance(t, ledger, "acme", 980)

	s := newSpendCap(100)
	old := time.Now().Add(-time.Hour)
	for i := range spendPruneAt {
		s.byInv[fmt.Sprint(i)] = &spendEntry{charged: 1, last: old}
	}
	s.byInv["busy"] = &spendEntry{held: 5, last: old}
	if _, err := s.Admit(context.Background(), &Request{Caller: abi.Caller{Tenant: "t", Invocation: "new"}}, 1); err != nil {
		t.Fatal(err)
	}
	if n := len(s.byInv); n != 2 { // "busy" holds credit, "new" is fresh
		t.Errorf("%d entries after pruning, want 2", n)
	}
}

// failingSink loses every record.
type failingSink struct{}

func (failingSink) Record(context.Context, UsageRecord) error { return errors.New("sink full") }

func TestRunnerUsageSinkFailureIsLogged(t *testing.T) {
	logs := &logBuffer{}
	r := runnerWith(t, RunnerOptions{Logger: logs.logger(), Usage: failingSink{}}, meteredCap("x", 0, &counter{}))
	if reply := r.HostCall(context.Background(), newCall("x", `{}`)); reply.Status != abi.StatusOK {
		t.Fatalf("status %v", reply.Status)
	}
	if !strings.Contains(logs.String(), "usage record lost") {
		t.Errorf("log: %s", logs.String())
	}
}
