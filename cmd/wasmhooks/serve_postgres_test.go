package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhooks/wasmhooks/store/storetest"
)

// TestServePostgres: `serve --db` keeps the platform in Postgres; a second
// node on the database starts with the first's host key (copied), without
// a new admin key, and a node with another host key is refused.
func TestServePostgres(t *testing.T) {
	url := storetest.PostgresURL(t)
	t.Setenv("WASMHOOKS_ADMIN_KEY", "")
	dir1, dir2, dir3 := t.TempDir(), t.TempDir(), t.TempDir()
	s1 := startServe(t, "--data", dir1, "--db", url)
	if stderr1 := s1.stderr.String(); !strings.Contains(stderr1, "whk_") || !strings.Contains(stderr1, "db=postgres") {
		t.Fatalf("the first node printed no admin key, or is not on postgres:\n%s", stderr1)
	}
	if _, err := os.Stat(filepath.Join(dir1, "state.db")); !os.IsNotExist(err) {
		t.Fatalf("a node on Postgres made a SQLite file: %v", err)
	}
	// Another host key: refused.
	if s2 := serve(t, "--data", dir2, "--db", url); s2.addr != "" || s2.stop(t) != exitRefused || !strings.Contains(s2.stdout.String(), "host key") {
		t.Fatalf("a node with another host key: addr %q exit %d: %s", s2.addr, s2.stop(t), s2.stdout.String())
	}
	// The same host key: a second node of the platform.
	key, err := os.ReadFile(filepath.Join(dir1, "host.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir3, "host.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	s3 := startServe(t, "--data", dir3, "--db", url)
	if stderr3 := s3.stderr.String(); strings.Contains(stderr3, "whk_") {
		t.Fatalf("the second node printed another admin key:\n%s", stderr3)
	}
	for _, a := range []string{s1.addr, s3.addr} {
		if status, _ := httpGet(t, "http://"+a+"/readyz"); status != 200 {
			t.Fatalf("readyz of %s: %d", a, status)
		}
	}
}
