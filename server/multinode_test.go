package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability/builtin"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// This file runs several servers on one Postgres database, each with its own
// handle (connection pool), runtime and loopback listener, as separate
// machines would: one platform. They need WASMHOOKS_TEST_POSTGRES (`make
// postgres`); without it they skip, and under CI=true they fail.

// cluster is n nodes on one fresh Postgres schema, under one host key.
type cluster struct {
	url   string
	key   []byte
	nodes []*platform
}

func newCluster(t *testing.T, n int, tweak func(i int, o *server.Options)) *cluster {
	t.Helper()
	c := &cluster{url: storetest.PostgresURL(t), key: make([]byte, 32)}
	_, _ = rand.Read(c.key)
	for i := range n {
		c.nodes = append(c.nodes, c.start(t, func(o *server.Options) {
			o.RateLimit = server.RateLimit{PerSecond: 10000, Burst: 10000}
			if tweak != nil {
				tweak(i, o)
			}
		}))
	}
	return c
}

// start starts one more node of c.
func (c *cluster) start(t *testing.T, tweak func(*server.Options)) *platform {
	t.Helper()
	return startPlatform(t, postgresTarget.OpenAt(t, c.url), c.key, tweak)
}

// on returns cl pointed at node p.
func on(cl *client.Client, p *platform) *client.Client {
	return client.New(p.hs.URL, cl.Key)
}

// exactProvider answers llm.run with the token counts its reservation
// assumed, so a call is charged exactly what it reserved (11 for the prompt
// "x" with max_tokens 1: 9 input tokens at 1, 1 output token at 2), and a
// balance of 11*n pays for exactly n calls.
type exactProvider struct{}

func (exactProvider) Complete(_ context.Context, req builtin.CompletionRequest) (builtin.Completion, error) {
	return builtin.Completion{Text: "x", Model: "exact", Provider: "test",
		InputTokens: builtin.EstimateInputTokens(req.Prompt), OutputTokens: int64(req.MaxTokens)}, nil
}

const paidCallCost = 11

// paidConfig binds the scripted guest at message.inbound, calling llm.run
// once per run (granted), and returning block with the call's result.
func paidConfig(pin string) []byte {
	script := "@@" + testutil.OpHostCall("llm.run", `{"prompt":"x","max_tokens":1}`, 256)
	return []byte(`{"modules": {"paid": "` + pin + `"},
  "bindings": [{"name": "paid", "module": "paid", "point": "message.inbound", "phase": "guard",
    "grants": ["llm.run"], "settings": {"script": "` + script + `"}, "limits": {"timeout": "30s"}}]}`)
}

// callStatus is the status of the one host call a paidConfig run made.
func callStatus(t *testing.T, out *client.Outcome) abi.Status {
	t.Helper()
	if out.Verdict != "block" || len(out.Reason) < 16 {
		t.Fatalf("not a scripted outcome: %+v", out)
	}
	v, err := strconv.ParseUint(out.Reason[:16], 16, 64)
	if err != nil {
		t.Fatalf("reason %q: %v", out.Reason, err)
	}
	s, _ := abi.UnpackResult(v)
	return s
}

// setupPaid makes tenant acme with credit, binds paidConfig on node 0,
// waits until the other nodes run it (waitBound) and returns the runtime and
// operator keys.
func setupPaid(t *testing.T, c *cluster, credit int64) (rtk, op *client.Client) {
	t.Helper()
	a := newTenant(t, c.nodes[0], "acme", false)
	if credit > 0 {
		a.grant(t, credit, "g1")
	}
	a.bind(t, paidConfig(client.Pin(publishGuest(t, a.pub, "scripted", "paid"))))
	for _, n := range c.nodes[1:] {
		waitBound(t, a.rt, n, "tool.before", map[string]any{"tool": "x"})
	}
	return a.rt, a.op
}

// waitBound waits until tenant's chain answers on node p.
func waitBound(t *testing.T, rtk *client.Client, p *platform, point string, ctxDoc map[string]any) {
	t.Helper()
	eventually(t, 10*time.Second, 20*time.Millisecond, "node never ran the binding", func() error {
		_, err := on(rtk, p).Run(context.Background(), "acme", point, ctxDoc, "")
		return err
	})
}

// TestNodesBindingReachesOtherNode: a binding changed on node 1 is in force
// on node 2 within a second. Node 2's periodic sync is an hour apart here,
// so the change can only travel by notification.
func TestNodesBindingReachesOtherNode(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, func(_ int, o *server.Options) { o.SyncInterval = time.Hour })
	n1, n2 := c.nodes[0], c.nodes[1]
	a := newTenant(t, n1, "acme", false)
	op, rtk := a.op, a.rt
	pin := publishPolicy(t, a.pub)
	a.bind(t, chainConfig(pin))
	secret := map[string]any{"outgoing": "the SECRET is 42"}
	classified := map[string]any{"outgoing": "CLASSIFIED plans"}
	waitBound(t, rtk, n2, "message.outbound", secret)
	for _, n := range c.nodes {
		if out, err := on(rtk, n).Run(ctx, "acme", "message.outbound", classified, ""); err != nil || out.Verdict != "allow" {
			t.Fatalf("before the change: %+v %v", out, err)
		}
	}
	// The change: CLASSIFIED is blocked now, SECRET allowed.
	changed := strings.Replace(string(chainConfig(pin)), `"when": "SECRET"`, `"when": "CLASSIFIED"`, 1)
	bound := time.Now()
	if _, err := op.BindChain(ctx, "acme", []byte(changed)); err != nil {
		t.Fatal(err)
	}
	for {
		out, err := on(rtk, n2).Run(ctx, "acme", "message.outbound", classified, "")
		if err != nil {
			t.Fatal(err)
		}
		if out.Verdict == "block" {
			break
		}
		if time.Since(bound) > time.Second {
			t.Fatalf("node 2 still runs the old binding %s after the bind", time.Since(bound))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("node 2 ran the new binding %s after node 1's bind returned", time.Since(bound))
	if out, err := on(rtk, n2).Run(ctx, "acme", "message.outbound", secret, ""); err != nil || out.Verdict != "allow" {
		t.Fatalf("after the change, on node 2: %+v %v", out, err)
	}
	var cfg json.RawMessage
	if err := on(op, n2).Do(ctx, "GET", "/v1/tenants/acme/chain", "", nil, &cfg); err != nil || !strings.Contains(string(cfg), "CLASSIFIED") {
		t.Fatalf("node 2's stored chain: %s %v", cfg, err)
	}
}

// TestNodesCreditExact: 200 concurrent runs, split over two nodes, each
// making one billable call, against a balance that pays for exactly 100:
// exactly 100 calls are charged, the others refused insufficient_credit,
// and the ledger's sums check.
func TestNodesCreditExact(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, func(_ int, o *server.Options) { o.LLMProvider = exactProvider{} })
	const paid, runs = 100, 200
	rtk, op := setupPaid(t, c, paid*paidCallCost)
	start := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[abi.Status]int{}
	)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out, err := on(rtk, c.nodes[i%2]).Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, fmt.Sprintf("r%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			s := callStatus(t, out)
			mu.Lock()
			statuses[s]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if statuses[abi.StatusOK] != paid || statuses[abi.StatusInsufficientCredit] != runs-paid {
		t.Fatalf("call statuses %v; want %d ok and %d insufficient_credit", statuses, paid, runs-paid)
	}
	for _, n := range c.nodes {
		if cr, err := on(op, n).Credit(ctx, "acme"); err != nil || cr.Available != 0 {
			t.Fatalf("credit after: %+v %v", cr, err)
		}
	}
	checkLedger(t, c, paid)
}

// checkLedger checks the ledger's cached sums and that acme was charged
// exactly charges calls.
func checkLedger(t *testing.T, c *cluster, charges int) {
	t.Helper()
	ctx := context.Background()
	db := postgresTarget.OpenAt(t, c.url)
	if err := store.NewLedger(db, store.LedgerOptions{}).Check(ctx); err != nil {
		t.Fatal(err)
	}
	var n, sum int64
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(-amount), 0) FROM ledger_entries WHERE kind = 'charge'`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != int64(charges) || sum != int64(charges)*paidCallCost {
		t.Fatalf("%d charges of %d in all; want %d of %d", n, sum, charges, charges*paidCallCost)
	}
}

// auditPerRun verifies acme's audit chain and returns how many records
// each run has.
func auditPerRun(t *testing.T, c *cluster) map[string]int {
	t.Helper()
	perRun := map[string]int{}
	for _, r := range verifyAudit(t, c, "acme") {
		perRun[r.Run]++
	}
	return perRun
}

// verifyAudit verifies tenant's audit chain, with the host key, and
// returns its records.
func verifyAudit(t *testing.T, c *cluster, tenant string) []audit.Record {
	t.Helper()
	ctx := context.Background()
	db := postgresTarget.OpenAt(t, c.url)
	st := store.NewAuditStore(db, tenant)
	if _, err := audit.VerifyStore(ctx, st, audit.VerifyOptions{Key: c.key}); err != nil {
		t.Fatalf("the audit chain of %s: %v", tenant, err)
	}
	var recs []audit.Record
	if err := st.Read(ctx, 0, func(line []byte) error {
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestNodesApprovalAcrossNodes: an approval made by a run on node 1 is
// waited on through node 2 and resolved through node 1; the waiter on node
// 2 receives the resumed outcome (woken by notification: its own backstop
// reads the index only every half second, and the test asks for less than
// the whole wait).
func TestNodesApprovalAcrossNodes(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, nil)
	n1, n2 := c.nodes[0], c.nodes[1]
	a := newAsking(t, n1)
	op, rtk := a.op, a.rt
	shell := map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls"}}
	waitBound(t, rtk, n2, "message.outbound", map[string]any{"outgoing": "hi"})
	for i := range 3 {
		// Made on node 1, waited on through node 2; resolved on node 1
		// (i = 0, 2) or node 2 (i = 1).
		run := fmt.Sprintf("r-ask-%d", i)
		out, err := rtk.Run(ctx, "acme", "tool.before", shell, run)
		if err != nil || out.Verdict != "pending" || out.Approval == nil {
			t.Fatalf("pending: %+v %v", out, err)
		}
		id := out.Approval.ID
		w := waitPoll(ctx, on(rtk, n2), id, 30)
		time.Sleep(200 * time.Millisecond) // let the waiter wait (correct without it too)
		resolver := on(op, c.nodes[i%2])
		began := time.Now()
		resumed, err := resolver.Resolve(ctx, "acme", id, "approve", nil, "")
		if err != nil || resumed.Verdict != "allow" {
			t.Fatalf("resolve: %+v %v", resumed, err)
		}
		if g := w.result(t, "the waiting client on node 2", 20*time.Second); g.err != nil || g.out == nil || g.out.Verdict != "allow" || g.out.Run != run {
			t.Fatalf("waiting client on node 2: %+v %v", g.out, g.err)
		}
		t.Logf("resolved on node %d: the waiter on node 2 had the outcome %s after the resolve began", i%2+1, time.Since(began))
		// Resolved once, on every node.
		for _, n := range c.nodes {
			_, err := on(op, n).Resolve(ctx, "acme", id, "deny", nil, "")
			wantCode(t, err, 409, "approval_resolved")
		}
	}
	var resolutions int
	for _, r := range verifyAudit(t, c, "acme") {
		if r.Resolution == "approved" {
			resolutions++
		}
	}
	if resolutions != 3 {
		t.Fatalf("%d approved resolutions audited, want 3", resolutions)
	}
}

// TestNodesRunIDOnce: the same run id posted to both nodes at once runs
// once: both get one outcome, and the tenant's audit chain holds one record
// of it (the credit gate's idempotency would hide a second run's charge, so
// the audit counts).
func TestNodesRunIDOnce(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, func(_ int, o *server.Options) { o.LLMProvider = exactProvider{} })
	rtk, _ := setupPaid(t, c, 1000*paidCallCost)
	const ids, each = 20, 2 // each id posted twice to each node, all at once
	start := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		docs = map[string]map[string]bool{}
	)
	for i := range ids {
		run := fmt.Sprintf("same-%d", i)
		docs[run] = map[string]bool{}
		for k := range 2 * each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out, err := on(rtk, c.nodes[k%2]).Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, run)
				if err != nil {
					t.Error(err)
					return
				}
				if s := callStatus(t, out); s != abi.StatusOK {
					t.Errorf("run %s: call status %v", run, s)
				}
				var o map[string]any
				_ = json.Unmarshal(out.Raw, &o)
				b, _ := json.Marshal(o)
				mu.Lock()
				docs[run][string(b)] = true
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	for run, d := range docs {
		if len(d) != 1 {
			t.Errorf("run %s: %d different outcomes", run, len(d))
		}
	}
	perRun := auditPerRun(t, c)
	for run := range docs {
		if perRun[run] != 1 {
			t.Errorf("run %s: %d audit records, want 1 (it ran more than once)", run, perRun[run])
		}
	}
	checkLedger(t, c, ids)
}

// TestNodesSQLiteSharedFile: two servers on one SQLite file (processes on
// one machine) are one platform too, with no notifications: a bind reaches
// the other by its periodic sync, and a run id posted to both runs once.
func TestNodesSQLiteSharedFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := hostKey()
	fast := func(o *server.Options) {
		o.SyncInterval = 50 * time.Millisecond
		o.LLMProvider = exactProvider{}
	}
	var nodes []*platform
	for range 2 {
		nodes = append(nodes, startPlatform(t, openSQLite(t, dir), key, fast))
	}
	c := &cluster{key: key, nodes: nodes}
	rtk, op := setupPaid(t, c, 100*paidCallCost)
	var wg sync.WaitGroup
	outs := make([]*client.Outcome, 4)
	for k := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := on(rtk, c.nodes[k%2]).Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, "once")
			if err != nil {
				t.Error(err)
				return
			}
			outs[k] = out
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, o := range outs[1:] {
		if string(o.Raw) != string(outs[0].Raw) {
			t.Fatalf("one run id, two outcomes:\n%s\n%s", outs[0].Raw, o.Raw)
		}
	}
	if cr, err := on(op, c.nodes[1]).Credit(ctx, "acme"); err != nil || cr.Available != 99*paidCallCost {
		t.Fatalf("credit after one paid run: %+v %v", cr, err)
	}
	if n := queryValue[int](t, c.nodes[0], `SELECT COUNT(*) FROM audit_records WHERE chain = CAST('acme' AS BLOB)`); n != 1 {
		t.Fatalf("%d audit records of one run id", n)
	}
}

// The environment of a node run in a child process (TestNodeProcess).
const (
	envNodeURL = "WASMHOOKS_TEST_NODE_DB"
	envNodeKey = "WASMHOOKS_TEST_NODE_KEY"
)

// TestNodeProcess is not a test: run by TestNodesKilledMidRun in a child
// process (this test binary again), it serves a node on the database and
// host key its environment names, prints "ADDR host:port" and serves until
// it is killed.
func TestNodeProcess(t *testing.T) {
	url := os.Getenv(envNodeURL)
	if url == "" {
		t.Skip("run by TestNodesKilledMidRun")
	}
	key, err := hex.DecodeString(os.Getenv(envNodeKey))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Options{DB: postgresTarget.OpenAt(t, url), Runtime: newRuntime(t), HostKey: key, AdminKey: adminKey, LLMProvider: exactProvider{},
		RunTimeout: 5 * time.Second, RateLimit: server.RateLimit{PerSecond: 10000, Burst: 10000},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ADDR %s\n", ln.Addr())
	t.Fatal(http.Serve(ln, srv.Handler()))
}

// startNodeProcess runs a node of c in a child process and returns its
// base URL and the process, killed when t ends.
func startNodeProcess(t *testing.T, c *cluster) (string, *exec.Cmd) {
	t.Helper()
	child := storetest.StartChild(t, "^TestNodeProcess$", envNodeURL+"="+c.url, envNodeKey+"="+hex.EncodeToString(c.key))
	cmd := child.Cmd
	addr := make(chan string, 1)
	go func() {
		for child.Out.Scan() {
			if a, ok := strings.CutPrefix(child.Out.Text(), "ADDR "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the node process ended before it listened")
		}
		return "http://" + a, cmd
	case <-time.After(60 * time.Second):
		t.Fatal("the node process did not listen within 60s")
	}
	return "", nil
}

// TestNodesKilledMidRun: a node in a child process takes runs (each with a
// run id and one billable call) until it is killed (SIGKILL) mid-load. Every
// run it acknowledged (a 200) is recorded, as the other node shows: its
// outcome (the same, replayed), its one audit record, its charge; the runs
// it did not acknowledge run on the other node once their claims' leases
// end, charged at most once; the ledger's sums check and the audit chain
// verifies after all of it.
func TestNodesKilledMidRun(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1, func(_ int, o *server.Options) { o.LLMProvider = exactProvider{} })
	rtk, _ := setupPaid(t, c, 100000*paidCallCost)
	base, cmd := startNodeProcess(t, c)
	child := client.New(base, rtk.Key)
	eventually(t, 30*time.Second, 20*time.Millisecond, "the node process never ran the binding", func() error {
		_, err := child.Run(ctx, "acme", "tool.before", map[string]any{"tool": "x"}, "")
		return err
	})

	const workers, enough = 8, 40
	var (
		mu    sync.Mutex
		acked = map[string]json.RawMessage{} // run id -> the outcome the node answered
		tried []string
		wg    sync.WaitGroup
		seq   int
	)
	killed := make(chan struct{})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				seq++
				run := fmt.Sprintf("k-%d", seq)
				tried = append(tried, run)
				mu.Unlock()
				out, err := child.Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, run)
				if err != nil {
					select {
					case <-killed:
						return // the node is gone: this run was not acknowledged
					default:
						t.Errorf("run %s before the kill: %v", run, err)
						return
					}
				}
				mu.Lock()
				acked[run] = out.Raw
				n := len(acked)
				mu.Unlock()
				if n == enough {
					// Kill it mid-load: the other workers' runs are in flight.
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Error(err)
					}
					close(killed)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	_ = cmd.Wait()
	t.Logf("%d runs acknowledged, %d tried", len(acked), len(tried))

	// Every acknowledged run: replayed by the other node as it was answered.
	other := on(rtk, c.nodes[0])
	for run, raw := range acked {
		out, err := other.Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "something else"}, run)
		if err != nil {
			t.Fatalf("run %s on the other node: %v", run, err)
		}
		if !sameJSON(t, out.Raw, raw) {
			t.Fatalf("run %s: acknowledged\n%s\nbut the platform has\n%s", run, raw, out.Raw)
		}
		if s := callStatus(t, out); s != abi.StatusOK {
			t.Fatalf("run %s: call status %v", run, s)
		}
	}
	// The runs it did not acknowledge: run (or replayed) by the other node,
	// once the dead node's claims end (twice its RunTimeout, 10 s).
	for _, run := range tried {
		if _, ok := acked[run]; ok {
			continue
		}
		eventually(t, 30*time.Second, 0, "unacknowledged run "+run+" on the other node", func() error {
			out, err := other.Run(ctx, "acme", "message.inbound", map[string]any{"incoming": "hi"}, run)
			if err == nil {
				// DENIED: the dead node's call was charged before it died
				// (the credit gate's "already billed"), so this one is not.
				if s := callStatus(t, out); s != abi.StatusOK && s != abi.StatusDenied {
					t.Fatalf("run %s: call status %v", run, s)
				}
				return nil
			}
			var p *server.Problem
			if !errors.As(err, &p) || p.Code != server.CodeRunInProgress {
				t.Fatalf("unacknowledged run %s on the other node: %v", run, err)
			}
			return err
		})
	}
	perRun := auditPerRun(t, c)
	for run := range acked {
		if perRun[run] != 1 {
			t.Errorf("acknowledged run %s: %d audit records, want 1", run, perRun[run])
		}
	}
	for _, run := range tried {
		if perRun[run] < 1 || perRun[run] > 2 {
			t.Errorf("run %s: %d audit records, want 1 (or 2: the dead node's, then the rerun's)", run, perRun[run])
		}
	}
	// Each run id's call charged once, whichever node (or both) ran it.
	checkLedger(t, c, len(tried))
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// BenchmarkRunID is a run through the HTTP API, over loopback, with and
// without a run id (its claim, the stored outcome, the claim's release), on
// SQLite and, with WASMHOOKS_TEST_POSTGRES, on Postgres.
func BenchmarkRunID(b *testing.B) {
	ctx := context.Background()
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			var db *store.DB
			if dialect == "postgres" {
				if os.Getenv(storetest.PostgresEnv) == "" {
					b.Skip("no Postgres: " + storetest.PostgresEnv + " is unset")
				}
				db = postgresTarget.OpenAt(b, storetest.PostgresURL(b))
			} else {
				db = openSQLite(b, b.TempDir())
			}
			p := startPlatform(b, db, hostKey(), func(o *server.Options) { o.RateLimit = server.RateLimit{PerSecond: 1e6, Burst: 1e6} })
			rtk := newBound(b, p, chainConfig).rt
			msg := map[string]any{"outgoing": "hello"}
			for _, withID := range []bool{false, true} {
				b.Run(fmt.Sprintf("id=%v", withID), func(b *testing.B) {
					for i := range b.N {
						run := ""
						if withID {
							run = fmt.Sprintf("b-%d-%d", time.Now().UnixNano(), i)
						}
						if _, err := rtk.Run(ctx, "acme", "message.outbound", msg, run); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestRunIDWaitLeavesNoWaiter: a request that waited for another node's
// claim on its run id, then found that node's stored outcome with the claim
// still there (the release failed or has not run yet), leaves no waiter
// behind. The node that ran it does not announce a stored outcome, so
// nobody closed the waiter: one map entry kept for ever per such run id.
func TestRunIDWaitLeavesNoWaiter(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	// Another node holds the claim, and stores its outcome a little later.
	p.exec(t, `INSERT INTO serve_run_claims (tenant, run, owner, lease_until) VALUES ('acme', 'r-other', 'node-other', $1)`,
		time.Now().Add(time.Hour).UnixNano())
	stored := make(chan error, 1)
	go func() {
		time.Sleep(800 * time.Millisecond)
		_, err := p.db.Exec(q(`INSERT INTO serve_runs (tenant, run, outcome) VALUES ('acme', 'r-other', $1)`),
			`{"run":"r-other","tenant":"acme","point":"tool.before","verdict":"allow","modified":false,"context":{},"trace":[],"audit":[]}`)
		stored <- err // its claim stays: giving it up failed (finishRun logs that, and goes on)
	}()
	out, err := a.rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "ls"}, "r-other")
	if err != nil || out.Verdict != "allow" || out.Run != "r-other" {
		t.Fatalf("%+v %v", out, err)
	}
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	if n := server.Waiters(p.srv); n != 0 {
		t.Fatalf("%d waiters left behind", n)
	}
}
