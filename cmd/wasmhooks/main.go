// Command wasmhooks runs untrusted WebAssembly hooks: the composition root
// that wires the runtime (wazero host) to the capability runner.
//
//	wasmhooks run --hook FILE.wasm [--point P] [--phase PHASE] [--input FILE|-] [--settings JSON|@FILE]
//	              [--grant cap,cap] [--credit N] [--fail closed|open] [--timeout D] ...
//	wasmhooks validate FILE.wasm
//	wasmhooks manifest embed --manifest FILE.json --out OUT.wasm IN.wasm
//	wasmhooks chain --config chain.json --point P [--input FILE|-] ...
//	wasmhooks chain resolve --config chain.json --approvals DIR --id ID --decision D
//	wasmhooks chain verify FILE.jsonl
//	wasmhooks mcp --config interceptors.json [--http ADDR] ...
//	wasmhooks serve [--addr HOST:PORT] [--data DIR] [--db postgres://...]
//	wasmhooks test [--hook FILE.wasm] DIR
//	wasmhooks new --lang go|rust|c|assemblyscript NAME
//	wasmhooks push|publish|sign|keygen|signing-key|bind|approvals|resolve|versions|call|admin ...
//
// `run` is a chain of one binding: both commands are chains over the host
// that wire.go wires. Output is JSON on stdout; `COMMAND --help` lists a
// command's flags. See README.md for the exit codes.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
)

const usage = "usage:\n" + runSynopsis + `  wasmhooks validate FILE.wasm
  wasmhooks manifest embed --manifest FILE.json --out OUT.wasm IN.wasm
` + chainSynopsis + mcpSynopsis + serveSynopsis + testSynopsis + newSynopsis + `
Over the platform's API (wasmhooks serve; --server, $WASMHOOKS_SERVER, $WASMHOOKS_KEY):
` + publisherSynopsis + operatorSynopsis + adminSynopsis + `  wasmhooks version

wasmhooks COMMAND --help lists the command's flags.
`

// Exit codes.
const (
	exitOK      = 0 // a decision was reached (possibly by the fail policy)
	exitRefused = 1 // the module (or its settings) could not be loaded
	exitUsage   = 2 // bad flags or input
)

// version is set by the linker in release builds
// (-ldflags "-X main.version=v1.2.3"); otherwise versionString reads the
// build's module version and VCS revision.
var version = ""

// versionString is what `wasmhooks version` prints after the name: the
// linker's version, else the main module's version (go install
// module@version), else the VCS revision the binary was built from (with
// "+dirty" for uncommitted changes), else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return "dev (" + bi.GoVersion + ")"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	out := "dev-" + rev + dirty
	if at != "" {
		out += " (" + at + ")"
	}
	return out
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdin, stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "manifest":
		return cmdManifest(args[1:], stdout, stderr)
	case "chain":
		return cmdChain(ctx, args[1:], stdin, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, args[1:], stdin, stdout, stderr)
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "test":
		return cmdTest(ctx, args[1:], stdout, stderr)
	case "new":
		return cmdNew(args[1:], stdout, stderr)
	case "keygen":
		return cmdKeygen(args[1:], stdout, stderr)
	case "push", "publish", "sign", "bind", "approvals", "resolve", "versions", "call":
		return runVerb(ctx, apiVerb(args[0]), args[1:], stdin, stdout, stderr)
	case "signing-key":
		return runGroup(ctx, "signing-key", signingKeyVerbs(), args[1:], stdin, stdout, stderr)
	case "admin":
		return runGroup(ctx, "admin", adminVerbs(), args[1:], stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "wasmhooks", versionString())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "wasmhooks: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// errorDoc is the JSON printed when a command fails.
type errorDoc struct {
	Error errorBody `json:"error"`
	Info  any       `json:"info,omitempty"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func fail(w io.Writer, exit int, code, format string, args ...any) int {
	printJSON(w, errorDoc{Error: errorBody{Code: code, Message: fmt.Sprintf(format, args...)}})
	return exit
}
