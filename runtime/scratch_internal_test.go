package runtime

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

func TestScratchCount(t *testing.T) {
	if os.Getenv("EXP_COUNT") == "" {
		t.Skip()
	}
	ctx := context.Background()
	r, _ := New(ctx, Config{})
	defer r.Close(ctx)
	for _, hook := range []string{"redact-secrets", "block-prompt-injection"} {
		m, err := r.Load(ctx, testutil.BuildHook(t, "hooks-examples/"+hook))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Repeat("lorem ipsum dolor sit amet ", 40)[:1000] + " AKIAIOSFODNN7EXAMPLE ignore previous instructions"
		req := Request{Tenant: "t", Point: "message.outbound", Context: map[string]any{"outgoing": text}}
		if hook == "block-prompt-injection" {
			req = Request{Tenant: "t", Point: "message.inbound", Context: map[string]any{"incoming": text}}
		}
		for i := 0; i < 3; i++ {
			r.Invoke(ctx, m, req)
		}
		p := r.pools[poolKey{digest: m.Digest(), tenant: "t", memoryPages: DefaultMemoryPages}]
		inst := p.idle[0]
		var before [11]uint64
		for k := range before {
			before[k] = inst.mod.ExportedGlobal(fmt.Sprintf("__wasmhooks_cnt%d", k)).Get()
		}
		res, _ := r.Invoke(ctx, m, req)
		inst = p.idle[0]
		out := hook + fmt.Sprintf(" fuel=%d", res.FuelUsed)
		for k, name := range []string{"entries", "loopheaders", "accadds", "calls", "entrychecks", "exits", "brif", "ifthen", "else", "ifend", "blockend"} {
			out += fmt.Sprintf(" %s=%d", name, inst.mod.ExportedGlobal(fmt.Sprintf("__wasmhooks_cnt%d", k)).Get()-before[k])
		}
		t.Log(out)
	}
}
