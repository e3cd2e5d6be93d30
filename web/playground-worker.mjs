// Runs the playground's shape off the main thread: inputs (position codes or random numbers), the
// library (median of up to 5 timed runs after a warm-up), plain JavaScript once (unless skipped),
// the largest difference, and the weights of batch 0, head 0. The page cancels a run by ending
// this worker, so nothing here needs to check for it. The library loads as soon as the worker
// starts (the page starts it before the first Run), with the default build for the page: threads
// where it is cross-origin isolated.
//   → { type: 'run', shape, pattern, plain }   ← progress messages, then a result or an error
import { loadAttention } from '../dist/index.mjs';
import { plainAttention } from './bench/plain-attention.mjs';
import { randomArray } from './random-arrays.mjs';

const libPromise = loadAttention();
libPromise.catch(() => {});  // reported by the first run

// (query, key) pairs the kernel computes: all of them, or with the causal mask (bottom-right
// aligned: query i sees key j iff j ≤ i + seqK − seqQ) the visible ones, exactly.
function visiblePairs(seqQ, seqK, causal) {
  if (!causal) return seqQ * seqK;
  let pairs = 0;
  for (let i = 0; i < seqQ; i++) pairs += Math.max(0, Math.min(seqK, i + 1 + seqK - seqQ));
  return pairs;
}

// Sinusoidal position codes: code(p)·code(p′) = Σₘ cos((p − p′)·ωₘ) is largest at p′ = p, so a
// query made from code(i + seqK − seqQ) looks at the keys near its own position (aligned as the
// causal mask is). With scaleToPeak the codes are scaled so that a query's scaled score for its
// neighbours is 0.5 below the peak (they get e^−0.5 ≈ 0.6 of its weight): a band a few keys wide.
// The frequencies ωₘ run from π/2 (a period of 4 positions) down to a period of 2·span, so that
// no two positions of the span get the same code.
function positionCodes(count, seq, headDim, offset, span, scaleToPeak) {
  const pairs = Math.max(1, Math.floor(headDim / 2));
  const omega = Array.from({ length: pairs }, (_, m) => Math.PI / 2 * (span / 2) ** (-m / Math.max(1, pairs - 1)));
  const drop = pairs - omega.reduce((s, w) => s + Math.cos(w), 0);  // Σ cos(0·ω) − Σ cos(1·ω)
  const sharpness = scaleToPeak ? (0.5 * Math.sqrt(headDim)) / Math.max(drop, 1e-6) : 1;
  const out = new Float32Array(count * seq * headDim);
  for (let c = 0; c < count; c++) {
    for (let p = 0; p < seq; p++) {
      const base = (c * seq + p) * headDim;
      for (let m = 0; m < pairs; m++) {
        out[base + 2 * m] = sharpness * Math.sin((p + offset) * omega[m]);
        if (2 * m + 1 < headDim) out[base + 2 * m + 1] = sharpness * Math.cos((p + offset) * omega[m]);
      }
    }
  }
  return out;
}

function inputs({ batch, heads, kvHeads, seqQ, seqK, headDim }, pattern) {
  const v = randomArray(batch * kvHeads * seqK * headDim, 3);
  if (pattern === 'random') {
    return { q: randomArray(batch * heads * seqQ * headDim, 1), k: randomArray(batch * kvHeads * seqK * headDim, 2), v };
  }
  return {
    q: positionCodes(batch * heads, seqQ, headDim, seqK - seqQ, seqK, true),
    k: positionCodes(batch * kvHeads, seqK, headDim, 0, seqK, false),
    v,
  };
}

// The heatmap of the weights as RGBA pixels, one per weight, made here so that the page only
// copies them in: each row normalised to its own maximum so that long rows stay visible; keys the
// causal mask hides from a query grey, not white (weight 0).
function heatmapPixels(weights, rows, cols, causal) {
  const px = new Uint8ClampedArray(4 * rows * cols);
  for (let i = 0; i < rows; i++) {
    let max = 0;
    for (let j = 0; j < cols; j++) max = Math.max(max, weights[i * cols + j]);
    const scale = max > 0 ? 1 / max : 0;
    for (let j = 0, p = 4 * i * cols; j < cols; j++, p += 4) {
      const t = weights[i * cols + j] * scale;
      const hidden = causal && j > i + cols - rows;
      px[p] = hidden ? 200 : 255 - 202 * t;
      px[p + 1] = hidden ? 203 : 255 - 167 * t;
      px[p + 2] = hidden ? 210 : 255 - 55 * t;
      px[p + 3] = 255;
    }
  }
  return px;
}

self.addEventListener('message', async ({ data }) => {
  const { shape, pattern, plain } = data;
  try {
    const lib = await libPromise;
    const { batch, heads, kvHeads, seqQ, seqK, headDim, causal } = shape;
    const { q, k, v } = inputs(shape, pattern);
    const options = { batch, heads, kvHeads, seqQ, seqK, headDim, causal };
    self.postMessage({ type: 'progress', step: 'library' });
    const out = lib.attention(q, k, v, options);  // warm-up, and the result to compare
    const times = [];
    const started = performance.now();
    while (times.length < 5 && (times.length === 0 || performance.now() - started < 2000)) {
      const t0 = performance.now();
      lib.attention(q, k, v, { ...options, out });
      times.push(performance.now() - t0);
    }
    const ms = times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
    let plainMs = null, maxDiff = null;
    if (plain) {
      self.postMessage({ type: 'progress', step: 'plain' });
      const t0 = performance.now();
      const reference = plainAttention(q, k, v, options);
      plainMs = performance.now() - t0;
      maxDiff = 0;
      for (let i = 0; i < out.length; i++) maxDiff = Math.max(maxDiff, Math.abs(out[i] - reference[i]));
    }
    const pairs = batch * heads * visiblePairs(seqQ, seqK, causal);
    const flops = 4 * headDim * pairs;  // Q·Kᵀ and P·V: 2·headDim each per visible pair
    let weights = null, pixels = null;
    if (seqQ <= 512 && seqK <= 512) {
      weights = lib.attentionWeights(q.subarray(0, seqQ * headDim), k.subarray(0, seqK * headDim),
        { heads: 1, seqQ, seqK, headDim, causal });
      pixels = heatmapPixels(weights, seqQ, seqK, causal);
    }
    self.postMessage({ type: 'result', ms, runs: times.length, plainMs, maxDiff, pairs, flops, gflops: flops / (ms * 1e6),
      seqQ, seqK, causal, pattern, weights, pixels, library: lib.info }, weights ? [weights.buffer, pixels.buffer] : []);
  } catch (error) {
    self.postMessage({ type: 'error', message: `${error.name}: ${error.message}` });
  }
});
