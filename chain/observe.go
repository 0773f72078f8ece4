package chain

import (
	"context"

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

// tracedCaller is the chain's HostCaller decorator: a span per host call.
// The runtime reports the calls themselves (runtime.Result.Calls), which the
// trace and the audit record take (hostCalls).
type tracedCaller struct {
	next   runtime.HostCaller
	tracer trace.Tracer
}

func (t *tracedCaller) HostCall(ctx context.Context, call *abi.Call) abi.Reply {
	ctx, span := t.tracer.Start(ctx, "host_call", trace.WithAttributes(
		attribute.String("wasmhooks.capability", call.Name),
		attribute.Int("wasmhooks.seq", call.Seq),
	))
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
	return reply
}

// hostCalls is the trace's and the audit record's form of the host calls a
// result reports (never nil).
func hostCalls(calls []runtime.HostCall) []audit.HostCall {
	out := make([]audit.HostCall, len(calls))
	for i, c := range calls {
		out[i] = audit.HostCall{Capability: c.Name, Status: c.Status.Code(), Charged: c.Charged, LatencyUS: c.Duration.Microseconds()}
	}
	return out
}
