package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
)

// FuzzFileKV: any bytes as a --kv file, and any key and value a hook's
// kv.set could store in it (the file holds what hooks wrote: their keys
// and values come back at the next run). openFileKV never panics and
// refuses with a "--kv" error; what it reads it writes back as a file it
// reads as the same data; and a value set under a key is, after the file
// is read again, the value Get gives for that key.
func FuzzFileKV(f *testing.F) {
	for _, s := range []struct{ file, key, value string }{
		{`{"scopes":[{"tenant":"acme","hook":"loop-detector","data":{"calls":{"n":3,"last":["a","b"]}}}]}`, "calls", `{"n":4}`},
		{`{"scopes":[]}`, "k", `1.50`},
		{`{}`, "<&>\u2028", `"<script>\u2029"`},
		{`{"scopes":[{"tenant":"","hook":"","data":{}}]}`, "", `null`},
		{`{"scopes":[{"tenant":"a","hook":"h","data":{"k":1}},{"tenant":"a","hook":"h","data":{"j":2}}]}`, "k", `[1e300,-0]`},
		{`{"scopes":[{"tenant":"a","hook":"h","data":{"k":1,"k":2}}]}`, "k", `{}`},
		{`{"scopes":null}`, "ünï", `"\ud83d\ude42"`},
		{`[1]`, "k", `1`},
		{``, "k", `1`},
	} {
		f.Add([]byte(s.file), s.key, []byte(s.value))
	}
	ctx := context.Background()
	scope := builtin.KVScope{Tenant: "acme", Hook: "fuzz"}
	f.Fuzz(func(t *testing.T, file []byte, key string, value []byte) {
		path := filepath.Join(t.TempDir(), "kv.json")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openFileKV(path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--kv") {
				t.Fatalf("%q: %v", file, err)
			}
			return
		}
		if err := s.write(); err != nil {
			t.Fatalf("%q: writing it back: %v", file, err)
		}
		again, err := openFileKV(path)
		if err != nil {
			t.Fatalf("%q: reading back what was written: %v", file, err)
		}
		if got, want := kvCanonical(t, again), kvCanonical(t, s); got != want {
			t.Fatalf("%q: read back as\n%s\nwant\n%s", file, got, want)
		}

		v, err := abi.ParseJSON(value, abi.JSONLimits{})
		if err != nil || key == "" || !utf8.ValidString(key) { // what kv.set takes
			return
		}
		enc, err := abi.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Set(ctx, scope, key, enc); err != nil {
			return // a full scope
		}
		third, err := openFileKV(path)
		if err != nil {
			t.Fatalf("%q after Set(%q, %s): %v", file, key, enc, err)
		}
		got, ok, err := third.Get(ctx, scope, key)
		if err != nil || !ok {
			t.Fatalf("Set(%q, %s), then Get: %v %v", key, enc, ok, err)
		}
		if gv, err := abi.ParseJSON(got, abi.JSONLimits{}); err != nil || mustMarshal(t, gv) != string(enc) {
			t.Fatalf("Set(%q, %s), then Get: %s (%v)", key, enc, got, err)
		}
	})
}

// kvCanonical is s's data as one string: each scope's keys and their values'
// canonical JSON (abi.Marshal), the whole canonical too.
func kvCanonical(t *testing.T, s *fileKV) string {
	t.Helper()
	m := map[string]any{}
	for sc, data := range s.data {
		d := map[string]any{}
		for k, raw := range data {
			v, err := abi.ParseJSON(raw, abi.JSONLimits{})
			if err != nil {
				t.Fatalf("scope %+v, key %q: %v", sc, k, err)
			}
			d[k] = v
		}
		m[sc.Tenant+"\x00"+sc.Hook] = d
	}
	return mustMarshal(t, m)
}

// mustMarshal is abi.Marshal(v) as a string.
func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := abi.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
