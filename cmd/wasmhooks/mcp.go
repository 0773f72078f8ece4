package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/interceptor"
)

const mcpSynopsis = `  wasmhooks mcp --config interceptors.json [--http ADDR [--token-file FILE | --insecure-no-auth]]
                [--tenant T] [--module-dir DIR] [--audit FILE.jsonl] [--key FILE]
                [--audit-checkpoint FILE] [--kv FILE]
`

// envMCPToken is where `wasmhooks mcp --http` reads its bearer token
// without --token-file.
const envMCPToken = "WASMHOOKS_MCP_TOKEN"

const mcpUsage = "usage:\n" + mcpSynopsis + `
Serves the configuration's interceptors as an MCP server (SEP-2624
interceptors over the official Go SDK): on stdin/stdout by default, or over
streamable HTTP at ADDR (path /mcp) with --http. The SEP's methods are the
tools interceptors.list, interceptor.invoke and interceptor.executeChain.
Without --audit, audit records are not kept.

Over HTTP every request must carry Authorization: Bearer TOKEN, the token
read from --token-file (a file only its owner can read; trimmed) or else
from $WASMHOOKS_MCP_TOKEN (--token-file wins when both are given; the
variable set but blank is refused); it must be at least 32 bytes. A request
without it, or with two Authorization headers, at any path, is answered 401
and reaches no session. A request's body has 2 minutes to arrive, or its
connection is closed. Without a token, --http serves only a loopback
address, with a warning: any local process can run calls; another address
is refused unless --insecure-no-auth says that anyone who reaches it may.
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
	tokenFile := fs.String("token-file", "", "with --http, the bearer token every request must carry: a file only its owner can read (default $"+envMCPToken+")")
	insecure := fs.Bool("insecure-no-auth", false, "with --http and no token, serve a non-loopback address anyway: anyone who reaches it runs calls")
	if code, ok := parseFlags(fs, args, mcpUsage, stdout, stderr); !ok {
		return code
	}
	if *config == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, "wasmhooks mcp: --config is required and no positional arguments are taken\n"+mcpUsage)
		return exitUsage
	}
	var ln net.Listener
	var token string
	if *httpAddr != "" {
		var err error
		if ln, token, err = listenMCP(*httpAddr, *tokenFile, *insecure, stderr); err != nil {
			return fail(stdout, exitUsage, "usage", "%v", err)
		}
		defer ln.Close()
	} else if *tokenFile != "" || *insecure {
		return fail(stdout, exitUsage, "usage", "--token-file and --insecure-no-auth apply only with --http")
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
	hs := mcpHTTPServer(srv, interceptor.HTTPOptions{Token: token})
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

// mcpHTTPServer is the http.Server of `wasmhooks mcp --http`: srv's
// streamable HTTP transport at /mcp with opts' bounds, serve's bounds on
// headers and idle connections (newHTTPServer). The token and the body's
// bound apply before routing, so a client without the token gets no answer
// but the 401 (no 404, no redirect, no OPTIONS *), which never waits for
// a body (TestServeCLIHTTPRefusalHoldsNothing), and a holder's body to any
// path is bounded in time (TestMCPHTTPBodyTimeout).
func mcpHTTPServer(srv *mcp.Server, opts interceptor.HTTPOptions) *http.Server {
	inner := opts
	inner.Token = "" // checked before routing
	mux := http.NewServeMux()
	mux.Handle("/mcp", interceptor.HTTPHandler(srv, inner))
	hs := newHTTPServer(interceptor.BoundBodies(opts.BodyTimeout, interceptor.BearerAuth(opts.Token, mux)))
	hs.DisableGeneralOptionsHandler = true
	return hs
}

// listenMCP listens at addr for `wasmhooks mcp --http` and returns the
// bearer token the requests must carry: tokenFile's, else $WASMHOOKS_MCP_TOKEN's
// (readSecret), at least interceptor.MinHTTPTokenBytes; the variable set
// but blank is refused, not taken for no token. Without a token it
// listens on a loopback address only, with a warning on stderr, unless
// insecure; a token and insecure together are refused, as contradicting.
func listenMCP(addr, tokenFile string, insecure bool, stderr io.Writer) (net.Listener, string, error) {
	token, err := readSecret("--token-file", tokenFile, envMCPToken)
	if err != nil {
		return nil, "", err
	}
	from := "--token-file " + tokenFile
	if tokenFile == "" {
		from = "$" + envMCPToken
	}
	if _, set := os.LookupEnv(envMCPToken); set && tokenFile == "" && token == "" {
		// Set but blank (an unset variable expanded into it, say): a
		// token was meant, so serving without one would fail open.
		return nil, "", fmt.Errorf("$%s is set but empty: give the token, or unset it to serve loopback without one", envMCPToken)
	}
	if token != "" {
		if err := interceptor.CheckHTTPToken(token); err != nil {
			return nil, "", fmt.Errorf("%s: %v", from, err)
		}
		if insecure {
			return nil, "", fmt.Errorf("--insecure-no-auth contradicts the token of %s: give one or the other", from)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--http: %v", err)
	}
	if token != "" {
		return ln, token, nil
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		if !insecure {
			ln.Close()
			return nil, "", fmt.Errorf("--http %s listens beyond loopback (%s) without authentication: give --token-file FILE or $%s, or --insecure-no-auth", addr, ln.Addr(), envMCPToken)
		}
		fmt.Fprintf(stderr, "wasmhooks mcp: warning: --insecure-no-auth: anyone who reaches %s opens sessions and runs calls\n", ln.Addr())
		return ln, "", nil
	}
	fmt.Fprintf(stderr, "wasmhooks mcp: warning: no token (--token-file or $%s): any local process that reaches %s opens sessions and runs calls\n", envMCPToken, ln.Addr())
	return ln, "", nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
