package testutil

import (
	"reflect"
	"testing"
)

// HalfField returns the zero T but for its field i, set to half that field in
// def. T is a struct of integer fields, such as runtime.Limits, and def its
// defaults: the result is a value of one field that is neither zero nor its
// default, for tests that go over every field.
func HalfField[T any](tb testing.TB, def T, i int) T {
	tb.Helper()
	var v T
	f, d := reflect.ValueOf(&v).Elem().Field(i), reflect.ValueOf(def).Field(i)
	switch {
	case f.CanInt():
		f.SetInt(d.Int() / 2)
	case f.CanUint():
		f.SetUint(d.Uint() / 2)
	default:
		tb.Fatalf("HalfField: no value for a %s", f.Type())
	}
	return v
}
