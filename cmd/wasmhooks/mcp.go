package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/interceptor"
)

const mcpSynopsis = `  wasmhooks mcp --config interceptors.json [--http ADDR] [--tenant T] [--module-dir DIR]
                [--audit FILE.jsonl] [--key FILE] [--audit-checkpoint FILE] [--kv FILE]
`

const mcpUsage = "usage:\n" + mcpSynopsis + `
Serves the configuration's interceptors as an MCP server (SEP-2624
interceptors over the official Go SDK): on stdin/stdout by default, or over
streamable HTTP at ADDR (path /mcp) with --http. The SEP's methods are the
tools interceptors.list, interceptor.invoke and interceptor.executeChain.
Without --audit, audit records are not kept.
`

func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	config := fs.String("config", "", "the interceptor configuration (JSON); required")
	moduleDir := fs.String("module-dir", "", "where relative module paths are found (default: the configuration's directory)")
	tenant := fs.String("tenant", interceptor.DefaultTenant, "the tenant the traffic runs as")
	httpAddr := fs.String("http", "", "serve streamable HTTP at this address (path /mcp) instead of stdio")
	auditPath := fs.String("audit", "", "append audit records to this JSON-lines file")
	keyFile := fs.String("key", "", "the host key file that keys the audit chain (see chain --help)")
	checkpoint := fs.String("audit-checkpoint", "", "where the audit log's checkpoint is kept (default FILE.jsonl.checkpoint)")
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
	kvPath := fs.String("kv", "", kvUsage)
	if code, ok := parseFlags(fs, args, mcpUsage, stdout, stderr); !ok {
		return code
	}
	if *config == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks mcp: --config is required and no positional arguments are taken\n"+mcpUsage)
		return exitUsage
	}
	cfg, err := interceptor.LoadConfigFile(*config, *moduleDir)
	if err != nil {
		return fail(stdout, exitRefused, "invalid_config", "%v", err)
	}
	// Without --kv, the hooks' per-session state is a SessionKV: bounded,
	// the session idle longest forgotten, never a new session refused.
	h, cerr := openHost(ctx, hostFlags{cacheDir: *cacheDir, tenant: *tenant, kvPath: *kvPath, kv: &interceptor.SessionKV{}}, stderr)
	if cerr != nil {
		return cerr.print(stdout)
	}
	defer h.close()
	sink := interceptor.Discard
	if *auditPath != "" {
		key, err := loadHostKey(*keyFile, true)
		if err != nil {
			return newCLIError(exitRefused, "key", err).print(stdout)
		}
		cp := *checkpoint
		if cp == "" {
			cp = *auditPath + ".checkpoint"
		}
		fsink, err := audit.OpenFile(*auditPath, audit.FileOptions{Key: key, Checkpoint: cp})
		if err != nil {
			return newCLIError(exitRefused, "audit", err).print(stdout)
		}
		defer fsink.Close()
		sink = fsink
	}
	x, err := interceptor.New(ctx, cfg, interceptor.Options{
		Runtime: h.rt, HostCaller: h.runner, Audit: sink, Tenant: *tenant, Logger: h.logger,
	})
	if err != nil {
		return fail(stdout, exitRefused, "invalid_config", "%v", err)
	}
	defer x.Close(context.Background())
	srv := interceptor.NewServer(x, version)
	if *httpAddr == "" {
		if err := srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}); err != nil && ctx.Err() == nil {
			fmt.Fprintln(stderr, "wasmhooks mcp:", err)
			return exitRefused
		}
		return exitOK
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fail(stdout, exitUsage, "usage", "--http: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", interceptor.HTTPHandler(srv, interceptor.HTTPOptions{}))
	hs := newHTTPServer(mux) // serve's: headers bounded, idle connections closed
	fmt.Fprintf(stderr, "wasmhooks mcp: serving streamable HTTP at http://%s/mcp\n", ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "wasmhooks mcp:", err)
		return exitRefused
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
