// Package bodydeadline bounds, from a handler, the time an HTTP request's
// body takes to arrive: the one place that knows when the connection's read
// deadline may be set for it. It serves `wasmhooks serve` (package server)
// and `wasmhooks mcp --http` (package interceptor, whose HTTPHandler an
// embedder mounts on its own http.Server, with its own ReadTimeout or
// none).
package bodydeadline

import (
	"net/http"
	"time"
)

// Set gives the body r declares (a length or chunked) until at to arrive:
// it sets the connection's read deadline. A read of the body past at fails
// with an error that is os.ErrDeadlineExceeded, and a body left unread,
// which net/http reads (up to 256 KiB) after the handler answers, is given
// up at at and its connection closed. Once the handler has read the body
// to its end, net/http lifts the deadline itself (it then reads the
// connection in the background, to see the client go), so a handler that
// runs long after reading its body is not cut off.
//
// A request without a body is left alone: net/http reads its connection
// in the background from the start, and a deadline would end that read
// and cancel the request's context (golang/go#70834), cutting an event
// stream. Set does nothing where the ResponseWriter cannot set a read
// deadline.
func Set(w http.ResponseWriter, r *http.Request, at time.Time) {
	if r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(at)
	}
}
