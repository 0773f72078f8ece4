package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhooks/wasmhooks/abi"
)

// MaxSettingsSchemaValues bounds the JSON values (objects, arrays and
// scalars, counted at every depth) of a manifest's settings_schema. With
// references refused (see CheckSettingsSchema) a schema is a tree, and
// validating a settings document applies each of its subschemas at most
// once per value of the document: the work is bounded by this times the
// size of the settings. Typical schemas hold tens of values.
const MaxSettingsSchemaValues = 4096

// MaxSettingsSchemaRegexpInsts bounds the regular expressions of a
// manifest's settings_schema (every "pattern" string and "patternProperties"
// key, anywhere): the instructions of their compiled programs, summed,
// estimated from their syntax before anything is compiled (a counted
// repetition {n} counts its body n times, as the compiler expands it). A
// pattern costs the host about 45 bytes of heap and some 0.5 us of
// compilation per instruction, twice (the compiler checks each pattern
// against the meta-schema's "regex" format, then compiles it), so a 64 KiB
// manifest of `\pL{1000}` patterns cost 1.5 s and held 150 MiB. At this bound
// a schema's patterns compile in about 10 ms and hold about 1.5 MiB
// (TestSettingsSchemaRegexpCost); typical patterns count tens to a few
// thousand (`^.{0,1000}$` is about 2,000).
const MaxSettingsSchemaRegexpInsts = 1 << 16

// MaxSettingsNumberExponent bounds the decimal exponent, as written, of a
// number in a settings_schema and in settings checked against one (1e-400
// is accepted, 1e-401 refused; float64 spans about ±324). The validator
// turns numbers into exact rationals (math/big.Rat), at a cost that grows
// with the exponent: 1e-999999 cost about 80 ms per use, and 1e-9999999,
// which strict JSON takes (it underflows to 0), made it panic. abi.ParseJSON
// already bounds a number's text to 128 bytes.
const MaxSettingsNumberExponent = 400

// checkNumber refuses a JSON number whose exponent, as written, is beyond
// ±MaxSettingsNumberExponent.
func checkNumber(n json.Number) error {
	s := string(n)
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return nil
	}
	e := strings.TrimLeft(s[i+1:], "+-")
	e = strings.TrimLeft(e, "0")
	if x, err := strconv.Atoi(e); e == "" || (err == nil && x <= MaxSettingsNumberExponent) {
		return nil
	}
	return fmt.Errorf("the number %.40s has an exponent beyond ±%d", s, MaxSettingsNumberExponent)
}

// checkSettingsNumbers applies checkNumber to every number of v, settings
// to be checked against a schema.
func checkSettingsNumbers(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			if err := checkSettingsNumbers(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := checkSettingsNumbers(x); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(v)
	}
	return nil
}

// ErrInvalidSettingsSchema means a manifest's settings_schema is refused: it
// does not compile, it holds a reference, or it is over
// MaxSettingsSchemaValues.
var ErrInvalidSettingsSchema = errors.New("chain: invalid settings_schema")

// ErrInvalidSettings means settings do not match their hook's
// settings_schema: what ValidateSettings, and a Chain for a binding's
// settings (in ConfigError.Errs), return wrapped.
var ErrInvalidSettings = errors.New("settings do not match the hook's settings_schema")

// SettingsSchemaError reports a refused settings_schema, naming the hook
// (its manifest's name) and where in the schema the problem is. It wraps
// ErrInvalidSettingsSchema and the compiler's error, if any.
type SettingsSchemaError struct {
	// Hook is the manifest's name; empty when it has none.
	Hook string
	// Path is the JSON pointer, in the schema, of the offending value;
	// empty for the schema as a whole.
	Path string
	// Reason says what is wrong, in lower case.
	Reason string
	// Err is the compiler's error, or nil.
	Err error
}

func (e *SettingsSchemaError) Error() string {
	msg := "the manifest's settings_schema"
	if e.Hook != "" {
		msg = fmt.Sprintf("hook %q: settings_schema", e.Hook)
	}
	if e.Path != "" {
		msg += " at " + e.Path
	}
	msg += ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrInvalidSettingsSchema and Err.
func (e *SettingsSchemaError) Unwrap() []error { return []error{ErrInvalidSettingsSchema, e.Err} }

// settingsSchema is a manifest's compiled settings_schema; nil accepts any
// object. See RATIONALE.md#why-are-settings-validated-outside-the-runtime.
type settingsSchema struct {
	s *jsonschema.Schema
}

// CheckSettingsSchema reports whether m's settings_schema (absent: any
// object) is one the chain and `wasmhooks run` accept, with a
// *SettingsSchemaError when it is not. It is the one check of a settings
// schema: Chain (New, Reload), ValidateSettings and the CLI's validate and
// manifest embed all go through it, so each refuses exactly what the others
// refuse.
//
// A settings_schema is the hook author's, so it is untrusted input. It is
// refused when it
//   - holds a member named $ref, $dynamicRef or $recursiveRef, anywhere
//     (even where it would be data, such as a property name): references
//     are what let a small schema describe exponential work (40 $defs
//     each an allOf of two $refs to the previous validate a value 2^40
//     times) and, to other documents, reach the disk or the network;
//   - holds more than MaxSettingsSchemaValues values, or a number whose
//     exponent is beyond ±MaxSettingsNumberExponent;
//   - holds regular expressions of more than MaxSettingsSchemaRegexpInsts
//     instructions in all;
//   - does not compile (an unknown type such as "objekt", a bad pattern).
//
// See RATIONALE.md#why-are-references-refused-in-a-settings-schema.
func CheckSettingsSchema(m *abi.Manifest) error {
	_, err := compileSettingsSchema(m)
	return err
}

// refKeywords are the keywords that make a schema refer to a schema.
var refKeywords = map[string]bool{"$ref": true, "$dynamicRef": true, "$recursiveRef": true}

// compileSettingsSchema checks (see CheckSettingsSchema) and compiles m's
// settings_schema.
func compileSettingsSchema(m *abi.Manifest) (*settingsSchema, error) {
	if m == nil || m.SettingsSchema == nil {
		return &settingsSchema{}, nil
	}
	refuse := func(path, reason string, err error) error {
		return &SettingsSchemaError{Hook: m.Name, Path: path, Reason: reason, Err: err}
	}
	values := 0
	var insts int64 // of the regular expressions so far (regexpInsts)
	addRegexp := func(path, expr string) error {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			return nil // the compiler refuses it, with its reason
		}
		if insts += regexpInsts(re); insts > MaxSettingsSchemaRegexpInsts {
			return refuse(path, fmt.Sprintf("its regular expressions are over %d instructions in all", MaxSettingsSchemaRegexpInsts), nil)
		}
		return nil
	}
	var walk func(v any, path string) error
	walk = func(v any, path string) error {
		values++
		if values > MaxSettingsSchemaValues {
			return refuse("", fmt.Sprintf("more than %d values", MaxSettingsSchemaValues), nil)
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) { // the same error every time
				x := v[k]
				p := path + "/" + pointerEscaper.Replace(k)
				if refKeywords[k] {
					return refuse(p, k+" is not allowed: a settings schema is one self-contained tree", nil)
				}
				switch x := x.(type) {
				case string:
					if k == "pattern" {
						if err := addRegexp(p, x); err != nil {
							return err
						}
					}
				case map[string]any:
					if k == "patternProperties" {
						for _, expr := range slices.Sorted(maps.Keys(x)) {
							if err := addRegexp(p+"/"+pointerEscaper.Replace(expr), expr); err != nil {
								return err
							}
						}
					}
				}
				if err := walk(x, p); err != nil {
					return err
				}
			}
		case []any:
			for i, x := range v {
				if err := walk(x, fmt.Sprintf("%s/%d", path, i)); err != nil {
					return err
				}
			}
		case json.Number:
			if err := checkNumber(v); err != nil {
				return refuse(path, err.Error(), nil)
			}
		case string, bool, nil, float64, int, int64:
		default:
			return refuse(path, fmt.Sprintf("a %T is not a JSON value", v), nil)
		}
		return nil
	}
	if err := walk(any(m.SettingsSchema), ""); err != nil {
		return nil, err
	}
	src, err := abi.Marshal(m.SettingsSchema)
	if err != nil {
		return nil, refuse("", "not encodable as JSON", err)
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("settings schema may not reference %s", s)
	}
	if err := c.AddResource(settingsSchemaURL, strings.NewReader(string(src))); err != nil {
		return nil, refuse("", "not a schema", err)
	}
	schema, err := compileGuarded(c)
	if err != nil {
		return nil, refuse("", "does not compile", err)
	}
	return &settingsSchema{s: schema}, nil
}

// compileGuarded compiles the settings schema, turning a panic of the
// compiler (a third party's code, fed the hook author's schema) into an
// error: the checks above are meant to keep it from panicking, this keeps
// a case they miss from crashing the host.
func compileGuarded(c *jsonschema.Compiler) (s *jsonschema.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("the schema compiler failed: %v", p)
		}
	}()
	return c.Compile(settingsSchemaURL)
}

// regexpInsts estimates the instructions of re's compiled program: as
// Simplify expands them, a counted repetition repeats its body up to its
// maximum (its minimum and one more when unbounded). The parser bounds
// nested repetition counts (their product is at most 1000), so this cannot
// overflow.
func regexpInsts(re *syntax.Regexp) int64 {
	var n int64
	for _, sub := range re.Sub {
		n += regexpInsts(sub)
	}
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune)) + 1
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		return int64(max(times, 1)) * (n + 1)
	}
	return n + 1
}

// settingsSchemaURL is the URL a settings schema is compiled under: one that
// names no file of the host (a relative name would resolve against the
// working directory, which then shows in errors) and no reachable server.
const settingsSchemaURL = "https://settings.wasmhooks.invalid/schema.json"

// pointerEscaper escapes a member name for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (s *settingsSchema) validate(settings map[string]any) error {
	if s == nil || s.s == nil {
		return nil
	}
	// Settings in the form abi.ParseJSON produces hold json.Number, which
	// the validator compares exactly: at a cost that grows with their
	// exponent, which is bounded first.
	if err := checkSettingsNumbers(settings); err != nil {
		return fmt.Errorf("%w: refused before the schema is applied: %w", ErrInvalidSettings, err)
	}
	if err := s.validateGuarded(settings); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidSettings, schemaMessages(err))
	}
	return nil
}

// validateGuarded is the validator's Validate, a panic of which is an error
// (see compileGuarded).
func (s *settingsSchema) validateGuarded(settings map[string]any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the schema validator failed: %v", p)
		}
	}()
	return s.s.Validate(any(settings))
}

// ValidateSettings checks settings against m's settings_schema (absent: any
// object), after checking the schema itself (CheckSettingsSchema: a refused
// schema is a *SettingsSchemaError). Settings come from the operator, not
// the hook, but a hook must never see settings its author did not plan for.
// A Chain validates each binding's settings once, when its configuration is
// built; this is for callers that invoke a hook without a chain.
func ValidateSettings(m *abi.Manifest, settings map[string]any) error {
	s, err := compileSettingsSchema(m)
	if err != nil {
		return err
	}
	return s.validate(settings)
}
