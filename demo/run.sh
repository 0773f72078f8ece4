#!/usr/bin/env bash
# The demo: the example hooks, built from source, run by the wasmhooks CLI over
# sample agent traffic. Usage: demo/run.sh CLI HOOKS_DIR
set -euo pipefail
cli=${1:?usage: demo/run.sh CLI HOOKS_DIR}
hooks=${2:?usage: demo/run.sh CLI HOOKS_DIR}
here=$(cd "$(dirname "$0")" && pwd)

step() {
  echo
  echo "== $1"
  shift
  echo "\$ wasmhooks $*" | sed "s|$hooks/||g; s|$here/||g"
  "$cli" "$@"
}

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
