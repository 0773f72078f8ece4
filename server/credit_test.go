package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/server"
)

// TestCreditAdjust: an admin adjusts a tenant's credit either way with a
// note; a zero amount, a missing or long note, a note with a NUL byte, taking back more than the
// balance and reusing a key for another adjustment are refused and change
// nothing; a retried adjustment with its key applies once; a grant's key
// reused for another amount is a 409 as well; other roles get 403.
func TestCreditAdjust(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	a.grant(t, 100, "g1")
	d, err := p.admin.AdjustCredit(ctx, "acme", -30, "refund of a failed batch", "a1")
	if err != nil || d.Available != 70 {
		t.Fatalf("adjust -30: %+v %v", d, err)
	}
	if d, err = p.admin.AdjustCredit(ctx, "acme", -30, "refund of a failed batch", "a1"); err != nil || d.Available != 70 {
		t.Fatalf("the same adjustment again: %+v %v", d, err)
	}
	if d, err = p.admin.AdjustCredit(ctx, "acme", 5, "goodwill", ""); err != nil || d.Available != 75 {
		t.Fatalf("adjust +5: %+v %v", d, err)
	}
	for _, c := range []struct {
		name   string
		amount int64
		note   string
		key    string
		status int
		code   string
	}{
		{"zero", 0, "nothing", "", 422, server.CodeInvalidRequest},
		{"no note", -1, "", "", 422, server.CodeInvalidRequest},
		{"long note", -1, strings.Repeat("x", server.MaxAdjustmentNote+1), "", 422, server.CodeInvalidRequest},
		{"note with a NUL byte", -1, "refund\x00", "", 422, server.CodeInvalidRequest}, // Postgres text refuses it: was a 500
		{"below zero", -76, "too much", "", 409, server.CodeConflict},
		{"key reused for another amount", -1, "refund", "a1", 409, server.CodeConflict},
	} {
		_, err := p.admin.AdjustCredit(ctx, "acme", c.amount, c.note, c.key)
		wantCode(t, err, c.status, c.code)
		if cr, err := p.admin.Credit(ctx, "acme"); err != nil || cr.Available != 75 {
			t.Fatalf("%s changed the credit: %+v %v", c.name, cr, err)
		}
	}
	// A grant's key reused for another amount is the same conflict.
	_, err = p.admin.GrantCredit(ctx, "acme", 7, "g1")
	wantCode(t, err, 409, server.CodeConflict)
	_, err = a.op.AdjustCredit(ctx, "acme", 1000, "mine now", "")
	wantCode(t, err, 403, server.CodeForbidden)
	_, err = p.admin.AdjustCredit(ctx, "nobody", 1, "no such tenant", "")
	wantCode(t, err, 404, server.CodeNotFound)
}
