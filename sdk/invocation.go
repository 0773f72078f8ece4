package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/wasmhooks/wasmhooks/abi"
)

// Invocation is one run of the hook: where it runs, the traffic it sees and
// the operator's settings for it. The SDK builds it from the host's
// invocation document; a handler must not keep it after returning.
//
// The SDK checks the whole document before the handler runs (a malformed one
// makes the hook fail, and the handler never runs), but decodes the context
// and the settings only when the handler asks: an accessor such as
// PrimaryText, ContextString or SettingString finds its one field in the
// document, and Context or Settings decode the whole object the first time
// they are called. A handler that reads nothing pays for nothing.
//
// Values in the context and the settings are what strict JSON decodes to:
// map[string]any, []any, string, bool, nil, and json.Number for numbers. The
// typed accessors also accept Go numbers (int, float64, ...), so an
// Invocation built by hand with NewInvocation, in a test, works the same way.
//
// An Invocation is not safe for concurrent use: the accessors decode into it
// and record setting type errors in it.
type Invocation struct {
	// Point is the hook point, such as "message.outbound".
	Point string
	// Meta identifies the invocation.
	Meta Meta

	// context and settings are the objects, decoded or given to
	// NewInvocation, or where to find them in doc.
	context, settings lazyObject
	// doc is the invocation document when the SDK built the Invocation,
	// and lex reads it.
	doc  []byte
	lex  abi.Lexer
	keys [8]abi.Span // the lexer's KeySpace

	settingErrs []error
}

// lazyObject is the context or the settings: the map once decoded (or
// given), or while at is not 0 the offset of the object in the document
// and its first members.
type lazyObject struct {
	m       map[string]any
	at      int
	members [6]member
	n       int
	// more says the object has more members than members holds.
	more bool
}

// member is a member of a lazyObject: val is its string if str, otherwise
// val.Start is where its value starts.
type member struct {
	key, val abi.Span
	str      bool
}

// NewInvocation returns an Invocation built by hand, such as a test passes
// to its handler: the accessors read context and settings as given.
func NewInvocation(point string, context, settings map[string]any, meta Meta) *Invocation {
	return &Invocation{Point: point, Meta: meta, context: lazyObject{m: context}, settings: lazyObject{m: settings}}
}

// Meta identifies an invocation. It is for logs and correlation only; the
// host scopes credit and data by these values, and a hook cannot change them.
type Meta struct {
	// Hook is the hook's name as the operator bound it.
	Hook string
	// Invocation is the invocation's unique id.
	Invocation string
	// Tenant is the tenant the invocation runs for.
	Tenant string
}

// Context returns the traffic at the point; its fields depend on Point
// ("outgoing" for message.outbound, "result" for tool.after, ...). The first
// call decodes it; later calls return the same map, and the accessors read
// it from then on (so a change the handler makes to it is seen by them).
func (inv *Invocation) Context() map[string]any {
	return inv.decodeObject(&inv.context)
}

// Settings returns the operator's settings for this hook, already validated
// by the host against the manifest's settings_schema. It is never nil when
// the SDK builds the Invocation. The first call decodes them; later calls
// return the same map, and the accessors read it from then on.
func (inv *Invocation) Settings() map[string]any {
	m := inv.decodeObject(&inv.settings)
	if m == nil && inv.doc != nil {
		m = map[string]any{}
		inv.settings.m = m
	}
	return m
}

// ContextValue returns the context field key and whether it is present.
func (inv *Invocation) ContextValue(key string) (any, bool) {
	if inv.context.at > 0 {
		if v, found, whole := inv.lookup(&inv.context, key); !whole {
			return v, found
		}
	}
	v, ok := inv.Context()[key]
	return v, ok
}

// ContextString returns the context field key if it is a string, and ""
// otherwise.
func (inv *Invocation) ContextString(key string) string {
	v, _ := inv.ContextValue(key)
	s, _ := v.(string)
	return s
}

// PrimaryField returns the name of the point's primary text field, the one
// ModifyPrimary changes: "outgoing" for message.outbound, "incoming" for
// message.inbound, "result" for tool.after, and so on. It is "" for a point
// without one (context.assemble) or unknown to this SDK.
func (inv *Invocation) PrimaryField() string {
	p, _ := lookupPoint(inv.Point)
	return p.Primary
}

// PrimaryText returns the point's primary field if it is a string, and ""
// otherwise. Some points' primary fields may hold JSON values instead
// (tool.before "arguments"); use ContextValue(inv.PrimaryField()) for those.
func (inv *Invocation) PrimaryText() string {
	f := inv.PrimaryField()
	if f == "" {
		return ""
	}
	return inv.ContextString(f)
}

// Setting returns the raw setting key and whether it is present and not null.
func (inv *Invocation) Setting(key string) (any, bool) {
	if inv.settings.at > 0 {
		if v, found, whole := inv.lookup(&inv.settings, key); !whole {
			return v, found && v != nil
		}
	}
	v, ok := inv.Settings()[key]
	return v, ok && v != nil
}

// SettingString returns setting key if it is a string, and def if it is
// absent or null. Any other type records a *SettingError (see SettingsErr)
// and returns def.
func (inv *Invocation) SettingString(key, def string) string {
	return setting(inv, key, def, "a string", func(v any) (string, bool) {
		s, ok := v.(string)
		return s, ok
	})
}

// SettingStrings returns setting key if it is an array of strings, and nil
// if it is absent or null. A present empty array returns an empty, non-nil
// slice, so `if s == nil` tells "use the default" from "none". Any other type
// records a *SettingError (see SettingsErr) and returns nil.
func (inv *Invocation) SettingStrings(key string) []string {
	return setting(inv, key, nil, "an array of strings", func(v any) ([]string, bool) {
		switch a := v.(type) {
		case []string:
			return append([]string{}, a...), true
		case []any:
			out := make([]string, 0, len(a))
			for _, e := range a {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				out = append(out, s)
			}
			return out, true
		}
		return nil, false
	})
}

// SettingFloat returns setting key if it is a number, and def if it is
// absent or null. Any other type records a *SettingError (see SettingsErr)
// and returns def.
func (inv *Invocation) SettingFloat(key string, def float64) float64 {
	return setting(inv, key, def, "a number", toFloat)
}

// SettingInt returns setting key if it is an integral number that fits an
// int, and def if it is absent or null. Any other value records a
// *SettingError (see SettingsErr) and returns def.
func (inv *Invocation) SettingInt(key string, def int) int {
	return setting(inv, key, def, "an integer", func(v any) (int, bool) {
		f, ok := toFloat(v)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53-1 || f < math.MinInt || f > math.MaxInt {
			return 0, false
		}
		return int(f), true
	})
}

// SettingBool returns setting key if it is a boolean, and def if it is absent
// or null. Any other type records a *SettingError (see SettingsErr) and
// returns def.
func (inv *Invocation) SettingBool(key string, def bool) bool {
	return setting(inv, key, def, "a boolean", func(v any) (bool, bool) {
		b, ok := v.(bool)
		return b, ok
	})
}

// setting returns setting key as conv converts it, and def if it is absent
// or null. A value conv refuses records a *SettingError wanting want and
// returns def.
func setting[T any](inv *Invocation, key string, def T, want string, conv func(any) (T, bool)) T {
	v, ok := inv.Setting(key)
	if !ok {
		return def
	}
	t, ok := conv(v)
	if !ok {
		inv.badSetting(key, want, v)
		return def
	}
	return t
}

// SettingsErr returns the errors the setting accessors recorded so far,
// joined, each a *SettingError; nil if there were none. A handler that reads
// its settings first can return it from a HandleE handler, so that a
// misconfigured hook fails (and the operator's failure policy decides)
// instead of running on defaults the operator did not choose:
//
//	n := inv.SettingInt("min_chars", 400)
//	if err := inv.SettingsErr(); err != nil {
//		return sdk.Decision{}, err
//	}
func (inv *Invocation) SettingsErr() error { return errors.Join(inv.settingErrs...) }

func (inv *Invocation) badSetting(key, want string, got any) {
	inv.settingErrs = append(inv.settingErrs, &SettingError{Key: key, Want: want, Got: got})
}

// SettingError reports a setting of the wrong type or value.
type SettingError struct {
	// Key is the setting's name.
	Key string
	// Want describes what the hook expected, such as "a string".
	Want string
	// Got is the value the operator gave.
	Got any
}

// Error returns `setting "KEY": want WANT, got VALUE`.
func (e *SettingError) Error() string {
	return fmt.Sprintf("setting %q: want %s, got %s", e.Key, e.Want, describe(e.Got))
}

func describe(v any) string {
	switch v := v.(type) {
	case json.Number:
		return "the number " + v.String()
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("%t", v)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T %v", v, v)
}

// toFloat converts a JSON number (json.Number) or a Go number (of a
// predeclared float, int or uint type, not uintptr) to float64.
func toFloat(v any) (float64, bool) {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return f, err == nil
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type().PkgPath() != "" {
		return 0, false // nil, or a defined type other than json.Number
	}
	switch {
	case rv.CanFloat():
		return rv.Float(), true
	case rv.CanInt():
		return float64(rv.Int()), true
	case rv.CanUint() && rv.Kind() != reflect.Uintptr:
		return float64(rv.Uint()), true
	}
	return 0, false
}
