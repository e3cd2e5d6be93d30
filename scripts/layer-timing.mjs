// Times the MultiHeadAttention layer on two model-sized cases, each thread count in its own
// process (the threaded build is a module of its own):
//   a decode step of a Llama-3-8B-shaped layer (embedDim 4096, 32 heads, 8 kv heads, 2048 cached
//     positions) per cache dtype: one cache per dtype, filled once, each step appending one
//     position and attending to 2049 (then truncated back to 2048, so every step is the same
//     step); the dtypes take interleaved turns of 16 steps in 7 rounds, in an order rotated from
//     round to round; median of the round medians, ratios the median of per-round ratios;
//   a prefill of a BERT-base-sized layer: embedDim 768, 12 heads, 512 tokens, causal;
// and, beside the step's bytes (weights and cache) ÷ time, the wasm read bandwidth over as many.
//   node scripts/layer-timing.mjs [--threads 1,2] [--dtype float32,float16,bfloat16,int8]
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { measureBandwidth } from './bench/bandwidth.mjs';
import { median } from '../web/bench/schedule.mjs';
import { randomArray } from '../web/random-arrays.mjs';

const DTYPES = ['float32', 'float16', 'bfloat16', 'int8'];
const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const dtypes = option('--dtype', DTYPES.join(',')).split(',');
const bad = dtypes.filter((d) => !DTYPES.includes(d));
if (bad.length) throw new Error(`layer-timing: --dtype expects some of ${DTYPES.join(', ')}, got ${bad.join(', ')}`);
const ROUNDS = 7, STEPS = 16, CACHED = 2048;
const LLAMA = { embedDim: 4096, numHeads: 32, numKvHeads: 8 };

function randomWeights({ embedDim: e, numHeads, numKvHeads = numHeads }) {
  const kv = numKvHeads * (e / numHeads);
  let x = 1;
  const t = (n) => Float32Array.from({ length: n }, () => { x = (x * 1664525 + 1013904223) >>> 0; return (x / 2 ** 32 - 0.5) / Math.sqrt(e); });
  return { wq: t(e * e), wk: t(kv * e), wv: t(kv * e), wo: t(e * e), bq: t(e), bk: t(kv), bv: t(kv), bo: t(e) };
}

// One thread count, in this process: { threads, decode: { dtype: { ms, rounds } }, vsF32, prefill }.
async function measure(threads) {
  const { createAttention } = await import('../dist/node.mjs');
  const lib = await createAttention({ threads, strict: true, layers: true });
  const mha = new lib.MultiHeadAttention(LLAMA);
  const weights = randomWeights(LLAMA);
  mha.setWeights(weights);
  const headDim = LLAMA.embedDim / LLAMA.numHeads;
  // The cached keys and values (as a layer's projections would have stored them), appended once.
  const past = [2, 3].map((seed) => randomArray(LLAMA.numKvHeads * CACHED * headDim, seed).map((v) => v * 0.5));
  const caches = Object.fromEntries(dtypes.map((dtype) => {
    const cache = mha.createCache({ batch: 1, maxSeq: CACHED + 1, dtype });
    cache.append(past[0], past[1]);
    return [dtype, cache];
  }));
  const token = randomArray(LLAMA.embedDim, 4).map((v) => v * 0.1);
  const out = new Float32Array(LLAMA.embedDim);
  const step = (cache) => {
    mha.forward(token, null, null, { cache, out });
    cache.truncate(CACHED);
  };
  const warmEnd = performance.now() + 1500;
  while (performance.now() < warmEnd) for (const c of Object.values(caches)) step(c);
  const rounds = Object.fromEntries(dtypes.map((d) => [d, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < dtypes.length; i++) {
      const dtype = dtypes[(i + r) % dtypes.length];
      step(caches[dtype]);  // untimed: the turn before ran another cache
      const times = [];
      for (let s = 0; s < STEPS; s++) {
        const t0 = performance.now();
        step(caches[dtype]);
        times.push(performance.now() - t0);
      }
      rounds[dtype].push(median(times));
    }
  }
  // What a step streams: every weight once, and the cache.
  const weightBytes = Object.values(weights).reduce((n, w) => n + w.byteLength, 0);
  const bytes = Object.fromEntries(dtypes.map((d) => [d, weightBytes + caches[d].bytes]));
  for (const c of Object.values(caches)) c.dispose();
  mha.dispose();
  const decode = Object.fromEntries(dtypes.map((d) => [d, { ms: median(rounds[d]), rounds: rounds[d], bytes: bytes[d] }]));
  // The wasm read bandwidth over as many bytes as the float32 step reads (one thread), after the rounds.
  const readGbps = await measureBandwidth(bytes[dtypes[0]]);

  const bert = { embedDim: 768, numHeads: 12 };
  const layer = new lib.MultiHeadAttention(bert);
  layer.setWeights(randomWeights(bert));
  const x = randomArray(512 * 768, 5).map((v) => v * 0.1);
  const y = new Float32Array(512 * 768);
  const prefillEnd = performance.now() + 1500;
  while (performance.now() < prefillEnd) layer.forward(x, null, null, { causal: true, out: y });
  const times = [];
  for (let r = 0; r < 15; r++) {
    const t0 = performance.now();
    layer.forward(x, null, null, { causal: true, out: y });
    times.push(performance.now() - t0);
  }
  layer.dispose();
  const flops = 2 * 512 * 768 * 768 * 4 + (4 * 12 * 512 * 512 * 64) / 2;
  const prefillMs = median(times);
  return { threads: lib.info.threads, simd: lib.info.simd, decode, readGbps, prefill: { ms: prefillMs, gflops: flops / (prefillMs * 1e6) } };
}

if (args.includes('--child')) {
  console.log(JSON.stringify(await measure(Number(option('--child')))));
  process.exit(0);
}

const counts = option('--threads', '1,2').split(',').map(Number);
const load = () => loadavg().map((v) => v.toFixed(2)).join(' ');
const loadStart = load();
const results = counts.map((t) => JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', String(t), '--dtype', dtypes.join(',')], { encoding: 'utf8' })));
const ratio = (a, b) => median(a.rounds.map((t, i) => t / b.rounds[i]));
const e = LLAMA.embedDim, kvDim = LLAMA.numKvHeads * (e / LLAMA.numHeads);
console.log(`Llama-3-8B-shaped layer (embedDim ${e}, ${LLAMA.numHeads} heads, ${LLAMA.numKvHeads} kv heads, ${((2 * e * e + 2 * kvDim * e) * 4) / 2 ** 20} MiB of weights): ` +
  `one decode step over ${CACHED} cached positions (+ the new one), attention-wasm ${results[0].simd} build; medians of ${ROUNDS} interleaved rounds of ${STEPS} steps`);
const head = ['cache dtype', ...results.flatMap((r) => [`${r.threads} thread${r.threads > 1 ? 's' : ''}, ms`, '÷ float32']), ...(results.length > 1 ? [`${results[0].threads} ÷ ${results[1].threads} threads`] : [])];
console.log(`| ${head.join(' | ')} |\n|${head.map(() => '---').join('|')}|`);
for (const dtype of dtypes) {
  const cells = results.flatMap((r) => [r.decode[dtype].ms.toFixed(2), r.decode.float32 ? ratio(r.decode[dtype], r.decode.float32).toFixed(2) : '—']);
  if (results.length > 1) cells.push(`${(results[0].decode[dtype].ms / results[1].decode[dtype].ms).toFixed(2)}×`);
  console.log(`| ${dtype} | ${cells.join(' | ')} |`);
}
for (const r of results) {
  const gbps = (d) => r.decode[d].bytes / (r.decode[d].ms * 1e6);
  console.log(`${r.threads} thread(s): a step reads the weights and the cache, ${dtypes.map((d) => `${d} ${(r.decode[d].bytes / 2 ** 20).toFixed(0)} MiB at ${gbps(d).toFixed(1)} GB/s`).join(', ')}; ` +
    `the wasm streaming read of ${(r.decode[dtypes[0]].bytes / 2 ** 20).toFixed(0)} MiB (scripts/bench/bandwidth.mjs, one thread, after the rounds): ${r.readGbps.toFixed(1)} GB/s`);
}
for (const r of results) {
  console.log(`prefill (embedDim 768, 12 heads, 512 tokens, causal), ${r.threads} thread(s): median ${r.prefill.ms.toFixed(1)} ms of 15 runs, ${r.prefill.gflops.toFixed(1)} GFLOP/s`);
}
console.log(`load average (1/5/15 min) ${loadStart} at start, ${load()} at end`);
