package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmhooks/wasmhooks/store"
	"github.com/wasmhooks/wasmhooks/store/sqlite"
)

// The state file: a SQLite database (package store) keeping the credit
// ledger of --credit and the pending approvals of `chain` (unless
// --approvals names a directory), so that they survive between commands and
// several commands may share them at once.

// stateEnv names the environment variable that points at the state file.
const stateEnv = "WASMHOOKS_STATE"

// stateUsage is --state's help text.
const stateUsage = "the state file (SQLite) keeping credit balances and pending approvals between commands (default $" + stateEnv + ", else <user config dir>/wasmhooks/state.db; created if missing)"

// statePath returns the state file to use: flag, else $WASMHOOKS_STATE,
// else <user config dir>/wasmhooks/state.db.
func statePath(flag string) (string, error) {
	return userFile(flag, "state", stateEnv, "state.db")
}

// userFile returns the file a command uses: flag (the value of --flagName)
// when set, else $env, else <user config dir>/wasmhooks/name.
func userFile(flag, flagName, env, name string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no --%s, no $%s, and no user configuration directory: %w", flagName, env, err)
	}
	return filepath.Join(dir, "wasmhooks", name), nil
}

// openState opens the host's state file, once.
func (h *host) openState(ctx context.Context) (*store.DB, *cliError) {
	if h.state != nil {
		return h.state, nil
	}
	path, err := statePath(h.statePath)
	if err != nil {
		return nil, newCLIError(exitRefused, "state", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, newCLIError(exitRefused, "state", err)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, newCLIError(exitRefused, "state", fmt.Errorf("state file %s: %w", path, err))
	}
	h.state = db
	h.closers = append(h.closers, func() { db.Close() })
	return db, nil
}

// openLedger opens the durable ledger in the state file and sets the
// tenant's available credit as --credit says: to N, or as it stands
// (--credit keep). Holds left open by commands that died are released
// first, once their lease has ended.
func (h *host) openLedger(ctx context.Context, tenant string, credit creditFlag) (*store.Ledger, *cliError) {
	db, cerr := h.openState(ctx)
	if cerr != nil {
		return nil, cerr
	}
	l := store.NewLedger(db, store.LedgerOptions{})
	if _, err := l.Sweep(ctx, time.Now()); err != nil {
		return nil, newCLIError(exitRefused, "state", err)
	}
	if credit.keep {
		return l, nil
	}
	avail, _, err := l.Balance(ctx, tenant)
	if err != nil {
		return nil, newCLIError(exitRefused, "state", err)
	}
	if d := credit.n - avail; d != 0 {
		if err := l.Adjust(ctx, tenant, d, "", fmt.Sprintf("wasmhooks --credit %d", credit.n)); err != nil {
			return nil, newCLIError(exitRefused, "state", err)
		}
	}
	return l, nil
}
