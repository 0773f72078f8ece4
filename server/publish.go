package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
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
	maxIn := s.opts.UploadQuota.withDefaults().MaxInFlight
	end, ok, err := s.startLease(r.Context(), "upload:"+p.Tenant, maxIn)
	switch {
	case err != nil:
		s.unavailable(w, "the uploads in flight", err)
		return
	case !ok:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, problem(http.StatusTooManyRequests, CodeRateLimited, "publisher %s has %d uploads in flight already", p.Tenant, maxIn))
		return
	}
	defer func() {
		end()
		s.testHook("upload ended")
	}()
	s.testHook("upload in flight")
	wasm, prob := readBody(w, r, runtime.DefaultMaxModuleBytes)
	if prob != nil {
		writeProblem(w, prob)
		return
	}
	// The quota first, before the costly validation (a publisher past its
	// quota does not get the server compiling its modules); again below,
	// under the publisher's lock, where it is exact.
	sum := sha256.Sum256(wasm)
	if pr := s.checkUploadQuota(r.Context(), s.db, p.Tenant, hex.EncodeToString(sum[:]), int64(len(wasm))); pr != nil {
		writeProblem(w, pr)
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
	// The quota check and the insert are one transaction holding the
	// publisher's lock (lockName): on every node, one publisher's uploads
	// take their turn, so two cannot both pass the last slot.
	tx, err := s.db.BeginTx(r.Context(), nil)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	defer tx.Rollback()
	if err := lockName(r.Context(), tx, "upload-quota:"+p.Tenant); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if pr := s.checkUploadQuota(r.Context(), tx, p.Tenant, info.Digest, int64(len(wasm))); pr != nil {
		writeProblem(w, pr)
		return
	}
	s.testHook("upload checked")
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
	report, pr := s.moduleReport(r.Context(), p.Tenant, r.PathValue("digest"), problem(http.StatusNotFound, CodeNotFound, "not found"))
	respond(w, 200, map[string]any{"digest": r.PathValue("digest"), "report": report}, pr)
}

// moduleReport reads the validation report of publisher's upload digest;
// notFound when publisher uploaded no such module.
func (s *Server) moduleReport(ctx context.Context, publisher, digest string, notFound *Problem) (json.RawMessage, *Problem) {
	var report string
	pr := s.scanRow(s.db.QueryRowContext(ctx, `SELECT m.report FROM serve_modules m JOIN serve_uploads u ON u.digest = m.digest WHERE u.publisher = ? AND m.digest = ?`,
		publisher, digest), notFound, &report)
	return json.RawMessage(report), pr
}

type versionRequest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

func (s *Server) publishVersion(w http.ResponseWriter, r *http.Request, p *Principal, req *versionRequest) {
	if !nameRE.MatchString(req.Name) || !semverRE.MatchString(req.Version) || len(req.Version) > 64 || !digestRE.MatchString(req.Digest) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "name is 1 to 64 of [a-z0-9._-], version a semantic version, digest 64 hex digits"))
		return
	}
	report, pr := s.moduleReport(r.Context(), p.Tenant, req.Digest, problem(http.StatusUnprocessableEntity, CodeNotFound, "no module %s uploaded by %s", req.Digest, p.Tenant))
	if pr != nil {
		writeProblem(w, pr)
		return
	}
	var info runtime.ModuleInfo
	if err := json.Unmarshal(report, &info); err != nil {
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
	respond(w, http.StatusCreated, v, pr)
}

func (s *Server) version(ctx context.Context, publisher, name, version string) (*VersionDoc, *Problem) {
	v := VersionDoc{Ref: publisher + "/" + name + "@" + version, Publisher: publisher, Name: name, Version: version}
	if pr := s.scanRow(s.db.QueryRowContext(ctx, `SELECT digest, manifest_digest FROM serve_versions WHERE publisher = ? AND name = ? AND version = ?`,
		publisher, name, version), problem(http.StatusNotFound, CodeUnknownVersion, "no published version %s", v.Ref), &v.Digest, &v.ManifestDigest); pr != nil {
		return nil, pr
	}
	var err error
	v.Signatures, err = queryAll(ctx, s.db, func(rows *sql.Rows) (sd SignatureDoc, err error) {
		err = rows.Scan(&sd.KeyID, &sd.Signature)
		return
	}, `SELECT key_id, signature FROM serve_signatures WHERE publisher = ? AND name = ? AND version = ? ORDER BY key_id`, publisher, name, version)
	if err != nil {
		return nil, s.internal(err)
	}
	return &v, nil
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request, _ *Principal) {
	v, pr := s.version(r.Context(), r.PathValue("publisher"), r.PathValue("name"), r.PathValue("version"))
	respond(w, 200, v, pr)
}

type signingKeyRequest struct {
	PublicKey []byte `json:"public_key"` // 32 bytes, base64
}

// MaxProposedSigningKeys bounds the signing keys a publisher has proposed
// (registered with its own API key) that no admin approved yet (32); one
// more is 403 quota_exceeded. Every key of a publisher, and a signature per
// key on each version, is read whenever its versions are listed or bound,
// so without a bound one publisher key could make those reads as slow as it
// liked. Keys an admin registers or approves are not counted.
const MaxProposedSigningKeys = 32

// addSigningKey registers an ed25519 public key of the path's publisher. A
// key the publisher registers itself is not trusted until an admin approves
// it (approveSigningKey); a key an admin registers is approved at once. So a
// stolen publisher API key cannot make a version pass a tenant's
// require_signatures: the signing keys that count come from the admin.
func (s *Server) addSigningKey(w http.ResponseWriter, r *http.Request, p *Principal, req *signingKeyRequest) {
	publisher := r.PathValue("publisher")
	if len(req.PublicKey) != ed25519.PublicKeySize {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "public_key must be an ed25519 public key: %d bytes, base64", ed25519.PublicKeySize))
		return
	}
	if !nameRE.MatchString(publisher) {
		writeProblem(w, problem(http.StatusUnprocessableEntity, CodeInvalidRequest, "a publisher's name is 1 to 64 of [a-z0-9._-]"))
		return
	}
	id := SigningKeyID(req.PublicKey)
	// The count of proposed keys and the insert are one transaction
	// holding the publisher's lock (lockName): of proposals racing for the
	// last slot, on any nodes, one passes.
	tx, err := s.db.BeginTx(r.Context(), nil)
	if err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	defer tx.Rollback()
	if err := lockName(r.Context(), tx, "signing-keys:"+publisher); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	if p.Role != RoleAdmin {
		var have, proposed int
		if err := tx.QueryRowContext(r.Context(), `SELECT COUNT(*) FROM serve_signing_keys WHERE id = ?`, id).Scan(&have); err != nil {
			writeProblem(w, s.internal(err))
			return
		}
		if err := tx.QueryRowContext(r.Context(), `SELECT COUNT(*) FROM serve_signing_keys k
			LEFT JOIN serve_signing_key_approvals a ON a.id = k.id WHERE k.publisher = ? AND a.id IS NULL`, publisher).Scan(&proposed); err != nil {
			writeProblem(w, s.internal(err))
			return
		}
		if have == 0 && proposed >= MaxProposedSigningKeys {
			writeProblem(w, problem(http.StatusForbidden, CodeQuotaExceeded, "publisher %s has %d signing keys no admin approved yet, its bound", publisher, proposed))
			return
		}
		s.testHook("signing keys counted")
	}
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO serve_signing_keys (id, publisher, public_key, created) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		id, publisher, req.PublicKey, now()); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	var owner string
	if err := tx.QueryRowContext(r.Context(), `SELECT publisher FROM serve_signing_keys WHERE id = ?`, id).Scan(&owner); err != nil || owner != publisher {
		writeProblem(w, problem(http.StatusConflict, CodeConflict, "this public key is registered by another publisher"))
		return
	}
	if p.Role == RoleAdmin {
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO serve_signing_key_approvals (id, approved) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, id, now()); err != nil {
			writeProblem(w, s.internal(err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	d, pr := s.signingKeyDoc(r.Context(), publisher, id)
	respond(w, http.StatusCreated, d, pr)
}

// signingKeyDoc reads publisher's signing key id (404 when it is not
// publisher's).
func (s *Server) signingKeyDoc(ctx context.Context, publisher, id string) (*SigningKeyDoc, *Problem) {
	d := SigningKeyDoc{ID: id, Publisher: publisher}
	var approved sql.NullString
	if pr := s.scanRow(s.db.QueryRowContext(ctx, `SELECT k.public_key, k.created, a.approved FROM serve_signing_keys k
		LEFT JOIN serve_signing_key_approvals a ON a.id = k.id WHERE k.id = ? AND k.publisher = ?`, id, publisher),
		problem(http.StatusNotFound, CodeNotFound, "not found"), &d.PublicKey, &d.Created, &approved); pr != nil {
		return nil, pr
	}
	d.Approved = approved.Valid
	return &d, nil
}

func (s *Server) listSigningKeys(w http.ResponseWriter, r *http.Request, _ *Principal) {
	out, err := queryAll(r.Context(), s.db, func(rows *sql.Rows) (d SigningKeyDoc, err error) {
		d.Publisher = r.PathValue("publisher")
		var approved sql.NullString
		err = rows.Scan(&d.ID, &d.PublicKey, &d.Created, &approved)
		d.Approved = approved.Valid
		return
	}, `SELECT k.id, k.public_key, k.created, a.approved FROM serve_signing_keys k
		LEFT JOIN serve_signing_key_approvals a ON a.id = k.id WHERE k.publisher = ? ORDER BY k.created, k.id`, r.PathValue("publisher"))
	s.writeList(w, "signing_keys", out, err)
}

// approveSigningKey (admin) makes a publisher's signing key count for
// require_signatures. The admin checks first, by a channel the publisher's
// API key is not (the key id, read out to them), that the key is the
// publisher's.
func (s *Server) approveSigningKey(w http.ResponseWriter, r *http.Request, _ *Principal) {
	s.changeSigningKeyApproval(w, r, `INSERT INTO serve_signing_key_approvals (id, approved) VALUES (?, ?) ON CONFLICT (id) DO NOTHING`, now())
}

// distrustSigningKey (admin) withdraws a signing key's approval: its
// signatures stop counting at the next bind and the next start (a chain in
// force keeps running until then).
func (s *Server) distrustSigningKey(w http.ResponseWriter, r *http.Request, _ *Principal) {
	s.changeSigningKeyApproval(w, r, `DELETE FROM serve_signing_key_approvals WHERE id = ?`)
}

// changeSigningKeyApproval runs change on the approval of the path's
// signing key (its id the first argument, then extra), after checking the
// key is the publisher's, and answers with the key as it is now.
func (s *Server) changeSigningKeyApproval(w http.ResponseWriter, r *http.Request, change string, extra ...any) {
	publisher, id := r.PathValue("publisher"), r.PathValue("keyid")
	if _, pr := s.signingKeyDoc(r.Context(), publisher, id); pr != nil {
		writeProblem(w, pr)
		return
	}
	if _, err := s.db.ExecContext(r.Context(), change, append([]any{id}, extra...)...); err != nil {
		writeProblem(w, s.internal(err))
		return
	}
	d, pr := s.signingKeyDoc(r.Context(), publisher, id)
	respond(w, 200, d, pr)
}

type signRequest struct {
	KeyID     string `json:"key_id"`
	Signature []byte `json:"signature"` // base64
}

func (s *Server) signVersion(w http.ResponseWriter, r *http.Request, p *Principal, req *signRequest) {
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
	respond(w, http.StatusCreated, v, pr)
}

func (s *Server) signingKey(ctx context.Context, publisher, id string) (ed25519.PublicKey, *Problem) {
	var pub []byte
	if pr := s.scanRow(s.db.QueryRowContext(ctx, `SELECT public_key FROM serve_signing_keys WHERE id = ? AND publisher = ?`, id, publisher),
		problem(http.StatusUnprocessableEntity, CodeBadSignature, "no signing key %q of %s", id, publisher), &pub); pr != nil {
		return nil, pr
	}
	return ed25519.PublicKey(pub), nil
}

// signed reports whether v has a signature that verifies under one of its
// publisher's keys that an admin approved.
func (s *Server) signed(ctx context.Context, v *VersionDoc) (bool, *Problem) {
	for _, sd := range v.Signatures {
		d, pr := s.signingKeyDoc(ctx, v.Publisher, sd.KeyID)
		if pr != nil {
			if pr.Code == CodeInternal {
				return false, pr
			}
			continue
		}
		if !d.Approved {
			continue // registered with the publisher's API key alone
		}
		pub := ed25519.PublicKey(d.PublicKey)
		if ed25519.Verify(pub, SigningMessage(v.Ref, v.Digest, v.ManifestDigest), sd.Signature) {
			return true, nil
		}
	}
	return false, nil
}

// The server's tables for what this file adds: a signing key's approval by
// an admin (a row here), kept apart from serve_signing_keys so databases made
// before it need no ALTER.
func init() {
	schema = append(schema,
		`CREATE TABLE IF NOT EXISTS serve_signing_key_approvals (
		id TEXT PRIMARY KEY REFERENCES serve_signing_keys(id),
		approved TEXT NOT NULL)`)
}

// Upload quota per publisher, with its defaults: what a publisher has
// uploaded, in modules and in bytes, summed over every module it uploaded
// (a module uploaded again is not counted twice). An upload past either is
// 403 quota_exceeded and stores nothing. The check is exact on every node
// sharing the database: it and the insert are one transaction holding the
// publisher's lock row (serve_locks), so of uploads racing for the last
// slot, on any nodes, one passes.
const (
	DefaultMaxPublisherModules       = 1000
	DefaultMaxPublisherBytes   int64 = 1 << 30 // 1 GiB
	// DefaultMaxUploadsInFlight bounds the uploads one publisher has in
	// flight at once on all the nodes sharing the database (2); one more
	// is 429 rate_limited (Retry-After), before its body is read. Each is
	// a lease (serve_leases) renewed while it runs: a node that dies
	// mid-upload holds its slot for leaseTTL (30 s) at most.
	DefaultMaxUploadsInFlight = 2
)

// UploadQuota configures the upload quota per publisher. Zero fields mean
// the defaults; a negative field disables that bound.
type UploadQuota struct {
	MaxModules int
	MaxBytes   int64
	// MaxInFlight bounds the publisher's uploads in flight at once, on
	// every node (DefaultMaxUploadsInFlight): each buffers up to
	// runtime.DefaultMaxModuleBytes and then compiles it.
	MaxInFlight int
}

func (q UploadQuota) withDefaults() UploadQuota {
	zeroDefault(&q.MaxModules, DefaultMaxPublisherModules)
	zeroDefault(&q.MaxBytes, DefaultMaxPublisherBytes)
	zeroDefault(&q.MaxInFlight, DefaultMaxUploadsInFlight)
	return q
}

// checkUploadQuota refuses an upload of size bytes that would take
// publisher past its quota, read through db (the database, or the
// transaction that holds the publisher's lock); an upload of a digest it
// uploaded before passes.
func (s *Server) checkUploadQuota(ctx context.Context, db rowQuerier, publisher, digest string, size int64) *Problem {
	q := s.opts.UploadQuota.withDefaults()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM serve_uploads WHERE publisher = ? AND digest = ?`, publisher, digest).Scan(&n); err != nil {
		return s.internal(err)
	}
	if n > 0 {
		return nil
	}
	var count, bytes int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(LENGTH(m.wasm)), 0) FROM serve_uploads u JOIN serve_modules m ON m.digest = u.digest WHERE u.publisher = ?`,
		publisher).Scan(&count, &bytes); err != nil {
		return s.internal(err)
	}
	if q.MaxModules >= 0 && count+1 > int64(q.MaxModules) {
		return problem(http.StatusForbidden, CodeQuotaExceeded, "publisher %s has uploaded %d modules, its quota", publisher, count)
	}
	if q.MaxBytes >= 0 && bytes+size > q.MaxBytes {
		return problem(http.StatusForbidden, CodeQuotaExceeded, "publisher %s has uploaded %d bytes; %d more would pass its quota of %d", publisher, bytes, size, q.MaxBytes)
	}
	return nil
}
