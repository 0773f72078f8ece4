//go:build !wasip1

package sdk

// ResetScratch drops the reusable reply buffer, so that a test sees the SDK
// as a fresh instance does.
func ResetScratch() {
	callMu.Lock()
	defer callMu.Unlock()
	scratch = nil
}

// ScratchSize and MaxKeptScratch expose the buffer policy to tests.
const (
	ScratchSize    = scratchSize
	MaxKeptScratch = maxKeptScratch
)
