package main

import (
	"errors"
	"strconv"
)

// creditFlag is --credit: a tenant's balance, or unset (no billing). A
// negative balance is a usage error, never "unset": `--credit -5` used to
// disable billing silently.
type creditFlag struct {
	set bool
	n   int64
}

func (c *creditFlag) String() string {
	if c == nil || !c.set {
		return ""
	}
	return strconv.FormatInt(c.n, 10)
}

func (c *creditFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("must be a whole number of credit units")
	}
	if n < 0 {
		return errors.New("must not be negative (omit --credit to run without billing)")
	}
	c.set, c.n = true, n
	return nil
}

// creditUsage is --credit's help text.
const creditUsage = "the tenant's credit balance, at least 0; when set, llm.run is billed against it (default: no billing)"
