package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

type docHost struct{ docs [][]byte }

func (h *docHost) HostCall(_ context.Context, c *abi.Call) abi.Reply {
	h.docs = append(h.docs, bytes.Clone(c.Payload))
	return abi.Reply{Status: abi.StatusOK, Body: []byte("{}")}
}

// TestRequestObjects: a Request whose context and settings come as
// abi.Objects gives the hook the document, byte for byte, that their maps
// give, and a map set beside an object wins over it.
func TestRequestObjects(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, mirrorWAT))
	type opaque struct {
		A []int `json:"a"`
	}
	for _, tc := range []struct {
		name              string
		context, settings map[string]any
	}{
		{"empty", nil, nil},
		{"traffic", map[string]any{"outgoing": "hi <there> & \u2028", "to": []any{"a", json.Number("2")}, "n": 1.5}, map[string]any{"mode": "strict"}},
		{"left to Marshal", map[string]any{"o": opaque{A: []int{1}}, "b": true}, map[string]any{"ints": []int{3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co, err := abi.ObjectFromMap(tc.context)
			if err != nil {
				t.Fatal(err)
			}
			so, err := abi.ObjectFromMap(tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			host := &docHost{}
			base := runtime.Request{Tenant: "t", Hook: "h", InvocationID: "i", HostCaller: host}
			for _, req := range []runtime.Request{
				{Context: tc.context, Settings: tc.settings},
				{ContextObject: co, SettingsObject: so},
				{Context: tc.context, SettingsObject: so},
				{Context: tc.context, Settings: tc.settings, ContextObject: abi.Object{}, SettingsObject: co}, // maps win
			} {
				req.Tenant, req.Hook, req.InvocationID, req.HostCaller = base.Tenant, base.Hook, base.InvocationID, host
				if _, err := r.Invoke(context.Background(), m, req); err != nil {
					t.Fatal(err)
				}
			}
			if len(host.docs) != 4 {
				t.Fatalf("%d documents", len(host.docs))
			}
			for i, d := range host.docs[1:] {
				if !bytes.Equal(d, host.docs[0]) {
					t.Errorf("request %d: document %s, want %s", i+1, d, host.docs[0])
				}
			}
		})
	}
}
