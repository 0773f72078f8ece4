package bench

import "testing"

// BenchmarkCases runs every case as a sub-benchmark. CI runs it once per
// case with -benchtime=1x so that none can rot; `make bench` runs the table
// (cmd/benchtable) instead.
func BenchmarkCases(b *testing.B) {
	for _, c := range Cases() {
		if c.Run == nil {
			continue
		}
		b.Run(c.Name, c.Run)
	}
}
