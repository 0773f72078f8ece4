package chain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/chain/audit/audittest"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// BenchmarkChainSteps runs chains of N empty WAT hooks (guards that take
// their input and continue) over a context of a few fields with a 1 KiB
// message: the host's and the chain's cost per hook step, wasm included,
// reported as ns/step, and as cpu-ns/step, the process's CPU time (all
// threads), which a loaded machine disturbs less. Audit records are hashed into a sink that keeps
// none; spans go to the no-op provider.
func BenchmarkChainSteps(b *testing.B) {
	benchSteps(b, func() audit.Sink { return &audittest.LinkingSink{} })
}

// BenchmarkChainStepsUnrecorded is BenchmarkChainSteps with a sink that
// takes each audit record without encoding or hashing it (the chain still
// fills the Record): the difference is what a step's record costs, written
// as JSON and hashed (BENCHMARKS.md, "Issue 11, ninth pass").
func BenchmarkChainStepsUnrecorded(b *testing.B) {
	benchSteps(b, func() audit.Sink { return unrecordedSink{} })
}

// unrecordedSink takes records and keeps, encodes and hashes none.
type unrecordedSink struct{}

func (unrecordedSink) Append(_ context.Context, r *audit.Record) error {
	r.Hash = "unrecorded"
	return nil
}

func benchSteps(b *testing.B, sink func() audit.Sink) {
	wasm := testutil.WAT(b, testutil.EmptyHookWAT)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)
	for _, n := range []int{1, 3, 10} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			t := &testing.T{}
			cfg := Config{Modules: map[string][]byte{"empty": wasm}}
			for i := range n {
				cfg.Bindings = append(cfg.Bindings, Binding{Name: fmt.Sprintf("g%d", i), Module: "empty", Point: outbound, Phase: Guard,
					Settings: map[string]any{"mode": "strict", "threshold": 3}})
			}
			c, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Audit: sink(), Logger: quiet(),
				TracerProvider: noop.NewTracerProvider()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			in := Input{Tenant: "acme", Point: outbound, Run: "bench", Context: map[string]any{
				"outgoing": text, "channel": "email", "to": []any{"a@example.com", "b@example.com"}, "thread": map[string]any{"id": "t-1", "n": 4}}}
			if out, err := c.Run(context.Background(), in); err != nil || len(out.Trace) != n || out.Verdict != Allow {
				b.Fatalf("outcome %+v, %v", out, err)
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := c.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			cpu = processCPU() - cpu
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/step")
			b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/step")
		})
	}
}

// BenchmarkChainStepFloor measures, one by one, the parts of BenchmarkChainSteps'
// run that no chain can leave out while it keeps its audit: encoding the
// context canonically (encode), its digest for the records (digest), the
// runtime's prepared invocation of the empty hook with those bytes
// (invoke), and hashing one step's record into the chain of records
// (record). Their sum is the floor under N=1's figure; what N=1 costs above
// it is the chain's own bookkeeping.
func BenchmarkChainStepFloor(b *testing.B) {
	t := &testing.T{}
	wasm := testutil.WAT(b, testutil.EmptyHookWAT)
	rt := testRuntime(t)
	m, err := rt.Load(context.Background(), wasm)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)
	in := map[string]any{"outgoing": text, "channel": "email", "to": []any{"a@example.com", "b@example.com"}, "thread": map[string]any{"id": "t-1", "n": 4}}
	var obj, settings abi.Object
	if err := obj.SetMap(in); err != nil {
		b.Fatal(err)
	}
	if err := settings.SetMap(map[string]any{"mode": "strict", "threshold": 3}); err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		var o abi.Object
		for b.Loop() {
			if err := o.SetMap(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			sum := sha256.Sum256(obj.Bytes())
			var h [2 * sha256.Size]byte
			hex.Encode(h[:], sum[:])
			_ = "sha256:" + string(h[:])
		}
	})
	b.Run("invoke", func(b *testing.B) {
		p, err := rt.Prepare(m, outbound, nil, runtime.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		var res runtime.Result
		req := runtime.Request{Tenant: "acme", Hook: "g0", InvocationID: "bench/0", ContextObject: obj, SettingsObject: settings}
		for b.Loop() {
			if err := rt.InvokePrepared(context.Background(), p, req, &res); err != nil || res.Failure != nil {
				b.Fatal(err, res.Failure)
			}
		}
	})
	b.Run("record", func(b *testing.B) {
		d := "sha256:" + strings.Repeat("d", 64)
		r := &audit.Record{Time: time.Now().UTC(), Run: "bench", Tenant: "acme", Point: outbound, Config: d,
			Binding: "g0", Phase: "guard", Module: strings.Repeat("m", 64), Decision: "continue", By: "hook",
			HookAction: "continue", Input: d, Output: d, LatencyUS: 2}
		sink := &audittest.LinkingSink{}
		for b.Loop() {
			if err := sink.Append(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
