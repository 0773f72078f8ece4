package capability

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// maxSchemaBytes bounds a capability's schema document.
const maxSchemaBytes = 1 << 20

// schemaBase is the base URL schemas are compiled under. The .invalid TLD
// guarantees it never resolves; references outside the document are refused
// anyway (see compileSchema).
const schemaBase = "https://capability.wasmhooks.invalid/"

// ValidName reports whether name is a well-formed capability name: 1 to
// abi.MaxNameBytes bytes of lower-case ASCII letters, digits, '_', '.' and '-'.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > abi.MaxNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Registry holds the capabilities a runner can resolve. What untrusted code
// can do is exactly what the registry holds.
//
// The zero value is an empty registry ready to use. A Registry is safe for
// concurrent use by multiple goroutines; registering while calls are being
// served is allowed.
type Registry struct {
	mu   sync.RWMutex      // guards caps
	caps map[string]*entry // by name
}

// entry is a registered capability with its compiled schema. Entries are
// immutable once stored.
type entry struct {
	cap    Capability
	schema *jsonschema.Schema
	// anything is true when the schema accepts every JSON value ({} or
	// true): the runner then skips the validator, which could only say
	// yes. Decided once, at Register.
	anything bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{caps: make(map[string]*entry)} }

// Register adds c to the registry after checking its name and compiling its
// schema. It returns a *RegistrationError wrapping ErrInvalidName,
// ErrDuplicateCapability, ErrInvalidSchema or ErrIncomplete. The registry
// keeps a copy of c (and of its Gates slice).
func (r *Registry) Register(c Capability) error {
	if !ValidName(c.Name) {
		return &RegistrationError{Name: c.Name, Reason: "name must be 1 to 128 bytes of [a-z0-9_.-]", Err: ErrInvalidName}
	}
	if c.Execute == nil {
		return &RegistrationError{Name: c.Name, Reason: "no Execute function", Err: ErrIncomplete}
	}
	if strings.TrimSpace(c.Schema) == "" {
		return &RegistrationError{Name: c.Name, Reason: `no schema (use "{}" to accept any JSON value)`, Err: ErrIncomplete}
	}
	for i, g := range c.Gates {
		if g == nil {
			return &RegistrationError{Name: c.Name, Reason: fmt.Sprintf("gate %d is nil", i), Err: ErrIncomplete}
		}
	}
	sch, anything, err := compileSchema(c.Name, c.Schema)
	if err != nil {
		return &RegistrationError{Name: c.Name, Reason: "schema: " + err.Error(), Err: errors.Join(ErrInvalidSchema, err)}
	}
	c.Gates = slices.Clone(c.Gates)

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.caps == nil {
		r.caps = make(map[string]*entry)
	}
	if _, dup := r.caps[c.Name]; dup {
		return &RegistrationError{Name: c.Name, Reason: "already registered", Err: ErrDuplicateCapability}
	}
	r.caps[c.Name] = &entry{cap: c, schema: sch, anything: anything}
	return nil
}

// MustRegister is Register for program initialisation: it panics if Register
// returns an error.
func (r *Registry) MustRegister(c Capability) {
	if err := r.Register(c); err != nil {
		panic(err)
	}
}

// Lookup returns the capability registered under name.
func (r *Registry) Lookup(name string) (Capability, bool) {
	e := r.lookup(name)
	if e == nil {
		return Capability{}, false
	}
	c := e.cap
	c.Gates = slices.Clone(c.Gates)
	return c, true
}

func (r *Registry) lookup(name string) *entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.caps[name]
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	names := make([]string, 0, len(r.caps))
	for n := range r.caps {
		names = append(names, n)
	}
	r.mu.RUnlock()
	sort.Strings(names)
	return names
}

// errNoExternalRefs is what the schema loader returns for every URL: a
// capability schema is one self-contained document, so compiling it can
// never read a file or reach the network.
var errNoExternalRefs = errors.New("references to other documents are not allowed")

// compileSchema checks that src is strict JSON and compiles it as a JSON
// Schema with format assertions on and every external reference refused.
// anything reports whether the schema is {} or true, which every JSON value
// satisfies in every draft.
func compileSchema(name, src string) (sch *jsonschema.Schema, anything bool, err error) {
	doc, err := abi.ParseJSON([]byte(src), abi.JSONLimits{MaxBytes: maxSchemaBytes, MaxDepth: 128})
	if err != nil {
		return nil, false, err
	}
	switch doc := doc.(type) {
	case map[string]any:
		anything = len(doc) == 0
	case bool:
		anything = doc
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, errNoExternalRefs }
	url := schemaBase + name + ".json"
	if err := c.AddResource(url, strings.NewReader(src)); err != nil {
		return nil, false, err
	}
	if sch, err = c.Compile(url); err != nil {
		return nil, false, err
	}
	return sch, anything, nil
}
