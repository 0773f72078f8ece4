package audittest

import (
	"context"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// LinkingSink links audit records as a sink must (prev and hash) but keeps
// none, so that a long benchmark does not measure a growing slice.
type LinkingSink struct {
	head string
}

// Append links r after the last record appended.
func (s *LinkingSink) Append(_ context.Context, r *audit.Record) error {
	r.Prev = s.head
	h, err := audit.Hash(r)
	if err != nil {
		return err
	}
	r.Hash, s.head = h, h
	return nil
}
