package main

// The platform operator's verbs: admin tenant|key|credit.

import (
	"context"
	"flag"
	"io"
	"strconv"

	"github.com/wasmhooks/wasmhooks/server/api"
	"github.com/wasmhooks/wasmhooks/server/client"
)

const adminSynopsis = "  wasmhooks admin tenant create|list | key create|list|revoke|rotate | credit grant|adjust|show ...  (admin --help)\n"

type verbFunc = func(context.Context, *client.Client, []string, io.Reader, io.Writer) error

func adminVerbs() []verb {
	return []verb{{
		name:     "admin tenant create",
		synopsis: "  wasmhooks admin tenant create [--require-signatures] ID\n",
		help: `Creates tenant ID. With --require-signatures, the tenant binds only versions
signed by a signing key an admin approved.
`,
		nargs: 1,
		flags: func(fs *flag.FlagSet) verbFunc {
			req := fs.Bool("require-signatures", false, "bind only versions signed by an approved key")
			return func(ctx context.Context, c *client.Client, args []string, _ io.Reader, stdout io.Writer) error {
				if err := c.CreateTenant(ctx, args[0], *req); err != nil {
					return err
				}
				printJSON(stdout, map[string]any{"id": args[0], "require_signatures": *req})
				return nil
			}
		},
	}, {
		name:     "admin tenant list",
		synopsis: "  wasmhooks admin tenant list\n",
		help:     "Lists the tenants.\n",
		nargs:    0,
		flags: func(fs *flag.FlagSet) verbFunc {
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				ts, err := c.Tenants(ctx)
				if err != nil {
					return err
				}
				printJSON(stdout, map[string]any{"tenants": ts})
				return nil
			}
		},
	}, {
		name:     "admin key create",
		synopsis: "  wasmhooks admin key create --role admin|publisher|operator|runtime [--tenant T] [--name NOTE]\n",
		help: `Creates an API key: for --role publisher, --tenant is the publisher's name;
for operator and runtime, an existing tenant; an admin key has none. The key
is printed here once and stored only hashed: hand it over by a safe channel.
`,
		nargs: 0,
		flags: func(fs *flag.FlagSet) verbFunc {
			role := fs.String("role", "", "admin, publisher, operator or runtime; required")
			tenant := fs.String("tenant", "", "the tenant (the publisher's name for a publisher key)")
			name := fs.String("name", "", "a note for whoever lists the keys")
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				if *role == "" {
					return usageErrorf("--role is required")
				}
				k, err := c.CreateNamedKey(ctx, api.Role(*role), *tenant, *name)
				if err != nil {
					return err
				}
				printJSON(stdout, k)
				return nil
			}
		},
	}, {
		name:     "admin key list",
		synopsis: "  wasmhooks admin key list [--tenant T]\n",
		help:     "Lists the API keys (of one tenant or publisher with --tenant): ids, roles, names; never a secret.\n",
		nargs:    0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := fs.String("tenant", "", "only this tenant's (or publisher's) keys")
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				ks, err := c.Keys(ctx, *tenant)
				if err != nil {
					return err
				}
				printJSON(stdout, map[string]any{"keys": ks})
				return nil
			}
		},
	}, {
		name:     "admin key revoke",
		synopsis: "  wasmhooks admin key revoke KEY_ID\n",
		help:     "Revokes an API key: its next request is 401. The last admin key cannot be revoked.\n",
		nargs:    1,
		flags: func(fs *flag.FlagSet) verbFunc {
			return func(ctx context.Context, c *client.Client, args []string, _ io.Reader, stdout io.Writer) error {
				if err := c.RevokeKey(ctx, args[0]); err != nil {
					return err
				}
				printJSON(stdout, map[string]any{"revoked": args[0]})
				return nil
			}
		},
	}, {
		name:     "admin key rotate",
		synopsis: "  wasmhooks admin key rotate KEY_ID\n",
		help: `Gives an API key a new secret, printed here once; the old one is 401 from now
on. The key keeps its id, role and tenant.
`,
		nargs: 1,
		flags: func(fs *flag.FlagSet) verbFunc {
			return func(ctx context.Context, c *client.Client, args []string, _ io.Reader, stdout io.Writer) error {
				k, err := c.RotateKey(ctx, args[0])
				if err != nil {
					return err
				}
				printJSON(stdout, k)
				return nil
			}
		},
	}, {
		name:     "admin credit grant",
		synopsis: "  wasmhooks admin credit grant --tenant T --amount N [--idempotency-key K]\n",
		help: `Grants N credit units to tenant T and prints its credit. --idempotency-key
makes a retried grant apply once.
`,
		nargs: 0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := tenantFlag(fs)
			amount := fs.String("amount", "", "credit units, more than 0; required")
			key := fs.String("idempotency-key", "", "a grant retried with the same key is applied once")
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				if err := needTenant(tenant); err != nil {
					return err
				}
				n, err := strconv.ParseInt(*amount, 10, 64)
				if err != nil || n <= 0 {
					return usageErrorf("--amount is a whole number of credit units, more than 0")
				}
				d, err := c.GrantCredit(ctx, *tenant, n, *key)
				if err != nil {
					return err
				}
				printJSON(stdout, d)
				return nil
			}
		},
	}, {
		name:     "admin credit adjust",
		synopsis: "  wasmhooks admin credit adjust --tenant T --amount N --note TEXT [--idempotency-key K]\n",
		help: `Adds N credit units, of either sign, to tenant T with a note saying why (a
correction, a refund, credit taken back) and prints its credit. Credit that
open holds keep cannot be taken back. --idempotency-key makes a retried
adjustment apply once.
`,
		nargs: 0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := tenantFlag(fs)
			amount := fs.String("amount", "", "credit units, not 0 (negative takes credit back); required")
			note := fs.String("note", "", "why (kept with the ledger entry); required")
			key := fs.String("idempotency-key", "", "an adjustment retried with the same key is applied once")
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				if err := needTenant(tenant); err != nil {
					return err
				}
				n, err := strconv.ParseInt(*amount, 10, 64)
				if err != nil || n == 0 {
					return usageErrorf("--amount is a whole number of credit units, not 0")
				}
				if *note == "" {
					return usageErrorf("--note is required")
				}
				d, err := c.AdjustCredit(ctx, *tenant, n, *note, *key)
				if err != nil {
					return err
				}
				printJSON(stdout, d)
				return nil
			}
		},
	}, {
		name:     "admin credit show",
		synopsis: "  wasmhooks admin credit show --tenant T\n",
		help:     "Prints tenant T's credit (an operator key of T may read it too).\n",
		nargs:    0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := tenantFlag(fs)
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader, stdout io.Writer) error {
				if err := needTenant(tenant); err != nil {
					return err
				}
				d, err := c.Credit(ctx, *tenant)
				if err != nil {
					return err
				}
				printJSON(stdout, d)
				return nil
			}
		},
	}}
}
