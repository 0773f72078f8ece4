package server

import "testing"

// TestDollars: the server's ? placeholders become Postgres's $n, in order,
// and a ? inside a quoted string or identifier stays.
func TestDollars(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{`INSERT INTO t VALUES (?, '?', "a?b", ?)`, `INSERT INTO t VALUES ($1, '?', "a?b", $2)`},
		{`SELECT 'it''s ?' , ?`, `SELECT 'it''s ?' , $1`},
	} {
		if got := dollars(c.in); got != c.want {
			t.Errorf("dollars(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
