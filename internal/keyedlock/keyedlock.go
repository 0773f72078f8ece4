// Package keyedlock is a set of mutexes, one per key, each there only while
// someone holds or waits for it: the server's per-run locks and the
// interceptor's per-session locks. (Striped locks let one key's slow holders,
// one per stripe, hold up every other key that hashed to the same stripes.)
package keyedlock

import "sync"

// Locks is one mutex per key. The zero value is ready to use; it must not be
// copied after first use.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when it drops to 0
}

// Lock locks key and returns the unlock, which must be called once.
func (k *Locks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*lock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &lock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// Len returns how many keys are held or waited for.
func (k *Locks) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
