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

// verbFunc runs a verb with the client, its positional arguments and stdin,
// and returns its answer, which runVerb prints (printAnswer).
type verbFunc = func(ctx context.Context, c *client.Client, args []string, stdin io.Reader) (any, error)

// required declares the string flag name, which the verb cannot do without,
// and returns run called with its value once it is checked to be given.
func required(fs *flag.FlagSet, name, usage string, run func(ctx context.Context, c *client.Client, value string, args []string, stdin io.Reader) (any, error)) verbFunc {
	v := fs.String(name, "", usage)
	return func(ctx context.Context, c *client.Client, args []string, stdin io.Reader) (any, error) {
		if *v == "" {
			return nil, usageErrorf("--%s is required", name)
		}
		return run(ctx, c, *v, args, stdin)
	}
}

// noFlags is the flags of a verb that takes none but the API's.
func noFlags(run verbFunc) func(*flag.FlagSet) verbFunc {
	return func(*flag.FlagSet) verbFunc { return run }
}

// forTenant is required's --tenant: the verbs of one tenant's objects.
func forTenant(fs *flag.FlagSet, run func(ctx context.Context, c *client.Client, tenant string, args []string, stdin io.Reader) (any, error)) verbFunc {
	return required(fs, "tenant", "the tenant; required", run)
}

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
			return func(ctx context.Context, c *client.Client, args []string, _ io.Reader) (any, error) {
				if err := c.CreateTenant(ctx, args[0], *req); err != nil {
					return nil, err
				}
				return map[string]any{"id": args[0], "require_signatures": *req}, nil
			}
		},
	}, {
		name:     "admin tenant list",
		synopsis: "  wasmhooks admin tenant list\n",
		help:     "Lists the tenants.\n",
		nargs:    0,
		flags: noFlags(func(ctx context.Context, c *client.Client, _ []string, _ io.Reader) (any, error) {
			ts, err := c.Tenants(ctx)
			return map[string]any{"tenants": ts}, err
		}),
	}, {
		name:     "admin key create",
		synopsis: "  wasmhooks admin key create --role admin|publisher|operator|runtime [--tenant T] [--name NOTE]\n",
		help: `Creates an API key: for --role publisher, --tenant is the publisher's name;
for operator and runtime, an existing tenant; an admin key has none. The key
is printed here once and stored only hashed: hand it over by a safe channel.
`,
		nargs: 0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := fs.String("tenant", "", "the tenant (the publisher's name for a publisher key)")
			name := fs.String("name", "", "a note for whoever lists the keys")
			return required(fs, "role", "admin, publisher, operator or runtime; required", func(ctx context.Context, c *client.Client, role string, _ []string, _ io.Reader) (any, error) {
				return c.CreateNamedKey(ctx, api.Role(role), *tenant, *name)
			})
		},
	}, {
		name:     "admin key list",
		synopsis: "  wasmhooks admin key list [--tenant T]\n",
		help:     "Lists the API keys (of one tenant or publisher with --tenant): ids, roles, names; never a secret.\n",
		nargs:    0,
		flags: func(fs *flag.FlagSet) verbFunc {
			tenant := fs.String("tenant", "", "only this tenant's (or publisher's) keys")
			return func(ctx context.Context, c *client.Client, _ []string, _ io.Reader) (any, error) {
				ks, err := c.Keys(ctx, *tenant)
				return map[string]any{"keys": ks}, err
			}
		},
	}, {
		name:     "admin key revoke",
		synopsis: "  wasmhooks admin key revoke KEY_ID\n",
		help:     "Revokes an API key: its next request is 401. The last admin key cannot be revoked.\n",
		nargs:    1,
		flags: noFlags(func(ctx context.Context, c *client.Client, args []string, _ io.Reader) (any, error) {
			return map[string]any{"revoked": args[0]}, c.RevokeKey(ctx, args[0])
		}),
	}, {
		name:     "admin key rotate",
		synopsis: "  wasmhooks admin key rotate KEY_ID\n",
		help: `Gives an API key a new secret, printed here once; the old one is 401 from now
on. The key keeps its id, role and tenant.
`,
		nargs: 1,
		flags: noFlags(func(ctx context.Context, c *client.Client, args []string, _ io.Reader) (any, error) {
			return c.RotateKey(ctx, args[0])
		}),
	}, {
		name:     "admin credit grant",
		synopsis: "  wasmhooks admin credit grant --tenant T --amount N [--idempotency-key K]\n",
		help: `Grants N credit units to tenant T and prints its credit. --idempotency-key
makes a retried grant apply once.
`,
		nargs: 0,
		flags: func(fs *flag.FlagSet) verbFunc {
			amount := fs.String("amount", "", "credit units, more than 0; required")
			key := fs.String("idempotency-key", "", "a grant retried with the same key is applied once")
			return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, _ []string, _ io.Reader) (any, error) {
				n, err := strconv.ParseInt(*amount, 10, 64)
				if err != nil || n <= 0 {
					return nil, usageErrorf("--amount is a whole number of credit units, more than 0")
				}
				return c.GrantCredit(ctx, tenant, n, *key)
			})
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
			amount := fs.String("amount", "", "credit units, not 0 (negative takes credit back); required")
			note := fs.String("note", "", "why (kept with the ledger entry); required")
			key := fs.String("idempotency-key", "", "an adjustment retried with the same key is applied once")
			return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, _ []string, _ io.Reader) (any, error) {
				n, err := strconv.ParseInt(*amount, 10, 64)
				if err != nil || n == 0 {
					return nil, usageErrorf("--amount is a whole number of credit units, not 0")
				}
				if *note == "" {
					return nil, usageErrorf("--note is required")
				}
				return c.AdjustCredit(ctx, tenant, n, *note, *key)
			})
		},
	}, {
		name:     "admin credit show",
		synopsis: "  wasmhooks admin credit show --tenant T\n",
		help:     "Prints tenant T's credit (an operator key of T may read it too).\n",
		nargs:    0,
		flags: func(fs *flag.FlagSet) verbFunc {
			return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, _ []string, _ io.Reader) (any, error) {
				return c.Credit(ctx, tenant)
			})
		},
	}}
}
