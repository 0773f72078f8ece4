package chain

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/configfile"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// FuzzParseConfig: any bytes as a chain configuration's JSON form (a
// tenant operator's PUT .../chain, `wasmhooks chain --config`), seeded with
// the demo's and the CLI's configurations. ParseConfig never panics and
// refuses with a "chain config: " error; what config.schema.json (which an
// editor applies too) accepts its decoder accepts (the schema adds
// required fields, enumerations and formats, so not the converse); and
// what it accepts, every module the policy guest, New builds
// or refuses with a *ConfigError, never a panic.
func FuzzParseConfig(f *testing.F) {
	for _, b := range fuzzSeedFiles(f, "demo/*chain.json", "cmd/wasmhooks/testdata/chain.json") {
		f.Add(b)
	}
	for _, s := range []string{
		`{}`, `{"bindings":[]}`, `{"modules":{"m":"m.wasm"},"bindings":[{"name":"b","module":"m","point":"message.outbound","phase":"guard"}]}`,
		`{"modules":{"m":"m.wasm"},"breaker":{"failures":5,"backoff":"30s","max_backoff":"5m"},"bindings":[{"name":"b","module":"m","point":"tool.before","phase":"guard","priority":-3,"settings":{"a":[1,2]},"grants":["kv.get"],"fail":"open","limits":{"timeout":"2s","memory_pages":512,"fuel":50000000},"approval":{"timeout":"15m","on_expiry":"approve"},"lookahead":256,"mode":"audit"}]}`,
		`{"tool_approvals":[{"name":"payments","tools":["payments.*","shell.exec"],"reason":"r","priority":0,"approval":{"timeout":"1h","on_expiry":"deny"}}]}`,
		`{"bindings":[{"priority":1.5}]}`, `{"bindings":[{"priority":1e3}]}`, `{"breaker":{"backoff":"-1s"}}`,
		`{"breaker":{"backoff":5}}`, `{"modules":{"m":"m.wasm"},"modules":{}}`, `{"bindings":[{"limits":{"fuel":-1}}]}`,
		`{"bindings":[{"limits":null}]}`, `{"bindings":null}`, `{"bindings":[{"phase":"observer","mode":"passive"}]}`,
		`[]`, `null`, `{"bindings":[{"lookahead":9223372036854775808}]}`, `{"x":1}`,
	} {
		f.Add([]byte(s))
	}
	guest := testutil.ReadFile(f, "testdata/guests/policy.wasm")
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { rt.Close(ctx) })
	readModule := func(string) ([]byte, error) { return guest, nil }

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data, readModule)
		decErr := configfile.Decode(data, MaxConfigBytes, &fileConfig{})
		schemaErr := ValidateConfigJSON(data)
		if schemaErr == nil && decErr != nil {
			t.Fatalf("%s: the schema accepts it, the decoder says %v", data, decErr)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "chain config: ") {
				t.Fatalf("%s: %v", data, err)
			}
			return
		}
		if decErr != nil {
			t.Fatalf("%s accepted, though %v", data, decErr)
		}
		c, err := New(ctx, cfg, Options{Runtime: rt, Logger: slog.New(slog.DiscardHandler)})
		var ce *ConfigError
		switch {
		case err == nil:
			c.Close(ctx)
		case !errors.As(err, &ce):
			t.Fatalf("%s: New: %T %v", data, err, err)
		}
	})
}

// fuzzSeedFiles reads the files matching globs, relative to the
// repository's root: a fuzzer's seeds.
func fuzzSeedFiles(tb testing.TB, globs ...string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, g := range globs {
		paths, err := filepath.Glob(filepath.Join(testutil.Root(tb), g))
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}
