package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/capability"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// The tests re-execute the test binary as child processes; these variables
// select the child's part and its database.
const (
	envChild  = "WASMHOOKS_STORE_CHILD" // "charge" or "hold"
	envDriver = "WASMHOOKS_STORE_DRIVER"
	envDSN    = "WASMHOOKS_STORE_DSN"
)

const (
	account    = "acme"
	callCost   = 7
	allowed    = 100 // calls the balance pays for
	goroutines = 50  // per process
	childLease = 2 * time.Second
)

func TestMain(m *testing.M) {
	if part := os.Getenv(envChild); part != "" {
		if err := child(part); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openDSN(ctx context.Context, driver, dsn string) (*store.DB, error) {
	if driver == "postgres" {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, dsn)
}

// child is one process's part.
//
//	charge: 50 goroutines reserve and settle callCost until the account
//	        runs dry; prints "ok N", the calls it paid for.
//	hold:   reserves 10 holds of callCost, settles 3, prints "ready" and
//	        waits to be killed.
func child(part string) error {
	ctx := context.Background()
	db, err := openDSN(ctx, os.Getenv(envDriver), os.Getenv(envDSN))
	if err != nil {
		return err
	}
	defer db.Close()
	switch part {
	case "charge":
		l := store.NewLedger(db, store.LedgerOptions{})
		var ok atomic.Int64
		err := inParallel(goroutines, func(int) error {
			for {
				id, err := l.Reserve(ctx, account, callCost, "")
				if errors.Is(err, capability.ErrInsufficientCredit) {
					return nil
				}
				if err != nil {
					return err
				}
				if _, err := l.Settle(ctx, id, callCost); err != nil {
					return err
				}
				ok.Add(1)
			}
		})
		if err != nil {
			return err
		}
		fmt.Printf("ok %d\n", ok.Load())
	case "hold":
		l := store.NewLedger(db, store.LedgerOptions{Lease: childLease})
		var ids []string
		for i := range 10 {
			id, err := l.Reserve(ctx, account, callCost, "crash/"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		for _, id := range ids[:3] {
			if _, err := l.Settle(ctx, id, callCost); err != nil {
				return err
			}
		}
		fmt.Println("ready")
		select {}
	case "resolve", "stall":
		return approvalChild(ctx, db, part)
	case "audit":
		return auditChild(ctx, db)
	default:
		return fmt.Errorf("unknown part %q", part)
	}
	return nil
}

// inParallel runs f(0) to f(n-1) in n goroutines and returns the first
// error any of them returned.
func inParallel(n int, f func(g int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range n {
		wg.Go(func() {
			if err := f(g); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startChild runs part in a child process on tg's database, with env added
// to its environment.
func startChild(t *testing.T, part string, tg target, env ...string) storetest.Child {
	t.Helper()
	return storetest.StartChild(t, "^$", append([]string{envChild + "=" + part, envDriver + "=" + tg.driver, envDSN + "=" + tg.dsn}, env...)...)
}

// startTogether starts n children of part that print "ready" and wait for
// a line on their stdin, then sends each that line, so that they run their
// part at the same moment.
func startTogether(t *testing.T, n int, part string, tg target, env ...string) []storetest.Child {
	t.Helper()
	cs := make([]storetest.Child, n)
	for i := range cs {
		cs[i] = startChild(t, part, tg, env...)
		cs[i].Expect(t, "ready")
	}
	for _, c := range cs {
		if _, err := io.WriteString(c.In, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

// awaitGo is a child's side of startTogether.
func awaitGo() error {
	fmt.Println("ready")
	_, err := bufio.NewReader(os.Stdin).ReadString('\n')
	return err
}

// poll calls done every 200ms until it reports true, for up to 30 s.
func poll(done func() bool) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if done() {
			return
		}
	}
}

// The multi-process scenarios, each run on SQLite and on Postgres.
var scenarios = []struct {
	name string
	run  func(*testing.T, target)
}{
	{"TwoProcessesChargeOneBalance", twoProcessesChargeOneBalance},
	{"CrashedProcessHoldsSwept", crashedProcessHoldsSwept},
	{"TwoProcessesResolveOneApproval", twoProcessesResolveOneApproval},
	{"KilledResumeIsResumedOnce", killedResumeIsResumedOnce},
	{"TwoProcessesAppendOneAuditChain", twoProcessesAppendOneAuditChain},
}

func TestMultiProcessSQLite(t *testing.T) { runScenarios(t, sqliteTarget) }

func TestMultiProcessPostgres(t *testing.T) { runScenarios(t, postgresTarget) }

func runScenarios(t *testing.T, on func(*testing.T) target) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { s.run(t, on(t)) })
	}
}

type target struct{ driver, dsn string }

func sqliteTarget(t *testing.T) target {
	return target{"sqlite", filepath.Join(t.TempDir(), "state.db")}
}

func postgresTarget(t *testing.T) target {
	return target{"postgres", storetest.PostgresURL(t)}
}

func (tg target) open(t *testing.T) *store.DB {
	t.Helper()
	db, err := openDSN(context.Background(), tg.driver, tg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// twoProcessesChargeOneBalance: two OS processes of 50 goroutines each charge
// one balance that pays for exactly 100 calls: exactly 100 are paid for and
// the balance ends at zero.
func twoProcessesChargeOneBalance(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.open(t)
	l := store.NewLedger(db, store.LedgerOptions{})
	if err := l.Grant(ctx, account, allowed*callCost, ""); err != nil {
		t.Fatal(err)
	}
	cs := []storetest.Child{startChild(t, "charge", tg), startChild(t, "charge", tg)}
	total := int64(0)
	for i, c := range cs {
		lines := c.Finish(t)
		if len(lines) != 1 {
			t.Fatalf("process %d printed %q", i, lines)
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "ok "), 10, 64)
		if err != nil {
			t.Fatalf("process %d printed %q", i, lines)
		}
		t.Logf("process %d paid for %d calls", i, n)
		total += n
	}
	if total != allowed {
		t.Errorf("%d calls paid for, want exactly %d", total, allowed)
	}
	if a, p, err := l.Balance(ctx, account); err != nil || a != 0 || p != 0 {
		t.Errorf("balance %d, pending %d, %v; want 0, 0", a, p, err)
	}
	if err := l.Check(ctx); err != nil {
		t.Error(err)
	}
}

// crashedProcessHoldsSwept: a process holding open holds is killed with
// SIGKILL; once its lease ends, Sweep in this process releases them (and not
// before, and never this live process's own hold), and the balance is the
// initial one minus what the dead process settled.
func crashedProcessHoldsSwept(t *testing.T, tg target) {
	ctx := context.Background()
	db := tg.open(t)
	const initial = 1000
	live := store.NewLedger(db, store.LedgerOptions{Lease: time.Hour})
	if err := live.Grant(ctx, account, initial, ""); err != nil {
		t.Fatal(err)
	}
	mine, err := live.Reserve(ctx, account, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "hold", tg)
	c.Expect(t, "ready")
	c.Kill(t)
	killed := time.Now()
	const settled = 3 * callCost
	if a, p, _ := live.Balance(ctx, account); p != 7*callCost+1 || a != initial-settled-p {
		t.Fatalf("after the kill: available %d pending %d", a, p)
	}
	// The dead process's lease has not ended yet: nothing is swept.
	if n, err := live.Sweep(ctx, killed); err != nil || n != 0 {
		t.Fatalf("Sweep within the lease = %d, %v; want 0", n, err)
	}
	swept := 0
	poll(func() bool {
		n, err := live.Sweep(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		return swept >= 7
	})
	if swept != 7 {
		t.Fatalf("swept %d holds, want 7", swept)
	}
	if since := time.Since(killed); since < childLease-100*time.Millisecond {
		t.Fatalf("swept %v after the kill, before the %v lease ended", since, childLease)
	}
	if a, p, err := live.Balance(ctx, account); err != nil || p != 1 || a != initial-settled-1 {
		t.Fatalf("after the sweep: available %d pending %d, %v; want %d, 1", a, p, err, initial-settled-1)
	}
	if err := live.Release(ctx, mine); err != nil {
		t.Fatalf("this live process's hold: %v", err)
	}
	if a, _, _ := live.Balance(ctx, account); a != initial-settled {
		t.Fatalf("final available %d, want %d", a, initial-settled)
	}
	if err := live.Check(ctx); err != nil {
		t.Fatal(err)
	}
}
