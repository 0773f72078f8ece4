// Package keyedlock is a set of mutexes, one per key, each there only while
// someone holds or waits for it: the server's per-run locks and the
// interceptor's per-session locks. (Striped locks let one key's slow holders,
// one per stripe, hold up every other key that hashed to the same stripes.)
package keyedlock

import (
	"context"
	"sync"
)

// Locks is one mutex per key. The zero value is ready to use; it must not be
// copied after first use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	held  chan struct{} // a token in it while the key is held
	users int           // holders and waiters; the entry goes when it drops to 0
}

// Lock locks key and returns the unlock, which must be called once.
func (k *Locks) Lock(key string) (unlock func()) {
	unlock, _ = k.LockContext(context.Background(), key)
	return unlock
}

// LockContext is Lock that gives up when ctx ends first: it then returns
// ctx's error, and no unlock (the key is not held by this call).
func (k *Locks) LockContext(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*lock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &lock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	select {
	case l.held <- struct{}{}:
	default:
		select {
		case l.held <- struct{}{}:
		case <-ctx.Done():
			k.leave(key, l)
			return nil, ctx.Err()
		}
	}
	return func() {
		<-l.held
		k.leave(key, l)
	}, nil
}

// leave drops one user of key's lock l, and the entry with the last.
func (k *Locks) leave(key string, l *lock) {
	k.mu.Lock()
	if l.users--; l.users == 0 {
		delete(k.locks, key)
	}
	k.mu.Unlock()
}

// Len returns how many keys are held or waited for.
func (k *Locks) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
