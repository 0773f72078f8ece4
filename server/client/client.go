// Package client is the Go client of the wasmhooks platform's HTTP API
// (package server, `wasmhooks serve`). Every method returns an *api.Problem
// when the server answers with one. It imports only the standard library and
// package api, so a platform's program does not compile the runtime.
package client

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// MaxResponseBytes bounds a response body the client reads (64 MiB).
const MaxResponseBytes = 64 << 20

// Client calls the API at Base with Key.
type Client struct {
	Base string // http://host:port
	Key  string
	HTTP *http.Client // nil means http.DefaultClient
}

// New returns a client of the server at base with key.
func New(base, key string) *Client { return &Client{Base: strings.TrimSuffix(base, "/"), Key: key} }

// Do sends one request and decodes a 2xx JSON answer into out (if not nil);
// a problem+json answer is returned as a *api.Problem.
func (c *Client) Do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		p := &api.Problem{}
		if json.Unmarshal(b, p) != nil || p.Code == "" {
			return fmt.Errorf("client: %s %s: %s", method, path, resp.Status)
		}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			p.RetryAfter = n
		}
		return p
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil
	}
	return json.Unmarshal(b, out)
}

func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	ct := ""
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
		ct = "application/json"
	}
	return c.Do(ctx, method, path, ct, body, out)
}

// call does a JSON request (doJSON) whose answer is a T.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (*T, error) {
	var d T
	err := c.doJSON(ctx, method, path, in, &d)
	return &d, err
}

func esc(s string) string { return url.PathEscape(s) }

// CreateTenant creates a tenant (admin).
func (c *Client) CreateTenant(ctx context.Context, id string, requireSignatures bool) error {
	return c.doJSON(ctx, "POST", "/v1/tenants", map[string]any{"id": id, "require_signatures": requireSignatures}, nil)
}

// CreateKey creates an API key (admin); the key is in the answer only.
func (c *Client) CreateKey(ctx context.Context, role api.Role, tenant string) (*api.KeyDoc, error) {
	return call[api.KeyDoc](ctx, c, "POST", "/v1/keys", map[string]any{"role": role, "tenant": tenant})
}

// GrantCredit grants amount to tenant (admin); key makes it idempotent.
func (c *Client) GrantCredit(ctx context.Context, tenant string, amount int64, key string) (*api.CreditDoc, error) {
	return call[api.CreditDoc](ctx, c, "POST", "/v1/tenants/"+esc(tenant)+"/credit", map[string]any{"amount": amount, "key": key})
}

// AdjustCredit adds amount (either sign, not 0) to tenant's credit with a
// note saying why (admin); key, if not empty, makes it idempotent.
func (c *Client) AdjustCredit(ctx context.Context, tenant string, amount int64, note, key string) (*api.CreditDoc, error) {
	return call[api.CreditDoc](ctx, c, "POST", "/v1/tenants/"+esc(tenant)+"/credit/adjustments", map[string]any{"amount": amount, "note": note, "key": key})
}

// Credit reads tenant's credit.
func (c *Client) Credit(ctx context.Context, tenant string) (*api.CreditDoc, error) {
	return call[api.CreditDoc](ctx, c, "GET", "/v1/tenants/"+esc(tenant)+"/credit", nil)
}

// UploadModule uploads a module (publisher) and returns its digest and
// validation report.
func (c *Client) UploadModule(ctx context.Context, publisher string, wasm []byte) (*api.ModuleDoc, error) {
	var d api.ModuleDoc
	err := c.Do(ctx, "POST", "/v1/publishers/"+esc(publisher)+"/modules", "application/wasm", wasm, &d)
	return &d, err
}

// Publish publishes publisher/name@version as digest (publisher).
func (c *Client) Publish(ctx context.Context, publisher, name, version, digest string) (*api.VersionDoc, error) {
	return call[api.VersionDoc](ctx, c, "POST", "/v1/publishers/"+esc(publisher)+"/versions", map[string]any{"name": name, "version": version, "digest": digest})
}

// Version reads a published version.
func (c *Client) Version(ctx context.Context, publisher, name, version string) (*api.VersionDoc, error) {
	return call[api.VersionDoc](ctx, c, "GET", "/v1/publishers/"+esc(publisher)+"/versions/"+esc(name)+"/"+esc(version), nil)
}

// AddSigningKey registers pub for publisher and returns its key id.
func (c *Client) AddSigningKey(ctx context.Context, publisher string, pub ed25519.PublicKey) (string, error) {
	var d struct {
		ID string `json:"id"`
	}
	err := c.doJSON(ctx, "POST", "/v1/publishers/"+esc(publisher)+"/signing-keys", map[string]any{"public_key": []byte(pub)}, &d)
	return d.ID, err
}

// Sign signs a published version with priv (registered as keyID): the
// signature is made here, over api.SigningMessage; the private key never
// leaves the caller.
func (c *Client) Sign(ctx context.Context, publisher, name, version, keyID string, priv ed25519.PrivateKey) (*api.VersionDoc, error) {
	v, err := c.Version(ctx, publisher, name, version)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(priv, api.SigningMessage(v.Ref, v.Digest, v.ManifestDigest))
	var out api.VersionDoc
	err = c.doJSON(ctx, "POST", "/v1/publishers/"+esc(publisher)+"/versions/"+esc(name)+"/"+esc(version)+"/signatures",
		map[string]any{"key_id": keyID, "signature": sig}, &out)
	return &out, err
}

// Pin names a published version pinned to its digest, as a binding's module.
func Pin(v *api.VersionDoc) string { return v.Ref + "#sha256:" + v.Digest }

// BindChain binds the tenant's chain configuration (operator).
func (c *Client) BindChain(ctx context.Context, tenant string, config []byte) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.Do(ctx, "PUT", "/v1/tenants/"+esc(tenant)+"/chain", "application/json", config, &out)
	return out, err
}

// Outcome is a run's outcome as the API returns it (the chain's Outcome,
// with the approval as a api.ApprovalView). Raw holds the whole document.
type Outcome struct {
	Run         string            `json:"run"`
	Tenant      string            `json:"tenant"`
	Point       string            `json:"point"`
	Verdict     string            `json:"verdict"`
	Modified    bool              `json:"modified"`
	Binding     string            `json:"binding,omitempty"`
	By          string            `json:"by,omitempty"`
	Reason      string            `json:"reason,omitempty"`
	UserMessage string            `json:"user_message,omitempty"`
	Context     map[string]any    `json:"context"`
	Approval    *api.ApprovalView `json:"approval,omitempty"`
	Raw         json.RawMessage   `json:"-"`
}

// Run runs the tenant's chain at point over ctxDoc (runtime); run, if not
// empty, makes it idempotent.
func (c *Client) Run(ctx context.Context, tenant, point string, ctxDoc map[string]any, run string) (*Outcome, error) {
	var raw json.RawMessage
	if err := c.doJSON(ctx, "POST", "/v1/tenants/"+esc(tenant)+"/runs", map[string]any{"point": point, "context": ctxDoc, "run": run}, &raw); err != nil {
		return nil, err
	}
	return decodeOutcome(raw)
}

func decodeOutcome(raw json.RawMessage) (*Outcome, error) {
	var o Outcome
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	o.Raw = raw
	return &o, nil
}

// Approvals lists the tenant's approvals with status (pending or resolved).
func (c *Client) Approvals(ctx context.Context, tenant, status string) ([]api.ApprovalView, error) {
	var d struct {
		Approvals []api.ApprovalView `json:"approvals"`
	}
	err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/approvals?status="+url.QueryEscape(status), nil, &d)
	return d.Approvals, err
}

// Resolve resolves a pending approval (operator) and returns the resumed
// run's outcome.
func (c *Client) Resolve(ctx context.Context, tenant, id, decision string, edit map[string]any, reason string) (*Outcome, error) {
	var raw json.RawMessage
	if err := c.doJSON(ctx, "POST", "/v1/tenants/"+esc(tenant)+"/approvals/"+esc(id)+"/resolve",
		map[string]any{"decision": decision, "edit": edit, "reason": reason}, &raw); err != nil {
		return nil, err
	}
	return decodeOutcome(raw)
}

// ErrUnrecorded is Result's error for an approval that was resolved but
// whose resumed run's outcome was never recorded (api.ResultDoc): none will
// come; the tenant's audit records say how it was resolved.
var ErrUnrecorded = errors.New("client: the approval was resolved, but its outcome was not recorded")

// Result waits up to waitSeconds for approval id's result: the outcome once
// resolved, nil while it is still pending, ErrUnrecorded if it never will be.
func (c *Client) Result(ctx context.Context, tenant, id string, waitSeconds int) (*Outcome, error) {
	var d api.ResultDoc
	if err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/approvals/"+esc(id)+"/result?wait="+strconv.Itoa(waitSeconds), nil, &d); err != nil {
		return nil, err
	}
	if d.Status == "unrecorded" {
		return nil, ErrUnrecorded
	}
	if d.Status != "resolved" {
		return nil, nil
	}
	return decodeOutcome(d.Outcome)
}

// Audit reads the tenant's audit records after seq (-1: from the first).
func (c *Client) Audit(ctx context.Context, tenant string, after int64, limit int) ([]json.RawMessage, error) {
	q := "?limit=" + strconv.Itoa(limit)
	if after >= 0 {
		q += "&after=" + strconv.FormatInt(after, 10)
	}
	var d struct {
		Records []json.RawMessage `json:"records"`
	}
	err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/audit"+q, nil, &d)
	return d.Records, err
}

// Tenants lists the tenants (admin).
func (c *Client) Tenants(ctx context.Context) ([]json.RawMessage, error) {
	var d struct {
		Tenants []json.RawMessage `json:"tenants"`
	}
	err := c.doJSON(ctx, "GET", "/v1/tenants", nil, &d)
	return d.Tenants, err
}

// CreateNamedKey is CreateKey with a name (a note for whoever lists keys).
func (c *Client) CreateNamedKey(ctx context.Context, role api.Role, tenant, name string) (*api.KeyDoc, error) {
	return call[api.KeyDoc](ctx, c, "POST", "/v1/keys", map[string]any{"role": role, "tenant": tenant, "name": name})
}

// Keys lists the API keys (admin), of one tenant if tenant is not empty:
// never their secrets.
func (c *Client) Keys(ctx context.Context, tenant string) ([]api.KeyInfo, error) {
	var d struct {
		Keys []api.KeyInfo `json:"keys"`
	}
	q := ""
	if tenant != "" {
		q = "?tenant=" + url.QueryEscape(tenant)
	}
	err := c.doJSON(ctx, "GET", "/v1/keys"+q, nil, &d)
	return d.Keys, err
}

// RevokeKey revokes the API key id (admin).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.doJSON(ctx, "DELETE", "/v1/keys/"+esc(id), nil, nil)
}

// RotateKey gives the API key id a new secret (admin): the answer holds it,
// once; the old one stops working.
func (c *Client) RotateKey(ctx context.Context, id string) (*api.KeyDoc, error) {
	return call[api.KeyDoc](ctx, c, "POST", "/v1/keys/"+esc(id)+"/rotate", nil)
}

// Versions lists publisher's published versions (its publisher, or any
// tenant's operator), of module name only if name is not empty.
func (c *Client) Versions(ctx context.Context, publisher, name string) ([]api.HookDoc, error) {
	var d struct {
		Versions []api.HookDoc `json:"versions"`
	}
	if err := c.doJSON(ctx, "GET", "/v1/publishers/"+esc(publisher)+"/versions", nil, &d); err != nil {
		return nil, err
	}
	out := d.Versions[:0]
	for _, v := range d.Versions {
		if name == "" || v.Name == name {
			out = append(out, v)
		}
	}
	return out, nil
}

// RegisterSigningKey registers pub for publisher (its publisher, or an
// admin, whose registration is approved at once) and returns the key.
func (c *Client) RegisterSigningKey(ctx context.Context, publisher string, pub ed25519.PublicKey) (*api.SigningKeyDoc, error) {
	return call[api.SigningKeyDoc](ctx, c, "POST", "/v1/publishers/"+esc(publisher)+"/signing-keys", map[string]any{"public_key": []byte(pub)})
}

// SigningKeys lists publisher's signing keys (its publisher, or an admin).
func (c *Client) SigningKeys(ctx context.Context, publisher string) ([]api.SigningKeyDoc, error) {
	var d struct {
		Keys []api.SigningKeyDoc `json:"signing_keys"`
	}
	err := c.doJSON(ctx, "GET", "/v1/publishers/"+esc(publisher)+"/signing-keys", nil, &d)
	return d.Keys, err
}

// ApproveSigningKey approves publisher's signing key id (admin): its
// signatures count for require_signatures from the next bind.
func (c *Client) ApproveSigningKey(ctx context.Context, publisher, id string) (*api.SigningKeyDoc, error) {
	return call[api.SigningKeyDoc](ctx, c, "PUT", "/v1/publishers/"+esc(publisher)+"/signing-keys/"+esc(id)+"/approval", nil)
}

// DistrustSigningKey withdraws the approval of publisher's signing key id
// (admin).
func (c *Client) DistrustSigningKey(ctx context.Context, publisher, id string) (*api.SigningKeyDoc, error) {
	return call[api.SigningKeyDoc](ctx, c, "DELETE", "/v1/publishers/"+esc(publisher)+"/signing-keys/"+esc(id)+"/approval", nil)
}

// VerifyAudit verifies the tenant's audit chain with the platform's key,
// from the checkpoint the platform keeps (from record 0 when it has none).
func (c *Client) VerifyAudit(ctx context.Context, tenant string) (*api.AuditVerifyDoc, error) {
	return c.VerifyAuditFrom(ctx, tenant, false, nil)
}

// VerifyAuditFrom is VerifyAudit reading the chain from record 0 when full
// is set, and checking that it still holds checkpoint when not nil (a
// previous answer's Checkpoint, kept by the caller: the platform's database
// cannot roll back what it says).
func (c *Client) VerifyAuditFrom(ctx context.Context, tenant string, full bool, checkpoint *api.AuditCheckpoint) (*api.AuditVerifyDoc, error) {
	q := url.Values{}
	if full {
		q.Set("full", "true")
	}
	if checkpoint != nil {
		b, err := json.Marshal(checkpoint)
		if err != nil {
			return nil, err
		}
		q.Set("checkpoint", string(b))
	}
	path := "/v1/tenants/" + esc(tenant) + "/audit/verify"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var d api.AuditVerifyDoc
	if err := c.doJSON(ctx, "GET", path, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
