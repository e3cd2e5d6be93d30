// The engines of the benchmark's model section: a token step as a model runs it — every layer's
// KV cache visited once per token, so each step streams its caches from memory, never from a
// cache level that the same layer left warm — behind the interface of web/bench/engines.mjs, so
// web/bench/host.mjs runs them in a Node process or a browser page.
// shape: { batch, heads, kvHeads, seqQ, seqK: S, headDim, model: { layers: L, dtype, workingSet } };
// inputs { q, k, v } in 'bhsd' (k and v: one layer's S positions, with kvHeads heads).
//   ours (deps.createAttention; spec.threads; spec.probes: thread counts to measure the limits
//     on): the token step on `threads` threads. Its caches are lib.createKVCache({ dtype,
//     maxSeq: S }), one per layer, each filled with k and v; a call is one token: for each of the
//     L layers, truncate(S − seqQ), append() of the token's seqQ keys and values (the last seqQ
//     positions of k and v), attention(query, cache, null, { heads, seqQ, out }) — the same query
//     for every layer. A model whose caches take less than workingSet bytes gets copies of its L
//     layers that tokens take in turn, so every layer is read again only after at least that
//     many bytes (float32 fills 1 GiB with one copy, int8 needs four). The caches stay for the
//     next shape with the same caches (seqQ 1, then 4). And the limits, each in as many workers
//     as threads (probes.mjs): the streaming read over workingSet bytes, and the multiply-add
//     peak of our build.
import { peakModule } from './peak.mjs';
import { createProbe } from './probes.mjs';
import { splitLast } from './decode-engines.mjs';

// The cache dtypes the benchmark measures, in this order, where the library has them (a
// library without one, an older or newer one, measures the rest).
export const CANDIDATE_DTYPES = ['float32', 'float16', 'bfloat16', 'int8', 'int4'];
export function cacheDtypes(lib) {
  return CANDIDATE_DTYPES.filter((dtype) => {
    try {
      lib.createKVCache({ kvHeads: 1, headDim: 1, maxSeq: 1, dtype }).dispose();
      return true;
    } catch {
      return false;
    }
  });
}

export const stepName = (threads) => `attention-wasm ${threads}T token step`;
export const readName = (threads) => `wasm read ${threads}T`;
export const peakName = (threads) => `multiply-add peak ${threads}T`;
export const isProbe = (name) => name.startsWith('wasm read') || name.startsWith('multiply-add peak');

// Peak probe iterations per call and stream: about 20 ms (7 chains of mul and of add, or 13 of FMA).
const PEAK_ITERATIONS = 16e6;

async function oursEngines({ threads = 1, probes = [], quick = false }, { createAttention }) {
  const requested = { threads, strict: true };
  const t0 = performance.now();
  const lib = await createAttention(requested);
  const loadMs = performance.now() - t0;
  const { version, simd, threads: got, threadsReason } = lib.info;
  const dtypes = cacheDtypes(lib);
  const config = (how) => ({ version, simd, threads: got, threadsReason, requested, loadMs, dtypes, how });

  let pool = null;  // { key, caches: [layer of copy 0, …, layer of copy 1, …], layers, copies, bytes }
  const dispose = () => {
    for (const c of pool?.caches ?? []) c.dispose();
    pool = null;
  };
  function cachesFor({ batch, kvHeads, seqK, headDim, model: { layers, dtype, workingSet } }, k, v) {
    const key = JSON.stringify([batch, kvHeads, seqK, headDim, layers, dtype, workingSet]);
    if (pool?.key === key) return pool;
    dispose();
    const caches = [];
    try {
      const make = () => {
        const c = lib.createKVCache({ batch, kvHeads, headDim, maxSeq: seqK, dtype });
        caches.push(c);
        c.append(k, v);
        return c;
      };
      const bytes = make().bytes;  // one layer's keys, values and scales
      const copies = Math.ceil(workingSet / (bytes * layers));
      while (caches.length < copies * layers) make();
      pool = { key, caches, layers, copies, bytes };
      return pool;
    } catch (error) {
      for (const c of caches) c.dispose();
      throw error;
    }
  }

  const step = {
    name: stepName(got),
    config: config('per token, for each of L layers: cache.truncate(S − seqQ), cache.append(key, value) of the token\'s seqQ positions, ' +
      'lib.attention(query, cache, null, { heads, seqQ, out }); one lib.createKVCache({ dtype, maxSeq: S }) per layer, in copies of the L layers ' +
      'that tokens take in turn when one copy holds less than the working set'),
    async prepare(shape, { q, k, v }) {
      if (!dtypes.includes(shape.model.dtype)) throw new Error(`not applicable: this library has no ${shape.model.dtype} cache`);
      const { heads, seqQ, seqK } = shape;
      const { caches, layers, copies, bytes } = cachesFor(shape, k, v);
      const K = splitLast(k, shape), V = splitLast(v, shape);
      const out = new Float32Array(q.length);
      let copy = 0;
      return {
        run: () => {
          const first = copy * layers;
          copy = (copy + 1) % copies;
          for (let l = first; l < first + layers; l++) {
            const cache = caches[l];
            cache.truncate(seqK - seqQ);
            cache.append(K.last, V.last);
            lib.attention(q, cache, null, { heads, seqQ, out });
          }
        },
        read: (i) => out[i],
        // What a token streams (bytes: the L layers' cache.bytes) and the working set it cycles through.
        about: { layerBytes: bytes, tokenBytes: bytes * layers, copies, workingSetBytes: bytes * layers * copies },
      };
    },
  };

  // The limits on 1 … n threads, each probe started once (its buffer is the same for every shape).
  const probe = (name, streams, setup, about) => {
    let p = null;
    return {
      name,
      config: { ...config(about), threads: streams },
      async prepare() {
        p ??= await createProbe(streams, setup);
        return { run: () => p.run(), about: { bytes: p.bytes, flop: setup.kind === 'peak' ? streams * setup.iterations * setup.flopsPerIteration : 0 } };
      },
    };
  };
  const peakKind = simd === 'relaxed-simd' ? 'relaxed' : 'simd128';
  const readBytes = quick ? 2 ** 22 : 2 ** 30;
  const iterations = quick ? 1e5 : PEAK_ITERATIONS;
  const probeEngines = probes.flatMap((n) => [
    probe(readName(n), n, { kind: 'read', bytes: readBytes },
      `scripts/bench/bandwidth.mjs in ${n} worker(s) at once (probes.mjs), each streaming its own ${readBytes / n / 2 ** 20} MiB`),
    probe(peakName(n), n, { kind: 'peak', simd: peakKind, iterations, flopsPerIteration: peakModule(peakKind).flopsPerIteration },
      `scripts/bench/peak.mjs (${peakKind}) in ${n} worker(s) at once (probes.mjs), ${iterations} iterations each`),
  ]);
  return [step, ...probeEngines];
}

export async function createModelEngines(spec, deps) {
  if (spec.kind === 'ours') return oursEngines(spec, deps);
  throw new Error(`model section: unknown engine kind ${spec.kind}`);
}
