//go:build !race

package adversarial

const raceEnabled = false
