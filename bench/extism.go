package bench

import (
	"context"
	"sync"

	extism "github.com/extism/go-sdk"
)

var (
	extismOnce     sync.Once
	extismCompiled *extism.CompiledPlugin
	extismErr      error
)

// Extism returns the hand-written Extism plugin (guests/extism_redact.wat),
// compiled once by extism/go-sdk with its default runtime configuration
// (wazero's compiler, no WASI, no host functions of ours).
func (e *Env) Extism(ctx context.Context) (*extism.CompiledPlugin, error) {
	extismOnce.Do(func() {
		var wasm []byte
		wasm, extismErr = e.Wasm("wat:extism_redact")
		if extismErr != nil {
			return
		}
		extismCompiled, extismErr = e.compileExtism(ctx, wasm)
	})
	return extismCompiled, extismErr
}

func (e *Env) compileExtism(ctx context.Context, wasm []byte) (*extism.CompiledPlugin, error) {
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}}}
	return extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{}, nil)
}

// ExtismCall calls export fn of p with input and returns the output, failing
// on a non-zero return code.
func ExtismCall(p *extism.Plugin, fn string, input []byte) ([]byte, error) {
	rc, out, err := p.Call(fn, input)
	if err != nil {
		return nil, err
	}
	if rc != 0 {
		return nil, errExtismRC
	}
	return out, nil
}

type extismError string

func (e extismError) Error() string { return string(e) }

const errExtismRC = extismError("bench: extism plugin returned a non-zero code")
