package server_test

import (
	"cmp"
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestRateLimit: a key past its burst gets 429 rate_limited, and another
// key is not affected.
func TestRateLimit(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: 5} })
	admin := p.admin
	op, _ := newOperator(t, p, "acme")
	for i := 0; i < 5; i++ {
		if _, err := op.Credit(ctx, "acme"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := op.Credit(ctx, "acme")
	wantCode(t, err, 429, server.CodeRateLimited)
	// The admin key used 2 of its 5 so far: still served.
	if _, err := admin.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
}

// onBothDatabases runs test as a subtest per database nodes can share,
// named by it: "sqlite" (one SQLite file) and "postgres" (skipped without
// WASMHOOKS_TEST_POSTGRES), as twoNodes takes them.
func onBothDatabases(t *testing.T, test func(t *testing.T, db string)) {
	t.Helper()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) { test(t, db) })
	}
}

// twoNodes starts two servers on one database, each with tweak: the
// Postgres cluster's (newCluster) or, for "sqlite", two on one SQLite file
// (as TestNodesSQLiteSharedFile).
func twoNodes(t *testing.T, db string, tweak func(*server.Options)) *cluster {
	t.Helper()
	if db == "postgres" {
		return newCluster(t, 2, func(_ int, o *server.Options) { tweak(o) })
	}
	dir, key := t.TempDir(), hostKey()
	c := &cluster{key: key}
	for range 2 {
		c.nodes = append(c.nodes, startPlatform(t, openSQLite(t, dir), key, tweak))
	}
	return c
}

// TestRateLimitAcrossNodes: one key's burst, sent over two nodes at once,
// is served at most Burst times in all with the cluster scope (the
// default on Postgres), the rest 429 rate_limited with Retry-After; with
// the node scope (the default on SQLite) each node serves its own Burst.
// It fails without the shared bucket (each node let Burst through:
// 2*Burst).
func TestRateLimitAcrossNodes(t *testing.T) {
	const burst = 6
	onBothDatabases(t, func(t *testing.T, db string) {
		byDefault := 2 * burst // SQLite: node
		if db == "postgres" {
			byDefault = burst
		}
		for _, c := range []struct {
			scope server.RateLimitScope
			want  int
		}{{"", byDefault}, {server.RateLimitCluster, burst}, {server.RateLimitNode, 2 * burst}} {
			t.Run(cmp.Or(string(c.scope), "default"), func(t *testing.T) {
				ctx := context.Background()
				cl := twoNodes(t, db, func(o *server.Options) {
					o.RateLimit = server.RateLimit{PerSecond: 0.001, Burst: burst}
					o.RateLimitScope = c.scope
				})
				op, _ := newOperator(t, cl.nodes[0], "acme")
				var served, limited atomic.Int32
				var wg sync.WaitGroup
				for i := range 4 * burst {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := on(op, cl.nodes[i%2]).Credit(ctx, "acme")
						var p *server.Problem
						switch {
						case err == nil:
							served.Add(1)
						case errors.As(err, &p) && p.Status == 429 && p.Code == server.CodeRateLimited && p.RetryAfter > 0:
							limited.Add(1)
						default:
							t.Errorf("request %d: %v", i, err)
						}
					}()
				}
				wg.Wait()
				if got := int(served.Load()); got != c.want {
					t.Fatalf("%d of %d requests served over two nodes, want %d (429: %d)", got, 4*burst, c.want, limited.Load())
				}
			})
		}
	})
}

// TestRateLimitDatabaseFails: when the shared bucket cannot be read the
// request is 503 unavailable with Retry-After, not served (nor a panic, nor
// a 500 that says nothing).
func TestRateLimitDatabaseFails(t *testing.T) {
	ctx := context.Background()
	p := newPlatformTweaked(t, func(o *server.Options) { o.RateLimitScope = server.RateLimitCluster })
	op, _ := newOperator(t, p, "acme")
	if _, err := op.Credit(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	p.exec(t, `DROP TABLE serve_rate_buckets`)
	_, err := op.Credit(ctx, "acme")
	wantCode(t, err, 503, server.CodeUnavailable)
	var pr *server.Problem
	if errors.As(err, &pr) && pr.RetryAfter != 1 {
		t.Fatalf("Retry-After %d, want 1", pr.RetryAfter)
	}
}

// TestLongPollsAcrossNodes: a key's open waits are counted on every node
// sharing the database: with one allowed, a long poll on node 1 while one
// is open on node 0 is 429 rate_limited. Each node counted its own: node 1
// opened it (its hook then ends the test's wait). The leases' times are
// the database's, so a node whose clock is an hour off still counts the
// other's: when each node wrote and compared its own clock's, the node
// ahead took the other's live lease for one expired long ago, deleted it
// and opened its wait.
func TestLongPollsAcrossNodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		clocks [2]time.Duration // each node's clock's offset
	}{
		{"same clocks", [2]time.Duration{0, 0}},
		{"node 1 an hour ahead", [2]time.Duration{0, time.Hour}},
		{"node 0 an hour behind", [2]time.Duration{-time.Hour, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			cl := newCluster(t, 2, func(_ int, o *server.Options) { o.MaxWait, o.MaxPollsPerKey = 30*time.Second, 1 })
			for i, n := range cl.nodes {
				server.SetClock(n.srv, func() time.Time { return time.Now().Add(c.clocks[i]) })
			}
			a := newAsking(t, cl.nodes[0])
			id := a.pending(t, "r-poll", map[string]any{"tool": "shell.exec"})
			open0 := make(chan struct{})
			server.SetHook(cl.nodes[0].srv, func(point string) {
				if point == "wait started" {
					close(open0)
				}
			})
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			server.SetHook(cl.nodes[1].srv, func(point string) {
				if point == "wait started" {
					cancel()
				}
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = on(a.rt, cl.nodes[0]).Result(wctx, "acme", id, 30)
			}()
			<-open0
			_, err := on(a.rt, cl.nodes[1]).Result(wctx, "acme", id, 30)
			wantCode(t, err, 429, server.CodeRateLimited)
			cancel()
			<-done
		})
	}
}

// slowBurst and slowInterval are slowRateNodes' rate limit: so slow that
// no token comes back while a test runs, unless it moves the clocks.
const slowBurst, slowInterval = 2, 1000 * time.Second

// slowRateNodes is twoNodes with the cluster scope and a burst of
// slowBurst, a token every slowInterval; node 1's clock is offset by what
// ahead holds.
func slowRateNodes(t *testing.T, db string) (cl *cluster, ahead *atomic.Int64) {
	t.Helper()
	cl = twoNodes(t, db, func(o *server.Options) {
		o.RateLimit = server.RateLimit{PerSecond: float64(time.Second) / float64(slowInterval), Burst: slowBurst}
		o.RateLimitScope = server.RateLimitCluster
	})
	ahead = new(atomic.Int64)
	server.SetClock(cl.nodes[1].srv, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	return cl, ahead
}

// TestRateLimitFloodInMemory: a request the shared bucket refuses sets
// its node's bucket in memory down to the shared one's tokens, so a key's
// flood is refused there, without a statement, until the shared bucket may
// have a token again; and then that node's bucket has it too (it never
// refuses what the shared one would pass). Node 0 spends the key's burst;
// node 1 is refused three times with one statement (each was one: the
// node's bucket in memory counted only its own requests, and with the
// token given back kept them all); one interval later (node 1's clock, and
// on Postgres the shared bucket's time moved by as much) node 1 serves one
// request, then refuses again.
func TestRateLimitFloodInMemory(t *testing.T) {
	const interval = slowInterval
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl, ahead := slowRateNodes(t, db)
		op, doc := newOperator(t, cl.nodes[0], "acme")
		request := func(node, want int) {
			t.Helper()
			_, err := on(op, cl.nodes[node]).Credit(ctx, "acme")
			if want == 200 {
				if err != nil {
					t.Fatalf("on node %d: %v", node, err)
				}
				return
			}
			wantCode(t, err, want, server.CodeRateLimited)
		}
		request(0, 200)
		request(0, 200)
		for range 3 {
			request(1, 429)
		}
		if n := server.SharedTakes(cl.nodes[1].srv); n != 1 {
			t.Fatalf("node 1 ran the shared bucket's statement %d times for 3 requests refused, want 1", n)
		}
		ahead.Store(int64(interval))
		if db == "postgres" { // the shared bucket reads the database's clock
			p := cl.nodes[0]
			p.exec(t, `UPDATE serve_rate_buckets SET tat = tat - $1 WHERE key_id = $2`, int64(interval), doc.ID)
		}
		request(1, 200)
		request(1, 429)
	})
}

// TestRateLimitClockStepsBack: a key's shared bucket whose tat is an hour
// ahead, as a clock (the database's, on Postgres) stepped an hour back
// leaves it, costs the key at most a burst: its next request is refused
// with a Retry-After of one interval, and one interval later it is served
// (then refused again: the limit holds). A refusal writes nothing, so the
// tat stayed an hour ahead and every request was refused for the hour
// (Retry-After 3600).
func TestRateLimitClockStepsBack(t *testing.T) {
	const interval = slowInterval
	onBothDatabases(t, func(t *testing.T, db string) {
		ctx := context.Background()
		cl, ahead := slowRateNodes(t, db)
		p := cl.nodes[1]
		op, doc := newOperator(t, p, "acme")
		if _, err := op.Credit(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		shift := func(d time.Duration) {
			t.Helper()
			p.exec(t, `UPDATE serve_rate_buckets SET tat = tat + $1 WHERE key_id = $2`, int64(d), doc.ID)
		}
		shift(time.Hour) // the clock stepped an hour back
		_, err := op.Credit(ctx, "acme")
		wantCode(t, err, 429, server.CodeRateLimited)
		if pr := (*server.Problem)(nil); errors.As(err, &pr) && pr.RetryAfter > int(interval/time.Second) {
			t.Fatalf("Retry-After %d s after the clock stepped an hour back, want at most one interval (%s)", pr.RetryAfter, interval)
		}
		ahead.Store(int64(interval))
		if db == "postgres" { // the shared bucket reads the database's clock
			shift(-interval)
		}
		if _, err := op.Credit(ctx, "acme"); err != nil {
			t.Fatalf("one interval after the refusal: %v", err)
		}
		_, err = op.Credit(ctx, "acme")
		wantCode(t, err, 429, server.CodeRateLimited)
	})
}

// TestNewRefusesBadRateLimit: New refuses a RateLimitScope it does not
// know and a rate that is not a finite number (an infinite one made every
// bucket refuse every request), naming the option.
func TestNewRefusesBadRateLimit(t *testing.T) {
	for _, c := range []struct {
		name  string
		tweak func(*server.Options)
		want  string
	}{
		{"scope", func(o *server.Options) { o.RateLimitScope = "planet" }, `RateLimitScope "planet"`},
		{"infinite rate", func(o *server.Options) { o.RateLimit.PerSecond = math.Inf(1) }, "RateLimit.PerSecond is +Inf"},
		{"rate not a number", func(o *server.Options) { o.RateLimit.PerSecond = math.NaN() }, "RateLimit.PerSecond is NaN"},
		{"cluster, infinite rate", func(o *server.Options) {
			o.RateLimitScope, o.RateLimit.PerSecond = server.RateLimitCluster, math.Inf(-1)
		}, "RateLimit.PerSecond is -Inf"},
		{"failed authentications", func(o *server.Options) { o.AuthFailLimit.PerSecond = math.Inf(1) }, "AuthFailLimit.PerSecond is +Inf"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := server.Options{DB: openSQLite(t, t.TempDir()), Runtime: newRuntime(t), HostKey: hostKey()}
			c.tweak(&opts)
			srv, err := server.New(context.Background(), opts)
			if err == nil {
				srv.Close(context.Background())
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v; want it to say %q", err, c.want)
			}
		})
	}
}
