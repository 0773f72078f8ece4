// Package builtin holds the capabilities wasmhooks ships: llm.run (behind a
// Provider: OpenAI-compatible HTTP or an offline extractive summariser),
// kv.get and kv.set (a key-value store scoped by tenant and hook) and
// log.write (hook lines into the operator's log). Each constructor returns a
// capability.Capability to register; Register registers them all.
package builtin

import (
	"log/slog"

	"github.com/wasmhooks/wasmhooks/capability"
)

// Config configures every built-in capability for Register. The zero value
// works: the offline provider, default pricing, llm.run free (no ledger), an
// in-memory key-value store and hook lines written to slog.Default(). The
// values it refers to (Provider, Ledger, KV, Logs) must be safe for concurrent
// use, because the capabilities built from it are.
type Config struct {
	// Provider completes prompts for llm.run. Nil means OfflineProvider.
	Provider Provider
	// Pricing is llm.run's credit per token. The zero value is the
	// defaults (1 per input token, 2 per output token).
	Pricing Pricing
	// Ledger bills llm.run through a capability.CreditGate on the
	// caller's tenant. Nil means llm.run is not billed.
	Ledger capability.Ledger
	// KV stores kv.get/kv.set data. Nil means a new MemoryKV.
	KV KVStore
	// Logs receives log.write lines. Nil means a SlogSink on Logger.
	Logs LogSink
	// Logger is where log.write lines go when Logs is nil. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Capabilities returns the built-in capabilities configured by cfg:
// llm.run, kv.get, kv.set and log.write.
func Capabilities(cfg Config) []capability.Capability {
	llm := LLMConfig{Provider: cfg.Provider, Pricing: cfg.Pricing}
	if cfg.Ledger != nil {
		llm.Gates = []capability.Gate{&capability.CreditGate{Ledger: cfg.Ledger}}
	}
	get, set := KV(KVConfig{Store: cfg.KV})
	logs := cfg.Logs
	if logs == nil {
		logs = SlogSink{Logger: cfg.Logger}
	}
	return []capability.Capability{LLM(llm), get, set, LogWrite(LogConfig{Sink: logs})}
}

// Register registers every built-in capability in reg. It stops at the first
// error, a *capability.RegistrationError (a name already taken, say).
func Register(reg *capability.Registry, cfg Config) error {
	for _, c := range Capabilities(cfg) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
