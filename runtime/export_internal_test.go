package runtime

// ConfigWithoutCloseOnDone returns c with wazero's close-on-context-done off,
// for the benchmarks that measure its cost.
func ConfigWithoutCloseOnDone(c Config) Config {
	c.noCloseOnDone = true
	return c
}
