//go:build race

package capability

// raceEnabled reports a -race build, under which allocation counts are not
// meaningful (sync.Pool drops items at random).
const raceEnabled = true
