package client

import (
	"context"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// Me reads the caller's own key: its id, role and tenant.
func (c *Client) Me(ctx context.Context) (*api.MeDoc, error) {
	return call[api.MeDoc](ctx, c, "GET", "/v1/me", nil)
}

// RunRecord reads a run of tenant (operator): its outcomes, approvals, and
// audit records with their verification status.
func (c *Client) RunRecord(ctx context.Context, tenant, run string) (*api.RunDoc, error) {
	return call[api.RunDoc](ctx, c, "GET", "/v1/tenants/"+esc(tenant)+"/runs/"+esc(run), nil)
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
	return call[api.UsageDoc](ctx, c, "GET", "/v1/tenants/"+esc(tenant)+"/usage", nil)
}
