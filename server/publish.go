package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/wasmhooks/wasmhooks/abi"
	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
)

// semverRE is a semantic version (semver.org 2.0.0).
var semverRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ManifestDigest is the hex sha256 of a manifest's canonical JSON
// (abi.Marshal), or "none" for a module without one.
func ManifestDigest(m *abi.Manifest) string {
	if m == nil {
		return "none"
	}
	b, err := abi.Marshal(m)
	if err != nil {
		return "none"
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uploadModule validates the body exactly as runtime.Runtime.Load does (Load
// itself, then the settings schema check chain.New applies), and stores it
// only if it passes.
func (s *Server) uploadModule(w http.ResponseWriter, r *http.Request, p *Principal) {
	wasm, prob := readBody(w, r, runtime.DefaultMaxModuleBytes)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	m, err := s.rt.Load(r.Context(), wasm)
	if err != nil {
		pr := problem(http.StatusUnprocessableEntity, string(runtime.Code(err)), "%v", err)
		if info, verr := runtime.Validate(wasm, runtime.ValidateOptions{}); verr != nil && info != nil {
			pr.Report = info
		}
		writeProblem(w, pr)
		return
	}
	info := m.Info()
	_ = m.Close(context.Background())
	if err := chain.CheckSettingsSchema(info.Manifest); err != nil {
		writeProblem(w, &Problem{Type: "https://wasmhooks.dev/problems/invalid_settings_schema", Title: "Unprocessable Entity",
			Status: http.StatusUnprocessableEntity, Code: "invalid_settings_schema", Detail: err.Error(), Report: info})
		return
	}
	report, _ := json.Marshal(info)
	tx, err := s.db.BeginTx(r.Context(), nil)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO serve_modules (digest, wasm, report, created) VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING`,
		info.Digest, wasm, string(report), now()); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO serve_uploads (publisher, digest) VALUES (?, ?) ON CONFLICT DO NOTHING`, p.Tenant, info.Digest); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if err := tx.Commit(); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, http.StatusCreated, ModuleDoc{Digest: info.Digest, Report: report})
}

func (s *Server) getModule(w http.ResponseWriter, r *http.Request, p *Principal) {
	var report string
	err := s.db.QueryRowContext(r.Context(), `SELECT m.report FROM serve_modules m JOIN serve_uploads u ON u.digest = m.digest WHERE u.publisher = ? AND m.digest = ?`,
		p.Tenant, r.PathValue("digest")).Scan(&report)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeProblem(w, problem(http.StatusNotFound, CodeNotFound, "not found"))
		return
	case err != nil:
		writeProblem(w, s.internal(err))
		return
	}
	writeJSON(w, 200, map[string]any{"digest": r.PathValue("digest"), "report": json.RawMessage(report)})
}

type versionRequest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

func (s *Server) publishVersion(w http.ResponseWriter, r *http.Request, p *Principal) {
	var req versionRequest
	if pr := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); pr != nil {
		writeProblem(w, pr)
		return
	}
	if !nameRE.MatchString(req.Name) || !semverRE.MatchString(req.Version) || len(req.Version) > 64 || !digestRE.MatchString(req.Digest) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "name is 1 to 64 of [a-z0-9._-], version a semantic version, digest 64 hex digits"))
		return
	}
	var report string
	err := s.db.QueryRowContext(r.Context(), `SELECT m.report FROM serve_modules m JOIN serve_uploads u ON u.digest = m.digest WHERE u.publisher = ? AND m.digest = ?`,
		p.Tenant, req.Digest).Scan(&report)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeNotFound, "no module %s uploaded by %s", req.Digest, p.Tenant))
		return
	case err != nil:
		writeProblem(w, s.internal(err))
		return
	}
	var info runtime.ModuleInfo
	if err := json.Unmarshal([]byte(report), &info); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	md := ManifestDigest(info.Manifest)
	res, err := s.db.ExecContext(r.Context(), `INSERT INTO serve_versions (publisher, name, version, digest, manifest_digest, created) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.Tenant, req.Name, req.Version, req.Digest, md, now())
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		v, pr := s.version(r.Context(), p.Tenant, req.Name, req.Version)
		if pr == nil && v.Digest == req.Digest {
			writeJSON(w, 200, v) // the same publication again: idempotent
			return
		}
		writeProblem(w, problem(http.StatusConflict, CodeConflict, "%s/%s@%s is published already, and a published version never changes", p.Tenant, req.Name, req.Version))
		return
	}
	v, pr := s.version(r.Context(), p.Tenant, req.Name, req.Version)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) version(ctx context.Context, publisher, name, version string) (*VersionDoc, *Problem) {
	v := VersionDoc{Ref: publisher + "/" + name + "@" + version, Publisher: publisher, Name: name, Version: version, Signatures: []SignatureDoc{}}
	err := s.db.QueryRowContext(ctx, `SELECT digest, manifest_digest FROM serve_versions WHERE publisher = ? AND name = ? AND version = ?`,
		publisher, name, version).Scan(&v.Digest, &v.ManifestDigest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, problem(http.StatusNotFound, CodeUnknownVersion, "no published version %s", v.Ref)
	case err != nil:
		return nil, s.internal(err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, signature FROM serve_signatures WHERE publisher = ? AND name = ? AND version = ? ORDER BY key_id`, publisher, name, version)
	if err != nil {
		return nil, s.internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var sd SignatureDoc
		if err := rows.Scan(&sd.KeyID, &sd.Signature); err != nil {
			return nil, s.internal(err)
		}
		v.Signatures = append(v.Signatures, sd)
	}
	return &v, nil
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, _ *Principal) {
	v, pr := s.version(r.Context(), r.PathValue("publisher"), r.PathValue("name"), r.PathValue("version"))
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, 200, v)
}

type signingKeyRequest struct {
	PublicKey []byte `json:"public_key"` // 32 bytes, base64
}

func (s *Server) addSigningKey(w http.ResponseWriter, r *http.Request, p *Principal) {
	var req signingKeyRequest
	if pr := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); pr != nil {
		writeProblem(w, pr)
		return
	}
	if len(req.PublicKey) != ed25519.PublicKeySize {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "public_key must be an ed25519 public key: %d bytes, base64", ed25519.PublicKeySize))
		return
	}
	sum := sha256.Sum256(req.PublicKey)
	id := "ed25519:" + hex.EncodeToString(sum[:8])
	if _, err := s.db.ExecContext(r.Context(), `INSERT INTO serve_signing_keys (id, publisher, public_key, created) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		id, p.Tenant, req.PublicKey, now()); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	var owner string
	if err := s.db.QueryRowContext(r.Context(), `SELECT publisher FROM serve_signing_keys WHERE id = ?`, id).Scan(&owner); err != nil || owner != p.Tenant {
		writeProblem(w, problem(http.StatusConflict, CodeConflict, "this public key is registered by another publisher"))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": id})
}

type signRequest struct {
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"` // base64
}

func (s *Server) signVersion(w http.ResponseWriter, r *http.Request, p *Principal) {
	var req signRequest
	if pr := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); pr != nil {
		writeProblem(w, pr)
		return
	}
	v, pr := s.version(r.Context(), p.Tenant, r.PathValue("name"), r.PathValue("version"))
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	pub, pr := s.signingKey(r.Context(), p.Tenant, req.KeyID)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	if !ed25519.Verify(pub, SigningMessage(v.Ref, v.Digest, v.ManifestDigest), req.Signature) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeBadSignature, "the signature does not verify under %s for %s", req.KeyID, v.Ref))
		return
	}
	if _, err := s.db.ExecContext(r.Context(), `INSERT INTO serve_signatures (publisher, name, version, key_id, signature) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.Tenant, v.Name, v.Version, req.KeyID, req.Signature); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	v, pr = s.version(r.Context(), p.Tenant, v.Name, v.Version)
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) signingKey(ctx context.Context, publisher, id string) (ed25519.PublicKey, *Problem) {
	var pub []byte
	err := s.db.QueryRowContext(ctx, `SELECT public_key FROM serve_signing_keys WHERE id = ? AND publisher = ?`, id, publisher).Scan(&pub)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, problem(http.StatusUnprocessableEntity, CodeBadSignature, "no signing key %q of %s", id, publisher)
	case err != nil:
		return nil, s.internal(err)
	}
	return ed25519.PublicKey(pub), nil
}

// signed reports whether v has a signature that verifies under one of its
// publisher's keys.
func (s *Server) signed(ctx context.Context, v *VersionDoc) (bool, *Problem) {
	for _, sd := range v.Signatures {
		pub, pr := s.signingKey(ctx, v.Publisher, sd.KeyID)
		if pr != nil {
			if pr.Code == CodeInternal {
				return false, pr
			}
			continue
		}
		if ed25519.Verify(pub, SigningMessage(v.Ref, v.Digest, v.ManifestDigest), sd.Signature) {
			return true, nil
		}
	}
	return false, nil
}
