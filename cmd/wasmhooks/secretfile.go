package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkSecretFile is the one rule for the files that hold the CLI's secrets
// (the host key, an API key, a bearer token), the way ssh checks its keys.
// It refuses path unless it is a regular file that group and others can
// neither read nor write, owned (on Unix) by the process's effective user,
// root included: a file another user owns was put there by them, who know
// it. Its directory must not be writable by others unless it is sticky
// (/tmp): there anyone could put their own file in its place; a directory
// group can write is left to the group. The error names the file and says
// what to do.
func checkSecretFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s can be read or written by others (mode %04o): chmod 600 it", path, perm)
	}
	if owner, ok := fileOwner(info); ok && owner != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not by us (uid %d): another user could have written it; chown %d it (or run as its owner) and chmod 600 it", path, owner, os.Geteuid(), os.Geteuid())
	}
	dir := filepath.Dir(path)
	d, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if m := d.Mode(); m.Perm()&0o002 != 0 && m&os.ModeSticky == 0 {
		return fmt.Errorf("%s is in %s, which anyone can write (mode %04o, not sticky), so anyone could put their own file in its place: move it to a directory only you can write, or chmod o-w %s", path, dir, m.Perm(), dir)
	}
	return nil
}
