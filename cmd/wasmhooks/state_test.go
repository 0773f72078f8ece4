package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

// TestStateSurvivesBetweenCommands: without --approvals, `chain` keeps the
// approval it paused on in the state file and `chain resolve`, another
// command, resumes it, once; `run --credit keep` bills against the balance
// an earlier command left in it.
func TestStateSurvivesBetweenCommands(t *testing.T) {
	root := testutil.Root(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	guests := filepath.Join(root, "testdata", "guests")
	base := []string{"--cache-dir=", "--config", filepath.Join("testdata", "chain.json"), "--module-dir", guests,
		"--state", state, "--key", filepath.Join(dir, "host.key")}
	exec := func(t *testing.T, stdin string, args ...string) ([]byte, int) {
		t.Helper()
		stdout, _, code := runCLI(stdin, args...)
		return []byte(stdout), code
	}
	out, code := exec(t, `{"tool":"shell.exec","arguments":{"command":"ls"}}`, append(append([]string{"chain"}, base...), "--point", "tool.before", "--input", "-")...)
	var paused struct {
		Verdict  string `json:"verdict"`
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if code != exitOK || json.Unmarshal(out, &paused) != nil || paused.Verdict != "pending" || paused.Approval.ID == "" {
		t.Fatalf("chain: exit %d\n%s", code, out)
	}
	// Nothing has expired: the sweeper leaves the approval pending.
	if out, code := exec(t, "", append([]string{"chain", "expire"}, base...)...); code != exitOK || !bytes.Contains(out, []byte(`"expired": []`)) {
		t.Fatalf("chain expire: exit %d\n%s", code, out)
	}
	resolve := append(append([]string{"chain", "resolve"}, base...), "--id", paused.Approval.ID, "--decision", "deny")
	if out, code := exec(t, "", resolve...); code != exitOK || !bytes.Contains(out, []byte(`"verdict": "block"`)) {
		t.Fatalf("chain resolve: exit %d\n%s", code, out)
	}
	if out, code := exec(t, "", resolve...); code != exitRefused || !bytes.Contains(out, []byte(`"approval_resolved"`)) {
		t.Fatalf("second chain resolve: exit %d\n%s", code, out)
	}

	shapes := filepath.Join(guests, "shapes.wasm")
	// run without --credit keeps nothing: no state file.
	unused := filepath.Join(dir, "unused.db")
	if out, code := exec(t, "", "run", "--cache-dir=", "--hook", shapes, "--state", unused); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(unused); !os.IsNotExist(err) {
		t.Fatalf("run without --credit made a state file: %v", err)
	}
	left := regexp.MustCompile(`"credit_left": ([0-9]+)`)
	credit := func(t *testing.T, arg string) string {
		t.Helper()
		out, code := exec(t, "", "run", "--cache-dir=", "--hook", shapes, "--state", state, "--credit", arg)
		m := left.FindSubmatch(out)
		if code != exitOK || m == nil {
			t.Fatalf("run --credit %s: exit %d\n%s", arg, code, out)
		}
		return string(m[1])
	}
	if got := credit(t, "1000"); got != "1000" {
		t.Fatalf("credit left %s, want 1000", got)
	}
	// Another process bills the tenant meanwhile.
	db, err := sqlite.Open(context.Background(), state)
	if err != nil {
		t.Fatal(err)
	}
	l := store.NewLedger(db, store.LedgerOptions{})
	id, err := l.Reserve(context.Background(), "local", 300, "")
	if err == nil {
		_, err = l.Settle(context.Background(), id, 300)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := credit(t, "keep"); got != "700" {
		t.Fatalf("credit left %s after 300 charged, want 700", got)
	}
	if got := credit(t, "50"); got != "50" {
		t.Fatalf("credit left %s after --credit 50, want 50", got)
	}
}
