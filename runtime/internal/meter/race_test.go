//go:build race

package meter

const raceEnabled = true
