package abi_test

import (
	"fmt"

	"github.com/wasmhooks/wasmhooks/abi"
)

func ExamplePackResult() {
	// A take whose buffer is too small: status 8, and the length the body
	// needs, so the guest can grow its buffer and take again.
	r := abi.PackResult(abi.StatusBufferTooSmall, 70000)
	fmt.Printf("%#x\n", r)
	// Output: 0x800011170
}

func ExampleUnpackResult() {
	status, length := abi.UnpackResult(0x300000031)
	fmt.Println(status, status.Code(), length)
	// Output: DENIED denied 49
}

func ExampleInRange() {
	const size = 65536                            // one page
	fmt.Println(abi.InRange(65535, 1, size))      // the last byte
	fmt.Println(abi.InRange(65535, 2, size))      // one past the end
	fmt.Println(abi.InRange(0xFFFFFFFF, 2, size)) // wraps to 1 in 32 bits
	// Output:
	// true
	// false
	// false
}

func ExampleParseJSON() {
	v, err := abi.ParseJSON([]byte(`{"model":"small","max_tokens":256,"stop":["END"]}`), abi.JSONLimits{})
	fmt.Printf("%v %v\n", v, err)

	// Rejected where a lenient parser would pick one of the two values.
	_, err = abi.ParseJSON([]byte(`{"action":"continue","\u0061ction":"block"}`), abi.JSONLimits{})
	fmt.Println(err)

	_, err = abi.ParseJSON([]byte(`{"n":9007199254740993}`), abi.JSONLimits{})
	fmt.Println(err)
	// Output:
	// map[max_tokens:256 model:small stop:[END]] <nil>
	// invalid JSON at byte 21: duplicate key "action"
	// invalid JSON at byte 5: integer 9007199254740993 is beyond ±(2^53-1)
}

func ExampleDecodeDecision() {
	point, _ := abi.LookupPoint("message.inbound")
	// What seed 003's Rust serializer emits for a Transform.
	out := []byte(`{"abort":false,"decision":"transform","transformed_body":"Hasta luego","reason":"opt-out keyword","do_not_reply_again":true}`)
	d, err := abi.DecodeDecision(out, point, abi.JSONLimits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	canonical, _ := d.Encode()
	fmt.Println(d.Shape)
	fmt.Println(string(canonical))

	// Any word the ABI does not define is a hook failure, never a continue.
	_, err = abi.DecodeDecision([]byte(`{"action":"permit"}`), point, abi.JSONLimits{})
	fmt.Println(err)
	// Output:
	// outcome
	// {"action":"modify","context":{"incoming":"Hasta luego"},"reason":"opt-out keyword","do_not_reply_again":true}
	// invalid decision: unknown action "permit" (want continue, modify, block, ask, notify, allow, rewrite or require_approval)
}

func ExampleInvocation_Encode() {
	inv := abi.Invocation{
		Point:   "message.outbound",
		Context: map[string]any{"incoming": "hi", "outgoing": "hello"},
		Meta:    abi.Meta{Hook: "redact-secrets", Invocation: "inv_1", Tenant: "acme"},
	}
	doc, _ := inv.Encode()
	fmt.Println(string(doc))
	// Output:
	// {"abi":1,"point":"message.outbound","context":{"incoming":"hi","outgoing":"hello"},"settings":{},"meta":{"hook":"redact-secrets","invocation":"inv_1","tenant":"acme"}}
}

func ExampleDecodeManifest() {
	m, err := abi.DecodeManifest([]byte(`{"name":"redact-secrets","capabilities":["llm.run"],"points":["message.outbound"],"future_field":1}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name, m.Requests("llm.run"), m.AllowsPoint("message.outbound"), m.AllowsPoint("tool.before"))

	_, err = abi.DecodeManifest([]byte(`{"capabilities":"llm.run"}`))
	fmt.Println(err)
	// Output:
	// redact-secrets true true false
	// invalid hook_v1.manifest: field "capabilities": must be an array of strings
}

func ExampleError_Encode() {
	body := abi.NewError(abi.StatusInsufficientCredit, "balance 3, cost 5").Encode()
	fmt.Println(string(body))
	e := abi.DecodeError(abi.StatusInsufficientCredit, body)
	fmt.Println(e)
	// Output:
	// {"code":"insufficient_credit","message":"balance 3, cost 5"}
	// insufficient_credit: balance 3, cost 5
}
