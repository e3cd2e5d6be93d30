// npm run bench: attention-wasm against a plain JavaScript loop on the same float32 inputs.
// Engines run interleaved (A B A B …) after a time-based warm-up; we report medians, GFLOP/s
// (4·B·H·Sq·Sk·D flops) and ratios, since this machine is shared and noisy.
//   node scripts/bench.mjs [--quick] [--json FILE]
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { loadAttention } from '../dist/node.mjs';
import { plainAttention } from '../web/plain-attention.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonIndex = args.indexOf('--json');
const jsonPath = jsonIndex >= 0 ? args[jsonIndex + 1] : new URL('../artifacts/bench/latest.json', import.meta.url).pathname;

const SHAPES = quick
  ? [{ batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64 }]
  : [
    { batch: 1, heads: 8, seqQ: 128, seqK: 128, headDim: 64 },
    { batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64 },
    { batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64, causal: true },
    { batch: 4, heads: 12, seqQ: 197, seqK: 197, headDim: 64 },
    { batch: 1, heads: 32, seqQ: 1, seqK: 2048, headDim: 128 },
  ];

const flops = (s) => 4 * s.batch * s.heads * s.seqQ * s.seqK * s.headDim;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const label = (s) => `(${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim})${s.causal ? ' causal' : ''}`;

function tensor(n, seed) {
  const a = new Float32Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1664525 + 1013904223) >>> 0;
    a[i] = x / 2 ** 31 - 1;
  }
  return a;
}

const t0 = performance.now();
const lib = await loadAttention();
const loadMs = performance.now() - t0;

const results = [];
for (const shape of SHAPES) {
  const q = tensor(shape.batch * shape.heads * shape.seqQ * shape.headDim, 1);
  const k = tensor(shape.batch * shape.heads * shape.seqK * shape.headDim, 2);
  const v = tensor(shape.batch * shape.heads * shape.seqK * shape.headDim, 3);
  const out = new Float32Array(q.length);
  const engines = {
    'attention-wasm': () => lib.attention(q, k, v, { ...shape, out }),
    ...(shape.causal ? {} : { 'plain JS': () => plainAttention(q, k, v, { ...shape, out }) }),
  };
  const first = performance.now();
  engines['attention-wasm']();
  const firstCallMs = performance.now() - first;
  // Warm-up: V8 re-compiles hot wasm with TurboFan for later calls, and idle cores start slow.
  const warmUntil = performance.now() + (quick ? 800 : 1500);
  while (performance.now() < warmUntil) for (const run of Object.values(engines)) run();

  const times = Object.fromEntries(Object.keys(engines).map((name) => [name, []]));
  const budgetMs = quick ? 2500 : 5000;
  const start = performance.now();
  let reps = 0;
  while (reps < 5 || (performance.now() - start < budgetMs && reps < 200)) {
    for (const [name, run] of Object.entries(engines)) {
      const t = performance.now();
      run();
      times[name].push(performance.now() - t);
    }
    reps++;
  }
  const row = { shape: label(shape), reps, firstCallMs, engines: {} };
  for (const [name, ts] of Object.entries(times)) {
    const ms = median(ts);
    row.engines[name] = { ms, gflops: flops(shape) / (ms * 1e6) };
  }
  results.push(row);
}

console.log(`attention-wasm ${lib.info.version} (${lib.info.simd}, ${lib.info.threads} thread), Node ${process.version}; load ${loadMs.toFixed(0)} ms`);
console.log('shape (B,H,Sq,Sk,D)            engine            median ms   GFLOP/s   vs plain JS');
for (const row of results) {
  const plain = row.engines['plain JS'];
  for (const [name, e] of Object.entries(row.engines)) {
    const ratio = plain ? `${(plain.ms / e.ms).toFixed(1)}x` : '';
    console.log(`${row.shape.padEnd(30)} ${name.padEnd(16)} ${e.ms.toFixed(2).padStart(10)} ${e.gflops.toFixed(1).padStart(9)} ${ratio.padStart(13)}`);
  }
}
const peakHeap = lib.memoryUsage().wasmMemory;
console.log(`wasm memory after the run: ${(peakHeap / 2 ** 20).toFixed(0)} MiB`);
mkdirSync(dirname(jsonPath), { recursive: true });
writeFileSync(jsonPath, JSON.stringify({ date: new Date().toISOString(), node: process.version, info: lib.info, loadMs, results, wasmMemory: peakHeap }, null, 2));
console.log(`results written to ${jsonPath}`);
