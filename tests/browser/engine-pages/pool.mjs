// The pool's job cost as the engine's clock reads it. A cross-origin-isolated page's clock is coarse
// (5 µs in Chromium, 20 µs in Firefox), and a job costs about a tick: read 0, it kept every call off
// the pool; read as whole ticks rounded down, it came to 0 or near it. Loads the threaded build on 2 threads three times (each sizes its pool), reads the job's
// cost (Module.poolChoiceState(0), a test probe) and whether a large call (a prefill of 256
// positions, 8 heads, 64 dims) went to the pool. Leaves { loads: [{ threads, jobNs, poolJobs }] }
// or { error } in window.__result for tests/browser/engines.test.mjs.
import { browserPlatform } from '/dist/browser.mjs';
import { makeLoaders } from '/dist/loader.mjs';

const dist = (file) => new URL(`/dist/${file}`, location.href);
const files = Object.fromEntries(['attn-mt', 'attn-relaxed-mt'].map((name) => [`${name}.wasm`, {
  url: () => dist(`${name}.wasm`), glue: () => import(dist(`${name}.mjs`).href), workerGlue: () => dist(`${name}.mjs`),
}]));
const platform = browserPlatform(files, 'attention-wasm');
let module;
const { createAttention } = makeLoaders({ ...platform, start: async (...args) => (module = await platform.start(...args)) });

const heads = 8, seq = 256, headDim = 64;
const tensor = () => Float32Array.from({ length: heads * seq * headDim }, (_, i) => Math.sin(i * 0.37));
const [q, k, v] = [tensor(), tensor(), tensor()];
try {
  const loads = [];
  for (let i = 0; i < 3; i++) {
    const lib = await createAttention({ threads: 2, strict: true });
    const jobNs = module.poolChoiceState(0), before = module.poolJobs();
    lib.attention(q, k, v, { heads, seqQ: seq, seqK: seq, headDim });
    loads.push({ threads: lib.info.threads, jobNs, poolJobs: module.poolJobs() - before });
    lib.dispose();
  }
  window.__result = { loads };
} catch (error) {
  window.__result = { error: `${error.name}: ${error.message}` };
}
