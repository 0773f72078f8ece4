package store

import (
	"context"
	"errors"
	"fmt"
)

// Stable codes of the store's errors. They never change once released.
const (
	// CodeUnavailable: the database could not be reached, went away
	// mid-call or refused the statement for a reason other than the data
	// (closed handle, lost connection, lock wait ended by the context).
	// The call changed nothing that a later call can observe as half done:
	// every change is one transaction.
	CodeUnavailable = "STORE_UNAVAILABLE"
	// CodeSchemaTooNew: the database's schema version is newer than this
	// binary knows; it refuses to read or write it.
	CodeSchemaTooNew = "STORE_SCHEMA_TOO_NEW"
	// CodeCorrupt: a row breaks an invariant the schema promises (an
	// unknown state, a negative amount, a cached balance that differs from
	// its entries).
	CodeCorrupt = "STORE_CORRUPT"
	// CodeMigration: a migration failed to apply; it was rolled back.
	CodeMigration = "STORE_MIGRATION"
)

// Sentinels for errors.Is; each matches every *Error with its code.
var (
	ErrUnavailable  = &Error{Code: CodeUnavailable}
	ErrSchemaTooNew = &Error{Code: CodeSchemaTooNew}
	ErrCorrupt      = &Error{Code: CodeCorrupt}
	ErrMigration    = &Error{Code: CodeMigration}
)

// Error is a failure of the store with a stable code.
type Error struct {
	Code string // one of the Code constants
	Op   string // what was being done, e.g. "ledger reserve"
	Msg  string // detail for people; not stable
	Err  error  // the underlying driver error, if any
}

func (e *Error) Error() string {
	s := "store"
	if e.Op != "" {
		s += ": " + e.Op
	}
	s += ": " + e.Code
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error with the same code, so that errors.Is(err,
// ErrUnavailable) holds for every unavailable error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unavailable wraps a driver error as CodeUnavailable. A nil err stays nil;
// an *Error already typed is returned unchanged.
func Unavailable(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	msg := ""
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		msg = "context ended"
	}
	return &Error{Code: CodeUnavailable, Op: op, Msg: msg, Err: err}
}

// Corrupt reports a row that breaks an invariant.
func Corrupt(op, format string, args ...any) error {
	return &Error{Code: CodeCorrupt, Op: op, Msg: fmt.Sprintf(format, args...)}
}
