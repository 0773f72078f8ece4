package runtime_test

import (
	"context"
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// upper is a HostCaller with one capability, "echo", for the example. In a
// platform, *capability.Runner is the HostCaller.
type upper struct{}

func (upper) HostCall(_ context.Context, c *abi.Call) abi.Reply {
	if c.Name != "echo" {
		return abi.ErrorReply(abi.StatusUnknownCapability, "no capability "+c.Name)
	}
	return abi.Reply{Status: abi.StatusOK, Body: c.Payload}
}

// Example loads a hook written in WAT against ABI.md (testdata/guests/shapes.wat)
// and invokes it for one tenant.
func Example() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{HostCaller: upper{}})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	wasm, err := runtime.ReadModuleFile("../testdata/guests/shapes.wasm", 0)
	if err != nil {
		panic(err)
	}
	mod, err := rt.Load(ctx, wasm) // validated, compiled, cached by sha256
	if err != nil {
		panic(err)
	}
	defer mod.Close(ctx)

	res, err := rt.Invoke(ctx, mod, runtime.Request{
		Tenant:   "acme",
		Point:    "message.outbound",
		Context:  map[string]any{"outgoing": "the agent's reply"},
		Settings: map[string]any{"shape": "legacy"},
	})
	if f, ok := abi.AsFailure(err); ok {
		fmt.Println("hook failed:", f.Code) // apply the binding's fail policy
		return
	}
	if err != nil {
		panic(err)
	}
	out, _ := res.Decision.Encode()
	fmt.Println(string(out), res.Decision.Shape)
	// Output:
	// {"action":"block","reason":"legacy block"} legacy
}

// ExampleRuntime_InvokeInto reuses one Result across invocations, as a hot
// path that counts its allocations does: a warm invocation whose hook
// continues allocates nothing on the host.
func ExampleRuntime_InvokeInto() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	wasm, err := runtime.ReadModuleFile("../testdata/guests/shapes.wasm", 0)
	if err != nil {
		panic(err)
	}
	mod, err := rt.Load(ctx, wasm)
	if err != nil {
		panic(err)
	}
	defer mod.Close(ctx)

	var res runtime.Result // reused; its Decision is overwritten by the next call
	for _, shape := range []string{"canonical", "top-level"} {
		err := rt.InvokeInto(ctx, mod, runtime.Request{
			Tenant:   "acme",
			Context:  map[string]any{"outgoing": "hello"},
			Settings: map[string]any{"shape": shape},
		}, &res)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Decision.Action, res.Decision.Shape, res.Reused)
	}
	// Output:
	// modify canonical true
	// modify top-level true
}
