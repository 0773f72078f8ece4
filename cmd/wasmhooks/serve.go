package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/postgres"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

const serveSynopsis = "  wasmhooks serve [--addr HOST:PORT] [--data DIR] [--db postgres://...]\n"

const serveUsage = "usage:\n" + serveSynopsis + `
Serves the hook platform over HTTP (JSON under /v1/, /openapi.json, /healthz,
/readyz). Without --db everything is kept under --data: state.db (SQLite:
tenants, keys, modules, bindings, runs, credit, approvals, audit chains),
host.key (seals approvals, keys the audit chains) and cache/. With --db the
state is in that Postgres database instead, and several serve processes on
it are one platform; each still keeps host.key and cache/ under its --data,
and every node needs the same host.key (copy it; a node with another is
refused). The first start prints a one-time admin key on stderr, unless
$WASMHOOKS_ADMIN_KEY gives one. A --data of the first serve is upgraded at
start: the pending approvals of its approvals/ are imported into the
database, and the directory renamed approvals.imported-UNIX; its audit.jsonl
is kept, no longer appended to.
`

// shutdownGrace bounds how long a shutdown waits for requests in flight.
const shutdownGrace = 60 * time.Second

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "the address to listen on")
	metricsAddr := fs.String("metrics-addr", "", "also serve the Prometheus metrics, without a key, at /metrics on this address (a private one: only the scraper should reach it); on --addr they need an admin key")
	data := fs.String("data", "wasmhooks-data", "the data directory")
	dbURL := fs.String("db", "", "a Postgres database (postgres://user@host:port/db?...) instead of SQLite under --data")
	scope := fs.String("rate-limit-scope", "auto", "where each API key's rate limit is kept: cluster (in the database: every node on it shares one bucket per key), node (in memory: each node allows the rate), or auto (cluster with --db, node on SQLite; processes sharing one SQLite file want cluster)")
	if code, ok := parseFlags(fs, args, serveUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprint(stderr, serveUsage)
		return exitUsage
	}
	rateScope := server.RateLimitScope(*scope)
	switch rateScope {
	case "auto":
		rateScope = "" // the server's default for its database
	case server.RateLimitCluster, server.RateLimitNode:
	default:
		fmt.Fprintf(stderr, "wasmhooks serve: --rate-limit-scope is auto, cluster or node, not %q\n", *scope)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return fail(stdout, exitRefused, "data", "%v", err)
	}
	keyPath := filepath.Join(*data, "host.key")
	key, err := loadHostKey(keyPath, true)
	if err != nil {
		return fail(stdout, exitRefused, "key", "%v", err)
	}
	var db *store.DB
	if *dbURL != "" {
		db, err = postgres.Open(ctx, *dbURL)
	} else {
		db, err = sqlite.Open(ctx, filepath.Join(*data, "state.db"))
	}
	if err != nil {
		return fail(stdout, exitRefused, "store", "%v", err)
	}
	defer db.Close()
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: filepath.Join(*data, "cache"), Logger: logger})
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	defer rt.Close(context.Background())
	srv, err := server.New(ctx, server.Options{DB: db, Runtime: rt, HostKey: key, DataDir: *data,
		AdminKey: os.Getenv("WASMHOOKS_ADMIN_KEY"), Logger: logger, RateLimitScope: rateScope})
	if err != nil {
		return fail(stdout, exitRefused, "internal", "%v", err)
	}
	if k := srv.BootstrapKey(); k != "" {
		fmt.Fprintf(stderr, "wasmhooks serve: the admin key (shown once, stored only hashed):\n%s\n", k)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(stdout, exitRefused, "listen", "%v", err)
	}
	if *metricsAddr != "" {
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fail(stdout, exitRefused, "listen", "%v", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", srv.MetricsHandler())
		ms := newHTTPServer(mux)
		go func() { _ = ms.Serve(mln) }()
		defer ms.Close()
		logger.Info("wasmhooks serve: metrics without a key", "metrics", "http://"+mln.Addr().String()+"/metrics")
	}
	hs := newHTTPServer(srv.Handler())
	logger.Info("wasmhooks serve: listening", "addr", ln.Addr().String(), "data", *data, "db", db.Dialect().Name())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fail(stdout, exitRefused, "serve", "%v", err)
		}
	case <-ctx.Done():
	}
	// Graceful: readiness fails and long polls end, then Shutdown waits for
	// every request in flight (runs among them) to finish.
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		logger.Error("wasmhooks serve: shutdown", "err", err)
	}
	_ = srv.Close(sctx)
	return exitOK
}

// serveIdleTimeout closes a keep-alive connection idle that long (2 min).
// Without it (http.Server's zero IdleTimeout and ReadTimeout) an idle
// connection is kept for ever: ReadHeaderTimeout starts only at the next
// request's first byte, so anyone, without a key, could hold connections
// until the process runs out of file descriptors.
const serveIdleTimeout = 2 * time.Minute

// newHTTPServer is serve's http.Server: headers bounded in time and size,
// idle connections closed.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: serveIdleTimeout, MaxHeaderBytes: 64 << 10}
}
