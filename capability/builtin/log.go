package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/capability"
)

// LogWriteName is the name of the log capability.
const LogWriteName = "log.write"

// Limits of log.write.
const (
	// MaxLogMessageBytes is the longest message, in bytes.
	MaxLogMessageBytes = 4 << 10
	// DefaultMaxLogEntries bounds the entries a MemoryLogSink keeps per
	// invocation when its MaxPerInvocation is zero.
	DefaultMaxLogEntries = 1000
)

// ErrLogFull means a log sink refuses more entries for an invocation.
// log.write answers it with QUOTA_EXCEEDED.
var ErrLogFull = errors.New("builtin: log is full for this invocation")

// LogEntry is one line a hook wrote with log.write. Tenant, Hook and
// Invocation come from the call's Caller, never from the payload. It is a
// plain value, safe to copy.
type LogEntry struct {
	Time       time.Time
	Tenant     string
	Hook       string
	Invocation string
	Level      slog.Level
	// Message is the hook's text, verbatim. Sinks must treat it as data
	// (an attribute value), never as format or markup.
	Message string
}

// LogSink receives the lines hooks write.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type LogSink interface {
	WriteLog(ctx context.Context, e LogEntry) error
}

// SlogSink writes hook lines to an operator slog.Logger as records with the
// fixed message "hook log" and attributes tenant, hook, invocation and
// message. The hook's text is only ever an attribute value, so the handler
// quotes or escapes it: CR, LF and ANSI escapes in it cannot forge log lines.
//
// A SlogSink is safe for concurrent use by multiple goroutines.
type SlogSink struct {
	// Logger receives the records. Nil means slog.Default().
	Logger *slog.Logger
}

// WriteLog implements LogSink.
func (s SlogSink) WriteLog(ctx context.Context, e LogEntry) error {
	l := s.Logger
	if l == nil {
		l = slog.Default()
	}
	l.LogAttrs(ctx, e.Level, "hook log",
		slog.String("tenant", e.Tenant),
		slog.String("hook", e.Hook),
		slog.String("invocation", e.Invocation),
		slog.String("message", e.Message))
	return nil
}

// MemoryLogSink keeps hook lines in memory, by invocation, so a CLI can show
// what one invocation wrote.
//
// The zero value is an empty sink ready to use. A MemoryLogSink is safe for
// concurrent use by multiple goroutines.
type MemoryLogSink struct {
	// MaxPerInvocation bounds the entries kept per invocation; more get
	// ErrLogFull. Zero means DefaultMaxLogEntries (1000). Set it before
	// first use.
	MaxPerInvocation int

	mu      sync.Mutex            // guards entries
	entries map[string][]LogEntry // by invocation
}

// WriteLog implements LogSink.
func (s *MemoryLogSink) WriteLog(_ context.Context, e LogEntry) error {
	limit := s.MaxPerInvocation
	if limit <= 0 {
		limit = DefaultMaxLogEntries
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = make(map[string][]LogEntry)
	}
	if len(s.entries[e.Invocation]) >= limit {
		return fmt.Errorf("%w: %d entries", ErrLogFull, limit)
	}
	s.entries[e.Invocation] = append(s.entries[e.Invocation], e)
	return nil
}

// Entries returns a copy of the entries written for invocation, in order.
func (s *MemoryLogSink) Entries(invocation string) []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]LogEntry(nil), s.entries[invocation]...)
}

// Take returns the entries written for invocation and forgets them.
func (s *MemoryLogSink) Take(invocation string) []LogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[invocation]
	delete(s.entries, invocation)
	return e
}

// LogConfig configures log.write. The zero value writes to slog.Default(). It
// is read once by LogWrite; the Sink must be safe for concurrent use.
type LogConfig struct {
	// Sink receives the lines. Nil means SlogSink{Logger: slog.Default()}.
	Sink LogSink
	// Gates guard the capability. Optional.
	Gates []capability.Gate
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// LogWrite returns log.write: {"level": "debug"|"info"|"warn"|"error"
// (default "info"), "message": string of at most 4 KiB} -> {"ok": true}. The
// line is attributed to the caller's tenant, hook and invocation. It is free.
func LogWrite(cfg LogConfig) capability.Capability {
	sink := cfg.Sink
	if sink == nil {
		sink = SlogSink{}
	}
	return capability.Capability{
		Name:        LogWriteName,
		Description: "Writes one line to the operator's log, attributed to this hook and invocation.",
		Schema: fmt.Sprintf(`{"type": "object", "properties": {
			"level": {"enum": ["debug", "info", "warn", "error"]},
			"message": {"type": "string", "maxLength": %d}},
			"required": ["message"], "additionalProperties": false}`, MaxLogMessageBytes),
		Gates: cfg.Gates,
		Execute: func(ctx context.Context, req *capability.Request) (*capability.Result, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m, _ := req.Payload.(map[string]any)
			msg, ok := m["message"].(string)
			if !ok {
				return nil, abi.NewError(abi.StatusInvalidRequest, "message must be a string")
			}
			if len(msg) > MaxLogMessageBytes {
				return nil, abi.Errorf(abi.StatusInvalidRequest, "message is %d bytes, over the limit of %d", len(msg), MaxLogMessageBytes)
			}
			level := slog.LevelInfo
			if l, present := m["level"]; present {
				s, _ := l.(string)
				lv, ok := logLevels[s]
				if !ok {
					return nil, abi.NewError(abi.StatusInvalidRequest, `level must be "debug", "info", "warn" or "error"`)
				}
				level = lv
			}
			err := sink.WriteLog(ctx, LogEntry{
				Time:       time.Now(),
				Tenant:     req.Caller.Tenant,
				Hook:       req.Caller.Hook,
				Invocation: req.Caller.Invocation,
				Level:      level,
				Message:    msg,
			})
			if errors.Is(err, ErrLogFull) {
				return nil, abi.NewError(abi.StatusQuotaExceeded, "this invocation wrote too many log lines")
			}
			if err != nil {
				return nil, err
			}
			return &capability.Result{Value: map[string]any{"ok": true}}, nil
		},
	}
}
