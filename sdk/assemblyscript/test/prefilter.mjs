// Runs prefilter.ts's differential test (built by make test-sdks): node
// prefilter.mjs prefilter.wasm. It exits 1 on any disagreement.
import { readFileSync } from "node:fs";

const wasm = await WebAssembly.compile(readFileSync(process.argv[2]));
let mem;
const text = (p) => {
  if (!p) return "";
  const n = new Uint32Array(mem.buffer)[(p - 4) >>> 2];
  return Buffer.from(mem.buffer, p, n).toString("utf16le");
};
const inst = await WebAssembly.instantiate(wasm, {
  env: { abort: (m, f, l, c) => { throw new Error(`abort: ${text(m)} at ${text(f)}:${l}:${c}`); } },
});
mem = inst.exports.memory;
if (!inst.exports.foldOK()) {
  console.error("fold table: foldNext differs from the sum sdk/internal/foldgen computed from Go's unicode.SimpleFold");
  process.exit(1);
}
if (!inst.exports.limitsOK()) {
  console.error("regex: a class's or a pattern's limit of non-ASCII ranges, or a class of non-ASCII members, is wrong");
  process.exit(1);
}
const rounds = 20000;
const r = inst.exports.run(rounds);
const bad = r >>> 16, compiled = (r & 0xffff) * 16;
if (bad > 0) {
  console.error(`prefilter: ${bad} disagreements; the first: ${text(inst.exports.failureText())}`);
  process.exit(1);
}
if (compiled < rounds / 3) {
  console.error(`prefilter: only ${compiled} of ${rounds} patterns compiled`);
  process.exit(1);
}
console.log(`ok: AssemblyScript regex prefilters over ${compiled} patterns`);
