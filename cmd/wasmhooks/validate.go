package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxPages := fs.Uint("max-memory-pages", runtime.DefaultMaxMemoryPages, "refuse modules whose minimum memory is larger, in 64 KiB pages")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: wasmhooks validate FILE.wasm")
		return exitUsage
	}
	wasm, err := runtime.ReadModuleFile(fs.Arg(0), 0)
	if err != nil {
		return fail(stdout, exitRefused, "unreadable_module", "%v", err)
	}
	info, err := runtime.Validate(wasm, runtime.ValidateOptions{MaxMemoryPages: uint32(*maxPages)})
	if err != nil {
		doc := errorDoc{Error: errorBody{Code: string(runtime.Code(err)), Message: err.Error()}}
		if info != nil {
			doc.Info = info
		}
		printJSON(stdout, doc)
		return exitRefused
	}
	if err := checkSettingsSchema(info.Manifest); err != nil {
		printJSON(stdout, errorDoc{Error: errorBody{Code: settingsCode(err), Message: err.Error()}, Info: info})
		return exitRefused
	}
	printJSON(stdout, map[string]any{"ok": true, "module": info})
	return exitOK
}

func cmdManifest(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "embed" {
		fmt.Fprintln(stderr, "usage: wasmhooks manifest embed --manifest FILE.json --out OUT.wasm IN.wasm")
		return exitUsage
	}
	fs := flag.NewFlagSet("manifest embed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	manPath := fs.String("manifest", "", "the manifest JSON file")
	outPath := fs.String("out", "", "where to write the module with its manifest")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	if *manPath == "" || *outPath == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: wasmhooks manifest embed --manifest FILE.json --out OUT.wasm IN.wasm")
		return exitUsage
	}
	wasm, err := runtime.ReadModuleFile(fs.Arg(0), 0)
	if err != nil {
		return fail(stdout, exitRefused, "unreadable_module", "%v", err)
	}
	man, err := runtime.ReadFileLimit(*manPath, abi.MaxManifestBytes, "manifest_bytes")
	if err != nil {
		return fail(stdout, exitRefused, "unreadable_manifest", "%v", err)
	}
	out, err := runtime.EmbedManifest(wasm, man)
	if err != nil {
		// The input module's fault (not WebAssembly) is invalid_module,
		// the manifest's invalid_manifest.
		var ve *runtime.ValidationError
		if errors.As(err, &ve) {
			return fail(stdout, exitRefused, string(runtime.Code(err)), "%s: %v", fs.Arg(0), err)
		}
		return fail(stdout, exitRefused, "invalid_manifest", "%v", err)
	}
	info, err := runtime.Validate(out, runtime.ValidateOptions{})
	if err != nil {
		return fail(stdout, exitRefused, string(runtime.Code(err)), "%v", err)
	}
	if err := checkSettingsSchema(info.Manifest); err != nil {
		return fail(stdout, exitRefused, settingsCode(err), "%v", err)
	}
	if err := os.WriteFile(*outPath, out, 0o644); err != nil {
		return fail(stdout, exitRefused, "write_failed", "%v", err)
	}
	return exitOK
}
