package runtime_test

import (
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

func TestHostCallFromInitialize(t *testing.T) {
	r, m := loaded(t, runtime.Config{}, testutil.WAT(t, initCaller))
	host := echoHost()
	res := mustInvoke(t, r, m, runtime.Request{Tenant: "t", HostCaller: host})
	got := parseLog(t, res.Decision.Reason)
	if len(got) != 1 || got[0].status != abi.StatusNotInInvocation {
		t.Fatalf("host_call from _initialize returned %+v, want NOT_IN_INVOCATION", got)
	}
	if n := len(host.Calls()); n != 0 {
		t.Errorf("the capability ran %d times from _initialize", n)
	}
}
