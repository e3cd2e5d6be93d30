// The engines of the benchmark's variants section: one attention call of this library
// per score variant, each an engine of web/bench/host.mjs, so the variants take interleaved turns
// like the engines of the main table. spec: { kind: 'ours', threads, threadedBuild?, variants: [name, ...] }
// (names from VARIANTS); the shape's own `causal` is ignored: each variant says its own.
import { randomArray } from '../../web/random-arrays.mjs';
import { loadOurs } from './load-ours.mjs';

// BLOOM's ALiBi slopes for a power-of-two head count: 2^(−8(h+1)/H).
const bloomSlopes = (heads) => Float32Array.from({ length: heads }, (_, h) => 2 ** (-8 * (h + 1) / heads));

// name → { label, options(shape) }: the options this variant adds to attention().
export const VARIANTS = {
  plain: { label: 'plain', options: () => ({}) },
  // Both sides ≥ 448 on 512 keys: the window hides the 1.6 % of scores more than 448 positions
  // away, in the corner blocks, so every key block is still computed and masked in part: this
  // is what the window's masking costs, with no block skipped to make up for it.
  window: { label: 'window [448, 448]', options: () => ({ window: [448, 448] }) },
  alibi: { label: "ALiBi (BLOOM's slopes)", options: ({ heads }) => ({ alibiSlopes: bloomSlopes(heads) }) },
  sinks: { label: 'sinks', options: ({ heads }) => ({ sinks: randomArray(heads, 7) }) },
  softcap: { label: 'softcap 50 (Gemma 2)', options: () => ({ softcap: 50 }) },
  causal: { label: 'causal', options: () => ({ causal: true }) },
  'causal-window': { label: 'causal + window [1023, 0]', options: () => ({ causal: true, window: [1023, 0] }) },
};

// Scores a variant computes at all: rows × the keys each row may see (causal lower-right,
// window [left, right] as flash-attention's window_size), for GFLOP/s of the work done.
export function visibleScores({ seqQ, seqK }, options) {
  const off = seqK - seqQ;
  const [left, right] = options.window ?? [Infinity, Infinity];
  let n = 0;
  for (let i = 0; i < seqQ; i++) {
    const end = Math.min(seqK, options.causal ? i + off + 1 : seqK, i + off + right + 1);
    const begin = Math.max(0, i + off - left);
    n += Math.max(0, end - begin);
  }
  return n;
}

export async function createVariantEngines(spec, deps) {
  const { kind, variants } = spec;
  if (kind !== 'ours') throw new Error(`variants section: unknown engine kind ${kind}`);
  const { lib, requested, loadMs, tag, suffix } = await loadOurs(spec, deps);
  const { version, simd, threads: got, threadsReason } = lib.info;
  return variants.map((v) => {
    const { label, options } = VARIANTS[v];
    return {
      name: `attention-wasm ${tag} ${label}${suffix}`,
      config: { version, simd, threads: got, threadsReason, requested, loadMs, variant: v },
      async prepare(shape, { q, k, v: value }) {
        const { batch, heads, seqQ, seqK, headDim } = shape;
        const call = { batch, heads, seqQ, seqK, headDim, causal: false, ...options(shape) };
        const out = new Float32Array(q.length);
        return { run: () => lib.attention(q, k, value, { ...call, out }), read: (i) => out[i] };
      },
    };
  });
}
