package capability
import ("testing";"context")
func BenchmarkRunnerNoopX(b *testing.B) {
	reg := NewRegistry()
	reg.MustRegister(Capability{Name: "noop", Schema: `{}`, Execute: func(context.Context, *Request) (*Result, error) {
		return &Result{Value: map[string]any{}}, nil
	}})
	r, _ := NewRunner(reg, RunnerOptions{})
	call := newCall("noop", `{}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ { r.HostCall(context.Background(), call) }
}
