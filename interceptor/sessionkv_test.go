package interceptor

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// A SessionKV never refuses a new key: past its bounds (keys, bytes) the
// scope's least recently used keys go, a read counting as a use, and other
// scopes are untouched.
func TestSessionKVForgetsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	a, b := builtin.KVScope{Tenant: "mcp", Hook: "guard"}, builtin.KVScope{Tenant: "mcp", Hook: "redactor"}
	for _, tt := range []struct {
		name      string
		kv        *SessionKV
		values    []string // written under k0, k1, ... in order, k0 read after each write
		wantKept  []string
		wantGone  []string
		wantBytes int
	}{
		{"keys", &SessionKV{MaxKeysPerScope: 3}, []string{`1`, `2`, `3`, `4`, `5`},
			[]string{"k0", "k3", "k4"}, []string{"k1", "k2"}, 3},
		{"bytes", &SessionKV{MaxBytesPerScope: 10}, []string{`"aaa"`, `"bbb"`, `"ccc"`, `"ddd"`},
			[]string{"k0", "k3"}, []string{"k1", "k2"}, 10},
		{"a value past the bytes is kept alone", &SessionKV{MaxBytesPerScope: 4}, []string{`1`, `"` + strings.Repeat("x", 8) + `"`},
			[]string{"k1"}, []string{"k0"}, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.kv.Set(ctx, b, "other", []byte(`0`)); err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.values {
				if err := tt.kv.Set(ctx, a, "k"+string(rune('0'+i)), []byte(v)); err != nil {
					t.Fatalf("set %d: %v", i, err)
				}
				_, _, _ = tt.kv.Get(ctx, a, "k0")
			}
			for _, k := range tt.wantKept {
				if _, ok, _ := tt.kv.Get(ctx, a, k); !ok {
					t.Errorf("%s was forgotten", k)
				}
			}
			for _, k := range tt.wantGone {
				if _, ok, _ := tt.kv.Get(ctx, a, k); ok {
					t.Errorf("%s was kept", k)
				}
			}
			if got := tt.kv.scopes[a].bytes; got != tt.wantBytes {
				t.Errorf("bytes %d, want %d", got, tt.wantBytes)
			}
			if _, ok, _ := tt.kv.Get(ctx, b, "other"); !ok || tt.kv.Len(b) != 1 {
				t.Error("another scope lost its key")
			}
		})
	}
}
