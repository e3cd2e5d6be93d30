// The Node benchmark's other measurements, each in a fresh process so none of them shares a
// process with the engines: load and first call, .wasm sizes, the backward pass, and memory at
// seq 8192. Run as a script, `node node-extras.mjs TASK` prints TASK's JSON.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { randomArray } from '../../web/random-arrays.mjs';
import { median } from '../../web/bench/schedule.mjs';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const DIST = here('../../dist/');
const runTask = (task, ...args) => JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), task, ...args], { encoding: 'utf8' }));

// Every shipped .wasm: bytes and gzip -9 bytes.
export function wasmSizes() {
  const files = [...readdirSync(DIST).map((f) => join(DIST, f)), ...readdirSync(join(DIST, 'node-mt')).map((f) => join(DIST, 'node-mt', f))];
  return Object.fromEntries(files.filter((f) => f.endsWith('.wasm')).map((f) => {
    const bytes = readFileSync(f);
    return [f.slice(DIST.length), { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length }];
  }));
}

// Both with the loader's warm-up (the default) and without it (warmUp: false), where the library
// has that option.
export const coldStart = () => {
  const warm = runTask('cold-start', 'warm-up');
  let cold = null;
  try {
    cold = runTask('cold-start', 'no-warm-up');
  } catch {
    // an older library without the option
  }
  return { ...warm, withoutWarmUp: cold };
};
export const backwardRatio = ({ quick = false } = {}) => runTask('backward', quick ? 'quick' : 'full');
export const memoryAtSeq8192 = () => runTask('memory');
// shapes: the decode section's ({ kvHeads, seqK, headDim, … }) → { label: { maxSeq, float32, float16, int8 } }
export const kvCacheBytes = (shapes) => runTask('kv-bytes', JSON.stringify(shapes));

const TASKS = {
  // cache.bytes of a KV cache per dtype holding the decode section's shapes (maxSeq = seqK).
  async 'kv-bytes'(shapes) {
    const { createAttention } = await import('../../dist/node.mjs');
    const { DTYPES } = await import('./decode-engines.mjs');
    const { sectionLabel } = await import('./sections.mjs');
    const lib = await createAttention({ threads: 1 });
    return Object.fromEntries(JSON.parse(shapes).map((s) => [sectionLabel(s), {
      maxSeq: s.seqK,
      ...Object.fromEntries(DTYPES.map((dtype) => {
        const cache = lib.createKVCache({ batch: s.batch, kvHeads: s.kvHeads, headDim: s.headDim, maxSeq: s.seqK, dtype });
        const bytes = cache.bytes;
        cache.dispose();
        return [dtype, bytes];
      })),
    }]));
  },

  // A fresh process: import, createAttention({ threads: 1 }), then the first and second call
  // on (1,8,128,128,64) (the first includes V8's compilation of what the call needs), and the
  // median of the next 20.
  async 'cold-start'(mode) {
    const t0 = performance.now();
    const { createAttention } = await import('../../dist/node.mjs');
    const t1 = performance.now();
    const lib = await createAttention({ threads: 1, ...(mode === 'no-warm-up' ? { warmUp: false } : {}) });
    const t2 = performance.now();
    const shape = { heads: 8, seqQ: 128, headDim: 64 };
    const [q, k, v] = [1, 2, 3].map((seed) => randomArray(8 * 128 * 64, seed));
    lib.attention(q, k, v, shape);
    const t3 = performance.now();
    const later = [];
    for (let r = 0; r < 20; r++) {
      const t = performance.now();
      lib.attention(q, k, v, shape);
      later.push(performance.now() - t);
    }
    return { importMs: t1 - t0, createMs: t2 - t1, firstCallMs: t3 - t2, laterCallMs: median(later) };
  },

  // The backward pass against the forward on (1,12,512,512,64), single thread.
  async backward(mode) {
    const { createAttention } = await import('../../dist/node.mjs');
    const lib = await createAttention({ threads: 1, layers: true });
    const shape = { batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64 };
    const n = 12 * 512 * 64;
    const [q, k, v, g] = [1, 2, 3, 4].map((seed) => randomArray(n, seed));
    const time = (run) => {
      const warmEnd = performance.now() + (mode === 'quick' ? 300 : 1000);
      while (performance.now() < warmEnd) run();
      const ts = [];
      for (let r = 0; r < (mode === 'quick' ? 5 : 9); r++) {
        const t0 = performance.now();
        run();
        ts.push(performance.now() - t0);
      }
      return median(ts);
    };
    const lse = new Float32Array(12 * 512);
    const forwardMs = time(() => lib.attention(q, k, v, shape));
    const out = lib.attention(q, k, v, { ...shape, lseOut: lse });
    const backwardMs = time(() => lib.attentionBackward(q, k, v, g, { ...shape, lse, out }));
    const recomputeMs = time(() => lib.attentionBackward(q, k, v, g, shape));
    return { shape: '(1,12,512,512,64)', forwardMs, backwardMs, recomputeMs, ratio: backwardMs / forwardMs };
  },

  // Peak wasm memory of a fresh module running one (1, 1, 8192, 8192, 64) call: the kernel keeps
  // O(seq · block) scratch, never the 8192² score matrix (256 MiB).
  async memory() {
    const { createAttention } = await import('../../dist/node.mjs');
    const lib = await createAttention({ threads: 1 });
    const x = new Float32Array(8192 * 64).fill(0.01);
    const before = lib.memoryUsage().wasmMemory;
    lib.attention(x, x, x, { heads: 1, seqQ: 8192, headDim: 64 });
    return { before, after: lib.memoryUsage().wasmMemory };
  },
};

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await TASKS[process.argv[2]](process.argv[3])));
  process.exit(0);
}
