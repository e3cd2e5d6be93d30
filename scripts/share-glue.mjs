// The layers builds (attn-layers*.wasm) ship without JS glue of their own: the glue of the
// inference build of the same SIMD level and threading starts them (src/js/builds.mjs). Emscripten
// links a glue per module, so this checks that the two differ only where sharing is safe, and
// writes the shared one:
// - the file names the link wrote in (the .wasm and the worker script; the loader compiles the
//   .wasm itself, and a threaded build's workers get that compiled module);
// - in a threaded build, the one data address Emscripten bakes into its glue
//   (_emscripten_allow_main_runtime_queued_calls, a flag the pool's bookkeeping sets and clears),
//   which is where each module's own data put it. The shared glue reads it from the module it
//   started (which exports it), so each build's flag is the one written.
// Anything else that differs fails the build. Without an output file, it only checks.
//   node scripts/share-glue.mjs build/wasm/attn-mt.mjs build/wasm/attn-layers-mt.mjs dist/attn-mt.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [inferencePath, layersPath, out] = process.argv.slice(2);
const stem = (path) => basename(path).replace(/(-node)?\.(mjs|cjs|worker\.js)$/, '');
const [inference, layers] = [inferencePath, layersPath].map((path) => readFileSync(path, 'utf8'));

const FLAG = '_emscripten_allow_main_runtime_queued_calls';
const DECLARATION = new RegExp(`var _${FLAG}\\s*=\\s*Module\\["_${FLAG}"\\]\\s*=\\s*(\\d+);`, 'g');
const USE = new RegExp(`\\b_${FLAG}(\\s*>>>?\\s*2)`, 'g');

// The glue with the flag read from the started module's exports instead of a constant.
function shared(glue, path) {
  const declared = [...glue.matchAll(DECLARATION)].length;
  if (declared > 1) throw new Error(`${path}: _${FLAG} declared ${declared} times`);
  if (declared === 0) return glue;
  const uses = [...glue.matchAll(USE)].length;
  if (uses === 0) throw new Error(`${path}: _${FLAG} declared but its uses are not where they were expected`);
  return glue.replace(DECLARATION, '').replace(USE, `Module["asm"]["${FLAG}"].value$1`);
}

const a = shared(inference, inferencePath);
const b = shared(layers, layersPath).replaceAll(stem(layersPath), stem(inferencePath));
if (a !== b) {
  let i = 0;
  while (a[i] === b[i]) i++;
  throw new Error(`${layersPath} differs from ${inferencePath} beyond the file names and the flag's address, so they cannot ` +
    `share one glue; first at character ${i}: ${JSON.stringify(a.slice(i, i + 80))} against ${JSON.stringify(b.slice(i, i + 80))}`);
}
if (out) writeFileSync(out, a);
