package runtime

import (
	"reflect"
	"testing"

	"github.com/wasmhooks/wasmhooks/abi"
)

// TestCanonicalContinueFastPath holds readDecision's shortcut to what
// abi.DecodeDecision returns for the same bytes, at every point.
func TestCanonicalContinueFastPath(t *testing.T) {
	for _, p := range abi.Points() {
		want, err := abi.DecodeDecision([]byte(canonicalContinue), p, abi.JSONLimits{})
		if err != nil {
			t.Fatal(err)
		}
		got := &abi.Decision{Action: abi.ActionContinue, Shape: abi.ShapeCanonical}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: fast path %+v, DecodeDecision %+v", p.Name, got, want)
		}
	}
}
