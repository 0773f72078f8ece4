package main

import (
	"net/http"
	"testing"
)

// TestServeHTTPServerTimeouts: serve's http.Server bounds the header read
// and closes idle keep-alive connections (with a zero IdleTimeout and
// ReadTimeout net/http keeps an idle connection for ever, so unauthenticated
// clients could hold every file descriptor).
func TestServeHTTPServerTimeouts(t *testing.T) {
	hs := newHTTPServer(http.NotFoundHandler())
	if hs.ReadHeaderTimeout <= 0 || hs.IdleTimeout <= 0 || hs.MaxHeaderBytes <= 0 {
		t.Fatalf("ReadHeaderTimeout %v IdleTimeout %v MaxHeaderBytes %d: each must be set", hs.ReadHeaderTimeout, hs.IdleTimeout, hs.MaxHeaderBytes)
	}
}
