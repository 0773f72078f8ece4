package audit

import (
	"context"
	"errors"
	"testing"
)

// TestVerifyRecord: a record read back on its own verifies under its
// chain's key, and a change to it, a recomputed hash without the key, or
// another key, is found.
func TestVerifyRecord(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := NewKeyedMemorySink(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"continue", "block"} {
		if err := s.Append(context.Background(), &Record{Tenant: "t", Decision: d, Reason: "<b>&"}); err != nil {
			t.Fatal(err)
		}
	}
	good := s.Records()[1]
	changed := good
	changed.Decision = "continue"
	rehashed := changed
	rehashed.Hash, _ = Hash(&rehashed)
	other := []byte("another key, also thirty-two bytes!")
	for _, c := range []struct {
		name string
		r    Record
		key  []byte
		ok   bool
	}{
		{"good, keyed", good, key, true},
		{"good, unkeyed check", good, nil, true},
		{"changed", changed, key, false},
		{"rehashed without the key", rehashed, key, false},
		{"rehashed, unkeyed check", rehashed, nil, true},
		{"another key", good, other, false},
	} {
		err := VerifyRecord(&c.r, c.key)
		var ve *VerifyError
		if c.ok != (err == nil) || (err != nil && !errors.As(err, &ve)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
