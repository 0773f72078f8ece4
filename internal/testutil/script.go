package testutil

import (
	"encoding/hex"
	"fmt"
	"testing"
)

// The interpreting test guests (runtime's testdata/guests/scripted.wat and
// internal/adversarial's testdata hostile.wat, which extends it) run a
// script carried in their invocation; these build the ops both share and
// read what they log. See scripted.wat for the ops.

// Scratch addresses in the interpreting guests' memory that their
// interpreter does not use: a host call's name, payload and output.
const (
	ScriptNamePtr = 0x1000
	ScriptInPtr   = 0x2000
	ScriptOutPtr  = 0x4000
)

// OpCall calls host_call with the arguments p (six of them).
func OpCall(p ...uint32) string {
	s := "C"
	for _, v := range p {
		s += fmt.Sprintf("%08x", v)
	}
	return s
}

// OpWrite writes b into the guest's memory at addr.
func OpWrite(addr uint32, b []byte) string {
	return fmt.Sprintf("W%08x%08x%s", addr, len(b), hex.EncodeToString(b))
}

// OpHostCall writes name and payload into scratch memory and calls
// host_call with an output buffer of outCap bytes.
func OpHostCall(name, payload string, outCap uint32) string {
	return OpWrite(ScriptNamePtr, []byte(name)) + OpWrite(ScriptInPtr, []byte(payload)) +
		OpCall(ScriptNamePtr, uint32(len(name)), ScriptInPtr, uint32(len(payload)), ScriptOutPtr, outCap)
}

// OpTake is a take (host_call with no name and no payload): it copies the
// body the host parked into an output buffer of outCap bytes.
func OpTake(outCap uint32) string { return OpCall(0, 0, 0, 0, ScriptOutPtr, outCap) }

// DecodeLogEntry decodes one entry of an interpreting guest's log: the
// packed host_call result (abi.UnpackResult reads it) and the body the guest
// wrote, if any.
func DecodeLogEntry(tb testing.TB, e string) (uint64, []byte) {
	tb.Helper()
	if len(e) < 16 {
		tb.Fatalf("log entry %q is not a host_call result", e)
	}
	var v uint64
	if _, err := fmt.Sscanf(e[:16], "%016x", &v); err != nil {
		tb.Fatalf("log entry %q: %v", e, err)
	}
	body, err := hex.DecodeString(e[16:])
	if err != nil {
		tb.Fatalf("log entry %q: %v", e, err)
	}
	return v, body
}
