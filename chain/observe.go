package chain

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain/audit"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// TracedHostCaller wraps next so that every host call gets an OpenTelemetry
// span, named after the capability once the call shows it exists ("host_call"
// otherwise: a hook must not be able to mint span names). A nil tp means
// otel.GetTracerProvider(); a nil next answers UNKNOWN_CAPABILITY. The result
// is safe for concurrent use if next is.
func TracedHostCaller(next runtime.HostCaller, tp trace.TracerProvider) runtime.HostCaller {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracedCaller{next: next, tracer: tp.Tracer("github.com/wasmhooks/wasmhooks/chain")}
}

// tracedCaller is the chain's HostCaller decorator: a span per host call, and
// a list of the calls of one invocation for the trace and the audit record.
type tracedCaller struct {
	next   runtime.HostCaller
	tracer trace.Tracer

	mu    sync.Mutex // guards calls
	calls []audit.HostCall
}

func (t *tracedCaller) HostCall(ctx context.Context, call *abi.Call) abi.Reply {
	ctx, span := t.tracer.Start(ctx, "host_call", trace.WithAttributes(
		attribute.String("wasmhooks.capability", call.Name),
		attribute.Int("wasmhooks.seq", call.Seq),
	))
	start := time.Now()
	var reply abi.Reply
	if t.next == nil {
		reply = abi.ErrorReply(abi.StatusUnknownCapability, "no capabilities are served")
	} else {
		reply = t.next.HostCall(ctx, call)
	}
	if span.IsRecording() { // a span that records nothing would drop all this
		if reply.Status != abi.StatusUnknownCapability {
			span.SetName(call.Name)
		}
		span.SetAttributes(attribute.String("wasmhooks.status", reply.Status.Code()), attribute.Int64("wasmhooks.credit_charged", reply.Charged))
		if reply.Status != abi.StatusOK {
			span.SetStatus(codes.Error, reply.Status.Code())
		}
	}
	span.End()
	t.mu.Lock()
	t.calls = append(t.calls, audit.HostCall{
		Capability: call.Name, Status: reply.Status.Code(), Charged: reply.Charged, LatencyUS: time.Since(start).Microseconds(),
	})
	t.mu.Unlock()
	return reply
}

// take returns the calls collected so far (never nil) and starts a new list.
func (t *tracedCaller) take() []audit.HostCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	calls := t.calls
	t.calls = nil
	if calls == nil {
		return []audit.HostCall{}
	}
	return calls
}
