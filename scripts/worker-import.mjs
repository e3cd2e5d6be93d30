// Emscripten 3.1.6's browser worker (NAME.worker.js) imports the glue from the URL the main
// thread posts, or else from "./NAME.mjs". The package always posts the URL (src/js/browser.mjs),
// so this drops the fallback: bundlers then neither warn about import() of an expression nor see
// a worker ↔ glue chunk cycle (webpack 5 warns about both). And a glue that fails to import or
// start (a 404, a policy that refuses it) would only reject a promise inside the worker, which its
// owner never hears of, so the load could only time out without saying why: the failure is
// thrown from a task instead, which the Worker object gets as an error event with the message
// (src/js/browser.mjs: watchWorkers), and posted to the owner as { attnWorkerFailed } too: a
// browser may mute an error of a script from another origin (a CDN) to "Script error.", but never
// a message. Run by scripts/build.sh.
//   node scripts/worker-import.mjs build/wasm/attn-mt.worker.js dist/attn-mt.worker.js
import { readFileSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const [from, to] = process.argv.slice(2);
const name = basename(from, '.worker.js');
const edits = [
  [`(e.data.urlOrBlob?import(e.data.urlOrBlob):import("./${name}.mjs"))`, 'import(/* webpackIgnore: true */ /* @vite-ignore */ e.data.urlOrBlob)'],
  ['.then(function(instance){Module=instance})', '.then(function(instance){Module=instance},function(error){' +
    'var report="attention-wasm worker: could not import or run "+e.data.urlOrBlob+": "+error;' +
    'postMessage({attnWorkerFailed:report});setTimeout(function(){throw new Error(report)})})'],
];
let source = readFileSync(from, 'utf8');
for (const [was, is] of edits) {
  if (!source.includes(was)) {
    console.error(`[build] ${from}: ${was} not found (did Emscripten's worker change?)`);
    process.exit(1);
  }
  source = source.replace(was, is);
}
writeFileSync(to, source);
