// Package mcpsec is what the MCP security example hooks (cross-boundary-guard
// and secretless-redactor) share: finding verbatim secrets of well-known
// formats anywhere in a payload, naming the MCP server traffic belongs to,
// and keying per-session state.
//
// The hooks run at tool.before (a request: the payload is "arguments") and
// tool.after (a response: the payload is "result"), bound there by package
// interceptor, whose context also carries "mcp": {event, phase, sessionId,
// server}; or bound directly at those points by a chain, where "tool" is the
// tool's name and there is no session.
package mcpsec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/wasmhooks/wasmhooks/sdk"
)

// DefaultPatterns are the secret formats found unless the "patterns" setting
// replaces them ("extra_patterns" adds to them). None asks for a word
// boundary: a secret glued to word characters ("x" + token, an AWS key +
// "X") is still found, where a \b let it through.
var DefaultPatterns = []string{
	// Stripe live secret and publishable keys.
	`[sp]k_live_[A-Za-z0-9]{16,}`,
	// GitHub personal access and OAuth tokens.
	`gh[po]_[A-Za-z0-9]{20,}`,
	// AWS access key ids.
	`AKIA[0-9A-Z]{16}`,
	// Slack bot and refresh tokens.
	`xox[br]-[A-Za-z0-9-]{10,}`,
}

// DefaultToolServers maps the tools of the reference MCP servers to their
// server. The "tool_servers" setting adds to it (and overrides it). A tool
// in neither is its own server.
var DefaultToolServers = map[string]string{
	"read_file": "filesystem", "write_file": "filesystem", "move_file": "filesystem",
	"list_directory": "filesystem", "search_files": "filesystem",
	"read_query": "sqlite", "write_query": "sqlite", "list_tables": "sqlite", "describe_table": "sqlite",
	"git_log": "git", "git_show": "git", "git_diff_unstaged": "git",
	"read_graph": "memory", "create_entities": "memory", "add_observations": "memory",
	"fetch":        "fetch",
	"browser_type": "browser", "browser_fill_form": "browser", "browser_snapshot": "browser",
	"execute_command": "shell",
}

// Finder finds secrets.
type Finder struct {
	res []*regexp.Regexp
	// needles has, for each of res, a string each of its matches holds
	// ("" for none known): a string without it is not searched.
	needles []string
}

// defaultNeedles are, by pattern, a string each match of a default pattern
// holds. Without them, a string was run through every pattern's automaton:
// about 3,000 fuel a byte, so that the default 400 M ran out on a request of
// about 120 KB, and a fail-closed hook blocked it.
var defaultNeedles = map[string]string{
	DefaultPatterns[0]: "k_live_",
	DefaultPatterns[1]: "gh",
	DefaultPatterns[2]: "AKIA",
	DefaultPatterns[3]: "xox",
}

// NewFinder reads the "patterns" and "extra_patterns" settings. A pattern
// that does not compile is an error: a hook that silently ran without it
// would let the secret through.
func NewFinder(inv *sdk.Invocation) (*Finder, error) {
	patterns := inv.SettingStrings("patterns")
	if patterns == nil {
		patterns = DefaultPatterns
	}
	patterns = append(append([]string(nil), patterns...), inv.SettingStrings("extra_patterns")...)
	if err := inv.SettingsErr(); err != nil {
		return nil, err
	}
	f := &Finder{}
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("setting patterns: pattern %d (%q): %w", i, p, err)
		}
		f.res = append(f.res, re)
		f.needles = append(f.needles, defaultNeedles[p])
	}
	return f, nil
}

// mayMatch reports whether pattern i may match in s: it holds the
// pattern's needle, or the pattern has none.
func (f *Finder) mayMatch(i int, s string) bool {
	return f.needles[i] == "" || strings.Contains(s, f.needles[i])
}

// maxDepth bounds how deep Find and Replace walk (the host's own JSON limit
// is lower; this only keeps the walk bounded whatever it is given).
const maxDepth = 256

// Find returns the distinct secrets in v's strings (object keys included),
// however deeply nested, sorted.
func (f *Finder) Find(v any) []string {
	seen := map[string]bool{}
	f.walk(v, 0, nil, func(s string) string {
		for i, re := range f.res {
			if !f.mayMatch(i, s) {
				continue
			}
			for _, m := range re.FindAllString(s, -1) {
				seen[m] = true
			}
		}
		return s
	})
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ErrKeysCollide means that replacing the secrets of an object's keys made
// two keys one (a key the secret became was already there): one member
// would have been dropped from the payload without a word.
var ErrKeysCollide = errors.New("mcpsec: an object key with a secret, replaced, is another key of the object")

// Replace returns v with every secret replaced by handle(secret), and how
// many were replaced; ErrKeysCollide if that made two keys of an object one.
func (f *Finder) Replace(v any, handle func(secret string) string) (any, int, error) {
	n := 0
	collided := false
	out := f.walk(v, 0, &collided, func(s string) string {
		for i, re := range f.res {
			if !f.mayMatch(i, s) {
				continue
			}
			s = re.ReplaceAllStringFunc(s, func(m string) string {
				n++
				return handle(m)
			})
		}
		return s
	})
	if collided {
		return nil, n, ErrKeysCollide
	}
	return out, n, nil
}

// walk rebuilds v with each string (and object key) passed through fn. Two
// keys of an object made one set *collided (when it is not nil).
func (f *Finder) walk(v any, depth int, collided *bool, fn func(string) string) any {
	if depth > maxDepth {
		return v
	}
	switch x := v.(type) {
	case string:
		return fn(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fn(k)] = f.walk(e, depth+1, collided, fn)
		}
		if len(out) != len(x) && collided != nil {
			*collided = true
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = f.walk(e, depth+1, collided, fn)
		}
		return out
	}
	return v
}

// Visit calls fn with each string in v (object keys included), as deep as
// Find looks.
func Visit(v any, fn func(string)) {
	visit(v, 0, fn)
}

func visit(v any, depth int, fn func(string)) {
	if depth > maxDepth {
		return
	}
	switch x := v.(type) {
	case string:
		fn(x)
	case map[string]any:
		for k, e := range x {
			fn(k)
			visit(e, depth+1, fn)
		}
	case []any:
		for _, e := range x {
			visit(e, depth+1, fn)
		}
	}
}

// printBase is the base of Print's polynomial (mod 2^32).
const printBase = 16777619

// Print is a 32-bit rolling fingerprint of s: what PrintSet.Search
// computes for each window of s's length. It tells windows that cannot be s from those
// that may be (then compared by Digest); 32 bits of a secret's hash, kept
// beside its 128-bit Digest, tell nothing the digest does not.
func Print(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = h*printBase + uint32(s[i])
	}
	return h
}

// PrintSet is a set of (length, Print) pairs of secrets, which Search looks
// for in every window of a string: linear in the string for each length.
// The zero value is empty.
type PrintSet struct {
	// bits has a Print's low 16 bits (of any length): a quick no, so
	// that most windows cost a rolling step and a bit test.
	bits  [1 << 10]uint64
	byLen map[int]map[uint32]bool
	lens  []int // sorted
}

// Add adds the Print of a secret of n bytes.
func (p *PrintSet) Add(n int, print uint32) {
	if n <= 0 {
		return
	}
	if p.byLen == nil {
		p.byLen = map[int]map[uint32]bool{}
	}
	if p.byLen[n] == nil {
		p.byLen[n] = map[uint32]bool{}
		p.lens = append(p.lens, n)
		sort.Ints(p.lens)
	}
	p.byLen[n][print] = true
	p.bits[print&0xffff>>6] |= 1 << (print & 63)
}

// Search calls fn with the start, length and Print of each window of s
// whose length and Print are in the set, lengths in increasing order, then
// starts. A window whose Print is a secret's may still be another string:
// fn compares.
func (p *PrintSet) Search(s string, fn func(start, n int, print uint32)) {
	for _, n := range p.lens {
		if n > len(s) {
			return
		}
		prints := p.byLen[n]
		top := uint32(1) // printBase^(n-1)
		for i := 1; i < n; i++ {
			top *= printBase
		}
		h := Print(s[:n])
		for i := 0; ; i++ {
			if p.bits[h&0xffff>>6]&(1<<(h&63)) != 0 && prints[h] {
				fn(i, n, h)
			}
			if i+n >= len(s) {
				break
			}
			h = (h-uint32(s[i])*top)*printBase + uint32(s[i+n])
		}
	}
}

// Digest is what state keeps of a secret: never the secret itself.
func Digest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:16])
}

// Traffic is what a hook knows of one MCP message.
type Traffic struct {
	Event, Phase, Session string
	// Server is the server the traffic goes to or comes from ("" when
	// nothing says).
	Server  string
	Payload any
}

// Read reads the traffic of an invocation.
func Read(inv *sdk.Invocation) Traffic {
	t := Traffic{Phase: "request"}
	if inv.Point == "tool.after" {
		t.Phase = "response"
	}
	t.Payload, _ = inv.ContextValue(inv.PrimaryField())
	mcp, isMCP := inv.Context()["mcp"].(map[string]any)
	tool := ""
	if isMCP {
		t.Event, _ = mcp["event"].(string)
		t.Session, _ = mcp["sessionId"].(string)
		t.Server, _ = mcp["server"].(string)
		if obj, ok := t.Payload.(map[string]any); ok {
			tool, _ = obj["name"].(string)
		}
	} else {
		t.Event, tool = "tools/call", inv.ContextString("tool")
	}
	if t.Server != "" {
		return t
	}
	if tool != "" {
		t.Server = ToolServer(inv, tool)
		return t
	}
	if u := resourceURI(t.Payload); u != "" {
		t.Server = URIServer(u)
	}
	return t
}

// ToolServer is the server of a tool: the "tool_servers" setting, else
// DefaultToolServers, else the tool itself.
func ToolServer(inv *sdk.Invocation, tool string) string {
	if m, ok := inv.Setting("tool_servers"); ok {
		if mm, ok := m.(map[string]any); ok {
			if s, ok := mm[tool].(string); ok && s != "" {
				return s
			}
		}
	}
	if s, ok := DefaultToolServers[tool]; ok {
		return s
	}
	return tool
}

// resourceURI is the uri of a resources/read request ({uri}) or response
// ({contents: [{uri}]}).
func resourceURI(p any) string {
	obj, ok := p.(map[string]any)
	if !ok {
		return ""
	}
	if u, ok := obj["uri"].(string); ok {
		return u
	}
	if list, ok := obj["contents"].([]any); ok {
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				if u, ok := m["uri"].(string); ok {
					return u
				}
			}
		}
	}
	return ""
}

// URIServer is the server of a resource: its URI's authority, else its
// scheme.
func URIServer(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.Index(raw, ":"); i > 0 {
			return raw[:i]
		}
		return raw
	}
	if u.Host != "" {
		return u.Host
	}
	if u.Scheme != "" {
		return u.Scheme
	}
	return raw
}

// Key is the key-value key of a hook's state named what for a session. Long
// session ids are hashed, to stay under the store's key limit (Bounded).
func Key(what, session string) string {
	return what + "/" + Bounded(session)
}

// hashedPrefix starts the names Bounded hashes.
const hashedPrefix = "sha256:"

// Bounded is a name (a server's, a session's) as state keeps it: names over
// 128 bytes (a tool name is the client's to choose) are replaced by their
// digest, and so are names that start as a digest does, so that no short
// name is the digest of a long one ("sha256:" + the digest of another
// server's long name was that server, a relay to it same-origin).
func Bounded(name string) string {
	if len(name) > 128 || strings.HasPrefix(name, hashedPrefix) {
		return hashedPrefix + Digest(name)
	}
	return name
}
