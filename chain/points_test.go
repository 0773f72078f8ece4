package chain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// acmeDeploy is a platform's own point, registered through Options.Points.
func acmeDeploy() abi.Point {
	return abi.Point{
		Name: "x.acme.deploy", Description: "a deployment about to start",
		Fields: []string{"service", "plan", "replicas"}, Changeable: []string{"plan", "replicas"}, Primary: "plan",
		Types: map[string]abi.FieldType{"service": abi.FieldText, "plan": abi.FieldText, "replicas": abi.FieldInteger},
		Fail:  "open",
	}
}

func withPoints(ps ...abi.Point) func(*Options) {
	return func(o *Options) { o.Points = ps }
}

// TestPointPhasesInConfig: a binding in a phase its point does not allow is
// refused with the configuration, naming the phases it allows.
func TestPointPhasesInConfig(t *testing.T) {
	tests := []struct {
		point string
		phase Phase
		want  string // "" accepts
	}{
		{"session.created", Observer, ""},
		{"session.created", Guard, "does not allow guard bindings (it allows observer)"},
		{"compaction.completed", Transformer, "does not allow transformer bindings"},
		{"loop.exit", Guard, ""},
		{"loop.exit", Transformer, "does not allow transformer bindings (it allows observer, guard)"},
		{"steering.inject", Transformer, ""},
		{"steering.skip", Guard, "does not allow guard"},
		{"tool.gap", Observer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.point+"/"+string(tt.phase), func(t *testing.T) {
			cfg := policyConfig(t, Binding{Name: "b", Point: tt.point, Phase: tt.phase, Settings: decide(`{"action":"continue"}`)})
			_, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Logger: quiet()})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a ConfigError saying %q", err, tt.want)
			}
		})
	}
}

// TestLifecyclePoints runs hooks at the new points: a guard's block at
// loop.exit halts the loop; observers at a notification point see it and
// cannot change it.
func TestLifecyclePoints(t *testing.T) {
	tests := []struct {
		name    string
		point   string
		phase   Phase
		decide  string
		verdict Verdict
		applied abi.Action
	}{
		{"exit check halts", "loop.exit", Guard, `{"action":"block","reason":"budget exceeded"}`, Block, abi.ActionBlock},
		{"exit check continues", "loop.exit", Guard, `{"action":"continue"}`, Allow, abi.ActionContinue},
		{"exit check asks", "loop.exit", Guard, `{"action":"ask","reason":"confirm the answer"}`, Pending, abi.ActionAsk},
		{"session observer", "session.created", Observer, `{"action":"continue"}`, Allow, abi.ActionContinue},
		{"observer cannot block a notification", "context.overflow", Observer, `{"action":"block"}`, Allow, abi.ActionContinue},
		{"steering redacted", "steering.inject", Transformer, `{"action":"modify","context":{"messages":[{"role":"user","content":"[redacted]"}]}}`, Allow, abi.ActionModify},
		{"steering blocked", "steering.inject", Guard, `{"action":"block","reason":"off-policy steering"}`, Block, abi.ActionBlock},
	}
	ctxs := map[string]map[string]any{
		"loop.exit":        {"response": "done", "iterations": 3},
		"session.created":  {"session": "s1", "user": "u1"},
		"context.overflow": {"tokens": 9, "limit": 8},
		"steering.inject":  {"messages": []any{map[string]any{"role": "user", "content": "use key sk-1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "b", Point: tt.point, Phase: tt.phase, Settings: decide(tt.decide)}))
			out := e.run(t, tt.point, ctxs[tt.point])
			if out.Verdict != tt.verdict || out.Trace[0].Applied != tt.applied {
				t.Fatalf("verdict %s applied %s, want %s %s (%+v)", out.Verdict, out.Trace[0].Applied, tt.verdict, tt.applied, out.Trace[0])
			}
			if out.Records()[0].Point != tt.point || out.Records()[0].Decision != string(tt.applied) {
				t.Errorf("audit %+v", out.Records()[0])
			}
		})
	}
}

// TestPlatformPoints: a platform registers its own point; bindings, runs,
// field types and default fail policies use it as a built-in one.
func TestPlatformPoints(t *testing.T) {
	deploy := map[string]any{"service": "api", "plan": "rolling", "replicas": 3}
	t.Run("run", func(t *testing.T) {
		e := newEnv(t, policyConfig(t,
			Binding{Name: "t", Point: "x.acme.deploy", Phase: Transformer, Settings: decide(`{"action":"modify","context":{"plan":"canary"}}`)},
			Binding{Name: "g", Point: "x.acme.deploy", Phase: Guard, Settings: when("canary", `{"action":"block","reason":"no canaries on friday"}`)},
		), withPoints(acmeDeploy()))
		out := e.run(t, "x.acme.deploy", deploy)
		if out.Verdict != Block || out.Context["plan"] != "canary" || out.Binding != "g" {
			t.Fatalf("outcome %+v", out)
		}
		info, _ := e.c.Info()
		if b := info.Points["x.acme.deploy"]; len(b) != 2 || b[0].Fail != FailOpen {
			t.Errorf("info %+v (the transformer's default fail policy is the point's: open)", b)
		}
	})
	// A modify the point's fields refuse is the hook's invalid output.
	for _, tt := range []struct{ name, modify string }{
		{"field types", `{"action":"modify","context":{"replicas":"many"}}`},
		{"modify of a field not changeable", `{"action":"modify","context":{"service":"db"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t,
				Binding{Name: "t", Point: "x.acme.deploy", Phase: Transformer, Fail: FailClosed, Settings: decide(tt.modify)},
			), withPoints(acmeDeploy()))
			out := e.run(t, "x.acme.deploy", deploy)
			if out.Verdict != Block || out.Trace[0].Failure == nil || out.Trace[0].Failure.Code != abi.FailInvalidOutput {
				t.Fatalf("outcome %+v", out.Trace[0])
			}
		})
	}
	t.Run("unregistered", func(t *testing.T) {
		cfg := policyConfig(t, Binding{Name: "t", Point: "x.acme.other", Phase: Observer, Settings: decide(`{"action":"continue"}`)})
		_, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Logger: quiet(), Points: []abi.Point{acmeDeploy()}})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), `unknown hook point "x.acme.other"`) {
			t.Fatalf("error %v", err)
		}
		e := newEnv(t, policyConfig(t))
		if _, err := e.c.Run(context.Background(), Input{Tenant: "acme", Point: "x.acme.deploy"}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("a run at a point this chain did not register: %v", err)
		}
	})
	t.Run("refused registry", func(t *testing.T) {
		bad := acmeDeploy()
		bad.Name = "tool.before"
		_, err := New(context.Background(), policyConfig(t), Options{Runtime: testRuntime(t), Logger: quiet(), Points: []abi.Point{bad}})
		var pe *abi.PointError
		if !errors.As(err, &pe) {
			t.Fatalf("error %v, want an *abi.PointError", err)
		}
	})
}

// TestNotify: a notify (ABI 1.2) continues from every phase, and the
// platform receives it in Outcome.Notifications, audited as "notify",
// across an approval's pause too.
func TestNotify(t *testing.T) {
	const notify = `{"action":"notify","reason":"large transfer","payload":{"amount":5000}}`
	for _, phase := range []Phase{Observer, Transformer, Guard} {
		t.Run(string(phase), func(t *testing.T) {
			e := newEnv(t, policyConfig(t, Binding{Name: "n", Point: "tool.before", Phase: phase, Settings: decide(notify)}))
			out := e.run(t, "tool.before", map[string]any{"tool": "pay", "arguments": map[string]any{}})
			if out.Verdict != Allow || out.Modified || out.Trace[0].Applied != abi.ActionNotify || out.Trace[0].Ignored != "" {
				t.Fatalf("outcome %+v", out)
			}
			if len(out.Notifications) != 1 {
				t.Fatalf("notifications %+v", out.Notifications)
			}
			n := out.Notifications[0]
			if n.Binding != "n" || n.Phase != phase || n.Reason != "large transfer" || n.Payload["amount"] == nil || n.Audit == "" || n.Audit != out.Records()[0].Hash {
				t.Errorf("notification %+v", n)
			}
			if r := out.Records()[0]; r.Decision != "notify" || r.HookAction != "notify" || r.Reason != "large transfer" {
				t.Errorf("audit %+v", r)
			}
		})
	}
	// A later guard's ask or block keeps the notification, across the
	// approval's pause too.
	for _, tt := range []struct {
		name, guard string
		verdict     Verdict
	}{
		{"kept across an approval", `{"action":"ask"}`, Pending},
		{"kept on a block", `{"action":"block"}`, Block},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, policyConfig(t,
				Binding{Name: "n", Point: "tool.before", Phase: Observer, Settings: decide(notify)},
				Binding{Name: "g", Point: "tool.before", Phase: Guard, Settings: decide(tt.guard)},
			))
			out := e.run(t, "tool.before", map[string]any{"tool": "pay", "arguments": map[string]any{}})
			if out.Verdict != tt.verdict || len(out.Notifications) != 1 {
				t.Fatalf("outcome %+v", out)
			}
			if tt.verdict != Pending {
				return
			}
			res, err := e.c.Resolve(context.Background(), out.Approval.ID, Resolution{Decision: Approve})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != Allow || len(res.Notifications) != 1 || res.Notifications[0].Binding != "n" {
				t.Fatalf("resumed outcome %+v", res)
			}
		})
	}
	t.Run("a guard's notify may end the conversation", func(t *testing.T) {
		e := newEnv(t, policyConfig(t, Binding{Name: "n", Point: "message.outbound", Phase: Guard, Settings: decide(`{"action":"notify","do_not_reply_again":true}`)}))
		out := e.run(t, "message.outbound", map[string]any{"outgoing": "hi"})
		if out.Verdict != Allow || !out.DoNotReplyAgain || len(out.Notifications) != 1 {
			t.Fatalf("outcome %+v", out)
		}
	})
	t.Run("no notifications", func(t *testing.T) {
		e := newEnv(t, policyConfig(t, Binding{Name: "c", Point: "tool.before", Phase: Guard, Settings: decide(`{"action":"continue"}`)}))
		if out := e.run(t, "tool.before", nil); out.Notifications != nil {
			t.Errorf("notifications %+v", out.Notifications)
		}
	})
}

// TestPlatformPointManifest: a manifest names a platform's point by its x.
// name; the chain binds the hook there once the platform registered it, and
// nowhere the manifest does not list.
func TestPlatformPointManifest(t *testing.T) {
	wasm, err := runtime.EmbedManifest(policyWasm(t), []byte(`{"name":"deploy-guard","points":["x.acme.deploy"]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		point string
		want  string // "" accepts
	}{
		{"x.acme.deploy", ""},
		{"tool.before", "manifest does not allow point tool.before"},
	}
	for _, tt := range tests {
		t.Run(tt.point, func(t *testing.T) {
			cfg := Config{Modules: map[string][]byte{"m": wasm}, Bindings: []Binding{
				{Name: "g", Module: "m", Point: tt.point, Phase: Guard, Settings: decide(`{"action":"block","reason":"frozen"}`)},
			}}
			c, err := New(context.Background(), cfg, Options{Runtime: testRuntime(t), Logger: quiet(), Points: []abi.Point{acmeDeploy()}})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			out, err := c.Run(context.Background(), Input{Tenant: "acme", Point: tt.point, Context: map[string]any{"service": "api"}})
			if err != nil || out.Verdict != Block || out.Reason != "frozen" {
				t.Fatalf("outcome %+v, %v", out, err)
			}
		})
	}
}
