package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/internal/hookcase"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// testSynopsis is test's synopsis, in its usage and the top-level one.
const testSynopsis = `  wasmhooks test [--hook FILE.wasm] [--run SUBSTR] [--fuel N] [--timeout D] [--update] [--cache-dir DIR] DIR
`

const testUsage = "usage:\n" + testSynopsis + `
Runs a hook over a folder of cases, one JSON file per case (DIR/*.json), through
the real runtime, with each case's capability replies mocked, and reports each
case whose decision differs from the expected one with a diff. Exit 0 when every
case passes, 1 when one fails, 2 for bad flags or an unreadable case.

A case (the format of testdata/corpus too):

  {
    "name": "aws key",                       // optional; default: the file's name
    "point": "message.outbound",             // the hook point
    "context": {"outgoing": "key AKIA..."},  // the traffic the hook sees
    "settings": {"...": "..."},              // optional: the hook's settings
    "unchecked_settings": false,             // optional: true skips the settings_schema
    "grants": ["llm.run"],                   // optional: without it every capability is granted
    "replies": {"llm.run": {"status": 0, "body": {"text": "..."}}},
    "want": {"action": "modify", "context": {"outgoing": "key [REDACTED] ok"}, "reason": "..."},
    "want_failure": false                    // true: the hook must fail (no "want")
  }

A host call to a capability not in "grants" is answered 3 (denied); one with no
mocked reply 1 (unknown_capability), except log.write, answered {} (its lines
are printed with a failure). A case's settings are checked against the
settings_schema of the manifest embedded in the module first, as a chain checks
a binding's when it is built: settings the schema refuses fail the case, named,
without running the hook, unless the case sets "unchecked_settings": true (for a
case that tests the hook's own checks of settings). --update rewrites each
case's "want" with the hook's decision: review the diff.
`

func cmdTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var (
		hookPath = fs.String("hook", "", "the hook module (.wasm) (default: DIR/../hook.wasm or DIR/hook.wasm, what `wasmhooks new`'s Makefile builds)")
		only     = fs.String("run", "", "run only the cases whose name or file contains this")
		fuel     = fs.Uint64("fuel", 0, "fuel budget of each case (default 400000000)")
		timeout  = fs.Duration("timeout", 0, "wall-clock limit of each case (default 2s)")
		update   = fs.Bool("update", false, "rewrite each case's \"want\" with the hook's decision")
		cacheDir = fs.String("cache-dir", defaultCacheDir(), "wazero's compilation cache directory; empty disables it")
	)
	if code, ok := parseFlags(fs, reorderArgs(fs, args), testUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, "wasmhooks test: one folder of cases is required\n"+testUsage)
		return exitUsage
	}
	dir := fs.Arg(0)
	if *hookPath == "" {
		for _, p := range []string{filepath.Join(dir, "..", "hook.wasm"), filepath.Join(dir, "hook.wasm")} {
			if _, err := os.Stat(p); err == nil {
				*hookPath = p
				break
			}
		}
		if *hookPath == "" {
			fmt.Fprintf(stderr, "wasmhooks test: no --hook, and neither %s nor %s exists (run make first?)\n",
				filepath.Join(dir, "..", "hook.wasm"), filepath.Join(dir, "hook.wasm"))
			return exitUsage
		}
	}
	cases, err := hookcase.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitUsage
	}
	wasm, err := runtime.ReadModuleFile(*hookPath, 0)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitRefused
	}
	pruneCache(*cacheDir, maxCacheBytes)
	rt, err := runtime.New(ctx, runtime.Config{CacheDir: *cacheDir})
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: %v\n", err)
		return exitRefused
	}
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, wasm)
	if err != nil {
		fmt.Fprintf(stderr, "wasmhooks test: the host refused %s: %v\n", *hookPath, err)
		return exitRefused
	}
	if mod.Manifest() == nil {
		fmt.Fprintf(stderr, "wasmhooks test: %s has no embedded manifest: the cases' settings are not checked against a settings_schema (wasmhooks manifest embed)\n", *hookPath)
	}
	passed, failed := 0, 0
	for i, c := range cases {
		if *only != "" && !strings.Contains(c.Name, *only) && !strings.Contains(c.File, *only) {
			continue
		}
		// Each case is its own hook (binding) to the runtime, so no warm
		// instance carries one case's state (say, patterns compiled from its
		// settings) into the next, as in a chain where bindings differ.
		out := hookcase.Run(ctx, rt, mod, c, "case-"+strconv.Itoa(i), nil, chain.ValidateSettings, runtime.Limits{Fuel: *fuel, Timeout: *timeout})
		msg := out.Problem
		if *update && out.Got != nil && !c.Failure {
			c.Want = out.Got
			msg = ""
			if err := c.Write(); err != nil {
				msg = err.Error()
			}
		}
		if msg == "" {
			passed++
			continue
		}
		failed++
		fmt.Fprintf(stdout, "--- FAIL: %s (%s)\n%s\n", c.Name, c.File, indent(msg))
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "FAIL: %d of %d cases failed (%s)\n", failed, passed+failed, *hookPath)
		return exitRefused
	}
	fmt.Fprintf(stdout, "ok: %d cases pass (%s)\n", passed, *hookPath)
	return exitOK
}

// reorderArgs lets the folder come before the flags (`wasmhooks test cases
// --hook h.wasm`), as the flag package stops at the first positional one.
func reorderArgs(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(flags, pos...)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
