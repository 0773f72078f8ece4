#!/usr/bin/env bash
# The demo: the example hooks, built from source, run by the wasmhooks CLI over
# sample agent traffic; first one hook at a time, then as a chain
# (demo/chain.json): an injection guard, secret redaction, a summariser paid
# for in credit, and a guard that holds shell commands for a human's approval;
# then the loop detector (demo/loop-chain.json) stopping an agent that repeats
# a tool call, its state kept in kv between processes (--kv).
# Usage: demo/run.sh CLI HOOKS_DIR
set -euo pipefail
cli=${1:?usage: demo/run.sh CLI HOOKS_DIR}
hooks=${2:?usage: demo/run.sh CLI HOOKS_DIR}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
# The working files (audit log, approvals, kv) are removed at the end unless
# DEMO_KEEP=1: then the printed commands can be run again after the demo.
if [ "${DEMO_KEEP:-}" = 1 ]; then echo "# working files in $work (kept)"; else trap 'rm -rf "$work"' EXIT; fi
# shown prints a command as it can be copied: the CLI by the path it was
# given, demo files relative to the current directory, arguments that need
# it in single quotes (the JSON of --edit, say).
here_rel=$(realpath --relative-to="$PWD" "$here" 2>/dev/null || echo "$here")
shown() {
  local out="\$ $cli" a q
  for a in "$@"; do
    a=${a//$here\//$here_rel/}
    if [[ $a =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
      out+=" $a"
    else
      q=${a//\'/\'\\\'\'}
      out+=" '$q'"
    fi
  done
  echo "$out"
}
# Credit balances (--credit) and approvals not kept in --approvals go to the
# state file, sealed under the host key: the demo's own, not the user's.
export WASMHOOKS_STATE="$work/state.db" WASMHOOKS_KEY_FILE="$work/host.key"

step() {
  echo
  echo "== $1"
  shift
  shown "$@"
  "$cli" "$@"
}

echo "# Part 1: one hook at a time (wasmhooks run)"

step "1. redact-secrets on an outbound reply that leaks credentials (expect: modify)" \
  run --hook "$hooks/redact-secrets.wasm" --point message.outbound \
  --input "$here/traffic/01-outbound-with-secrets.json"

step "2. block-prompt-injection on an inbound message (expect: block)" \
  run --hook "$hooks/block-prompt-injection.wasm" --point message.inbound \
  --input "$here/traffic/02-inbound-injection.json"

step "3. block-prompt-injection on a clean inbound message (expect: continue)" \
  run --hook "$hooks/block-prompt-injection.wasm" --point message.inbound \
  --input "$here/traffic/04-inbound-clean.json"

step "4. summarize on a long reply, calling llm.run through the capability runner and paying credit (expect: modify, credit charged)" \
  run --hook "$hooks/summarize.wasm" --point message.outbound --grant llm.run --credit 1000 \
  --input "$here/traffic/03-outbound-long.json"

step "5. summarize with no credit left: the credit gate refuses llm.run and the hook continues unchanged (expect: continue, nothing charged)" \
  run --hook "$hooks/summarize.wasm" --point message.outbound --grant llm.run --credit 0 \
  --input "$here/traffic/03-outbound-long.json"

step "6. summarize without the grant: the runner denies llm.run (expect: continue, nothing charged)" \
  run --hook "$hooks/summarize.wasm" --point message.outbound --credit 1000 \
  --input "$here/traffic/03-outbound-long.json"

echo
echo "# Part 2: the chain (wasmhooks chain --config demo/chain.json)"
# The approval guard is a small WAT hook (testdata/guests/policy.wat) whose
# settings choose its decision; it sits beside the example hooks.
cp "$here/../testdata/guests/policy.wasm" "$hooks/policy.wasm"
echo "# (the observer tap-inbound and the approval guards approve-shell and no-destructive-shell are"
echo "#  policy.wasm, a test hook in WAT, testdata/guests/policy.wat: its settings say what it decides)"
chain=(--config "$here/chain.json" --module-dir "$hooks" --audit "$work/audit.jsonl" --approvals "$work/approvals" --key "$work/host.key" --brief)

step "7. an injection attempt: the observer logs it, redaction finds nothing, the injection guard blocks (expect: block by injection-guard)" \
  chain "${chain[@]}" --point message.inbound --input "$here/traffic/02-inbound-injection.json"

step "8. a user pastes a token: the transformer redacts it and the guard sees the redacted text (expect: allow, modified)" \
  chain "${chain[@]}" --point message.inbound --input "$here/traffic/05-inbound-with-secret.json"

step "9. a long reply that mentions a key: redacted, then summarised by llm.run, credit charged (expect: allow, modified twice, credit charged)" \
  chain "${chain[@]}" --point message.outbound --credit 1000 --input "$here/traffic/06-outbound-long-with-secret.json"

step "10. the agent wants to run a shell command: the guard asks, the run pauses (expect: pending, an approval stored on disk)" \
  chain "${chain[@]}" --point tool.before --input "$here/traffic/07-tool-shell.json" | tee "$work/pending.json"
id=$(grep -o '"id": "[0-9a-f]*"' "$work/pending.json" | head -1 | sed 's/.*"\([0-9a-f]*\)"$/\1/')

step "11. an operator approves with an edit that drops the rm -rf; a new process resumes the run at the next guard (expect: allow, modified)" \
  chain resolve "${chain[@]}" --id "$id" --decision edit --actor ops-oncall \
  --edit '{"arguments": {"command": "systemctl restart app"}}'

step "12. the audit log holds one hash-chained, keyed record per verdict, and ends where its checkpoint says (expect: verified, keyed)" \
  chain verify --key "$work/host.key" "$work/audit.jsonl"

echo
echo "== 13. someone rewrites the ask in the audit log into a continue (expect: audit_broken, exit 1)"
line=$(grep -n '"decision":"ask"' "$work/audit.jsonl" | head -1 | cut -d: -f1)
sed -i "${line}s/\"decision\":\"ask\"/\"decision\":\"continue\"/" "$work/audit.jsonl"
shown chain verify "$work/audit.jsonl"
if "$cli" chain verify "$work/audit.jsonl"; then
  echo "tampering went unnoticed" >&2
  exit 1
fi
echo "(the error above is the expected outcome: verify found the rewritten record and exited 1)"


echo
echo "# Part 3: the loop detector (wasmhooks chain --config demo/loop-chain.json --kv kv.json)"
# loop-detector is bound twice: loop-guard, a guard at tool.before (it blocks),
# and loop-warn, a transformer at tool.after (it injects a warning into the
# result the agent reads). Each invocation is a new process, so the window of
# recent calls lives in kv, kept in a file by --kv; each binding has its own
# kv scope and one window per conversation (the context's "conversation").
loop=(--config "$here/loop-chain.json" --module-dir "$hooks" --kv "$work/kv.json")
field() { { grep -o "\"$1\": \"[^\"]*" || true; } | head -1 | cut -d'"' -f4 | cut -c1-160; }
echo
echo "== 14. an agent in conversation c_9f2 reads the same file again and again; each call runs the chain at"
echo "   tool.before and, if allowed, at tool.after (expect: allow; from call 2 a warning injected into the"
echo "   result; from call 3 a warning in loop-guard's reason)"
shown chain "${loop[@]}" --point tool.before --input "$here/traffic/08-tool-read-config.json"
shown chain "${loop[@]}" --point tool.after --input "$here/traffic/09-tool-read-config-result.json"
for i in 1 2 3 4; do
  out=$("$cli" chain "${loop[@]}" --point tool.before --input "$here/traffic/08-tool-read-config.json")
  verdict=$(field verdict <<<"$out")
  reason=$(field reason <<<"$out")
  echo "call $i tool.before: $verdict${reason:+ ($reason)}"
  [ "$verdict" = allow ] || { echo "the loop detector blocked too early" >&2; exit 1; }
  out=$("$cli" chain "${loop[@]}" --point tool.after --input "$here/traffic/09-tool-read-config-result.json")
  echo "call $i tool.after:  $(field verdict <<<"$out"), modified: $(grep -o '"modified": [a-z]*' <<<"$out" | cut -d' ' -f2); result: $(field result <<<"$out")"
done

step "15. the fifth call: loop-guard blocks it before the tool runs (expect: block by loop-guard, repetition)" \
  chain "${loop[@]}" --brief --point tool.before --input "$here/traffic/08-tool-read-config.json" | tee "$work/blocked.json"
grep -q '"verdict": "block"' "$work/blocked.json" || { echo "the loop was not stopped" >&2; exit 1; }

step "16. the same read in another conversation (c_a11) has its own window (expect: allow)" \
  chain "${loop[@]}" --brief --point tool.before --input "$here/traffic/10-tool-read-config-other-conversation.json"

echo
echo "# Part 4: a streamed reply (wasmhooks chain --config demo/stream-chain.json --stream)"
# The model's reply arrives in chunks of 12 characters at llm.output.stream;
# the host holds back a window (the binding's lookahead, 64 characters) and
# releases text only once redact-secrets has seen it with that much after it.
# The key is split across chunks: no part of it is ever released.
step "17. a streamed reply with a key split across chunk boundaries (expect: allow, modified; the key never released, [REDACTED] in its place)" \
  chain --config "$here/stream-chain.json" --module-dir "$hooks" --point llm.output.stream --stream --chunk 12 \
  --input "$here/traffic/11-llm-stream-with-secret.json" | tee "$work/stream.json"
if grep '"released' "$work/stream.json" | grep -q 'sk-proj\|Q7vX\|Hd and'; then
  echo "part of the key was released" >&2
  exit 1
fi
grep -q '"text": ".*\[REDACTED\]' "$work/stream.json" || { echo "the key was not redacted" >&2; exit 1; }
