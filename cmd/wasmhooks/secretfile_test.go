package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// secretReaders are the CLI's readers of secret files, which all go through
// checkSecretFile: each row of the tests below is checked on each.
var secretReaders = []struct {
	name string
	read func(path string) error
}{
	{"host key", func(p string) error { _, err := loadHostKey(p, false); return err }},
	{"api key", func(p string) error { _, err := readSecret("--api-key-file", p, envAPIKey); return err }},
	{"token", func(p string) error { _, err := readSecret("--token-file", p, envMCPToken); return err }},
}

// writeSecretFile writes a valid secret (a host key, also a fine API key or
// token) at dir/secret, with dir and the file given their modes.
func writeSecretFile(t *testing.T, dirMode, fileMode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "secret")
	if err := os.WriteFile(p, []byte(strings.Repeat("ab", audit.MinKeyBytes)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, fileMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecretFileModes: a secret file that group or others can read or write
// is refused, and so is one in a directory anyone can write unless the
// directory is sticky (where anyone could put their own file in its place);
// a directory its group can write is accepted. Without the directory check
// the "directory anyone writes" rows were accepted.
func TestSecretFileModes(t *testing.T) {
	for _, tt := range []struct {
		name              string
		dirMode, fileMode os.FileMode
		want              string // in the error; "" = accepted
	}{
		{"owner only", 0o700, 0o600, ""},
		{"owner read only", 0o700, 0o400, ""},
		{"group reads", 0o700, 0o640, "chmod 600"},
		{"group writes", 0o700, 0o620, "chmod 600"},
		{"others read", 0o700, 0o604, "chmod 600"},
		{"others write", 0o700, 0o602, "chmod 600"},
		{"directory anyone writes", 0o777, 0o600, "which anyone can write (mode 0777, not sticky)"},
		{"directory others write", 0o703, 0o600, "which anyone can write (mode 0703, not sticky)"},
		{"sticky directory anyone writes", 0o777 | os.ModeSticky, 0o600, ""},
		{"directory group writes", 0o770, 0o600, ""},
	} {
		p := writeSecretFile(t, tt.dirMode, tt.fileMode)
		for _, r := range secretReaders {
			err := r.read(p)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s, %s: refused: %v", tt.name, r.name, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p)):
				t.Errorf("%s, %s: error %v, want one naming %s and saying %q", tt.name, r.name, err, p, tt.want)
			}
		}
	}
}

// TestSecretFileOwnedByAnotherUser: run as root (as the CI does), a secret
// file owned by another user (uid 65534), mode 0600 in a directory only
// root writes, is refused: that user could have planted it and so knows it.
// Before the owner check it was accepted.
func TestSecretFileOwnedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a file to another user (the CI runs as root)")
	}
	const other = 65534
	p := writeSecretFile(t, 0o700, 0o600)
	if err := os.Chown(p, other, other); err != nil {
		t.Fatal(err)
	}
	for _, r := range secretReaders {
		err := r.read(p)
		if err == nil || !strings.Contains(err.Error(), p+" is owned by uid 65534, not by us (uid 0)") || !strings.Contains(err.Error(), "chown 0") {
			t.Errorf("%s: error %v, want the refusal naming both uids and chown", r.name, err)
		}
	}
	// Given back to us, it is accepted.
	if err := os.Chown(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, r := range secretReaders {
		if err := r.read(p); err != nil {
			t.Errorf("%s: refused once ours: %v", r.name, err)
		}
	}
}

// TestHostKeyCreatedIsAccepted: a host key loadHostKey creates is ours and
// only ours, in a directory it makes 0700, so it passes its own check.
func TestHostKeyCreatedIsAccepted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "new", "host.key")
	k1, err := loadHostKey(p, true)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := loadHostKey(p, false)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("reloaded: %x, %v; want %x", k2, err, k1)
	}
}
