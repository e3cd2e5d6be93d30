// The layers builds (attn-layers*.wasm) ship without JS glue of their own: the glue of the
// inference build of the same SIMD level and threading starts them (src/js/builds.mjs). Emscripten
// links a glue per module, so this checks that the two differ only where sharing is safe, and
// writes the shared one:
// - the file names the link wrote in (the .wasm and the worker script; the loader compiles the
//   .wasm itself, and a threaded build's workers get that compiled module);
// - in a threaded build, the one data address Emscripten bakes into its glue
//   (_emscripten_allow_main_runtime_queued_calls, a flag the pool's bookkeeping sets and clears),
//   which is where each module's own data put it. The shared glue reads it from the module it
//   started, so each build's flag is the one written: each glue's .wasm (beside it, same name)
//   must export it as a global, or the read would throw when the pool returns a worker (in
//   setNumThreads and dispose), and no other mention of the address may be left.
// Anything else that differs fails the build. Without an output file, it only checks.
//   node scripts/share-glue.mjs build/wasm/attn-mt.mjs build/wasm/attn-layers-mt.mjs dist/attn-mt.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { leb } from './wasm-functions.mjs';

export const FLAG = '_emscripten_allow_main_runtime_queued_calls';
const DECLARATION = new RegExp(`var _${FLAG}\\s*=\\s*Module\\["_${FLAG}"\\]\\s*=\\s*(\\d+);`, 'g');
const USE = new RegExp(`\\b_${FLAG}(\\s*>>>?\\s*2)`, 'g');
const READ = `Module["asm"]["${FLAG}"]`;

const stem = (path) => basename(path).replace(/(-node)?\.(mjs|cjs|worker\.js)$/, '');

// A module's exports as Map(name → kind: 'function' | 'table' | 'memory' | 'global' | …), read
// from its export section (not compiled: a relaxed-SIMD module needs a flag to compile).
export function wasmExports(bytes) {
  const kinds = ['function', 'table', 'memory', 'global', 'tag'], exports = new Map();
  for (let at = 8; at < bytes.length;) {
    const id = bytes[at++];
    let size;
    [size, at] = leb(bytes, at);
    if (id === 7) {
      let count, p = at;
      [count, p] = leb(bytes, p);
      for (let i = 0; i < count; i++) {
        let length;
        [length, p] = leb(bytes, p);
        const name = new TextDecoder().decode(bytes.subarray(p, p + length));
        exports.set(name, kinds[bytes[p + length]] ?? `kind ${bytes[p + length]}`);
        [, p] = leb(bytes, p + length + 1);
      }
    }
    at += size;
  }
  return exports;
}

// The glue with the flag read from the started module's exports instead of a constant; wasm (the
// bytes of the module it starts) must export the flag when the glue declares it.
function shared(glue, path, wasm) {
  const declared = [...glue.matchAll(DECLARATION)].length;
  if (declared > 1) throw new Error(`${path}: _${FLAG} declared ${declared} times`);
  if (declared === 0) {
    if (glue.includes(FLAG)) throw new Error(`${path} mentions ${FLAG} without declaring it where expected`);
    return glue;
  }
  const uses = [...glue.matchAll(USE)].length;
  if (uses === 0) throw new Error(`${path}: _${FLAG} declared but its uses are not where they were expected`);
  const kind = wasmExports(wasm()).get(FLAG);
  if (kind !== 'global') throw new Error(`${path}: its .wasm exports ${FLAG} ${kind ? `as a ${kind}` : 'not at all'}, not as a global`);
  const out = glue.replace(DECLARATION, '').replace(USE, `${READ}.value$1`);
  const left = out.split(FLAG).length - 1 - (out.split(READ).length - 1);
  if (left) throw new Error(`${path}: ${left} mention(s) of ${FLAG} left besides ${READ} (a form of the address this does not rewrite)`);
  return out;
}

// The shared glue of an inference glue and its layers twin (each { path, text, wasm: () => bytes }),
// or an error saying where they differ.
export function shareGlue(inference, layers) {
  const a = shared(inference.text, inference.path, inference.wasm);
  const b = shared(layers.text, layers.path, layers.wasm).replaceAll(stem(layers.path), stem(inference.path));
  if (a !== b) {
    let i = 0;
    while (a[i] === b[i]) i++;
    throw new Error(`${layers.path} differs from ${inference.path} beyond the file names and the flag's address, so they cannot ` +
      `share one glue; first at character ${i}: ${JSON.stringify(a.slice(i, i + 80))} against ${JSON.stringify(b.slice(i, i + 80))}`);
  }
  return a;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [inferencePath, layersPath, out] = process.argv.slice(2);
  const glue = (path) => ({ path, text: readFileSync(path, 'utf8'), wasm: () => readFileSync(path.replace(/\.(mjs|cjs)$/, '.wasm')) });
  const text = shareGlue(glue(inferencePath), glue(layersPath));
  if (out) writeFileSync(out, text);
}
