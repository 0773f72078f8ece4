package abi

import (
	"flag"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// update rewrites the golden files instead of comparing against them, as
// go/printer's tests do: go test ./abi -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with the golden file at path, or rewrites the file
// when -update is given.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	testutil.Golden(t, path, got, *update)
}
