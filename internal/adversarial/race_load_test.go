//go:build race

package adversarial

// raceEnabled reports a -race build, in which time budgets are not checked.
const raceEnabled = true
