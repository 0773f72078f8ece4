// Command cross-boundary-guard is a wasmhooks hook, an MCP security
// validator: a verbatim secret that one server returned earlier in a session
// must not be sent to another server later in the same session. See
// README.md.
package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/hooks-examples/internal/mcpsec"
	"github.com/wasmhooks/wasmhooks/sdk"
)

func init() { sdk.HandleE(handle) }

func main() {}

// MaxTainted bounds the secrets remembered per session (the oldest are
// dropped past it), MaxOrigins the servers remembered per secret, and
// MaxStateBytes the state's encoding (the oldest secrets are dropped until
// it fits), so that it stays under the store's value limit (64 KiB by
// default): past that limit the state could not be written, the hook
// failed, and a fail-closed guard blocked every response of the session
// that carried a secret.
// MaxSearchedLengths bounds the lengths of tainted secrets a request is
// searched for window by window (each a pass over its strings), those of
// the most recent secrets; a secret of another length is found only as a
// whole token.
const (
	MaxTainted         = 512
	MaxOrigins         = 8
	MaxStateBytes      = 60 << 10
	MaxSearchedLengths = 8
)

// unknownServer is the origin of a secret in a response whose server
// nothing names: a request that carries it is blocked wherever it goes,
// rather than the secret left untainted.
const unknownServer = "(unknown)"

// state is a session's taint: the digest of each secret a response carried,
// with the servers it came from, in the order first seen; each secret's
// length and Print ("LENGTH:PRINT", hex; Prints[i] is Order[i]'s, "" when
// unknown), by which a request is searched for it anywhere, also inside a
// longer token; and the server of the session's last request, for
// responses that do not name theirs.
type state struct {
	Origins map[string][]string `json:"origins"`
	Order   []string            `json:"order"`
	Prints  []string            `json:"prints,omitempty"`
	Last    string              `json:"last,omitempty"`
}

// dropOldest forgets the oldest secret.
func (st *state) dropOldest() {
	delete(st.Origins, st.Order[0])
	st.Order, st.Prints = st.Order[1:], st.Prints[1:]
}

// fit drops the oldest secrets past MaxTainted, then while the state's
// encoding is over MaxStateBytes (an eighth of them at a time).
func (st *state) fit() error {
	for len(st.Order) > MaxTainted {
		st.dropOldest()
	}
	for len(st.Order) > 0 {
		b, err := abi.Marshal(st)
		if err != nil {
			return err
		}
		if len(b) <= MaxStateBytes {
			return nil
		}
		for n := max(1, len(st.Order)/8); n > 0; n-- {
			st.dropOldest()
		}
	}
	return nil
}

func handle(inv *sdk.Invocation) (sdk.Decision, error) {
	f, err := mcpsec.NewFinder(inv)
	if err != nil {
		return sdk.Decision{}, err
	}
	t := mcpsec.Read(inv)
	key := mcpsec.Key("taint", t.Session)
	var st state
	if err := load(key, &st); err != nil {
		return sdk.Decision{}, err
	}
	secrets := f.Find(t.Payload)

	if t.Phase == "response" {
		from := t.Server
		if from == "" {
			from = st.Last
		}
		if from == "" {
			from = unknownServer
		}
		if len(secrets) == 0 {
			return sdk.Continue(), nil
		}
		from = mcpsec.Bounded(from)
		changed := false
		for _, s := range secrets {
			d := mcpsec.Digest(s)
			if _, ok := st.Origins[d]; !ok {
				st.Order = append(st.Order, d)
				st.Prints = append(st.Prints, strconv.Itoa(len(s))+":"+strconv.FormatUint(uint64(mcpsec.Print(s)), 16))
			}
			if !contains(st.Origins[d], from) {
				if len(st.Origins[d]) >= MaxOrigins {
					// A secret many servers returned: keep the
					// first ones; a request to a later one is
					// blocked (the safe side).
					continue
				}
				st.Origins[d] = append(st.Origins[d], from)
				changed = true
			}
		}
		if changed {
			if err := st.fit(); err != nil {
				return sdk.Decision{}, err
			}
			if err := sdk.KVSet(key, st); err != nil {
				return sdk.Decision{}, err
			}
		}
		return sdk.Continue(), nil
	}

	to := mcpsec.Bounded(t.Server)
	// The tainted secrets the request carries: those the patterns find,
	// and those found by their length and Print anywhere in its strings (a
	// secret glued to more characters is another token to the patterns:
	// "x" + secret, secret + "0").
	carried := map[string]bool{}
	for _, s := range secrets {
		carried[mcpsec.Digest(s)] = true
	}
	st.find(t.Payload, carried)
	var leaks []string
	for d := range carried {
		if origins := st.Origins[d]; len(origins) > 0 && !contains(origins, to) {
			leaks = append(leaks, d)
		}
	}
	if len(leaks) > 0 {
		sort.Strings(leaks)
		origins := append([]string(nil), st.Origins[leaks[0]]...)
		sort.Strings(origins)
		return sdk.Block(fmt.Sprintf("cross-boundary: a secret read from server %s must not be sent to server %s", origins[0], name(to))), nil
	}
	if to != "" && to != st.Last {
		st.Last = to
		if err := sdk.KVSet(key, st); err != nil {
			return sdk.Decision{}, err
		}
	}
	return sdk.Continue(), nil
}

// find adds to carried the digest of each tainted secret found in a
// window of payload's strings of the secret's length whose Print is the
// secret's: linear in the payload for each length searched (at most
// MaxSearchedLengths, the most recent secrets').
func (st *state) find(payload any, carried map[string]bool) {
	var set mcpsec.PrintSet
	digests := map[[2]uint64][]string{} // by length and Print
	lengths := map[int]bool{}
	for i := len(st.Order) - 1; i >= 0; i-- {
		d, p := st.Order[i], st.Prints[i]
		if p == "" {
			continue
		}
		// strconv, not fmt.Sscanf: its reader imports fd_read, outside
		// the WASI a hook may import.
		ls, ps, _ := strings.Cut(p, ":")
		n, err := strconv.Atoi(ls)
		pr, perr := strconv.ParseUint(ps, 16, 32)
		if err != nil || perr != nil || n <= 0 {
			continue
		}
		if !lengths[n] && len(lengths) >= MaxSearchedLengths {
			continue
		}
		lengths[n] = true
		set.Add(n, uint32(pr))
		k := [2]uint64{uint64(n), pr}
		digests[k] = append(digests[k], d)
	}
	if len(digests) == 0 {
		return
	}
	mcpsec.Visit(payload, func(s string) {
		set.Search(s, func(i, n int, print uint32) {
			for _, d := range digests[[2]uint64{uint64(n), uint64(print)}] {
				if mcpsec.Digest(s[i:i+n]) == d {
					carried[d] = true
				}
			}
		})
	})
}

func name(server string) string {
	if server == "" {
		return "(unknown)"
	}
	return server
}

// load reads the session's state; none yet is an empty one.
func load(key string, st *state) error {
	v, found, err := sdk.KVGet(key)
	if err != nil {
		return err
	}
	st.Origins = map[string][]string{}
	if !found {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if o, ok := m["origins"].(map[string]any); ok {
		for d, list := range o {
			if l, ok := list.([]any); ok {
				for _, s := range l {
					if s, ok := s.(string); ok {
						st.Origins[d] = append(st.Origins[d], s)
					}
				}
			}
		}
	}
	prints, _ := m["prints"].([]any)
	if o, ok := m["order"].([]any); ok {
		if len(prints) != len(o) {
			prints = nil // not Order's: none known
		}
		for i, d := range o {
			if d, ok := d.(string); ok {
				if _, ok := st.Origins[d]; ok {
					st.Order = append(st.Order, d)
					p := ""
					if prints != nil {
						p, _ = prints[i].(string)
					}
					st.Prints = append(st.Prints, p)
				}
			}
		}
	}
	st.Last, _ = m["last"].(string)
	return nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
