package hookcase

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRead: a case file is read strictly (an unknown field, "want" with
// "want_failure", an unknown point are errors naming the file) and gets its
// defaults (the file's name, message.outbound).
func TestRead(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, body, wantErr string
	}{
		{"defaults.json", `{"context":{"outgoing":"x"},"want":{"action":"continue"}}`, ""},
		{"typo.json", `{"context":{},"wnat":{"action":"continue"}}`, `unknown field "wnat"`},
		{"both.json", `{"context":{},"want":{"action":"continue"},"want_failure":true}`, "not both"},
		{"point.json", `{"point":"message.sideways","context":{}}`, `unknown hook point "message.sideways" (the points are `},
		{"trailing.json", `{"context":{}} {"context":{}}`, "more than one JSON value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(dir, tt.name)
			if err := os.WriteFile(f, []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Read(f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), f) {
					t.Fatalf("err %v, want one naming %s with %q", err, f, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != strings.TrimSuffix(tt.name, ".json") || c.Point != DefaultPoint || c.File != f {
				t.Errorf("got name %q point %q file %q", c.Name, c.Point, c.File)
			}
		})
	}
}
