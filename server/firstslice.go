package server

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
)

// The first slice of `wasmhooks serve` (before the store kept approvals and
// audit chains) kept, under its --data directory, the pending approvals as
// a chain.DirApprovals in approvals/ and one audit chain, every tenant's
// records in it, in audit.jsonl; the approvals' index rows (serve_approvals)
// were in state.db, as they are now. importFirstSlice, at start, moves what is still pending
// into the store, so an upgrade loses no paused run.

// importFirstSlice imports into the approval store every approval still
// pending in dataDir/approvals (not resolved, no claim whose lease runs),
// indexes those the index lacks, then renames the directory
// approvals.imported-UNIX so it is not read again; it warns that
// dataDir/audit.jsonl, if there, is no longer appended to. Every approval
// is read and checked before anything is written: one that cannot be (it
// does not decode, a resume of an old process holds it) fails the start
// and leaves everything as it was. The writes are each idempotent (the
// store's Put keeps an approval once claimed or resolved as it is, the
// index's insert does nothing for an id it has), so a start that fails
// among them, or two nodes importing one directory at once, complete the
// import and revive nothing.
func (s *Server) importFirstSlice(ctx context.Context, dataDir string) error {
	if dataDir == "" {
		return nil
	}
	if logPath := filepath.Join(dataDir, "audit.jsonl"); exists(logPath) {
		s.log.Warn("server: the first slice's audit log is no longer appended to (it is kept as it is); each tenant's audit chain is in the database: GET /v1/tenants/{tenant}/audit and .../audit/verify",
			"file", logPath)
	}
	dir := filepath.Join(dataDir, "approvals")
	fi, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("server: the first slice's approvals %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("server: the first slice's approvals %s is not a directory", dir)
	}
	pending, resolved, err := s.readFirstSlice(ctx, dir)
	if err != nil {
		return fmt.Errorf("server: importing the first slice's approvals from %s: %w; nothing was imported and the directory is as it was", dir, err)
	}
	for _, a := range pending {
		if err := s.importApproval(ctx, a); err != nil {
			return fmt.Errorf("server: importing the first slice's approvals from %s: approval %s: %w; the directory is kept, and the next start imports what is left", dir, a.ID, err)
		}
	}
	for _, id := range resolved {
		// Resolved by the old server, whose outcome the index never got
		// (it stopped between the two): markUnrecorded gives it up.
		if _, err := s.db.ExecContext(ctx, `UPDATE serve_approvals SET done_at = ? WHERE id = ? AND status = 'pending' AND done_at IS NULL`,
			time.Now().UnixNano(), id); err != nil {
			return fmt.Errorf("server: importing the first slice's approvals from %s: noting approval %s resolved: %w", dir, id, err)
		}
	}
	to := fmt.Sprintf("%s.imported-%d", dir, time.Now().Unix())
	if err := os.Rename(dir, to); err != nil {
		if os.IsNotExist(err) {
			return nil // another node sharing the directory imported it at once
		}
		return fmt.Errorf("server: the first slice's approvals from %s are imported, but the directory could not be renamed: %w", dir, err)
	}
	s.log.Warn("server: imported the first slice's pending approvals into the database", "imported", len(pending), "resolved", len(resolved), "from", dir, "renamed", to)
	return nil
}

// readFirstSlice reads the approvals of the DirApprovals dir: those still
// pending, checked against the index, and the ids of the resolved ones.
func (s *Server) readFirstSlice(ctx context.Context, dir string) (pending []*chain.Approval, resolved []string, err error) {
	d, err := chain.NewDirApprovals(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil, nil // imported (and renamed) by another node meanwhile
	} else if err != nil {
		return nil, nil, err
	}
	// An approval's files are ID.json (pending), ID.claim-OWNER-LEASE (a
	// resume's claim) and ID.resolved (its tombstone).
	ids := map[string]bool{}
	for _, e := range entries {
		id, _, _ := strings.Cut(e.Name(), ".")
		ids[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		a, err := d.Get(ctx, id)
		var ae *chain.ApprovalError
		switch {
		case errors.As(err, &ae) && ae.Code == chain.ApprovalResolved:
			resolved = append(resolved, id)
			continue
		case errors.As(err, &ae) && ae.Code == chain.ApprovalClaimed:
			return nil, nil, fmt.Errorf("approval %s is being resumed by a server of the first slice (its claim's lease has not ended): stop every old server and start again once its lease ends (at most %v)", id, chain.DefaultApprovalLease)
		case errors.Is(err, chain.ErrUnknownApproval):
			continue // a name that is no approval (a temporary file left behind)
		case err != nil:
			return nil, nil, fmt.Errorf("approval %s: %w", id, err)
		case a.ID != id || a.Tenant == "" || a.Run == "":
			return nil, nil, fmt.Errorf("approval %s: its file holds approval %q of tenant %q, run %q", id, a.ID, a.Tenant, a.Run)
		}
		var tenant, status string
		err = s.db.QueryRowContext(ctx, `SELECT tenant, status FROM serve_approvals WHERE id = ?`, id).Scan(&tenant, &status)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, nil, fmt.Errorf("approval %s: reading its index: %w", id, err)
		case tenant != a.Tenant:
			return nil, nil, fmt.Errorf("approval %s: its file says tenant %q, the index %q", id, a.Tenant, tenant)
		case status != "pending":
			// The index has its outcome: never made pending again.
			s.log.Warn("server: a first slice's approval left pending in its directory is resolved in the index; not imported", "id", id, "status", status)
			continue
		}
		pending = append(pending, a)
	}
	return pending, resolved, nil
}

// importApproval puts a into the approval store and indexes it if the
// index lacks it (the first slice stopped between the two, or the state is
// now in another database).
func (s *Server) importApproval(ctx context.Context, a *chain.Approval) error {
	err := s.opts.Approvals.Put(ctx, a)
	var ae *chain.ApprovalError
	if errors.As(err, &ae) && (ae.Code == chain.ApprovalClaimed || ae.Code == chain.ApprovalResolved) {
		return nil // imported by an earlier start, and resumed since
	} else if err != nil {
		return err
	}
	return s.indexApproval(ctx, a)
}

// exists says whether anything is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
