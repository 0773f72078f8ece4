package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
)

// limitField is one field of Limits in its JSON form.
type limitField struct {
	name     string // the json tag
	index    int    // in Limits
	duration bool   // a time.Duration, written as a Go duration string
}

// limitFields lists Limits' fields, sorted by JSON name.
var limitFields = func() []limitField {
	t := reflect.TypeFor[Limits]()
	var fs []limitField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			panic("runtime: Limits." + f.Name + " has no json name")
		}
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int64, reflect.Uint32, reflect.Uint64:
		default:
			panic("runtime: Limits." + f.Name + " has a type the JSON form does not know")
		}
		fs = append(fs, limitField{name: name, index: i, duration: f.Type == reflect.TypeFor[time.Duration]()})
	}
	slices.SortFunc(fs, func(a, b limitField) int { return strings.Compare(a.name, b.name) })
	return fs
}()

// MarshalJSON returns the JSON form of l, the one encoding of a Limits: the
// chain's configuration file takes it as a binding's "limits", and the
// chain's configuration digest is computed over it. It is an object whose
// names are the fields' json tags, in snake case ("memory_pages", "fuel",
// "init_fuel", "max_stack_bytes", ...), with
//
//   - durations (Timeout, InitTimeout) as Go duration strings ("250ms",
//     "2s", "1m30s"; time.ParseDuration), and
//   - every other field as a JSON integer, in the field's unit and range
//     and, as everywhere in strict JSON (abi.ParseJSON), within ±(2^53-1):
//     the form cannot say a Fuel or InitFuel beyond that (a budget of
//     days), short of MaxFuel.
//
// MarshalJSON writes the non-zero fields only, names sorted, so equal limits
// have equal bytes; a field left out is zero, the default.
// runtime/testdata/limits.json is the golden form. The fields are read from
// the Limits struct itself, so a new field is in the form, the chain's file
// and its digest as soon as it has a json tag (TestLimitsFieldsInEveryForm
// fails until it has).
func (l Limits) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(l)
	b := []byte{'{'}
	for _, f := range limitFields {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.name)
		b = append(b, ':')
		switch {
		case f.duration:
			b = strconv.AppendQuote(b, time.Duration(fv.Int()).String())
		case fv.CanInt():
			b = strconv.AppendInt(b, fv.Int(), 10)
		default:
			b = strconv.AppendUint(b, fv.Uint(), 10)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON sets l from its JSON form (see MarshalJSON); fields the
// object does not name, or names with null, are zero, and null leaves l as it
// is. It refuses what strict JSON refuses (abi.ParseJSON: duplicate names,
// more than 1 MiB, ...), unknown names (matched exactly, not ignoring case),
// a number where a duration goes and the reverse, fractions, exponents and
// values outside the field's type. The limits' own bounds are Validate's.
func (l *Limits) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	doc, err := abi.ParseJSON(b, abi.JSONLimits{})
	if err != nil {
		return fmt.Errorf("runtime: limits: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("runtime: limits: want an object")
	}
	var out Limits
	v := reflect.ValueOf(&out).Elem()
	for name, val := range obj {
		i, found := slices.BinarySearchFunc(limitFields, name, func(f limitField, name string) int { return strings.Compare(f.name, name) })
		if !found {
			return fmt.Errorf("runtime: limits: unknown field %q", name)
		}
		if val == nil {
			continue
		}
		f := limitFields[i]
		fv := v.Field(f.index)
		if f.duration {
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("runtime: limits: %s: a duration is a string such as \"2s\"", name)
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("runtime: limits: %s: %w", name, err)
			}
			fv.SetInt(int64(d))
			continue
		}
		n, ok := val.(json.Number)
		if !ok {
			return fmt.Errorf("runtime: limits: %s: want an integer", name)
		}
		bits := fv.Type().Bits()
		if fv.CanInt() {
			x, err := strconv.ParseInt(string(n), 10, bits)
			if err != nil {
				return fmt.Errorf("runtime: limits: %s: %s is not an integer of %d bits", name, n, bits)
			}
			fv.SetInt(x)
		} else {
			x, err := strconv.ParseUint(string(n), 10, bits)
			if err != nil {
				return fmt.Errorf("runtime: limits: %s: %s is not a non-negative integer of %d bits", name, n, bits)
			}
			fv.SetUint(x)
		}
	}
	*l = out
	return nil
}
