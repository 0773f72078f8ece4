package server_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

// firstSlice is a data directory as the first slice of serve left it:
// approvals kept by a chain.DirApprovals in approvals/, their index rows in
// the database, an audit.jsonl.
type firstSlice struct {
	dir     string
	key     []byte
	a       tenantKeys
	pending string // asked by run r1, index row kept
	noIndex string // asked by run r3, its index row lost
	done    string // asked by run r2, resolved (denied) by the old server
	lost    string // asked by run r4, resolved by the old server, its outcome never indexed
}

// newFirstSlice runs the tenant acme's asking chain on a server keeping
// its approvals as the first slice did, in a DirApprovals under the data
// directory, and stops it.
func newFirstSlice(t *testing.T) *firstSlice {
	t.Helper()
	ctx := context.Background()
	f := &firstSlice{dir: t.TempDir(), key: hostKey()}
	dirApprovals, err := chain.NewDirApprovals(filepath.Join(f.dir, "approvals"))
	if err != nil {
		t.Fatal(err)
	}
	p := newPlatformWith(t, f.dir, f.key, func(o *server.Options) { o.Approvals = dirApprovals })
	f.a = newAsking(t, p)
	shell := map[string]any{"tool": "shell.exec"}
	f.pending = f.a.pending(t, "r1", shell)
	f.done = f.a.pending(t, "r2", shell)
	f.noIndex = f.a.pending(t, "r3", shell)
	f.lost = f.a.pending(t, "r4", shell)
	for _, id := range []string{f.done, f.lost} {
		if out, err := f.a.op.Resolve(ctx, "acme", id, "deny", nil, "no"); err != nil || out.Verdict != "block" {
			t.Fatalf("resolving on the old server: %+v %v", out, err)
		}
	}
	for stmt, id := range map[string]string{
		`DELETE FROM serve_approvals WHERE id = $1`:                                                   f.noIndex,
		`UPDATE serve_approvals SET status = 'pending', outcome = NULL, done_at = NULL WHERE id = $1`: f.lost,
	} {
		p.exec(t, stmt, id)
	}
	sink, err := audit.OpenFile(filepath.Join(f.dir, "audit.jsonl"), audit.FileOptions{Key: f.key})
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	stopPlatform(t, p)
	return f
}

// start starts a server on the data directory, importing it, logging to
// logs; its clients are the tenant's keys pointed at it.
func (f *firstSlice) start(t *testing.T, logs *testutil.SyncBuffer) (*platform, tenantKeys) {
	t.Helper()
	p := newPlatformWith(t, f.dir, f.key, func(o *server.Options) {
		o.DataDir = f.dir
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	for _, c := range []*client.Client{f.a.op, f.a.rt, f.a.pub} {
		c.Base = p.hs.URL
	}
	return p, f.a
}

// startFails starts a server on the data directory and returns New's error.
func (f *firstSlice) startFails(t *testing.T) error {
	t.Helper()
	_, err := server.New(context.Background(), server.Options{DB: platformDB(t, f.dir), Runtime: newRuntime(t), HostKey: f.key,
		AdminKey: adminKey, DataDir: f.dir, Logger: slog.New(slog.NewTextHandler(&testutil.SyncBuffer{}, nil))})
	if err == nil {
		t.Fatal("the server started")
	}
	return err
}

// imported returns the directories the first slice's approvals were
// renamed to.
func (f *firstSlice) imported(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(f.dir, "approvals.imported-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFirstSliceApprovalsImported: a server started on the first slice's
// data imports its pending approvals (with their index row, or without)
// into the database, where they are listed, read and resolved through the
// API with the resumed run's outcome recorded; the resolved one stays
// resolved; the directory is renamed; the old audit log is left, with a
// warning; a second start imports nothing, and a directory imported again
// (two nodes at once) revives nothing.
func TestFirstSliceApprovalsImported(t *testing.T) {
	ctx := context.Background()
	f := newFirstSlice(t)
	logs := &testutil.SyncBuffer{}
	p, a := f.start(t, logs)
	if exists(filepath.Join(f.dir, "approvals")) || len(f.imported(t)) != 1 {
		t.Fatalf("the approvals directory is not renamed: %v", f.imported(t))
	}
	for _, want := range []string{"imported=2 resolved=2", "audit log is no longer appended to", "audit.jsonl"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the start's log lacks %q:\n%s", want, logs)
		}
	}
	if !exists(filepath.Join(f.dir, "audit.jsonl")) {
		t.Fatal("audit.jsonl was removed")
	}
	list, err := a.op.Approvals(ctx, "acme", "pending")
	if err != nil || len(list) != 3 {
		t.Fatalf("pending after the import: %+v %v", list, err)
	}
	// The one whose outcome the old server never indexed is noted resolved,
	// to become unrecorded (markUnrecorded), not imported.
	if doneAt := queryValue[sql.NullInt64](t, p, `SELECT done_at FROM serve_approvals WHERE id = $1`, f.lost); !doneAt.Valid {
		t.Fatalf("the lost outcome's approval: done_at %v", doneAt)
	}
	if n := p.count(t, "approvals"); n != 2 {
		t.Fatalf("the store holds %d approvals, want 2", n)
	}
	for _, id := range []string{f.pending, f.noIndex} {
		status, body, _ := httpDo(t, "GET", p.hs.URL+"/v1/tenants/acme/approvals/"+id, a.op.Key, nil, "")
		if status != http.StatusOK || !strings.Contains(string(body), `"status":"pending"`) || !strings.Contains(string(body), `"tool":"shell.exec"`) {
			t.Fatalf("GET %s: %d %s", id, status, body)
		}
	}
	for i, id := range []string{f.pending, f.noIndex} {
		run := map[int]string{0: "r1", 1: "r3"}[i]
		out, err := a.op.Resolve(ctx, "acme", id, "approve", nil, "")
		if err != nil || out.Verdict != "allow" || out.Run != run {
			t.Fatalf("resolving %s: %+v %v", id, out, err)
		}
		if r, err := a.rt.Result(ctx, "acme", id, 0); err != nil || r == nil || r.Verdict != "allow" || r.Run != run {
			t.Fatalf("result of %s: %+v %v", id, r, err)
		}
	}
	_, err = a.op.Resolve(ctx, "acme", f.done, "approve", nil, "")
	wantCode(t, err, http.StatusConflict, chain.ApprovalResolved)
	if r, err := a.rt.Result(ctx, "acme", f.done, 0); err != nil || r == nil || r.Verdict != "block" {
		t.Fatalf("result of the old server's resolved approval: %+v %v", r, err)
	}
	stopPlatform(t, p)

	// Started again: nothing to import.
	logs = &testutil.SyncBuffer{}
	p, _ = f.start(t, logs)
	if strings.Contains(logs.String(), "imported") || len(f.imported(t)) != 1 {
		t.Fatalf("the second start imported: %v\n%s", f.imported(t), logs)
	}
	stopPlatform(t, p)

	// The directory back (a node that read it before another renamed it):
	// the approvals it holds pending were resolved since, and stay so.
	if err := os.Rename(f.imported(t)[0], filepath.Join(f.dir, "approvals")); err != nil {
		t.Fatal(err)
	}
	logs = &testutil.SyncBuffer{}
	p, a = f.start(t, logs)
	if list, err := a.op.Approvals(ctx, "acme", "pending"); err != nil || len(list) != 1 || list[0].ID != f.lost {
		t.Fatalf("pending after importing again: %+v %v", list, err)
	}
	if n := p.count(t, "approvals"); n != 2 || exists(filepath.Join(f.dir, "approvals")) {
		t.Fatalf("imported again: the store holds %d approvals, want 2; the directory renamed: %v", n, f.imported(t))
	}
	_, err = a.op.Resolve(ctx, "acme", f.pending, "deny", nil, "")
	wantCode(t, err, http.StatusConflict, chain.ApprovalResolved)
	if r, err := a.rt.Result(ctx, "acme", f.noIndex, 0); err != nil || r == nil || r.Verdict != "allow" {
		t.Fatalf("result after importing again: %+v %v", r, err)
	}
}

// TestFirstSliceImportRefused: an approval of the first slice's that does
// not decode, or that an old server is resuming, fails the start with an
// error naming the directory and the approval, and nothing is imported;
// once it is dealt with, the next start imports the rest.
func TestFirstSliceImportRefused(t *testing.T) {
	ctx := context.Background()
	f := newFirstSlice(t)
	dir := filepath.Join(f.dir, "approvals")
	corrupt := filepath.Join(dir, "abc123.json")
	if err := os.WriteFile(corrupt, []byte(`{"id": "abc123", "seal": `), 0o600); err != nil {
		t.Fatal(err)
	}
	err := f.startFails(t)
	for _, want := range []string{dir, "approval abc123", chain.ApprovalCorrupt, "nothing was imported"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error lacks %q: %v", want, err)
		}
	}
	if err := os.Remove(corrupt); err != nil {
		t.Fatal(err)
	}

	// A claim whose lease runs: an old server is resuming it.
	from := filepath.Join(dir, f.pending+".json")
	claim := filepath.Join(dir, f.pending+".claim-0123abcd-"+strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10))
	if err := os.Rename(from, claim); err != nil {
		t.Fatal(err)
	}
	err = f.startFails(t)
	for _, want := range []string{dir, "approval " + f.pending, "being resumed"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error lacks %q: %v", want, err)
		}
	}
	if !exists(dir) || len(f.imported(t)) != 0 {
		t.Fatal("the refused start renamed the directory")
	}
	if err := os.Rename(claim, from); err != nil {
		t.Fatal(err)
	}

	p, a := f.start(t, &testutil.SyncBuffer{})
	if n := p.count(t, "approvals"); n != 2 {
		t.Fatalf("the store holds %d approvals after the refused starts, want 2", n)
	}
	if list, err := a.op.Approvals(ctx, "acme", "pending"); err != nil || len(list) != 3 {
		t.Fatalf("pending after the refused starts: %+v %v", list, err)
	}
}

// exists says whether anything is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
