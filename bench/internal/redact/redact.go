// Package redact is the redaction every variant of the side-by-side
// benchmark performs: native Go, the Go-SDK hook, the WAT hook on our ABI and
// the Extism plugin (the two WAT guests implement the same loop by hand).
//
// A secret is "AKIA" followed by 16 characters of [0-9A-Z] (the shape of an
// AWS access key id). Scanning goes left to right; each secret is replaced
// by "[REDACTED]" and scanning resumes after it. There is no word-boundary
// check, so all four variants agree byte for byte.
package redact

import (
	"strconv"
	"strings"
)

// Replacement replaces each secret.
const Replacement = "[REDACTED]"

// secretLen is len("AKIA") + 16.
const secretLen = 20

// Redact returns s with every secret replaced, and how many were replaced.
// When none is found it returns s itself without allocating.
func Redact(s string) (string, int) {
	first := find(s, 0)
	if first < 0 {
		return s, 0
	}
	out := make([]byte, 0, len(s))
	n, last := 0, 0
	for i := first; i >= 0; i = find(s, last) {
		out = append(out, s[last:i]...)
		out = append(out, Replacement...)
		last = i + secretLen
		n++
	}
	out = append(out, s[last:]...)
	return string(out), n
}

// find returns the index of the first secret in s at or after from, or -1.
func find(s string, from int) int {
	for from+secretLen <= len(s) {
		i := strings.Index(s[from:], "AKIA")
		if i < 0 {
			return -1
		}
		i += from
		if i+secretLen > len(s) {
			return -1
		}
		if tail(s[i+4 : i+secretLen]) {
			return i
		}
		from = i + 1
	}
	return -1
}

func tail(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Reason is the decision's reason for n secrets: "redacted 1 secret",
// "redacted 2 secrets".
func Reason(n int) string {
	if n == 1 {
		return "redacted 1 secret"
	}
	return "redacted " + strconv.Itoa(n) + " secrets"
}
