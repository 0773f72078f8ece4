package chain

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// ConfigSchema is the JSON Schema of a configuration's JSON form
// (config.schema.json, the reference docs/chain-config.md). ParseConfig
// validates with it, and TestConfigSchemaCoversTheParser holds it to the
// parser's fields.
//
//go:embed config.schema.json
var ConfigSchema []byte

// configSchemaURL is the schema's $id.
const configSchemaURL = "https://github.com/wasmhooks/wasmhooks/chain/config.schema.json"

var compiledConfigSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("the chain config schema may not reference %s", s)
	}
	if err := c.AddResource(configSchemaURL, strings.NewReader(string(ConfigSchema))); err != nil {
		return nil, err
	}
	return c.Compile(configSchemaURL)
})

// ValidateConfigJSON checks a configuration's JSON form against
// ConfigSchema.
func ValidateConfigJSON(data []byte) error {
	v, err := abi.ParseJSON(data, abi.JSONLimits{MaxBytes: MaxConfigBytes})
	if err != nil {
		return err
	}
	s, err := compiledConfigSchema()
	if err != nil {
		return fmt.Errorf("the configuration schema: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return schemaError(err)
	}
	return nil
}

// schemaError says where the configuration breaks the schema.
func schemaError(err error) error {
	return fmt.Errorf("does not match the configuration schema (docs/chain-config.md): %s", schemaMessages(err))
}

// schemaMessages says where a document breaks a schema, "at /pointer:
// message" per cause, without the schema's URL (the settings schema's is
// made up: the manifest's schema has no address of its own).
func schemaMessages(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			msgs = append(msgs, "at "+loc+": "+e.Message)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}
