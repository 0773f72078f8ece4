package client

import (
	"context"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// Me reads the caller's own key: its id, role and tenant.
func (c *Client) Me(ctx context.Context) (*api.MeDoc, error) {
	var d api.MeDoc
	err := c.doJSON(ctx, "GET", "/v1/me", nil, &d)
	return &d, err
}

// RunRecord reads a run of tenant (operator): its outcomes, approvals, and
// audit records with their verification status.
func (c *Client) RunRecord(ctx context.Context, tenant, run string) (*api.RunDoc, error) {
	var d api.RunDoc
	err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/runs/"+esc(run), nil, &d)
	return &d, err
}

// Hooks lists the modules tenant's chain names (operator), with their
// signatures and validation reports.
func (c *Client) Hooks(ctx context.Context, tenant string) ([]api.HookDoc, error) {
	var d struct {
		Hooks []api.HookDoc `json:"hooks"`
	}
	err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/hooks", nil, &d)
	return d.Hooks, err
}

// Usage reads tenant's credit and usage (admin, or the tenant's operator).
func (c *Client) Usage(ctx context.Context, tenant string) (*api.UsageDoc, error) {
	var d api.UsageDoc
	err := c.doJSON(ctx, "GET", "/v1/tenants/"+esc(tenant)+"/usage", nil, &d)
	return &d, err
}
