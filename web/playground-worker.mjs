// Runs the playground's shape off the main thread: random inputs, the library (median of a few
// runs after a warm-up), plain JavaScript (once), the largest difference, and head 0's weights.
import { loadAttention } from '../dist/index.mjs';
import { plainAttention } from './plain-attention.mjs';
import { randomArray } from './random-arrays.mjs';

const libPromise = loadAttention();

self.addEventListener('message', async ({ data: shape }) => {
  try {
    const lib = await libPromise;
    const { batch, heads, kvHeads, seqQ, seqK, headDim, causal } = shape;
    const q = randomArray(batch * heads * seqQ * headDim, 1);
    const k = randomArray(batch * kvHeads * seqK * headDim, 2);
    const v = randomArray(batch * kvHeads * seqK * headDim, 3);
    const options = { batch, heads, kvHeads, seqQ, seqK, headDim, causal };
    self.postMessage({ type: 'progress', step: 'library' });
    const out = lib.attention(q, k, v, options);  // warm-up, and the result to compare
    const times = [];
    for (let r = 0; r < 5; r++) {
      const t0 = performance.now();
      lib.attention(q, k, v, { ...options, out });
      times.push(performance.now() - t0);
    }
    const ms = times.sort((a, b) => a - b)[2];
    self.postMessage({ type: 'progress', step: 'plain' });
    const t0 = performance.now();
    const plain = plainAttention(q, k, v, options);
    const plainMs = performance.now() - t0;
    let maxDiff = 0;
    for (let i = 0; i < out.length; i++) maxDiff = Math.max(maxDiff, Math.abs(out[i] - plain[i]));
    const flops = 4 * batch * heads * seqQ * seqK * headDim * (causal ? 0.5 : 1);
    let weights = null;
    if (seqQ <= 512 && seqK <= 512) {
      weights = lib.attentionWeights(q.subarray(0, seqQ * headDim), k.subarray(0, seqK * headDim),
        { heads: 1, seqQ, seqK, headDim, causal });
    }
    self.postMessage({ type: 'result', ms, plainMs, maxDiff, gflops: flops / (ms * 1e6), seqQ, seqK, weights },
      weights ? [weights.buffer] : []);
  } catch (error) {
    self.postMessage({ type: 'error', message: `${error.name}: ${error.message}` });
  }
});
