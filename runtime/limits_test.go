package runtime_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// goldenLimits is testdata/limits.json as a value: every field set.
var goldenLimits = runtime.Limits{
	MemoryPages: 16, MemoryHighWaterPages: 12, Timeout: 250 * time.Millisecond, InitTimeout: 90 * time.Second,
	MaxInputBytes: 4096, MaxOutputBytes: 8192, MaxHostCalls: 8, MaxHostCallBytes: 64 << 10,
	MaxRequestBytes: 512, MaxResultBytes: 768, MaxLogBytes: 1024,
	Fuel: 1_000_000, InitFuel: 2_000_000, MaxStackBytes: 64 << 10,
}

// TestLimitsJSONGolden pins the JSON form of Limits, the chain configuration
// file's "limits" and the input of the configuration digest. The golden file
// is the format: it is edited by hand, never regenerated, and a change to it
// is a change of the file format (and of every configuration digest).
func TestLimitsJSONGolden(t *testing.T) {
	golden := bytes.TrimSpace(testutil.ReadFile(t, "runtime/testdata/limits.json"))
	got, err := json.Marshal(goldenLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Errorf("JSON form of Limits:\n got %s\nwant %s", got, golden)
	}
	var back runtime.Limits
	if err := json.Unmarshal(golden, &back); err != nil || back != goldenLimits {
		t.Errorf("Unmarshal(golden) = %+v, %v; want %+v", back, err, goldenLimits)
	}
	if got, _ := json.Marshal(runtime.Limits{}); string(got) != "{}" {
		t.Errorf("zero Limits = %s, want {}", got)
	}
}

// TestLimitsFieldsInEveryForm fails when a field of Limits is missing from
// one of the places that must know every field: its JSON name, the JSON form
// (both ways), the defaults, Config.Limits as the default of a request, and
// Validate. chain's TestConfigDigestCoversEveryLimit
// and TestConfigFileTakesEveryLimit do the same for the chain's digest and
// file.
func TestLimitsFieldsInEveryForm(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	defaults := reflect.ValueOf(runtime.Limits{}.WithDefaults())
	typ := reflect.TypeFor[runtime.Limits]()
	names := map[string]bool{}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		t.Run(sf.Name, func(t *testing.T) {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !snake.MatchString(name) || names[name] {
				t.Fatalf("json name %q: want a snake-case name of its own", name)
			}
			names[name] = true
			if defaults.Field(i).IsZero() {
				t.Errorf("WithDefaults leaves it zero")
			}

			// A valid value, neither zero nor the default.
			l := testutil.HalfField(t, runtime.Limits{}.WithDefaults(), i)
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || m[name] == nil {
				t.Errorf("JSON form %s: want %q alone", b, name)
			}
			var back runtime.Limits
			if err := json.Unmarshal(b, &back); err != nil || back != l {
				t.Errorf("round trip of %s = %+v, %v; want %+v", b, back, err, l)
			}
			if err := l.WithDefaults().Validate(runtime.DefaultMaxMemoryPages); err != nil {
				t.Errorf("Validate(%s) = %v, want nil", b, err)
			}
			// Config.Limits is the default of a request that leaves the
			// field zero (mergeLimits).
			eff, err := newRuntime(t, runtime.Config{Limits: l}).EffectiveLimits(runtime.Limits{})
			if got, want := reflect.ValueOf(eff).Field(i).Interface(), reflect.ValueOf(l).Field(i).Interface(); err != nil || got != want {
				t.Errorf("with Config.Limits %s, EffectiveLimits(zero) has %v (%v), want %v", b, got, err, want)
			}

			// Out of bounds: every field has one (no negative int or
			// duration; memory under the ceiling, the high-water mark under
			// the memory, fuel under MaxFuel).
			bad := l.WithDefaults()
			f := reflect.ValueOf(&bad).Elem().Field(i)
			switch f.Kind() {
			case reflect.Uint32:
				f.SetUint(math.MaxUint32)
			case reflect.Uint64:
				f.SetUint(runtime.MaxFuel + 1)
			default:
				f.SetInt(-1)
			}
			if err := bad.Validate(runtime.DefaultMaxMemoryPages); err == nil {
				t.Errorf("Validate accepts %s = %v", name, f)
			}
		})
	}
}

func TestLimitsJSONRefused(t *testing.T) {
	for name, src := range map[string]string{
		"unknown field":            `{"fuell": 1}`,
		"duplicate field":          `{"fuel": 1, "fuel": 2}`,
		"not an object":            `[1]`,
		"duration as a number":     `{"timeout": 2000000000}`,
		"bad duration":             `{"timeout": "2 seconds"}`,
		"number as a string":       `{"fuel": "1000"}`,
		"fraction":                 `{"memory_pages": 1.5}`,
		"exponent":                 `{"fuel": 1e6}`,
		"negative unsigned":        `{"memory_pages": -1}`,
		"unsigned out of range":    `{"memory_pages": 4294967296}`,
		"fuel out of range":        `{"fuel": 18446744073709551616}`,
		"beyond strict JSON":       `{"fuel": 9007199254740992}`,
		"bool":                     `{"max_host_calls": true}`,
		"Go field name":            `{"MemoryPages": 16}`,
		"trailing garbage":         `{"fuel": 1} x`,
		"signed int out of range":  `{"max_stack_bytes": 9223372036854775808}`,
		"negative zero (unsigned)": `{"fuel": -0}`,
	} {
		var l runtime.Limits
		if err := json.Unmarshal([]byte(src), &l); err == nil {
			t.Errorf("%s: %s accepted as %+v", name, src, l)
		}
	}
	// What the form accepts: omitted and null fields are zero (the
	// defaults); a negative signed value is Validate's to refuse.
	for src, want := range map[string]runtime.Limits{
		`{}`:                                    {},
		`{"fuel": null, "timeout": null}`:       {},
		`{"timeout": "2s", "memory_pages": 16}`: {Timeout: 2 * time.Second, MemoryPages: 16},
		`{"max_host_calls": -1}`:                {MaxHostCalls: -1},
		`{"fuel": 9007199254740991}`:            {Fuel: 1<<53 - 1},
	} {
		l := runtime.Limits{Fuel: 7} // replaced, not merged into
		if err := json.Unmarshal([]byte(src), &l); err != nil || l != want {
			t.Errorf("%s = %+v, %v; want %+v", src, l, err, want)
		}
	}
	l := runtime.Limits{Fuel: 7}
	if err := json.Unmarshal([]byte(`null`), &l); err != nil || l.Fuel != 7 {
		t.Errorf("null = %+v, %v; want it left as it was", l, err)
	}
}

// FuzzLimitsJSON: whatever the JSON form accepts, it writes back in a form
// it reads as the same limits, and equal limits have equal bytes.
func FuzzLimitsJSON(f *testing.F) {
	f.Add(bytes.TrimSpace(testutil.ReadFile(f, "runtime/testdata/limits.json")))
	for _, s := range []string{`{}`, `null`, `{"timeout": "1.5ms", "init_timeout": "-1h2m3.000000001s"}`,
		`{"fuel": 9007199254740991, "memory_pages": 4294967295, "max_host_calls": -9007199254740991}`,
		`{"fuel": 1, "fuel": 2}`, `{"Fuel": 1}`, `{"timeout": "2s" }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var l runtime.Limits
		if json.Unmarshal(data, &l) != nil {
			return
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var back runtime.Limits
		if err := json.Unmarshal(b, &back); err != nil || back != l {
			t.Fatalf("%s: %+v, written %s, read back %+v, %v", data, l, b, back, err)
		}
		if b2, _ := json.Marshal(back); !bytes.Equal(b, b2) {
			t.Fatalf("%+v written as %s, then %s", l, b, b2)
		}
	})
}
