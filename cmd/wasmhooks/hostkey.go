package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhooks/wasmhooks/chain/audit"
)

// The host key: 32 random bytes, hex-encoded, in a file only its owner can
// read. It seals approvals (a key derived from it) and keys the audit chain.
// It lives outside the approvals directory and the audit log, so that write
// access to those does not give it; but anyone who can read it (the same
// user, root) can forge approvals and audit records: see SECURITY.md.

// keyFileEnv names the environment variable that points at the key file.
const keyFileEnv = "WASMHOOKS_KEY_FILE"

// hostKeyPath returns the key file to use: flag, else $WASMHOOKS_KEY_FILE,
// else <user config dir>/wasmhooks/host.key.
func hostKeyPath(flag string) (string, error) {
	return userFile(flag, "key", keyFileEnv, "host.key")
}

// loadHostKey reads the host key, creating it first when create is set and
// it does not exist. A key file that another user owns or could have
// written, or that group or others can read, is refused (checkSecretFile).
func loadHostKey(flag string, create bool) ([]byte, error) {
	path, err := hostKeyPath(flag)
	if err != nil {
		return nil, err
	}
	if create {
		if err := createHostKey(path); err != nil {
			return nil, err
		}
	}
	if err := checkSecretFile(path); err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < audit.MinKeyBytes {
		return nil, fmt.Errorf("host key %s is not %d or more bytes in hex", path, audit.MinKeyBytes)
	}
	return key, nil
}

// createHostKey writes a new random key at path unless a file is there.
func createHostKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("host key: %w", err)
	}
	key := make([]byte, audit.MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		f.Close()
		return err
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// approvalKey derives the approval sealing key from the host key, so that an
// approval seal and an audit MAC can never stand for each other.
func approvalKey(host []byte) []byte {
	m := hmac.New(sha256.New, host)
	m.Write([]byte("wasmhooks approval key v1"))
	return m.Sum(nil)
}
