package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/internal/testutil"
)

// TestChainStream: `chain --stream --chunk N` sends the input's primary
// field in chunks through a streaming point and prints what each released;
// a guard's block stops it with nothing blocked released; a point that does
// not stream, or a chunk under 1, is a usage error.
func TestChainStream(t *testing.T) {
	guests := filepath.Join(testutil.Root(t), "testdata", "guests")
	config := writeTemp(t, "stream.json", `{"modules":{"p":"policy.wasm"},"bindings":[
		{"name":"ban","module":"p","point":"llm.output.stream","phase":"guard","lookahead":16,
		 "settings":{"when":"forbidden","decide":{"action":"block","reason":"forbidden word"}}}]}`)
	base := []string{"chain", "--cache-dir=", "--config", config, "--module-dir", guests, "--point", "llm.output.stream", "--stream"}
	type doc struct {
		Chunks []struct {
			Chunk, Released string
		}
		Final   string `json:"released_at_close"`
		Verdict string
		Binding string
		Runs    int
		Text    string
	}
	exec := func(t *testing.T, input string, args ...string) (doc, string, int) {
		t.Helper()
		stdout, _, code := runCLI(input, append(append([]string(nil), base...), append(args, "--input", "-")...)...)
		var d doc
		_ = json.Unmarshal([]byte(stdout), &d)
		return d, stdout, code
	}
	clean := `{"model":"m","response":"` + strings.Repeat("nothing to see here, ", 6) + `the end."}`
	d, out, code := exec(t, clean, "--chunk", "7")
	var released strings.Builder
	for _, c := range d.Chunks {
		released.WriteString(c.Released)
	}
	released.WriteString(d.Final)
	if code != exitOK || d.Verdict != "allow" || d.Text != strings.Repeat("nothing to see here, ", 6)+"the end." ||
		released.String() != d.Text || len(d.Chunks) != (len(d.Text)+6)/7 || d.Runs < 5 {
		t.Fatalf("exit %d: %s", code, out)
	}

	d, out, code = exec(t, `{"model":"m","response":"`+strings.Repeat("all fine so far. ", 5)+`but this is forbidden text and more"}`, "--chunk", "5")
	if code != exitOK || d.Verdict != "block" || d.Binding != "ban" || strings.Contains(d.Text, "forb") || d.Final != "" {
		t.Fatalf("exit %d: %s", code, out)
	}
	for _, c := range d.Chunks {
		if strings.Contains(c.Released, "forb") {
			t.Fatalf("released %q", c.Released)
		}
	}

	if _, out, code := exec(t, clean, "--chunk", "0"); code != exitUsage || !strings.Contains(out, "--chunk") {
		t.Fatalf("--chunk 0: exit %d: %s", code, out)
	}
	if stdout, _, code := runCLI(clean, "chain", "--cache-dir=", "--config", config, "--module-dir", guests, "--point", "llm.after", "--stream", "--input", "-"); code != exitUsage || !strings.Contains(stdout, "streaming point") {
		t.Fatalf("llm.after: exit %d: %s", code, stdout)
	}
}
