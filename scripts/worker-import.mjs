// Emscripten 3.1.6's browser worker (NAME.worker.js) imports the glue from the URL the main
// thread posts, or else from "./NAME.mjs". The package always posts the URL (src/js/browser.mjs),
// so this drops the fallback: bundlers then neither warn about import() of an expression nor see
// a worker ↔ glue chunk cycle (webpack 5 warned about both). Run by scripts/build.sh.
//   node scripts/worker-import.mjs build/wasm/attn-mt.worker.js dist/attn-mt.worker.js
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [from, to] = process.argv.slice(2);
const name = basename(from, '.worker.js');
const fallback = `(e.data.urlOrBlob?import(e.data.urlOrBlob):import("./${name}.mjs"))`;
const source = readFileSync(from, 'utf8');
if (!source.includes(fallback)) {
  console.error(`[build] ${from}: ${fallback} not found (did Emscripten's worker change?)`);
  process.exit(1);
}
writeFileSync(to, source.replace(fallback, 'import(/* webpackIgnore: true */ /* @vite-ignore */ e.data.urlOrBlob)'));
