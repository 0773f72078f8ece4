package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhooks/wasmhooks/abi"
)

// invocation is the per-invocation state host functions reach through the
// call's context (guestRun.inv). One instance serves one invocation at a
// time, so the parked slot (one per instance, per ABI.md) lives here and
// ends with the invocation.
type invocation struct {
	lim    Limits
	caller HostCaller
	who    abi.Caller

	// The fields below are touched only by host functions running on the
	// invocation's goroutine, and read by Invoke after the guest returned.
	parked       []byte
	parkedStatus abi.Status
	hasParked    bool

	calls     int        // non-take host calls made
	record    []HostCall // one per call counted in calls; Result.Calls
	takes     int        // takes made
	bytes     int        // host-call bytes used
	charged   int64      // credit charged by host calls
	violation *abi.Failure

	log logBuffer
}

// initState collects what a guest prints while it is being initialised.
type initState struct {
	log logBuffer
}

func (st *initState) tail() string {
	lines := st.log.lines
	if len(lines) == 0 {
		return ""
	}
	s := lines[len(lines)-1].Text
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// abiViolation records a violation and stops the guest. The panic value is
// recovered by wazero and surfaces as the error of the export call; the
// recorded Failure is what Invoke reports.
func abiViolation(inv *invocation, format string, args ...any) {
	f := &abi.Failure{Code: abi.FailABIViolation, Message: fmt.Sprintf(format, args...)}
	if inv != nil && inv.violation == nil {
		inv.violation = f
	}
	panic(f)
}

// hostCall implements hook_v1.host_call. See ABI.md.
func hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	namePtr, nameLen := uint32(stack[0]), uint32(stack[1])
	inPtr, inLen := uint32(stack[2]), uint32(stack[3])
	outPtr, outCap := uint32(stack[4]), uint32(stack[5])
	g := runFrom(ctx)
	var inv *invocation
	if g != nil {
		inv = g.inv
	}
	mem := mod.Memory()
	size := uint64(0)
	if mem != nil {
		size = uint64(mem.Size())
	}
	// Every pointer/length pair is checked before anything else, takes
	// included: an out-of-range pair is an ABI violation, never a status.
	for _, r := range [...]struct {
		what     string
		ptr, len uint32
	}{{"name", namePtr, nameLen}, {"payload", inPtr, inLen}, {"output buffer", outPtr, outCap}} {
		if !abi.InRange(r.ptr, r.len, size) {
			abiViolation(inv, "host_call %s [%d, %d+%d) is outside linear memory of %d bytes", r.what, r.ptr, r.ptr, r.len, size)
		}
	}
	if g != nil {
		// Charged like every host function (HostFunctionFuel), before
		// anything else is done; the bytes it moves are charged below.
		g.charge(HostFunctionFuel)
	}
	if inv == nil {
		stack[0] = deliver(nil, mem, deliverReply{abi.StatusNotInInvocation,
			abi.NewError(abi.StatusNotInInvocation, "host_call is not available outside an invocation (from _initialize or init)").Encode()}, outPtr, outCap)
		return
	}
	take := abi.IsTake(nameLen, inLen)
	// Past the deadline nothing more runs: a guest that spends little fuel
	// between host calls must not outlive it by looping on them. The first
	// take, a hook's read of its input as it starts, reads no clock for
	// this (a clock read is dear on some virtual machines): it changes
	// nothing outside the guest, and a guest past its deadline by then is
	// stopped at its next host call, by the interrupt, or when it returns.
	if !take || inv.takes > 0 {
		if f := g.interrupted(); f != nil {
			panic(f)
		}
	}
	if take {
		inv.takes++
		if !inv.hasParked {
			stack[0] = abi.PackResult(abi.StatusNoPending, 0)
			return
		}
		n := uint32(len(inv.parked))
		if n > outCap {
			stack[0] = abi.PackResult(abi.StatusBufferTooSmall, n)
			return
		}
		g.charge(uint64(n) * HostByteFuel)
		writeGuest(mem, outPtr, inv.parked)
		stack[0] = abi.PackResult(inv.parkedStatus, n)
		inv.parked, inv.hasParked = nil, false
		return
	}
	// A new call drops whatever was parked.
	inv.parked, inv.hasParked = nil, false
	reply := inv.call(g, mem, namePtr, nameLen, inPtr, inLen)
	if n := uint64(len(reply.body)); n <= uint64(outCap) {
		g.charge(n * HostByteFuel) // the copy into the guest's buffer
	}
	stack[0] = deliver(inv, mem, reply, outPtr, outCap)
}

// deliverReply is what a host call answers before it is written or parked.
type deliverReply struct {
	status abi.Status
	body   []byte
}

// HostCall reports one host call of an invocation (Result.Calls), takes
// excluded: what the hook asked for and what it was answered.
type HostCall struct {
	// Name is the capability name as the hook wrote it; "" when the call
	// was refused before the name was read (the name or the payload over
	// its limit, the byte budget spent), which nothing is charged for. The
	// hook chooses it: a name the runner does not know answers
	// StatusUnknownCapability.
	Name string `json:"name"`
	// Status is the status the hook was answered, the runtime's own
	// refusals (StatusRequestTooLarge, StatusQuotaExceeded,
	// StatusResultTooLarge, ...) included.
	Status abi.Status `json:"status"`
	// Charged is the credit the call was charged.
	Charged int64 `json:"charged,omitempty"`
	// Duration is how long the host took to answer the call.
	Duration time.Duration `json:"duration"`
}

// call serves one non-take host call and records it in inv.record. The
// calls past MaxHostCalls are answered StatusQuotaExceeded and neither
// counted nor recorded, so the record holds at most MaxHostCalls entries.
func (inv *invocation) call(g *guestRun, mem api.Memory, namePtr, nameLen, inPtr, inLen uint32) deliverReply {
	if inv.calls >= inv.lim.MaxHostCalls {
		return errReply(abi.StatusQuotaExceeded, "this invocation already made %d host calls, the limit", inv.lim.MaxHostCalls)
	}
	inv.calls++
	start := time.Now()
	name, charged, reply := inv.serve(g, mem, namePtr, nameLen, inPtr, inLen)
	inv.record = append(inv.record, HostCall{Name: name, Status: reply.status, Charged: charged, Duration: time.Since(start)})
	return reply
}

// serve is call after the call was counted: the name it read (if any), the
// credit charged and the reply.
func (inv *invocation) serve(g *guestRun, mem api.Memory, namePtr, nameLen, inPtr, inLen uint32) (string, int64, deliverReply) {
	if nameLen > abi.MaxNameBytes {
		return "", 0, errReply(abi.StatusRequestTooLarge, "capability name is %d bytes, over the limit of %d", nameLen, abi.MaxNameBytes)
	}
	if int64(inLen) > int64(inv.lim.MaxRequestBytes) {
		return "", 0, errReply(abi.StatusRequestTooLarge, "payload is %d bytes, over the limit of %d", inLen, inv.lim.MaxRequestBytes)
	}
	if int64(inv.bytes)+int64(nameLen)+int64(inLen) > int64(inv.lim.MaxHostCallBytes) {
		return "", 0, errReply(abi.StatusQuotaExceeded, "this invocation's host-call byte budget of %d is spent", inv.lim.MaxHostCallBytes)
	}
	inv.bytes += int(nameLen) + int(inLen)
	g.charge((uint64(nameLen) + uint64(inLen)) * HostByteFuel) // the copies out of the guest's memory
	name, _ := readGuestString(mem, namePtr, nameLen)
	payload, _ := readGuest(mem, inPtr, inLen)
	if inv.caller == nil {
		return name, 0, errReply(abi.StatusUnknownCapability, "no capability named %q", name)
	}
	call := &abi.Call{Name: name, Payload: payload, Seq: inv.calls, MaxResultBytes: inv.lim.MaxResultBytes, Caller: inv.who}
	reply := inv.caller.HostCall(g.hostContext(), call)
	inv.charged += reply.Charged
	if !reply.Status.Known() {
		return name, reply.Charged, errReply(abi.StatusCapabilityFailed, "capability %q failed", name)
	}
	if len(reply.Body) > inv.lim.MaxResultBytes {
		return name, reply.Charged, errReply(abi.StatusResultTooLarge, "result is %d bytes, over the limit of %d", len(reply.Body), inv.lim.MaxResultBytes)
	}
	inv.bytes += len(reply.Body)
	return name, reply.Charged, deliverReply{reply.Status, reply.Body}
}

// errReply is a reply of status s with an error object.
func errReply(s abi.Status, format string, args ...any) deliverReply {
	return deliverReply{s, abi.Errorf(s, format, args...).Encode()}
}

// deliver writes body into the guest's buffer when it fits, and parks it
// otherwise. Per ABI.md the body was written iff len <= out_cap.
// See RATIONALE.md#why-park-and-take-never-re-run.
func deliver(inv *invocation, mem api.Memory, r deliverReply, outPtr, outCap uint32) uint64 {
	n := uint32(len(r.body))
	if n <= outCap {
		writeGuest(mem, outPtr, r.body)
	} else if inv != nil {
		inv.parked, inv.parkedStatus, inv.hasParked = r.body, r.status, true
	}
	return abi.PackResult(r.status, n)
}

// LogLine is one line a hook wrote to stdout or stderr. Text is the raw line,
// never interpreted; render it escaped.
type LogLine struct {
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// logBuffer collects a hook's output, split into lines, up to a limit.
type logBuffer struct {
	mu        sync.Mutex // guards all fields; fd_write and Invoke run on one goroutine today, the lock keeps the buffer safe if a host function ever runs elsewhere
	limit     int
	used      int
	dropped   int
	lines     []LogLine
	partial   [2]strings.Builder
	truncated bool
}

// write adds p to the log of stream (0 stdout, 1 stderr) and returns the
// number of lines it completed.
func (b *logBuffer) write(stream int, p []byte) (lines int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.limit - b.used
	if room <= 0 {
		b.dropped += len(p)
		b.truncated = true
		return 0
	}
	if len(p) > room {
		b.dropped += len(p) - room
		b.truncated = true
		p = p[:room]
	}
	b.used += len(p)
	name := [2]string{"stdout", "stderr"}[stream]
	for len(p) > 0 {
		i := indexByte(p, '\n')
		if i < 0 {
			b.partial[stream].Write(p)
			return lines
		}
		b.partial[stream].Write(p[:i])
		b.lines = append(b.lines, LogLine{Stream: name, Text: b.partial[stream].String()})
		b.partial[stream].Reset()
		p = p[i+1:]
		lines++
	}
	return lines
}

func (b *logBuffer) flush() []LogLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, name := range [2]string{"stdout", "stderr"} {
		if b.partial[i].Len() > 0 {
			b.lines = append(b.lines, LogLine{Stream: name, Text: b.partial[i].String()})
			b.partial[i].Reset()
		}
	}
	return b.lines
}

func indexByte(p []byte, c byte) int {
	for i, x := range p {
		if x == c {
			return i
		}
	}
	return -1
}
