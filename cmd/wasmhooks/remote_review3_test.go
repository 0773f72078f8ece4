package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/wasmhooks/wasmhooks/server/client"
)

// TestAPIFailUnrecorded: a verb whose approval will never have an outcome
// (call --wait on an approval marked unrecorded) prints the code
// "unrecorded", not "request_failed" (which reads as a network failure
// worth retrying), and exits 1.
func TestAPIFailUnrecorded(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := apiFail(&out, &errOut, "usage", fmt.Errorf("waiting: %w", client.ErrUnrecorded)); code != exitRefused {
		t.Fatalf("exit %d", code)
	}
	var doc apiErrorDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if doc.Error.Code != "unrecorded" {
		t.Fatalf("code %q, want unrecorded: %s", doc.Error.Code, out.String())
	}
}
