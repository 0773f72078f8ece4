package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
)

// TestNotifyPostgres: a notification sent in a transaction reaches a
// listener on another handle when the transaction commits, and not when it
// rolls back; Listen returns when its context ends.
func TestNotifyPostgres(t *testing.T) {
	url := target.Fresh(t)
	a, b := target.OpenAt(t, url), target.OpenAt(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	type note struct{ channel, payload string }
	got := make(chan note, 8)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.Listen(ctx, []string{"wh_test", "wh_other"}, func() { close(ready) }, func(c, p string) { got <- note{c, p} })
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen never became ready")
	}
	send := func(payload string, commit bool) {
		t.Helper()
		err := store.InTx(ctx, a.SQL(), func(tx *sql.Tx) error {
			if err := a.Notify(ctx, tx, "wh_test", payload); err != nil {
				return err
			}
			if !commit {
				return errors.New("roll back")
			}
			return nil
		})
		if commit && err != nil {
			t.Fatal(err)
		}
	}
	send("rolled back", false)
	send("committed", true)
	if err := a.Notify(ctx, nil, "wh_other", "at once"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []note{{"wh_test", "committed"}, {"wh_other", "at once"}} {
		select {
		case n := <-got:
			if n != want {
				t.Fatalf("got %+v, want %+v (a rolled-back notification must not arrive)", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %+v", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Listen returned nil after its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not return after its context ended")
	}
}
