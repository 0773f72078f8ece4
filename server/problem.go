package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/wasmhooks/wasmhooks/server/api"
)

func problem(status int, code, format string, args ...any) *Problem {
	return api.NewProblem(status, code, fmt.Sprintf(format, args...))
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// readBody reads at most limit bytes of r's body: a longer body is
// body_too_large, and nothing of it is used. The body must arrive within
// BodyTimeout of the request's start (set by observe); once it is read, the
// connection's read deadline is lifted, so that a long handler (a run) is
// not cut off.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Problem) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, problem(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, problem(http.StatusRequestTimeout, CodeBodyTimeout, "the body did not arrive in time")
	case err != nil:
		return nil, problem(http.StatusBadRequest, CodeMalformedJSON, "reading the body: %v", err)
	}
	return b, nil
}

// decodeJSON reads a JSON body of at most limit bytes into v: unknown fields
// and trailing data are refused.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Problem {
	b, p := readBody(w, r, limit)
	if p != nil {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return problem(http.StatusBadRequest, CodeMalformedJSON, "%v", err)
	}
	if dec.More() {
		return problem(http.StatusBadRequest, CodeMalformedJSON, "data after the JSON value")
	}
	return nil
}

// handlerFunc is a route's handler (Route.h).
type handlerFunc = func(http.ResponseWriter, *http.Request, *Principal)

// withBody adapts h, the handler of a route whose body is a JSON T, to the
// route table: the body is decoded first (decodeJSON, at most MaxBodyBytes),
// and one that does not decode is answered without running h.
func withBody[T any](s *Server, h func(w http.ResponseWriter, r *http.Request, p *Principal, req *T)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) {
		var req T
		if pr := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); pr != nil {
			writeProblem(w, pr)
			return
		}
		h(w, r, p, &req)
	}
}

// respond writes doc with status, or pr when it is not nil.
func respond(w http.ResponseWriter, status int, doc any, pr *Problem) {
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, status, doc)
}
