// Command secretless-redactor is a wasmhooks hook, an MCP security mutator:
// verbatim secrets in outbound requests are replaced by handles, stable
// within a session. See README.md.
package main

import (
	"fmt"
	"strconv"

	"github.com/wasmhooks/wasmhooks/hooks-examples/internal/mcpsec"
	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

func main() {}

// MaxHandles bounds the handles remembered per session; past it new secrets
// still get replaced, by handles numbered on.
const MaxHandles = 1024

func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	f, err := mcpsec.NewFinder(inv)
	if err != nil {
		return sdk.Decision{}, err
	}
	t := mcpsec.Read(inv)
	if t.Phase != "request" {
		return sdk.Continue(), nil
	}
	secrets := f.Find(t.Payload)
	if len(secrets) == 0 {
		return sdk.Continue(), nil
	}
	key := mcpsec.Key("handles", t.Session)
	handles, next, err := load(key)
	if err != nil {
		return sdk.Decision{}, err
	}
	changed := false
	redacted, n, err := f.Replace(t.Payload, func(secret string) string {
		d := mcpsec.Digest(secret)
		h, ok := handles[d]
		if !ok {
			next++
			h = next
			if len(handles) < MaxHandles {
				handles[d] = h
			}
			changed = true
		}
		return "[secret:" + strconv.Itoa(h) + "]"
	})
	if err != nil {
		return sdk.Decision{}, err // the fail policy decides: closed, the interceptor default, blocks
	}
	if changed {
		m := make(map[string]any, len(handles))
		for d, h := range handles {
			m[d] = h
		}
		if err := sdk.KVSet(key, map[string]any{"handles": m, "next": next}); err != nil {
			return sdk.Decision{}, err
		}
	}
	return sdk.ModifyPrimary(redacted).WithReason(fmt.Sprintf("replaced %d secret(s) by handles", n)), nil
}

// load reads a session's handles: secret digest to handle number, and the
// last number given.
func load(key string) (map[string]int, int, error) {
	handles := map[string]int{}
	v, found, err := sdk.KVGet(key)
	if err != nil || !found {
		return handles, 0, err
	}
	m, _ := v.(map[string]any)
	next := toInt(m["next"])
	if hm, ok := m["handles"].(map[string]any); ok {
		for d, h := range hm {
			handles[d] = toInt(h)
		}
	}
	return handles, next, nil
}

func toInt(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case interface{ String() string }:
		i, _ := strconv.Atoi(n.String())
		return i
	}
	return 0
}
