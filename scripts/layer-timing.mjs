// Times the MultiHeadAttention layer on two model-sized cases (medians after a warm-up):
//   a decode step: embedDim 4096, 32 heads, 8 kv heads, 2048 cached positions (Llama-style)
//   a prefill: embedDim 768, 12 heads, 512 tokens (BERT-base-sized)
//   node scripts/layer-timing.mjs [threads, default 1]
import { createAttention } from '../dist/node.mjs';

const threads = Number(process.argv[2] ?? 1);
const lib = await createAttention({ threads });
console.log(`${lib.info.threads} thread(s)`);

function randomWeights({ embedDim: e, numHeads, numKvHeads = numHeads }) {
  const kv = numKvHeads * (e / numHeads);
  let x = 1;
  const t = (n) => Float32Array.from({ length: n }, () => { x = (x * 1664525 + 1013904223) >>> 0; return (x / 2 ** 32 - 0.5) / Math.sqrt(e); });
  return { wq: t(e * e), wk: t(kv * e), wv: t(kv * e), wo: t(e * e), bq: t(e), bk: t(kv), bv: t(kv), bo: t(e) };
}

function median(run, { warmMs = 1500, minReps = 5, budgetMs = 8000 } = {}) {
  const warmEnd = performance.now() + warmMs;
  while (performance.now() < warmEnd) run();
  const times = [];
  const end = performance.now() + budgetMs;
  while (times.length < minReps || (performance.now() < end && times.length < 200)) {
    const t0 = performance.now();
    run();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[times.length >> 1], reps: times.length };
}

{
  // Fill the cache to 2048 − 16 positions, warm up with 16 single-token steps (reaching 2048),
  // then time 64 steps: the cache holds 2048…2111 positions while they run.
  const config = { embedDim: 4096, numHeads: 32, numKvHeads: 8 };
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(randomWeights(config));
  const cache = mha.createCache({ batch: 1, maxSeq: 2048 + 64 });
  const chunk = new Float32Array(254 * 4096).fill(0.01);
  for (let n = 0; n < 2032; n += 254) mha.forward(chunk, null, null, { cache });
  const token = new Float32Array(4096).fill(0.02);
  const out = new Float32Array(4096);
  while (cache.length < 2048) mha.forward(token, null, null, { cache, out });
  const steps = [];
  while (cache.length < 2048 + 64) {
    const t0 = performance.now();
    mha.forward(token, null, null, { cache, out });
    steps.push(performance.now() - t0);
  }
  steps.sort((a, b) => a - b);
  console.log(`decode step (embedDim 4096, 32 heads, 8 kv heads, 2048 cached positions): median ${steps[32].toFixed(2)} ms over 64 steps`);
  cache.dispose();
  mha.dispose();
}
{
  const config = { embedDim: 768, numHeads: 12 };
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(randomWeights(config));
  const x = new Float32Array(512 * 768).fill(0.01);
  const out = new Float32Array(512 * 768);
  const { ms, reps } = median(() => mha.forward(x, null, null, { causal: true, out }));
  const flops = 2 * 512 * 768 * 768 * 4 + 4 * 12 * 512 * 512 * 64 / 2;
  console.log(`prefill (embedDim 768, 12 heads, 512 tokens, causal): median ${ms.toFixed(1)} ms over ${reps} runs, ${(flops / ms / 1e6).toFixed(1)} GFLOP/s`);
  mha.dispose();
}
