package audit

import (
	"context"
	"fmt"
	"sync"
)

// TenantLogs is a Sink that keeps one chain per tenant: each record goes to
// the Log of its Tenant, a Log over the Store that open returns for it, made
// on the tenant's first record. A tenant's records are numbered from 0 and
// verify (VerifyStore) without the others'. A database store's open hands
// out the Store of one tenant's chain (RATIONALE.md#the-audit-log-over-a-store).
//
// It keeps a Log per tenant seen, for the life of the sink: tenants are the
// platform's, not the hooks'. It takes no CheckpointStore: with several
// writers per chain, checkpoints come from each Store's head, taken apart
// (the server keeps the one its last verification reached: VerifyStoreFrom).
type TenantLogs struct {
	open func(ctx context.Context, tenant string) (Store, error)
	key  []byte
	mu   sync.Mutex // guards logs
	logs map[string]*Log
}

// NewTenantLogs returns a TenantLogs opening each tenant's Store with open;
// key, if not nil (at least MinKeyBytes), keys every chain.
func NewTenantLogs(open func(ctx context.Context, tenant string) (Store, error), key []byte) (*TenantLogs, error) {
	if key != nil {
		if _, err := deriveKeys(key); err != nil {
			return nil, err
		}
	}
	return &TenantLogs{open: open, key: append([]byte(nil), key...), logs: map[string]*Log{}}, nil
}

// Log returns the Log of tenant's chain, opening it if need be.
func (t *TenantLogs) Log(ctx context.Context, tenant string) (*Log, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.logs[tenant]; ok {
		return l, nil
	}
	s, err := t.open(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("audit: opening the chain of tenant %q: %w", tenant, err)
	}
	var key []byte
	if len(t.key) > 0 {
		key = t.key
	}
	l, err := NewLog(ctx, s, LogOptions{Key: key})
	if err != nil {
		return nil, fmt.Errorf("audit: the chain of tenant %q: %w", tenant, err)
	}
	t.logs[tenant] = l
	return l, nil
}

// Append links r into the chain of r.Tenant and stores it.
func (t *TenantLogs) Append(ctx context.Context, r *Record) error {
	l, err := t.Log(ctx, r.Tenant)
	if err != nil {
		return err
	}
	return l.Append(ctx, r)
}
