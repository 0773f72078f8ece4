package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultHeartbeat is how often an approval's event stream sends a comment
// line while it waits (15 s): proxies and load balancers that close idle
// connections see traffic, and a client learns within that long that the
// connection is gone.
const DefaultHeartbeat = 15 * time.Second

// sseReread is how often a waiting stream reads the approval again, for a
// resolution made by another process (the long poll's rhythm).
const sseReread = 500 * time.Millisecond

// The events of an approval's stream (approvalEvents): "status" first, with
// the approval's status; then "resolved", with the ResultDoc carrying the
// resumed run's outcome (or status unrecorded and no outcome: none will
// come), or "timeout" (still pending when the wait ended, or the server is
// draining), and the stream ends.
const (
	EventStatus   = "status"
	EventResolved = "resolved"
	EventTimeout  = "timeout"
)

// parseWait reads ?wait= (seconds, a number, at most MaxWait); def when
// absent.
func (s *Server) parseWait(r *http.Request, def time.Duration) (time.Duration, *Problem) {
	q := r.URL.Query().Get("wait")
	if q == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(q, "s"), 64)
	if err != nil || !(n >= 0) || math.IsInf(n, 0) {
		return 0, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "wait is a number of seconds")
	}
	// Compared in seconds: n*1e9 past int64 converts to a negative
	// Duration.
	if n >= s.opts.MaxWait.Seconds() {
		return s.opts.MaxWait, nil
	}
	return time.Duration(n * float64(time.Second)), nil
}

// approvalEvents streams an approval's result as Server-Sent Events
// (text/event-stream): the same wait as approvalResult's long poll (the same
// scope, and the same per-key bound on open waits, MaxPollsPerKey), with a
// comment line every Heartbeat, ending after the "resolved" event or after
// ?wait= seconds (default and at most MaxWait) with "timeout".
func (s *Server) approvalEvents(w http.ResponseWriter, r *http.Request, p *Principal) {
	tenant, id := r.PathValue("tenant"), r.PathValue("id")
	wait, pr := s.parseWait(r, s.opts.MaxWait)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	// The approval must exist, and be the tenant's, before the stream
	// starts: an unknown id is a 404 problem, not an empty stream.
	status, _, outcome, pr := s.approvalRow(r.Context(), tenant, id)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	end, ok := s.startWait(w, r, p, "waits")
	if !ok {
		return
	}
	defer end()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		// json.Marshal's output is one line: one data field.
		if _, err := w.Write([]byte("event: " + event + "\ndata: " + string(b) + "\n\n")); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if status != "pending" { // resolved, or unrecorded
		send(EventResolved, ResultDoc{ID: id, Status: status, Outcome: outcome})
		return
	}
	if !send(EventStatus, ResultDoc{ID: id, Status: status}) {
		return
	}
	// A key revoked or rotated while the stream waits gets nothing more:
	// the stream ends without "resolved" or "timeout".
	live := func() bool {
		ok, err := s.keyLive(context.WithoutCancel(r.Context()), p)
		if err != nil {
			s.log.Warn("server: an event stream's key could not be checked; the stream ends", "err", err)
		}
		return ok && err == nil
	}
	beat := s.opts.Heartbeat
	if beat <= 0 {
		beat = DefaultHeartbeat
	}
	heartbeat := time.NewTicker(beat)
	defer heartbeat.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	reread := time.NewTicker(sseReread)
	defer reread.Stop()
	for {
		ch := s.waiter(id)
		select {
		case <-ch:
		case <-reread.C:
		case <-heartbeat.C:
			if !live() {
				return
			}
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-deadline.C:
			if live() {
				send(EventTimeout, ResultDoc{ID: id, Status: "pending"})
			}
			return
		case <-s.done:
			if live() {
				send(EventTimeout, ResultDoc{ID: id, Status: "pending"})
			}
			return
		case <-r.Context().Done():
			return
		}
		status, _, outcome, pr := s.approvalRow(r.Context(), tenant, id)
		if pr != nil {
			return // the client sees the stream end without "resolved"
		}
		if status != "pending" { // resolved, or unrecorded
			// A waiter made between a pending read and the resolution's
			// wake is closed by nobody else: drop it.
			s.wake(id)
			if live() {
				send(EventResolved, ResultDoc{ID: id, Status: status, Outcome: outcome})
			}
			return
		}
	}
}
