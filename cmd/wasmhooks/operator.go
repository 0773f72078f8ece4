package main

// The tenant's verbs: bind, approvals, resolve, versions, call.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/wasmhooks/wasmhooks/chain"
	"github.com/wasmhooks/wasmhooks/runtime"
	"github.com/wasmhooks/wasmhooks/server"
	"github.com/wasmhooks/wasmhooks/server/client"
)

const operatorSynopsis = `  wasmhooks bind --tenant T CONFIG.json|-
  wasmhooks approvals --tenant T [--status pending|resolved]
  wasmhooks resolve --tenant T --decision approve|deny|edit [--edit JSON|@FILE] [--reason TEXT] ID
  wasmhooks versions [--name NAME] PUBLISHER
  wasmhooks call --tenant T --point P [--input FILE|-] [--run ID] [--wait SECONDS]
`

// printAnswer prints a verb's answer as JSON, indented: a document, or the
// server's raw answer (json.RawMessage) re-indented (as it is, if it does
// not parse).
func printAnswer(w io.Writer, answer any) {
	if raw, ok := answer.(json.RawMessage); ok {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			_, _ = w.Write(raw)
			return
		}
		answer = v
	}
	printJSON(w, answer)
}

var bindVerb = verb{
	name:     "bind",
	synopsis: "  wasmhooks bind --tenant T CONFIG.json|-\n",
	help: `Binds the tenant's chain: CONFIG.json (- for stdin) is the chain configuration
format, each module a published version pinned to its digest
("publisher/name@version#sha256:HEX", publish prints it as "pin"). The server
validates it as chain.New does, and refuses an unsigned version when the
tenant requires signatures. In force on every node without a restart.
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, args []string, stdin io.Reader) (any, error) {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(stdin, server.DefaultMaxConfigBytes+1))
				if err == nil && len(data) > server.DefaultMaxConfigBytes {
					err = fmt.Errorf("stdin is larger than %d bytes", server.DefaultMaxConfigBytes)
				}
			} else {
				data, err = runtime.ReadFileLimit(args[0], server.DefaultMaxConfigBytes, "config_bytes")
			}
			if err != nil {
				return nil, usageErrorf("%v", err)
			}
			return c.BindChain(ctx, tenant, data)
		})
	},
}

var approvalsVerb = verb{
	name:     "approvals",
	synopsis: "  wasmhooks approvals --tenant T [--status pending|resolved]\n",
	help:     "Lists the tenant's approvals: pending ones (the inbox) or resolved ones.\n",
	nargs:    0,
	flags: func(fs *flag.FlagSet) verbFunc {
		status := fs.String("status", "pending", "pending or resolved")
		return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, _ []string, _ io.Reader) (any, error) {
			list, err := c.Approvals(ctx, tenant, *status)
			return map[string]any{"approvals": list}, err
		})
	},
}

var resolveVerb = verb{
	name:     "resolve",
	synopsis: "  wasmhooks resolve --tenant T --decision approve|deny|edit [--edit JSON|@FILE] [--reason TEXT] ID\n",
	help: `Resolves the tenant's pending approval ID: approve, deny, or edit (approve with
the changed fields of --edit). Prints the resumed run's outcome; a client
waiting on the approval receives the same.
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		decision := fs.String("decision", "", "approve, deny or edit; required")
		edit := fs.String("edit", "", "for edit: the changed fields, a JSON object (or @FILE)")
		reason := fs.String("reason", "", "why, for the audit record")
		return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, args []string, _ io.Reader) (any, error) {
			switch chain.ResolutionDecision(*decision) {
			case chain.Approve, chain.Deny, chain.Edit:
			default:
				return nil, usageErrorf("--decision is approve, deny or edit")
			}
			var m map[string]any
			if *edit != "" {
				var err error
				if m, err = readObjectFlag("--edit", *edit); err != nil {
					return nil, usageErrorf("%v", err)
				}
			}
			out, err := c.Resolve(ctx, tenant, args[0], *decision, m, *reason)
			if err != nil {
				return nil, err
			}
			return out.Raw, nil
		})
	},
}

var versionsVerb = verb{
	name:     "versions",
	synopsis: "  wasmhooks versions [--name NAME] PUBLISHER\n",
	help: `Lists PUBLISHER's published versions (of module NAME only, with --name), each
with its pin ("ref"), digest, signatures ("valid": verifies; "signed": by a
key an admin approved) and validation report. A publisher lists its own;
every tenant's operator reads the catalogue.
`,
	nargs: 1,
	flags: func(fs *flag.FlagSet) verbFunc {
		name := fs.String("name", "", "only this module's versions")
		return func(ctx context.Context, c *client.Client, args []string, _ io.Reader) (any, error) {
			vs, err := c.Versions(ctx, args[0], *name)
			return map[string]any{"versions": vs}, err
		}
	},
}

// maxCallWait bounds call --wait (1 h): each poll waits at most the
// server's own bound.
const maxCallWait = time.Hour

var callVerb = verb{
	name:     "call",
	synopsis: "  wasmhooks call --tenant T --point P [--input FILE|-] [--run ID] [--wait SECONDS]\n",
	help: `Posts a run of the tenant's chain at point P, as an agent platform does (a
runtime key), with --input's context object (- for stdin; default {}), and
prints the outcome. --run makes it idempotent: the same id again gets the
first outcome. With --wait, a pending outcome waits that long for its
approval's result and prints the resumed outcome (or the pending one if
nobody resolved it in time).
`,
	nargs: 0,
	flags: func(fs *flag.FlagSet) verbFunc {
		point := fs.String("point", "", "the hook point; required")
		input := fs.String("input", "", "the context object: a JSON file, or - for stdin")
		run := fs.String("run", "", "the run's id (idempotency)")
		wait := fs.Int("wait", 0, "seconds to wait for a pending outcome's approval")
		return forTenant(fs, func(ctx context.Context, c *client.Client, tenant string, _ []string, stdin io.Reader) (any, error) {
			if err := checkPoint(*point); err != nil {
				return nil, usageErrorf("--point: %v", err)
			}
			if *wait < 0 || time.Duration(*wait)*time.Second > maxCallWait {
				return nil, usageErrorf("--wait is 0 to %d seconds", int(maxCallWait.Seconds()))
			}
			ctxDoc, err := readContext(*input, stdin)
			if err != nil {
				return nil, usageErrorf("%v", err)
			}
			out, err := c.Run(ctx, tenant, *point, ctxDoc, *run)
			if err != nil {
				return nil, err
			}
			deadline := time.Now().Add(time.Duration(*wait) * time.Second)
			for out.Approval != nil && out.Verdict == "pending" && time.Now().Before(deadline) {
				left := int(time.Until(deadline).Seconds() + 0.999)
				res, err := c.Result(ctx, tenant, out.Approval.ID, left)
				if err != nil {
					return nil, err
				}
				if res != nil {
					out = res
				}
			}
			return out.Raw, nil
		})
	},
}
