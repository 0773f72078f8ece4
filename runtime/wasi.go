package runtime

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// WASI preview 1 errno values used here.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNotsup  = 58
	errnoSpipe   = 70
)

// Caps on the work of one WASI call. With them, and the fuel each call is
// charged (see HostFunctionFuel), no host function does more than about a
// millisecond of work between two looks at the deadline. SECURITY.md lists
// them.
const (
	// MaxRandomBytes bounds one random_get call (64 KiB); a longer one
	// fails with EINVAL, as getrandom(2) callers expect of a short
	// source. Go's runtime and crypto/rand ask for much less.
	MaxRandomBytes = 1 << 16
	// MaxWriteIovecs bounds the iovecs of one fd_write call (1024, POSIX's
	// IOV_MAX, which wasi-libc and Rust's std also assume); more fail with
	// EINVAL, as writev(2) does.
	MaxWriteIovecs = 1024
	// MaxWriteBytes bounds the bytes one fd_write call takes (1 MiB): it
	// writes the first MaxWriteBytes and reports that many written, a
	// short write, which Go's os package and wasi-libc's stdio complete by
	// writing the rest.
	MaxWriteBytes = 1 << 20
	// MaxPollSubscriptions bounds the subscriptions of one poll_oneoff
	// call (1024); more fail with EINVAL, as poll(2) does past its limit.
	// Go's runtime subscribes one clock and one subscription per fd it
	// waits on; a hook has no fds to wait on.
	MaxPollSubscriptions = 1024
)

// maxPollWait bounds one poll_oneoff sleep when the context has no deadline.
const maxPollWait = 10 * time.Second

var startTime = time.Now()

// The sources of clock_time_get, poll_oneoff's clock and random_get; a test
// makes them deterministic to show that fuel depends on nothing else.
var (
	readRandom = rand.Read
	clockNow   = time.Now
)

// defineWASI defines the fixed WASI set of abi.WASIFunctions as inert
// plumbing: no files, no sockets, no environment, no arguments. stdout and
// stderr go to the invocation's capped log. See ABI.md#wasi.
// See RATIONALE.md#why-our-own-wasi-and-why-this-set.
func defineWASI(b wazero.HostModuleBuilder) {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	// Every call is charged HostFunctionFuel before it runs; the functions
	// that do more work charge it themselves, before doing it.
	def := func(name string, params, results []api.ValueType, f api.GoModuleFunc) {
		charged := func(ctx context.Context, mod api.Module, stack []uint64) {
			chargeHost(ctx, HostFunctionFuel)
			f(ctx, mod, stack)
		}
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(charged), params, results).Export(name)
	}
	// Empty argument and environment lists.
	empty := func(_ context.Context, mod api.Module, stack []uint64) {
		stack[0] = errnoSuccess
	}
	emptySizes := func(_ context.Context, mod api.Module, stack []uint64) {
		mem := mod.Memory()
		if mem == nil || !mem.WriteUint32Le(uint32(stack[0]), 0) || !mem.WriteUint32Le(uint32(stack[1]), 0) {
			stack[0] = errnoFault
			return
		}
		stack[0] = errnoSuccess
	}
	def("args_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, empty)
	def("args_sizes_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, emptySizes)
	def("environ_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, empty)
	def("environ_sizes_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, emptySizes)
	def("clock_time_get", []api.ValueType{i32, i64, i32}, []api.ValueType{i32}, clockTimeGet)
	def("fd_close", []api.ValueType{i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = errnoBadf
	})
	def("fd_seek", []api.ValueType{i32, i64, i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		if fd := uint32(stack[0]); fd <= 2 {
			stack[0] = errnoSpipe
			return
		}
		stack[0] = errnoBadf
	})
	def("fd_fdstat_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, fdFdstatGet)
	def("fd_fdstat_set_flags", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		if fd := uint32(stack[0]); fd <= 2 {
			stack[0] = errnoNotsup
			return
		}
		stack[0] = errnoBadf
	})
	// No preopened directories: Go's startup scans fds from 3 until EBADF.
	def("fd_prestat_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = errnoBadf
	})
	def("fd_prestat_dir_name", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = errnoBadf
	})
	def("fd_write", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, fdWrite)
	def("poll_oneoff", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, pollOneoff)
	def("proc_exit", []api.ValueType{i32}, nil, func(ctx context.Context, mod api.Module, stack []uint64) {
		code := uint32(stack[0])
		_ = mod.CloseWithExitCode(ctx, code)
		panic(sys.NewExitError(code))
	})
	def("random_get", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(ctx context.Context, mod api.Module, stack []uint64) {
		ptr, n := uint32(stack[0]), uint32(stack[1])
		mem := mod.Memory()
		if mem == nil || n > MaxRandomBytes {
			stack[0] = errnoInval
			return
		}
		buf, ok := mem.Read(ptr, n)
		if !ok {
			stack[0] = errnoFault
			return
		}
		chargeHost(ctx, uint64(n)*HostByteFuel)
		_, _ = readRandom(buf)
		stack[0] = errnoSuccess
	})
	def("sched_yield", nil, []api.ValueType{i32}, func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = errnoSuccess
	})
}

func now(clock uint32) (uint64, bool) {
	switch clock {
	case 0: // realtime
		return uint64(clockNow().UnixNano()), true
	case 1: // monotonic
		return uint64(clockNow().Sub(startTime).Nanoseconds()) + 1, true
	}
	return 0, false
}

// fdFdstatGet describes fds 0 to 2 as character devices (stdin readable,
// stdout and stderr writable) and every other fd as bad.
func fdFdstatGet(_ context.Context, mod api.Module, stack []uint64) {
	fd, ptr := uint32(stack[0]), uint32(stack[1])
	if fd > 2 {
		stack[0] = errnoBadf
		return
	}
	const (
		filetypeCharacterDevice = 2
		rightFdRead             = 1 << 1
		rightFdWrite            = 1 << 6
	)
	rights := uint64(rightFdWrite)
	if fd == 0 {
		rights = rightFdRead
	}
	// Written in place: a buffer passed to mem.Write would escape.
	mem := mod.Memory()
	if mem == nil {
		stack[0] = errnoFault
		return
	}
	st, ok := mem.Read(ptr, 24)
	if !ok {
		stack[0] = errnoFault
		return
	}
	clear(st)
	st[0] = filetypeCharacterDevice
	binary.LittleEndian.PutUint64(st[8:], rights)
	stack[0] = errnoSuccess
}

func clockTimeGet(_ context.Context, mod api.Module, stack []uint64) {
	t, ok := now(uint32(stack[0]))
	if !ok {
		stack[0] = errnoInval
		return
	}
	mem := mod.Memory()
	if mem == nil || !mem.WriteUint64Le(uint32(stack[2]), t) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// writeChunk is how many bytes fd_write charges and writes at a time: at
// most half a millisecond of work, even when every byte ends a line.
const writeChunk = 4 << 10

// fdWrite sends writes to fds 1 and 2 to the invocation's log: at most
// MaxWriteIovecs iovecs and MaxWriteBytes bytes a call, charged per iovec,
// per byte (whether the log keeps the bytes or drops them) and per line the
// log keeps.
func fdWrite(ctx context.Context, mod api.Module, stack []uint64) {
	fd, iovs, iovsLen, nwrittenPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if fd != 1 && fd != 2 {
		stack[0] = errnoBadf
		return
	}
	if iovsLen > MaxWriteIovecs {
		stack[0] = errnoInval
		return
	}
	mem := mod.Memory()
	if mem == nil || uint64(iovs)+uint64(iovsLen)*8 > uint64(mem.Size()) {
		stack[0] = errnoFault
		return
	}
	g := chargeHost(ctx, uint64(iovsLen)*HostIovecFuel)
	var sink *logBuffer
	if g != nil && g.inv != nil {
		sink = &g.inv.log
	} else if g != nil && g.init != nil {
		sink = &g.init.log
	}
	var total uint32
	for i := uint32(0); i < iovsLen && total < MaxWriteBytes; i++ {
		iov, _ := mem.Read(iovs+i*8, 8) // in range: checked above
		ptr, n := binary.LittleEndian.Uint32(iov), binary.LittleEndian.Uint32(iov[4:])
		data, ok := mem.Read(ptr, n)
		if !ok {
			stack[0] = errnoFault
			return
		}
		if room := MaxWriteBytes - total; n > room {
			data, n = data[:room], room // a short write
		}
		total += n
		// In chunks, each charged before it is written, and its lines
		// after: a line costs the log far more than a byte (a megabyte
		// of newlines is 130 ms of work), and the clock is looked at in
		// between.
		for len(data) > 0 {
			chunk := data[:min(len(data), writeChunk)]
			data = data[len(chunk):]
			if g != nil {
				g.charge(uint64(len(chunk)) * HostByteFuel)
			}
			if sink != nil {
				if lines := sink.write(int(fd-1), chunk); lines > 0 && g != nil {
					g.charge(uint64(lines) * HostLineFuel)
				}
			}
		}
	}
	if !mem.WriteUint32Le(nwrittenPtr, total) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// pollOneoff serves clock subscriptions by sleeping (honouring ctx) and
// answers fd subscriptions at once with EBADF: there are no files. It takes
// at most MaxPollSubscriptions subscriptions a call, charged per
// subscription.
func pollOneoff(ctx context.Context, mod api.Module, stack []uint64) {
	in, out, nsubs, neventsPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	mem := mod.Memory()
	if mem == nil || nsubs == 0 || nsubs > MaxPollSubscriptions {
		stack[0] = errnoInval
		return
	}
	const subSize, evSize = 48, 32
	subs, ok := mem.Read(in, nsubs*subSize)
	if !ok {
		stack[0] = errnoFault
		return
	}
	chargeHost(ctx, uint64(nsubs)*HostSubscriptionFuel)
	// The events are collected on the stack (at most MaxPollSubscriptions
	// of them, 16 KiB) and written once every subscription is read, in case
	// the two regions overlap: nothing is allocated, whatever the guest
	// asks.
	type event struct {
		userdata uint64
		errno    uint16
		typ      uint8
	}
	var collected [MaxPollSubscriptions]event
	events := collected[:0]
	wait := time.Duration(-1)
	var clockEvent event
	hasClock := false
	for i := uint32(0); i < nsubs; i++ {
		s := subs[i*subSize:]
		userdata, tag := binary.LittleEndian.Uint64(s), s[8]
		switch tag {
		case 0: // clock
			id := binary.LittleEndian.Uint32(s[16:])
			timeout := binary.LittleEndian.Uint64(s[24:])
			flags := binary.LittleEndian.Uint16(s[40:])
			d := time.Duration(min(timeout, uint64(maxPollWait)))
			if flags&1 != 0 { // absolute time
				t, ok := now(id)
				if !ok {
					events = append(events, event{userdata, errnoInval, 0})
					continue
				}
				if timeout <= t {
					d = 0
				} else {
					d = time.Duration(min(timeout-t, uint64(maxPollWait)))
				}
			}
			if wait < 0 || d < wait {
				wait = d
				clockEvent, hasClock = event{userdata, errnoSuccess, 0}, true
			}
		case 1, 2: // fd_read, fd_write
			events = append(events, event{userdata, errnoBadf, tag})
		default:
			events = append(events, event{userdata, errnoInval, tag})
		}
	}
	if len(events) == 0 && hasClock {
		g := runFrom(ctx)
		var done <-chan struct{}
		if g != nil {
			// Never sleep past the deadline, and stop at it: a guest
			// that sleeps in a loop spends almost no fuel.
			if f := g.interrupted(); f != nil {
				panic(f)
			}
			if !g.deadline.IsZero() {
				wait = min(wait, time.Until(g.deadline))
			}
			done = g.done
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
			}
		}
		if g != nil {
			if f := g.interrupted(); f != nil {
				panic(f)
			}
		}
		events = append(events, clockEvent)
	}
	if uint64(out)+uint64(len(events))*evSize > uint64(mem.Size()) {
		stack[0] = errnoFault
		return
	}
	for i, e := range events {
		// The event is written in place: a buffer passed to mem.Write
		// would escape, one allocation per event.
		at := out + uint32(i)*evSize
		ev, _ := mem.Read(at, evSize) // in range: checked above
		clear(ev)
		binary.LittleEndian.PutUint64(ev[0:], e.userdata)
		binary.LittleEndian.PutUint16(ev[8:], e.errno)
		ev[10] = e.typ
	}
	if !mem.WriteUint32Le(neventsPtr, uint32(len(events))) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}
