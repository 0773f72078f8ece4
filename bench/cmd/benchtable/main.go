// Command benchtable runs the wasmhooks benchmarks side by side with native
// Go and Extism, and prints one table with the figures' targets. `make bench`
// runs it; BENCHMARKS.md records its output.
//
//	go run ./cmd/benchtable [-run REGEXP] [-test.benchtime D] [-q]
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/bench"
)

func main() {
	testing.Init()
	run := flag.String("run", "", "only the cases whose names match this regular expression")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()
	var filter *regexp.Regexp
	if *run != "" {
		filter = regexp.MustCompile(*run)
	}
	if _, err := bench.Setup(); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	progress := os.Stderr
	if *quiet {
		progress = nil
	}
	rows := bench.Run(filter, progress)
	bench.Print(os.Stdout, rows)
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Fprintf(os.Stderr, "benchtable: %s failed: %s\n", r.Case.Name, strings.TrimSpace(r.Failure))
			os.Exit(1)
		}
	}
}
