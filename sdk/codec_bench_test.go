package sdk

import (
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// These benchmarks run natively and, to see what a hook pays, inside wasm:
// bench/cmd/guestbench runs this package's test binary built for wasip1
// (BENCHMARKS.md has the command).

// benchText is 1 KiB of prose with one secret, as in bench/.
var benchText = strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 18)[:1000] + " AKIAIOSFODNN7EXAMPLE   "

func benchDoc(b *testing.B, text string) []byte {
	b.Helper()
	doc, err := (&abi.Invocation{
		ABI: abi.Major, Point: "message.outbound", Context: map[string]any{"outgoing": text},
		Meta: abi.Meta{Hook: "redact", Invocation: "bench-1", Tenant: "bench"},
	}).Encode()
	if err != nil {
		b.Fatal(err)
	}
	return doc
}

func BenchmarkDecodeInvocation(b *testing.B) {
	for _, size := range []struct {
		name string
		text string
	}{{"small", "hello"}, {"1KiB", benchText}} {
		doc := benchDoc(b, size.text)
		b.Run("fast/"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeInvocation(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("abi/"+size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := abi.DecodeInvocation(doc, decodeLimits(len(doc))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeDecision(b *testing.B) {
	for _, c := range []struct {
		name string
		d    Decision
	}{
		{"continue", Continue()},
		{"modify-1KiB", ModifyPrimary(benchText).WithReason("redacted 1 secret")},
	} {
		b.Run("fast/"+c.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var ok bool
				var err error
				if buf, ok, err = appendDecision(buf[:0], c.d, "message.outbound"); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
		b.Run("encoding-json/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.d.encode("message.outbound"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandle is the SDK's whole hook_v1_handle but the export
// boundary: take the document, decode, run the handler, encode.
func BenchmarkHandle(b *testing.B) {
	for _, c := range []struct {
		name    string
		text    string
		handler func(*Invocation) (Decision, error)
	}{
		{"continue-small", "hello", func(*Invocation) (Decision, error) { return Continue(), nil }},
		{"modify-1KiB", benchText, func(inv *Invocation) (Decision, error) {
			return ModifyPrimary(inv.PrimaryText()).WithReason("redacted 1 secret"), nil
		}},
	} {
		doc := benchDoc(b, c.text)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, failure := handleDoc(doc, c.handler); failure != "" {
					b.Fatal(failure)
				}
			}
		})
	}
}
