package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server/client"
)

const testAdminKey = "cli-test-admin-key-0123456789abcdef01234567"

// platformCLI is `wasmhooks serve` on a real loopback listener, driven by
// the CLI's own verbs.
type platformCLI struct {
	t    *testing.T
	url  string
	keys []string // every API key seen, none of which a verb may print
}

// startServeCLI runs `wasmhooks serve` until the test ends.
func startServeCLI(t *testing.T) *platformCLI {
	t.Helper()
	t.Setenv("WASMHOOKS_ADMIN_KEY", testAdminKey)
	s := startServe(t, "--data", t.TempDir())
	return &platformCLI{t: t, url: "http://" + s.addr, keys: []string{testAdminKey}}
}

// do runs a verb with key in $WASMHOOKS_KEY ("" for none) and the server in
// $WASMHOOKS_SERVER, and checks that no API key is in what it printed
// unless it is one this call made (allowKey).
func (p *platformCLI) do(key, stdin string, wantExit int, args ...string) string {
	p.t.Helper()
	out, errOut, code := p.run(key, stdin, args...)
	if code != wantExit {
		p.t.Fatalf("wasmhooks %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantExit, out, errOut)
	}
	for _, k := range p.keys {
		if strings.Contains(out, k) || strings.Contains(errOut, k) {
			p.t.Fatalf("wasmhooks %s printed an API key:\n%s\n%s", strings.Join(args, " "), out, errOut)
		}
	}
	return out
}

func (p *platformCLI) run(key, stdin string, args ...string) (string, string, int) {
	p.t.Setenv(envServer, p.url)
	p.t.Setenv(envAPIKey, key)
	return runCLI(stdin, args...)
}

// newKey runs admin key create and returns the key (remembered as a secret
// no later verb may print).
func (p *platformCLI) newKey(role, tenant string) (id, key string) {
	p.t.Helper()
	var k struct{ ID, Key string }
	out, errOut, code := p.run(testAdminKey, "", "admin", "key", "create", "--role", role, "--tenant", tenant, "--name", role+" of "+tenant)
	if code != exitOK || json.Unmarshal([]byte(out), &k) != nil || !strings.HasPrefix(k.Key, "whk_") {
		p.t.Fatalf("admin key create: exit %d\n%s\n%s", code, out, errOut)
	}
	p.keys = append(p.keys, k.Key)
	return k.ID, k.Key
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

// wantError checks a refusal's printed code (and status).
func wantError(t *testing.T, out, code string, status int) {
	t.Helper()
	e := decode[apiErrorDoc](t, out)
	if e.Error.Code != code || e.Error.Status != status {
		t.Fatalf("want error %s %d, got %s", code, status, out)
	}
}

// TestCLIEndToEnd drives the platform with the CLI's verbs only, over a
// real `wasmhooks serve`: the admin makes a tenant that requires
// signatures, keys and credit; the publisher makes a signing key (keygen,
// mode 0600), pushes, publishes, registers the key and signs; the tenant's
// bind is refused until an admin approves the key, then binds; the agent
// platform's call is pending; the operator lists and resolves it (approve,
// and edit with --edit @FILE), and a
// caller waiting on a second approval gets its resumed outcome; the key
// list shows no secret; a rotated and a revoked key are refused. No verb
// prints an API key it was given.
func TestCLIEndToEnd(t *testing.T) {
	root := testutil.Root(t)
	p := startServeCLI(t)
	dir := t.TempDir()

	p.do(testAdminKey, "", exitOK, "admin", "tenant", "create", "--require-signatures", "acme")
	_, pubKey := p.newKey("publisher", "pubco")
	_, opKey := p.newKey("operator", "acme")
	rtID, rtKey := p.newKey("runtime", "acme")
	credit := decode[map[string]any](t, p.do(testAdminKey, "", exitOK, "admin", "credit", "grant", "--tenant", "acme", "--amount", "100", "--idempotency-key", "welcome"))
	if credit["available"] != float64(100) {
		t.Fatalf("credit: %v", credit)
	}
	credit = decode[map[string]any](t, p.do(testAdminKey, "", exitOK, "admin", "credit", "adjust", "--tenant", "acme", "--amount", "-10", "--note", "a correction"))
	if credit["available"] != float64(90) {
		t.Fatalf("credit after adjusting by -10: %v", credit)
	}
	credit = decode[map[string]any](t, p.do(testAdminKey, "", exitOK, "admin", "credit", "adjust", "--tenant", "acme", "--amount", "10", "--note", "the correction undone"))
	if credit["available"] != float64(100) {
		t.Fatalf("credit after adjusting by +10: %v", credit)
	}

	// keygen: a pair of 0600 files, never overwritten.
	keyPath := filepath.Join(dir, "pubco")
	kg := decode[map[string]string](t, p.do("", "", exitOK, "keygen", "--out", keyPath))
	for _, f := range []string{keyPath, keyPath + ".pub"} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st.Mode(), err)
		}
	}
	p.do("", "", exitRefused, "keygen", "--out", keyPath)

	// The publisher's key from a file.
	pubKeyFile := filepath.Join(dir, "publisher.key")
	if err := os.WriteFile(pubKeyFile, []byte(pubKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(root, "testdata", "guests", "policy.wasm")
	out := p.do("", "", exitOK, "push", "--api-key-file", pubKeyFile, "--publisher", "pubco", policy)
	golden(t, "cli-push", []byte(out))
	mod := decode[struct{ Digest string }](t, out)
	// Flags after the arguments too.
	v := decode[struct{ Ref, Digest, Pin string }](t, p.do(pubKey, "", exitOK, "publish", "pubco/policy@1.0.0", "--digest", mod.Digest))
	if v.Ref != "pubco/policy@1.0.0" || v.Digest != mod.Digest || v.Pin != v.Ref+"#sha256:"+mod.Digest {
		t.Fatalf("publish: %+v", v)
	}
	// --module pushes (again: not an error) and publishes its digest.
	v2 := decode[struct{ Ref, Digest string }](t, p.do(pubKey, "", exitOK, "publish", "--publisher", "pubco", "--module", policy, "policy@1.0.1"))
	if v2.Ref != "pubco/policy@1.0.1" || v2.Digest != mod.Digest {
		t.Fatalf("publish --module: %+v", v2)
	}
	sk := decode[struct {
		ID       string
		Approved bool
	}](t, p.do(pubKey, "", exitOK, "signing-key", "register", "--publisher", "pubco", keyPath+".pub"))
	if sk.ID != kg["key_id"] || sk.Approved {
		t.Fatalf("register: %+v, keygen said %s", sk, kg["key_id"])
	}
	signed := decode[struct {
		Signatures []struct {
			KeyID string `json:"key_id"`
		}
	}](t,
		p.do(pubKey, "", exitOK, "sign", "--signing-key", keyPath, "--publisher", "pubco", "policy@1.0.0"))
	if len(signed.Signatures) != 1 || signed.Signatures[0].KeyID != sk.ID {
		t.Fatalf("sign: %+v", signed)
	}

	// The tenant binds: refused until an admin approves the key.
	cfg := filepath.Join(dir, "acme.json")
	if err := os.WriteFile(cfg, []byte(`{"modules": {"policy": "`+v.Pin+`"},
 "bindings": [
  {"name": "no-secrets", "module": "policy", "point": "message.outbound", "phase": "guard",
   "settings": {"when": "SECRET", "decide": {"action": "block", "reason": "mentions a secret"}}},
  {"name": "approve-shell", "module": "policy", "point": "tool.before", "phase": "guard",
   "settings": {"when": "shell.exec", "decide": {"action": "ask", "reason": "shell needs a human"}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = p.do(opKey, "", exitRefused, "bind", "--tenant", "acme", cfg)
	golden(t, "cli-bind-unsigned", []byte(out))
	p.do(pubKey, "", exitRefused, "signing-key", "approve", "--publisher", "pubco", sk.ID) // not the publisher's to approve
	p.do(testAdminKey, "", exitOK, "signing-key", "approve", "--publisher", "pubco", sk.ID)
	p.do(opKey, "", exitOK, "bind", "--tenant", "acme", cfg)

	// Runs: block, then pending.
	o := decode[struct{ Verdict string }](t, p.do(rtKey, `{"outgoing":"the SECRET is 42"}`, exitOK, "call", "--tenant", "acme", "--point", "message.outbound", "--input", "-"))
	if o.Verdict != "block" {
		t.Fatalf("block: %+v", o)
	}
	type outcome struct {
		Run, Verdict string
		Approval     *struct{ ID string }
	}
	pending := decode[outcome](t, p.do(rtKey, `{"tool":"shell.exec","arguments":{"command":"ls"}}`, exitOK,
		"call", "--tenant", "acme", "--point", "tool.before", "--input", "-", "--run", "run-1"))
	if pending.Verdict != "pending" || pending.Approval == nil {
		t.Fatalf("pending: %+v", pending)
	}
	inbox := decode[struct {
		Approvals []struct{ ID, Binding string }
	}](t, p.do(opKey, "", exitOK, "approvals", "--tenant", "acme"))
	if len(inbox.Approvals) != 1 || inbox.Approvals[0].ID != pending.Approval.ID || inbox.Approvals[0].Binding != "approve-shell" {
		t.Fatalf("inbox: %+v", inbox)
	}
	resumed := decode[outcome](t, p.do(opKey, "", exitOK, "resolve", "--tenant", "acme", "--decision", "approve", "--reason", "looked fine", pending.Approval.ID))
	if resumed.Verdict != "allow" || resumed.Run != "run-1" {
		t.Fatalf("resolve: %+v", resumed)
	}
	out = p.do(opKey, "", exitRefused, "resolve", "--tenant", "acme", "--decision", "deny", pending.Approval.ID)
	wantError(t, out, "approval_resolved", 409)
	// Edit: approve with changed arguments, from a file.
	edited := decode[struct{ Approval *struct{ ID string } }](t, p.do(rtKey, `{"tool":"shell.exec","arguments":{"command":"rm -rf /"}}`, exitOK,
		"call", "--tenant", "acme", "--point", "tool.before", "--input", "-", "--run", "run-edit"))
	editFile := filepath.Join(dir, "edit.json")
	if err := os.WriteFile(editFile, []byte(`{"arguments":{"command":"ls"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	after := decode[struct {
		Verdict  string
		Modified bool
		Context  struct{ Arguments struct{ Command string } }
	}](t, p.do(opKey, "", exitOK, "resolve", "--tenant", "acme", "--decision", "edit", "--edit", "@"+editFile, edited.Approval.ID))
	if after.Verdict != "allow" || !after.Modified || after.Context.Arguments.Command != "ls" {
		t.Fatalf("resolve --decision edit: %+v", after)
	}

	// call --wait: the caller waits while the operator denies.
	type res struct {
		out  string
		code int
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.key"), []byte(rtKey), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan res, 1)
	go func() {
		// The environment is the test's: WASMHOOKS_SERVER set above; the
		// runtime key from a file, so that the main goroutine's Setenv
		// does not race it.
		kf := filepath.Join(dir, "runtime.key")
		stdout, stderr, code := runCLI(`{"tool":"shell.exec"}`, "call", "--api-key-file", kf, "--tenant", "acme", "--point", "tool.before",
			"--input", "-", "--run", "run-2", "--wait", "60")
		done <- res{stdout + stderr, code}
	}()
	var id string
	for deadline := time.Now().Add(20 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		in := decode[struct{ Approvals []struct{ ID, Run string } }](t, p.do(opKey, "", exitOK, "approvals", "--tenant", "acme"))
		for _, a := range in.Approvals {
			if a.Run == "run-2" {
				id = a.ID
			}
		}
	}
	if id == "" {
		t.Fatal("run-2 never pending")
	}
	p.do(opKey, "", exitOK, "resolve", "--tenant", "acme", "--decision", "deny", id)
	select {
	case r := <-done:
		got := decode[outcome](t, r.out)
		if r.code != exitOK || got.Verdict != "block" || got.Run != "run-2" {
			t.Fatalf("call --wait: exit %d %s", r.code, r.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("call --wait got nothing")
	}

	// A private key others can read is refused before anything is sent.
	if err := os.Chmod(keyPath, 0o640); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := p.run(pubKey, "", "sign", "--signing-key", keyPath, "pubco/policy@1.0.1")
	if code != exitUsage || !strings.Contains(errOut, "chmod 600") {
		t.Fatalf("sign with an open key: exit %d: %s", code, errOut)
	}

	// The catalogue, from the operator.
	vs := decode[struct {
		Versions []struct {
			Ref        string
			Signed     bool
			Signatures []any
		}
	}](t, p.do(opKey, "", exitOK, "versions", "pubco"))
	if len(vs.Versions) != 2 || vs.Versions[0].Ref != v.Pin || len(vs.Versions[0].Signatures) != 1 || !vs.Versions[0].Signed ||
		len(vs.Versions[1].Signatures) != 0 || vs.Versions[1].Signed {
		t.Fatalf("versions: %+v", vs)
	}
	if vs := decode[struct{ Versions []any }](t, p.do(opKey, "", exitOK, "versions", "--name", "other", "pubco")); len(vs.Versions) != 0 {
		t.Fatalf("versions --name other: %+v", vs)
	}

	// Keys: listed without secrets (do checks); rotated, the old secret is
	// refused; revoked, the key is refused.
	keys := decode[struct {
		Keys []struct{ ID, Role, Tenant string }
	}](t, p.do(testAdminKey, "", exitOK, "admin", "key", "list", "--tenant", "acme"))
	if len(keys.Keys) != 2 {
		t.Fatalf("acme's keys: %+v", keys)
	}
	var rot struct{ ID, Key string }
	outRot, _, code := p.run(testAdminKey, "", "admin", "key", "rotate", rtID)
	if code != exitOK || json.Unmarshal([]byte(outRot), &rot) != nil || rot.ID != rtID || rot.Key == rtKey {
		t.Fatalf("rotate: %d %s", code, outRot)
	}
	p.keys = append(p.keys, rot.Key)
	out = p.do(rtKey, "", exitRefused, "call", "--tenant", "acme", "--point", "message.outbound")
	wantError(t, out, "unauthenticated", 401)
	p.do(rot.Key, "", exitOK, "call", "--tenant", "acme", "--point", "message.outbound")
	p.do(testAdminKey, "", exitOK, "admin", "key", "revoke", rtID)
	out = p.do(rot.Key, "", exitRefused, "call", "--tenant", "acme", "--point", "message.outbound")
	wantError(t, out, "unauthenticated", 401)
}

// TestCLIRefusals: what the verbs refuse themselves (usage, exit 2) and
// what the server refuses (its stable code, exit 1).
func TestCLIRefusals(t *testing.T) {
	root := testutil.Root(t)
	p := startServeCLI(t)
	dir := t.TempDir()
	_, pubKey := p.newKey("publisher", "pubco")
	garbage := filepath.Join(dir, "garbage.wasm")
	if err := os.WriteFile(garbage, []byte("not wasm"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, []byte(pubKey), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(root, "testdata", "guests", "policy.wasm")
	for _, tt := range []struct {
		name   string
		key    string
		args   []string
		exit   int
		code   string // the printed error's code (exit 1)
		stderr string // in stderr (exit 2)
	}{
		{"no key", "", []string{"push", "--publisher", "pubco", policy}, exitUsage, "", "no API key"},
		{"key file others read", "", []string{"push", "--api-key-file", open, "--publisher", "pubco", policy}, exitUsage, "", "chmod 600"},
		{"bad server", pubKey, []string{"push", "--server", "ftp://x", "--publisher", "pubco", policy}, exitUsage, "", "--server"},
		{"no publisher", pubKey, []string{"push", policy}, exitUsage, "", "--publisher is required"},
		{"two files", pubKey, []string{"push", "--publisher", "pubco", policy, policy}, exitUsage, "", "want 1 argument"},
		{"bad ref", pubKey, []string{"publish", "--digest", "00", "policy"}, exitUsage, "", "not [PUBLISHER/]NAME@VERSION"},
		{"ref of another publisher", pubKey, []string{"publish", "--publisher", "a", "--digest", "00", "b/x@1.0.0"}, exitUsage, "", "not --publisher a's"},
		{"bad decision", pubKey, []string{"resolve", "--tenant", "acme", "--decision", "maybe", "id"}, exitUsage, "", "--decision"},
		{"bad point", pubKey, []string{"call", "--tenant", "acme", "--point", "nowhere"}, exitUsage, "", "unknown hook point"},
		{"unknown admin verb", pubKey, []string{"admin", "key", "burn"}, exitUsage, "", "unknown verb"},
		{"unknown key", "whk_nope", []string{"push", "--publisher", "pubco", policy}, exitRefused, "unauthenticated", ""},
		{"wrong role", pubKey, []string{"admin", "tenant", "list"}, exitRefused, "forbidden", ""},
		{"another publisher", pubKey, []string{"push", "--publisher", "rival", policy}, exitRefused, "not_found", ""},
		{"bad semver", pubKey, []string{"publish", "--digest", strings.Repeat("a", 64), "pubco/x@1.0"}, exitRefused, "invalid_request", ""},
		{"unreachable", pubKey, []string{"push", "--server", "http://127.0.0.1:1", "--publisher", "pubco", policy}, exitRefused, "unreachable", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := p.run(tt.key, "", tt.args...)
			if code != tt.exit || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d, want %d with %q in stderr\nstdout: %s\nstderr: %s", code, tt.exit, tt.stderr, out, errOut)
			}
			if tt.code != "" {
				if e := decode[apiErrorDoc](t, out); e.Error.Code != tt.code {
					t.Fatalf("code %s, want %s: %s", e.Error.Code, tt.code, out)
				}
			}
			if strings.Contains(out+errOut, pubKey) {
				t.Fatal("printed the API key")
			}
		})
	}
	// A refused module: the server's code and its validation report.
	out := p.do(pubKey, "", exitRefused, "push", "--publisher", "pubco", garbage)
	golden(t, "cli-push-refused", []byte(out))
}

// TestCLIVerbHelp: every API verb answers --help on stdout with exit 0,
// its synopsis and its flags, the API flags among them.
func TestCLIVerbHelp(t *testing.T) {
	for _, args := range [][]string{
		{"push", "--help"}, {"publish", "-h"}, {"sign", "--help"}, {"keygen", "--help"}, {"bind", "--help"},
		{"approvals", "--help"}, {"resolve", "--help"}, {"versions", "--help"}, {"call", "--help"},
		{"signing-key", "register", "--help"}, {"signing-key", "approve", "--help"},
		{"admin", "tenant", "create", "--help"}, {"admin", "key", "rotate", "--help"}, {"admin", "credit", "grant", "--help"}, {"admin", "credit", "adjust", "--help"},
	} {
		stdout, stderr, code := runCLI("", args...)
		want := "-api-key-file"
		if args[0] == "keygen" {
			want = "-out"
		}
		if code != exitOK || !strings.Contains(stdout, "usage:") || !strings.Contains(stdout, want) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"admin", "--help"}, {"admin", "key", "--help"}, {"signing-key", "--help"}} {
		if stdout, stderr, code := runCLI("", args...); code != exitOK || !strings.Contains(stdout, "usage:") {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
	}
}

// TestAPIFailUnrecorded: a verb whose approval will never have an outcome
// (call --wait on an approval marked unrecorded) prints the code
// "unrecorded", not "request_failed" (which reads as a network failure
// worth retrying), and exits 1.
func TestAPIFailUnrecorded(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := apiFail(&out, &errOut, "usage", fmt.Errorf("waiting: %w", client.ErrUnrecorded)); code != exitRefused {
		t.Fatalf("exit %d", code)
	}
	var doc apiErrorDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if doc.Error.Code != "unrecorded" {
		t.Fatalf("code %q, want unrecorded: %s", doc.Error.Code, out.String())
	}
}
