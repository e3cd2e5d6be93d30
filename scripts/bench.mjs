// npm run bench: attention-wasm against its peers on the same float32 inputs, in one Node
// process: onnxruntime-web (wasm backend; a standard-ops graph and the com.microsoft
// MultiHeadAttention op; 1 and 2 threads), TensorFlow.js's wasm backend, plain JavaScript, and
// this kernel compiled natively for 128-bit SSE (a child process: the "no browser" ceiling).
// Engines run interleaved (A B A B …) after a time-based warm-up; we report medians, GFLOP/s
// (4·B·H·Sq·Sk·D, halved for causal), the fraction of this machine's SIMD128 peak, and ratios,
// because this machine is shared and noisy. Results go to artifacts/bench/ as JSON.
//   node scripts/bench.mjs [--quick] [--shape B,H,Sq,Sk,D[,causal]] [--json FILE]
//   (npm run bench builds what it needs first)
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-web';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { createAttention } from '../dist/node.mjs';
import { plainAttention } from '../web/plain-attention.mjs';
import { randomArray as tensor } from '../web/random-arrays.mjs';
import { msMultiHeadAttention, standardAttention } from './bench/onnx-graphs.mjs';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonIndex = args.indexOf('--json');
const jsonPath = jsonIndex >= 0 ? args[jsonIndex + 1] : here('../artifacts/bench/latest.json');
const WARM_MS = quick ? 800 : 1500;
const BUDGET_MS = quick ? 2500 : 6000;
const SKIP_MS = 20000;  // an engine whose first call takes longer sits out that shape

const square = (b, h, s, d) => ({ batch: b, heads: h, seqQ: s, seqK: s, headDim: d });
const shapeIndex = args.indexOf('--shape');
const oneShape = shapeIndex >= 0 ? (() => {
  const [batch, heads, seqQ, seqK, headDim, causal] = args[shapeIndex + 1].split(',').map(Number);
  return { batch, heads, seqQ, seqK, headDim, causal: causal === 1 };
})() : null;
const SHAPES = oneShape ? [oneShape] : quick
  ? [square(1, 12, 512, 64)]
  : [
    square(1, 8, 128, 64), { ...square(1, 8, 128, 64), causal: true },
    square(1, 12, 512, 64), { ...square(1, 12, 512, 64), causal: true },
    square(1, 8, 2048, 64), { ...square(1, 8, 2048, 64), causal: true },
    { batch: 1, heads: 32, seqQ: 1, seqK: 2048, headDim: 128 },
    square(4, 12, 197, 64),
  ];

const label = (s) => `(${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim})${s.causal ? ' causal' : ''}`;
const flops = (s) => 4 * s.batch * s.heads * s.seqQ * s.seqK * s.headDim * (s.causal && s.seqQ === s.seqK ? 0.5 : 1);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// This machine's SIMD128 multiply-add peak, from scripts/bench/simd-peak.cpp. Called many
// times so V8 tiers it up (a long single call would stay in the baseline compiler).
async function simdPeak() {
  const wasmFile = here('../build/wasm/simd_peak.wasm');
  if (!existsSync(wasmFile)) return null;
  const { instance } = await WebAssembly.instantiate(readFileSync(wasmFile), {});
  const peak = instance.exports.simd_peak;
  const iterations = 200000;
  const warmEnd = performance.now() + 1500;
  while (performance.now() < warmEnd) peak(iterations, 1);
  const times = [];
  for (let r = 0; r < 15; r++) {
    const t0 = performance.now();
    peak(iterations, 1 + r);
    times.push(performance.now() - t0);
  }
  return (iterations * 56) / (median(times) * 1e6);  // 56 flops per iteration
}

function nativeTimes() {
  const exe = here('../build/bench/attn_bench_native');
  if (!existsSync(exe)) return {};
  const specs = SHAPES.map((s) => `${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim},${s.causal ? 1 : 0}`);
  const lines = execFileSync(exe, specs, { encoding: 'utf8' }).trim().split('\n').map((l) => JSON.parse(l));
  return Object.fromEntries(lines.map((l, i) => [label(SHAPES[i]), l.ms]));
}

async function makeEngines(shape, lib, lib2) {
  const { batch, heads, seqQ, seqK, headDim } = shape;
  const q = tensor(batch * heads * seqQ * headDim, 1);
  const k = tensor(batch * heads * seqK * headDim, 2);
  const v = tensor(batch * heads * seqK * headDim, 3);
  const out = new Float32Array(q.length);
  const engines = {
    'attention-wasm': () => lib.attention(q, k, v, { ...shape, out }),
    'attention-wasm 2T': () => lib2.attention(q, k, v, { ...shape, out }),
  };

  const bhsd = (x, s) => new ort.Tensor('float32', x, [batch, heads, s, headDim]);
  const bsd = (x, s) => new ort.Tensor('float32', x, [batch, s, heads * headDim]);
  const standard = standardAttention(shape);
  const mha = msMultiHeadAttention(shape);
  for (const threads of [1, 2]) {
    // No spinning: idle pool threads would otherwise busy-wait on the second core and slow
    // whichever engine runs next.
    const options = { executionProviders: ['wasm'], graphOptimizationLevel: 'all', intraOpNumThreads: threads,
      extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } } };
    const s1 = await ort.InferenceSession.create(standard, options);
    const feeds1 = { Q: bhsd(q, seqQ), K: bhsd(k, seqK), V: bhsd(v, seqK) };
    engines[`onnxruntime-web ops ${threads}T`] = () => s1.run(feeds1);
    const s2 = await ort.InferenceSession.create(mha, options);
    const feeds2 = { query: bsd(q, seqQ), key: bsd(k, seqK), value: bsd(v, seqK) };
    engines[`onnxruntime-web MHA ${threads}T`] = () => s2.run(feeds2);
  }
  const [tq, tk, tv] = [tf.tensor4d(q, [batch, heads, seqQ, headDim]), tf.tensor4d(k, [batch, heads, seqK, headDim]),
    tf.tensor4d(v, [batch, heads, seqK, headDim])];
  const causalMask = shape.causal ? tf.tensor2d(Float32Array.from({ length: seqQ * seqK },
    (_, e) => (e % seqK <= Math.floor(e / seqK) + seqK - seqQ ? 0 : -1e9)), [seqQ, seqK]) : null;
  engines['tfjs-wasm'] = () => {
    const o = tf.tidy(() => {
      let s = tf.mul(tf.matMul(tq, tk, false, true), 1 / Math.sqrt(headDim));
      if (causalMask) s = tf.add(s, causalMask);
      return tf.matMul(tf.softmax(s), tv);
    });
    o.dataSync();
    o.dispose();
  };
  engines['plain JS'] = () => plainAttention(q, k, v, { ...shape, out });
  const dispose = () => { tq.dispose(); tk.dispose(); tv.dispose(); causalMask?.dispose(); };
  return { engines, dispose };
}

async function timeShape(shape, lib, lib2) {
  const { engines, dispose } = await makeEngines(shape, lib, lib2);
  const firstCall = {};
  const active = {};
  for (const [name, run] of Object.entries(engines)) {
    const t0 = performance.now();
    await run();
    firstCall[name] = performance.now() - t0;
    if (firstCall[name] <= SKIP_MS) active[name] = run;
  }
  // Slow engines (seconds per call) are timed only a few times, outside the warm-up.
  const slow = Object.keys(active).filter((n) => firstCall[n] > 1000);
  const fast = Object.keys(active).filter((n) => !slow.includes(n));
  const warmEnd = performance.now() + WARM_MS;
  while (performance.now() < warmEnd) for (const n of fast) await active[n]();
  const times = Object.fromEntries(Object.keys(active).map((n) => [n, []]));
  const start = performance.now();
  let reps = 0;
  while (reps < 5 || (performance.now() - start < BUDGET_MS && reps < 200)) {
    for (const n of fast) {
      const t0 = performance.now();
      await active[n]();
      times[n].push(performance.now() - t0);
    }
    reps++;
  }
  for (const n of slow) {
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now();
      await active[n]();
      times[n].push(performance.now() - t0);
    }
  }
  dispose();
  return { firstCall, medians: Object.fromEntries(Object.entries(times).map(([n, ts]) => [n, median(ts)])), reps };
}

// Peak wasm memory of a fresh module running one (1, 1, 8192, 8192, 64) call: the kernel keeps
// O(seq · block) scratch, never the 8192² score matrix (256 MiB).
function memoryAtSeq8192() {
  const script = `
    const { createAttention } = await import(${JSON.stringify(new URL('../dist/node.mjs', import.meta.url).href)});
    const lib = await createAttention({ threads: 1 });
    const n = 8192 * 64, x = new Float32Array(n).fill(0.01);
    const before = lib.memoryUsage().wasmMemory;
    lib.attention(x, x, x, { heads: 1, seqQ: 8192, headDim: 64 });
    console.log(JSON.stringify({ before, after: lib.memoryUsage().wasmMemory }));`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }));
}

const loadStart = performance.now();
const lib = await createAttention({ threads: 1 });
const loadMs = performance.now() - loadStart;
const lib2 = await createAttention({ threads: 2 });
ort.env.wasm.numThreads = 2;
setWasmPaths(here('../node_modules/@tensorflow/tfjs-backend-wasm/dist/'));
await tf.setBackend('wasm');

const peak = await simdPeak();
const native = nativeTimes();
const results = [];
for (const shape of SHAPES) {
  const r = await timeShape(shape, lib, lib2);
  const nativeMs = native[label(shape)];
  results.push({ shape: label(shape), flops: flops(shape), ...r, nativeMs });
  process.stderr.write(`  measured ${label(shape)} (${r.reps} interleaved rounds)\n`);
}
const memory = quick ? null : memoryAtSeq8192();

// The backward pass against the forward on (1,12,512,512,64), single thread.
function backwardRatio() {
  const shape = square(1, 12, 512, 64);
  const n = 12 * 512 * 64;
  const [q, k, v, g] = [1, 2, 3, 4].map((seed) => tensor(n, seed));
  const time = (run) => {
    for (let r = 0; r < 3; r++) run();
    const ts = [];
    for (let r = 0; r < 7; r++) {
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
  return { shape: label(shape), forwardMs, backwardMs, recomputeMs, ratio: backwardMs / forwardMs };
}
const backward = backwardRatio();

const mib = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
console.log(`attention-wasm ${lib.info.version} (${lib.info.simd}; 1 thread, and 2 as "2T"), Node ${process.version}, ` +
  `onnxruntime-web ${ort.env.versions?.web ?? '?'}, tfjs ${tf.version_core}; ${new Date().toISOString().slice(0, 10)}`);
console.log(`createAttention({ threads: 1 }): ${loadMs.toFixed(0)} ms; SIMD128 mul+add peak on this machine: ${peak ? peak.toFixed(1) : '?'} GFLOP/s`);
console.log('\nshape (B,H,Sq,Sk,D)        engine                     median ms   GFLOP/s  % peak   time ÷ attention-wasm');
for (const row of results) {
  const ours = row.medians['attention-wasm'];
  const lines = Object.entries(row.medians);
  if (row.nativeMs) lines.push(['native SSE (g++)', row.nativeMs]);
  for (const [name, ms] of lines) {
    const g = row.flops / (ms * 1e6);
    console.log(`${row.shape.padEnd(26)} ${name.padEnd(26)} ${ms.toFixed(2).padStart(10)} ${g.toFixed(1).padStart(9)} ` +
      `${peak ? `${(100 * g / peak).toFixed(0)}%`.padStart(7) : ''} ${(ms / ours).toFixed(2).padStart(12)}`);
  }
  const skipped = Object.keys(row.firstCall).filter((n) => !(n in row.medians));
  if (skipped.length) console.log(`${''.padEnd(26)} skipped (first call > 20 s): ${skipped.join(', ')}`);
  console.log(`${''.padEnd(26)} first call of attention-wasm: ${row.firstCall['attention-wasm'].toFixed(1)} ms`);
}
console.log(`\nbackward ${backward.shape}, 1 thread, from the forward's saved lse and out: ${backward.backwardMs.toFixed(1)} ms vs forward ${backward.forwardMs.toFixed(1)} ms (${backward.ratio.toFixed(2)}×); recomputing them: ${backward.recomputeMs.toFixed(1)} ms`);
console.log(`wasm memory after the run: ${mib(lib.memoryUsage().wasmMemory)}`);
if (memory) console.log(`fresh module, one (1,1,8192,8192,64) call: wasm memory ${mib(memory.before)} → ${mib(memory.after)} (inputs + output 8 MiB; a score matrix would be 256 MiB)`);
mkdirSync(dirname(jsonPath), { recursive: true });
writeFileSync(jsonPath, JSON.stringify({ date: new Date().toISOString(), node: process.version, info: lib.info, loadMs, simdPeakGflops: peak, results, memory, backward }, null, 2));
console.log(`results: ${jsonPath}`);
process.exit(0);  // onnxruntime-web's thread pool would keep the process alive
