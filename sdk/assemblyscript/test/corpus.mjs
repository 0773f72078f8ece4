// corpus.mjs: runs an AssemblyScript hook's module over a folder of cases
// (the format of `wasmhooks test` and of testdata/corpus) under Node, with
// the test double (mockhost.mjs) serving each case's mocked replies and
// grants: the AssemblyScript ports' native tests, as
// sdk/c/test/corpus_native.c is the C ports'. Each case gets a new instance,
// as each case is its own binding in `wasmhooks test`.
//
//   node sdk/assemblyscript/test/corpus.mjs HOOK.wasm testdata/corpus/HOOK
//
// Exit 0 when every case reaches its expected decision (or fails when it
// wants a failure), 1 otherwise. The manifest's settings_schema is not
// applied here (the real runtime's run, hooks-examples/corpus_test.go,
// applies it): every case's settings reach the hook.
import { readFileSync, readdirSync } from "node:fs";
import { join, basename } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { MockHost, DENIED } from "./mockhost.mjs";

const [wasmPath, dir] = process.argv.slice(2);
if (!wasmPath || !dir) {
  console.error("usage: node corpus.mjs HOOK.wasm CASES_DIR");
  process.exit(2);
}
const wasm = readFileSync(wasmPath);
const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
if (files.length === 0) {
  console.error(`no cases (*.json) in ${dir}`);
  process.exit(2);
}

// The host's normal form of a decision: no empty optional members.
function normal(d) {
  const out = { ...d };
  for (const k of ["reason", "user_message"]) if (out[k] === "") delete out[k];
  if (out.do_not_reply_again === false) delete out.do_not_reply_again;
  return out;
}

let failed = 0;
for (const f of files) {
  const c = JSON.parse(readFileSync(join(dir, f), "utf8"));
  const name = c.name ?? basename(f, ".json");
  const caps = {};
  for (const [cap, reply] of Object.entries(c.replies ?? {})) caps[cap] = { status: reply.status, body: reply.body };
  if (Array.isArray(c.grants)) {
    for (const cap of new Set([...Object.keys(caps), "llm.run", "kv.get", "kv.set", "log.write"])) {
      if (!c.grants.includes(cap)) caps[cap] = { status: DENIED, body: { code: "denied", message: cap + " is not in the case's grants" } };
    }
  }
  const host = await MockHost.load(wasm);
  const r = host.run({ point: c.point ?? "message.outbound", context: c.context, settings: c.settings }, caps);
  let problem = "";
  if (c.want_failure) {
    if (!r.failed) problem = `decided ${r.output}, want a hook failure`;
  } else if (r.failed) {
    problem = "the hook failed" + (host.trap ? `: ${host.trap.message}` : "");
  } else if (!isDeepStrictEqual(normal(r.decision), normal(c.want))) {
    problem = `decided ${JSON.stringify(r.decision)}\n    want    ${JSON.stringify(c.want)}`;
  }
  if (problem) {
    failed++;
    console.log(`--- FAIL: ${name} (${f})\n    ${problem}`);
  }
}
if (failed) {
  console.log(`FAIL: ${failed} of ${files.length} cases failed (${wasmPath})`);
  process.exit(1);
}
console.log(`ok: ${files.length} cases pass under the mock host (${wasmPath})`);
