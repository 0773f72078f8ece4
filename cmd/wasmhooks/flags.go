package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/abi"
)

// creditFlag is --credit: a tenant's available credit, "keep" (bill against
// the balance the state file holds), or unset (no billing). A negative
// balance is a usage error, never "unset": `--credit -5` used to disable
// billing silently.
type creditFlag struct {
	set  bool
	keep bool
	n    int64
}

func (c *creditFlag) String() string {
	switch {
	case c == nil || !c.set:
		return ""
	case c.keep:
		return "keep"
	}
	return strconv.FormatInt(c.n, 10)
}

func (c *creditFlag) Set(s string) error {
	if s == "keep" {
		c.set, c.keep, c.n = true, true, 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("must be a whole number of credit units, or keep")
	}
	if n < 0 {
		return errors.New("must not be negative (omit --credit to run without billing)")
	}
	c.set, c.keep, c.n = true, false, n
	return nil
}

// creditUsage is --credit's help text.
const creditUsage = "the tenant's available credit, at least 0, set in the state file (--state) before the command; or keep, to bill against what the state file holds; when set, llm.run is billed against it (default: no billing)"

// parseFlags parses a command's flags. --help (-h) prints the synopsis and
// every flag's help on stdout and exits 0; a bad flag prints them on stderr,
// after flag's own message, and exits 2. ok is false when the command must
// return code.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, where it belongs
	err := fs.Parse(args)
	if err == nil {
		return exitOK, true
	}
	w, code := stderr, exitUsage
	if errors.Is(err, flag.ErrHelp) {
		w, code = stdout, exitOK
	}
	fmt.Fprint(w, synopsis)
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	return code, false
}

// checkPoint refuses a hook point ABI v1 does not have, listing those it has.
func checkPoint(point string) error {
	if _, ok := abi.LookupPoint(point); ok {
		return nil
	}
	names := make([]string, 0, 10)
	for _, p := range abi.Points() {
		names = append(names, p.Name)
	}
	return fmt.Errorf("unknown hook point %q (the points are %s)", point, strings.Join(names, ", "))
}
