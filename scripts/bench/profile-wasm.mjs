// Where one attention call spends its time in a wasm build, through the library's own JS API
// (so the copies in and out of wasm memory count): V8's sampling profiler, started after a
// time-based warm-up (so everything hot is in TurboFan), attributes samples to wasm functions by
// name (the build must be linked with --profiling-funcs, as scripts/profile.sh does), and the
// phases are summed from those names (phases.mjs).
//   node [--experimental-wasm-relaxed-simd] scripts/bench/profile-wasm.mjs DIR [B,H,Sq,Sk,D[,1]] [--seconds 6] [--build attn]
//        [--kv-heads N] [--cache float32|float16|bfloat16|int8]
// DIR holds BUILD.mjs + BUILD.wasm (a single-threaded module: attn, attn-relaxed). --cache: the
// keys and values sit in a KV cache of that dtype (a decode step: nothing copied in but the
// query); --kv-heads: grouped K/V heads (default: one per head). Prints JSON.
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createLibrary } from '../../src/js/api.mjs';
import { makeMultiHeadAttention } from '../../src/js/mha.mjs';
import { randomArray } from '../../web/random-arrays.mjs';
import { phaseOf } from './phases.mjs';
import { parseShape } from './shapes.mjs';

const args = process.argv.slice(2);
const dir = resolve(args[0]);
const shapeArg = args.find((a) => /^\d+,/.test(a));
const shape = shapeArg ? parseShape(shapeArg) : parseShape('1,12,512,512,64');
const seconds = args.includes('--seconds') ? Number(args[args.indexOf('--seconds') + 1]) : 6;
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const build = option('--build') ?? 'attn';
const cacheDtype = option('--cache');

// The module straight from its factory, wrapped by the library's JS API (the loader would check
// the .wasm against the shipped builds' fingerprints, which a profiling build does not match).
const { default: createAttnModule } = await import(pathToFileURL(join(dir, `${build}.mjs`)).href);
const wasmBinary = readFileSync(join(dir, `${build}.wasm`));
const M = await createAttnModule({ print: () => {}, printErr: () => {}, wasmBinary });
const lib = createLibrary(M, { makeMultiHeadAttention: typeof M.MultiHeadAttentionCore === 'function' ? makeMultiHeadAttention : null });
const { batch, heads, seqQ, seqK, headDim, causal } = shape;
const kvHeads = Number(option('--kv-heads') ?? heads);
const [q, k, v] = [1, 2, 3].map((seed, i) => randomArray(batch * (i ? kvHeads * seqK : heads * seqQ) * headDim, seed));
const out = new Float32Array(q.length);
let call = () => lib.attention(q, k, v, { batch, heads, kvHeads, seqQ, seqK, headDim, causal, out });
if (cacheDtype) {
  const cache = lib.createKVCache({ batch, kvHeads, headDim, maxSeq: seqK, dtype: cacheDtype });
  cache.append(k, v);
  call = () => lib.attention(q, cache, null, { heads, seqQ, causal, out });
}

const warmEnd = performance.now() + 1500;
while (performance.now() < warmEnd) call();
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 100 });  // µs
await session.post('Profiler.start');
const times = [];
const end = performance.now() + seconds * 1000;
while (performance.now() < end) {
  const t0 = performance.now();
  call();
  times.push(performance.now() - t0);
}
const { profile } = await session.post('Profiler.stop');
session.disconnect();

// Self time per function: each sample is charged to the node it landed in.
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const dt = new Map();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  dt.set(id, (dt.get(id) ?? 0) + profile.timeDeltas[i] / 1000);
}
const functions = new Map();
for (const [id, ms] of dt) {
  const { functionName, url } = byId.get(id).callFrame;
  const name = functionName || '(anonymous)';
  if (name === '(idle)') continue;
  const key = `${name}\u0000${url}`;
  functions.set(key, (functions.get(key) ?? 0) + ms);
}
const total = [...functions.values()].reduce((a, b) => a + b, 0);
const phases = {};
for (const [key, ms] of functions) {
  const [name, url] = key.split('\u0000');
  const phase = phaseOf(name, url);
  phases[phase] = (phases[phase] ?? 0) + ms;
}
// ms per call = a phase's share of the samples × the median call: a mean would charge the time
// this process spent descheduled (a loaded machine) to whatever was running.
times.sort((a, b) => a - b);
const medianMs = times[times.length >> 1];
const perCall = (ms) => (ms / total) * medianMs;
console.log(JSON.stringify({
  build: dir, shape: shapeArg ?? '1,12,512,512,64', kvHeads, cache: cacheDtype ?? null, simd: lib.info.simd, calls: times.length, medianMs,
  phases: Object.fromEntries(Object.entries(phases).sort((a, b) => b[1] - a[1]).map(([p, ms]) => [p, { share: ms / total, msPerCall: perCall(ms) }])),
  top: [...functions].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([key, ms]) => ({ fn: key.split('\u0000')[0], share: ms / total })),
}));
process.exit(0);
