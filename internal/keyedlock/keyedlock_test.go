package keyedlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLocks: one key's holders take their turn, other keys are not held
// up, and an entry goes with its last user.
func TestLocks(t *testing.T) {
	var k Locks
	var wg sync.WaitGroup
	n := 0 // guarded by key "a"
	for range 50 {
		wg.Go(func() {
			unlock := k.Lock("a")
			n++
			unlock()
		})
	}
	unlockB := k.Lock("b") // held throughout: "a" does not wait for it
	wg.Wait()
	if n != 50 {
		t.Fatalf("n = %d, want 50", n)
	}
	if k.Len() != 1 {
		t.Fatalf("Len %d with only b held, want 1", k.Len())
	}
	unlockB()
	if k.Len() != 0 {
		t.Fatalf("Len %d with nothing held, want 0", k.Len())
	}
}

// TestLockContextGivesUp: a waiter whose context ends returns its error,
// holds nothing and leaves no entry behind; the holder and the next
// waiter are not affected.
func TestLockContextGivesUp(t *testing.T) {
	var k Locks
	unlock := k.Lock("s")
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		u, err := k.LockContext(ctx, "s")
		if u != nil {
			u()
		}
		gaveUp <- err
	}()
	next := make(chan struct{})
	go func() {
		k.Lock("s")()
		close(next)
	}()
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("LockContext: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LockContext did not give up when its context ended")
	}
	select {
	case <-next:
		t.Fatal("the next waiter took a lock still held")
	default:
	}
	unlock()
	<-next
	if k.Len() != 0 {
		t.Fatalf("Len %d after all left, want 0", k.Len())
	}
	// An ended context with the key free still takes it.
	u, err := k.LockContext(ctx, "free")
	if err != nil {
		t.Fatalf("a free key with an ended context: %v", err)
	}
	u()
}
