// Package abi is the contract between the wasmhooks host and an untrusted hook:
// the names of the one import and the exports, the host_call status codes and
// their stable lower-case error codes, result packing, strict JSON, the
// invocation, decision and manifest documents, and the closed list of failure
// codes the host reports when an invocation reaches no decision.
//
// The normative text is ABI.md at the repository root. This package implements
// it, imports only the standard library, and builds both for the host and for
// GOOS=wasip1, because the guest SDK imports it too.
package abi

import (
	"fmt"
	"maps"
	"strings"
)

// Version numbers of the ABI implemented by this package. A host that speaks
// version 1.N accepts every module written against 1.M for M <= N.
const (
	// Major is the ABI major version: the suffix of ImportModule and
	// HandleExport, and the "abi" field of the invocation document.
	Major = 1
	// Minor is the ABI minor version. Minor versions only add. 1.1 added
	// metering (ABI.md#metering); 1.2 added the notify action, the
	// lifecycle hook points, seed 002's decision words and short_circuit
	// (ABI.md#versions).
	Minor = 2
)

// Names of the import, the exports and the custom section defined by ABI v1.
const (
	// ImportModule is the module name of the one import a hook may use.
	ImportModule = "hook_v1"
	// HostCallImport is the field name of the host_call import.
	HostCallImport = "host_call"
	// MemoryExport is the name of the exported linear memory.
	MemoryExport = "memory"
	// HandleExport is the name of the exported entry point,
	// (func (param i32) (result i64)).
	HandleExport = "hook_v1_handle"
	// InitializeExport is the optional reactor initialiser, called once
	// per instance before the first invocation.
	InitializeExport = "_initialize"
	// ManifestSection is the name of the custom section holding the
	// hook's manifest.
	ManifestSection = "hook_v1.manifest"
	// WASIModule is the module name of the WASI preview 1 imports served
	// as inert plumbing.
	WASIModule = "wasi_snapshot_preview1"
)

// WASIFunctions returns the fixed set of wasi_snapshot_preview1 functions a
// hook may import, mapped to their signatures; the map is a copy the caller
// may keep or change. The set is the union of what Go's wasip1 port and
// wasi-libc's stdio import. the union of what Go's wasip1 port and wasi-libc's stdio import.
// The host serves them without files, sockets, environment or arguments.
//
// Go's runtime alone imports args_get, args_sizes_get, environ_get,
// environ_sizes_get, clock_time_get, fd_write, poll_oneoff, proc_exit,
// random_get and sched_yield. Any Go program that links package os (fmt
// does, and so does this package) adds fd_close, fd_fdstat_get,
// fd_fdstat_set_flags, fd_prestat_get and fd_prestat_dir_name, the last two
// from package syscall's scan for preopened directories at init. wasi-libc's
// stdio adds fd_seek. ABI.md says how each one is served.
//
// The value is the function's signature in WebAssembly text form, which the
// host checks at load.
func WASIFunctions() map[string]string { return maps.Clone(wasiFunctions) }

// WASISignature returns the signature of the WASI function name, in the form
// WASIFunctions gives, and whether a hook may import it at all.
func WASISignature(name string) (sig string, ok bool) {
	sig, ok = wasiFunctions[name]
	return sig, ok
}

// wasiFunctions is the set WASIFunctions copies; it never changes.
var wasiFunctions = map[string]string{
	"args_get":            "(i32, i32) -> i32",
	"args_sizes_get":      "(i32, i32) -> i32",
	"environ_get":         "(i32, i32) -> i32",
	"environ_sizes_get":   "(i32, i32) -> i32",
	"clock_time_get":      "(i32, i64, i32) -> i32",
	"fd_close":            "(i32) -> i32",
	"fd_fdstat_get":       "(i32, i32) -> i32",
	"fd_fdstat_set_flags": "(i32, i32) -> i32",
	"fd_prestat_get":      "(i32, i32) -> i32",
	"fd_prestat_dir_name": "(i32, i32, i32) -> i32",
	"fd_seek":             "(i32, i64, i32, i32) -> i32",
	"fd_write":            "(i32, i32, i32, i32) -> i32",
	"poll_oneoff":         "(i32, i32, i32, i32) -> i32",
	"proc_exit":           "(i32) -> ()",
	"random_get":          "(i32, i32) -> i32",
	"sched_yield":         "() -> i32",
}

// HostCallSignature is the signature of hook_v1.host_call in the same form.
const HostCallSignature = "(i32, i32, i32, i32, i32, i32) -> i64"

// HandleSignature is the signature of hook_v1_handle in the same form.
const HandleSignature = "(i32) -> i64"

// Status is the high half of host_call's result. Its values are stable.
type Status uint32

// The host_call status codes of ABI v1. See ABI.md.
const (
	StatusOK                 Status = 0
	StatusUnknownCapability  Status = 1
	StatusInvalidRequest     Status = 2
	StatusDenied             Status = 3
	StatusInsufficientCredit Status = 4
	StatusCapabilityFailed   Status = 5
	StatusResultTooLarge     Status = 6
	StatusRequestTooLarge    Status = 7
	StatusBufferTooSmall     Status = 8
	StatusNoPending          Status = 9
	StatusQuotaExceeded      Status = 10
	StatusNotInInvocation    Status = 11
	StatusRateLimited        Status = 12
)

var statusNames = [...]string{
	StatusOK:                 "OK",
	StatusUnknownCapability:  "UNKNOWN_CAPABILITY",
	StatusInvalidRequest:     "INVALID_REQUEST",
	StatusDenied:             "DENIED",
	StatusInsufficientCredit: "INSUFFICIENT_CREDIT",
	StatusCapabilityFailed:   "CAPABILITY_FAILED",
	StatusResultTooLarge:     "RESULT_TOO_LARGE",
	StatusRequestTooLarge:    "REQUEST_TOO_LARGE",
	StatusBufferTooSmall:     "BUFFER_TOO_SMALL",
	StatusNoPending:          "NO_PENDING",
	StatusQuotaExceeded:      "QUOTA_EXCEEDED",
	StatusNotInInvocation:    "NOT_IN_INVOCATION",
	StatusRateLimited:        "RATE_LIMITED",
}

// statusCodes holds each status's Code: its name in lower case.
var statusCodes = func() (codes [len(statusNames)]string) {
	for i, name := range statusNames {
		codes[i] = strings.ToLower(name)
	}
	return codes
}()

// Statuses returns every status defined by this version, in order.
func Statuses() []Status {
	out := make([]Status, len(statusNames))
	for i := range statusNames {
		out[i] = Status(i)
	}
	return out
}

// Known reports whether s is a status defined by this version.
func (s Status) Known() bool { return uint64(s) < uint64(len(statusNames)) }

// String returns the upper-case name of the status, as in ABI.md.
func (s Status) String() string {
	if s.Known() {
		return statusNames[s]
	}
	return fmt.Sprintf("STATUS_%d", uint32(s))
}

// Code returns the stable lower-case error code of the status, the "code"
// field of the error object a failing host_call returns.
func (s Status) Code() string {
	if s.Known() {
		return statusCodes[s]
	}
	return fmt.Sprintf("status_%d", uint32(s))
}

// StatusFromCode returns the status whose Code is code.
func StatusFromCode(code string) (Status, bool) {
	for i, c := range statusCodes {
		if c == code {
			return Status(i), true
		}
	}
	return 0, false
}

// PackResult packs a host_call result: (status << 32) | length.
func PackResult(s Status, length uint32) uint64 {
	return uint64(s)<<32 | uint64(length)
}

// UnpackResult is the inverse of PackResult.
func UnpackResult(v uint64) (Status, uint32) {
	return Status(v >> 32), uint32(v)
}

// PackPtrLen packs the result of hook_v1_handle: (ptr << 32) | length.
func PackPtrLen(ptr, length uint32) uint64 {
	return uint64(ptr)<<32 | uint64(length)
}

// UnpackPtrLen is the inverse of PackPtrLen.
func UnpackPtrLen(v uint64) (ptr, length uint32) {
	return uint32(v >> 32), uint32(v)
}

// IsTake reports whether a host_call with these lengths is a take: a call
// with an empty name and an empty payload that fetches the parked body.
func IsTake(nameLen, inLen uint32) bool { return nameLen == 0 && inLen == 0 }

// InRange reports whether [ptr, ptr+length) lies inside a linear memory of
// size bytes. The arithmetic is done in 64 bits, so it never wraps.
func InRange(ptr, length uint32, size uint64) bool {
	return uint64(ptr)+uint64(length) <= size
}
