// The engines of the benchmark's decode section: one decode step — seqQ new positions of every
// query head against S positions of keys and values — behind the interface of
// web/bench/engines.mjs, so web/bench/host.mjs runs them in a Node process or a browser page.
// shape: { batch, heads, kvHeads, seqQ, seqK: S, headDim }; inputs { q, k, v } in 'bhsd' (k and
// v with kvHeads heads). Each step replaces the last seqQ positions of the cache with the step's
// keys and values (positions S − seqQ … S − 1), as a real decoder (or a speculative verify that
// starts again) appends them; its queries see every cached position (not causal: one query sees
// nothing after it anyway, and a causal mask over the last seqQ × seqQ corner would hide under
// 0.02 % of a 4096-position step's scores).
//   ours (deps.createAttention, deps.dist; spec.threads, spec.threadedBuild (load-ours.mjs); spec.parts ⊆ ['caches', 'copy', 'reads', 'peak'],
//     default all): a standalone KV cache (lib.createKVCache) per dtype; a plain lib.attention()
//     call that copies all of K and V in on every step; the read-bandwidth probe
//     (scripts/bench/bandwidth.mjs) over as many bytes as each cache holds, the limit of a step
//     of one position; and the multiply-add peak probe of our build (scripts/bench/peak.mjs),
//     the limit of a step of several;
//   ort (deps.ort; spec.threads): onnxruntime-web's wasm backend fed the same K/V on every step
//     (it has no way to keep them in its memory between runs): the standard-ops graph (the query
//     heads of each group as its rows), the com.microsoft MultiHeadAttention op (kvHeads = heads
//     only) and the com.microsoft GroupQueryAttention op with a past, its decoders' own op (the
//     last two for seqQ 1 only: they would mask the new positions causally).
import { ORT_SESSION_OPTIONS, createEngines, toBshd } from '../../web/bench/engines.mjs';
import { createReader } from './bandwidth.mjs';
import { loadOurs } from './load-ours.mjs';
import { peakEngine } from './peak.mjs';
import { msGroupQueryAttention, msMultiHeadAttention, standardAttention } from '../../web/bench/onnx-graphs.mjs';

export const DTYPES = ['float32', 'float16', 'bfloat16', 'int8'];

// The probe that reads as many bytes as a cache of `dtype` holds (float16 and bfloat16 hold the
// same): its engine's name.
const READ_KINDS = { float32: 'float32', float16: '16-bit', bfloat16: '16-bit', int8: 'int8' };
export const readerName = (dtype) => `wasm read, ${READ_KINDS[dtype]} cache's bytes`;
export const PEAK_NAME = 'wasm multiply-add peak';

// k [B, Hkv, S, D] → { past: [B, Hkv, S − n, D], last: [B, Hkv, n, D] } (n = seqQ)
export function splitLast(x, { batch, kvHeads, seqQ = 1, seqK, headDim }) {
  const n = seqQ;
  const past = new Float32Array(batch * kvHeads * (seqK - n) * headDim);
  const last = new Float32Array(batch * kvHeads * n * headDim);
  for (let h = 0; h < batch * kvHeads; h++) {
    const from = h * seqK * headDim;
    past.set(x.subarray(from, from + (seqK - n) * headDim), h * (seqK - n) * headDim);
    last.set(x.subarray(from + (seqK - n) * headDim, from + seqK * headDim), h * n * headDim);
  }
  return { past, last };
}

const ALL_PARTS = ['caches', 'copy', 'reads', 'peak'];
async function oursEngines(spec, deps) {
  const { parts = ALL_PARTS } = spec;
  const { lib, requested, loadMs, tag, suffix } = await loadOurs(spec, deps);
  const { version, simd, threads: got, threadsReason } = lib.info;
  const config = (how) => ({ version, simd, threads: got, threadsReason, requested, loadMs, how });
  const cacheEngine = (dtype) => ({
    name: `attention-wasm ${tag} cache ${dtype}${suffix}`,
    config: config(`lib.createKVCache({ dtype: '${dtype}', maxSeq: S }); per step: truncate(S − seqQ), append(key, value) of the step's seqQ positions, attention(query, cache, null, { heads, seqQ, out })`),
    dtype,
    async prepare(shape, { q, k, v }) {
      const { batch, heads, kvHeads, seqQ, seqK, headDim } = shape;
      const K = splitLast(k, shape), V = splitLast(v, shape);
      const cache = lib.createKVCache({ batch, kvHeads, headDim, maxSeq: seqK, dtype });
      if (seqK > seqQ) cache.append(K.past, V.past);  // (a step over its own keys alone has no past)
      const out = new Float32Array(q.length);
      return {
        run: () => {
          cache.truncate(seqK - seqQ);
          cache.append(K.last, V.last);
          lib.attention(q, cache, null, { heads, seqQ, out });
        },
        read: (i) => out[i],
        release: () => cache.dispose(),
      };
    },
  });
  // One probe per size of cache (the 16-bit dtypes share one): a pass over as many bytes as the
  // cache of the step holds (cache.bytes: keys, values and any scales), in a module of its own.
  const readKinds = [...new Set(DTYPES.map((d) => READ_KINDS[d]))];
  const readEngine = (kind) => {
    const dtype = DTYPES.find((d) => READ_KINDS[d] === kind);
    let reader = null;
    return {
      name: `${readerName(dtype)}${suffix}`,
      config: { ...config(`scripts/bench/bandwidth.mjs: one streaming pass of v128.load (8 per 128 bytes, into 4 i32x4.add chains) over a buffer of cache.bytes of the step's ${kind} cache`), simd: 'simd128', threads: 1 },
      async prepare({ batch, kvHeads, seqK, headDim }) {
        const cache = lib.createKVCache({ batch, kvHeads, headDim, maxSeq: seqK, dtype });
        const bytes = cache.bytes;
        cache.dispose();
        reader = reader ? reader.resize(bytes) : await createReader(bytes);
        return { run: () => reader.run() };  // no output to cross-check
      },
    };
  };
  // The peak of the build our engines run (relaxed SIMD's FMA or SIMD128's mul + add), timed in
  // the same rounds: config.flopsPerCall ÷ its time is GFLOP/s.
  const peak = () => peakEngine(simd === 'relaxed-simd' ? 'relaxed' : 'simd128', `${PEAK_NAME}${suffix}`, config());
  return [
    ...(parts.includes('caches') ? DTYPES.map(cacheEngine) : []),
    ...(parts.includes('copy') ? [{
      name: `attention-wasm ${tag} attention() copying K/V${suffix}`,
      config: config('lib.attention(query, key, value, { heads, kvHeads, seqQ, out }): all S positions of K and V copied into wasm memory on every step'),
      async prepare({ batch, heads, kvHeads, seqQ, seqK, headDim }, { q, k, v }) {
        const out = new Float32Array(q.length);
        return { run: () => lib.attention(q, k, v, { batch, heads, kvHeads, seqQ, seqK, headDim, out }), read: (i) => out[i] };
      },
    }] : []),
    ...(parts.includes('reads') ? readKinds.map(readEngine) : []),
    ...(parts.includes('peak') ? [peak()] : []),
  ];
}

async function ortEngines({ threads = 1 }, { ort, ortWasmPaths }) {
  // The same runtime set-up as the main benchmark's ORT engines (numThreads, session options).
  const [base] = await createEngines({ kind: 'ort', threads, graphs: ['ops'] }, { ort, ortWasmPaths });
  const got = base.config.numThreads;
  const options = { ...ORT_SESSION_OPTIONS, intraOpNumThreads: got, interOpNumThreads: 1 };
  const tensor = (x, dims, type = 'float32') => new ort.Tensor(type, x, dims);
  // applies(shape) → null, or why the graph does not compute this step
  const engine = (name, graph, applies, build) => ({
    name: `onnxruntime-web ${name} ${got}T`,
    config: { ...base.config, graph },
    async prepare(shape, inputs) {
      const not = applies(shape);
      if (not) throw new Error(`not applicable: ${graph} ${not}`);
      const { model, feeds, fetches } = build(shape, inputs);
      const session = await ort.InferenceSession.create(model, options);
      let last = null;
      return {
        run: async () => { last = Object.values(await session.run(feeds, fetches))[0].data; },
        read: (i) => last[i],
        release: () => session.release(),
      };
    },
  });
  const always = () => null;
  // MultiHeadAttention and GroupQueryAttention take the step's queries as [B, seqQ, H·D] and
  // GroupQueryAttention masks new positions causally: both for one new position only.
  const oneRow = (s) => (s.seqQ === 1 ? null : 'is run for one new position (seqQ 1) only');
  return [
    // A step's queries of one group (its heads × seqQ, contiguous in 'bhsd') are the rows of one
    // [group · seqQ, D] × [D, S] product.
    engine('ops', 'Transpose→MatMul→Mul→Softmax→MatMul, query [B, kvHeads, heads/kvHeads · seqQ, D]', always,
      ({ batch: b, heads, kvHeads, seqQ, seqK, headDim: d }, { q, k, v }) => ({
        model: standardAttention({ batch: b, heads: kvHeads, seqQ: (heads / kvHeads) * seqQ, seqK, headDim: d, causal: false }),
        feeds: { Q: tensor(q, [b, kvHeads, (heads / kvHeads) * seqQ, d]), K: tensor(k, [b, kvHeads, seqK, d]), V: tensor(v, [b, kvHeads, seqK, d]) },
      })),
    engine('MHA', 'com.microsoft MultiHeadAttention, key/value [B, S, H·D]', (s) => (s.kvHeads !== s.heads ? 'needs kvHeads = heads' : oneRow(s)),
      ({ batch: b, heads, seqK, headDim: d }, { q, k, v }) => ({
        model: msMultiHeadAttention({ batch: b, heads, seqQ: 1, seqK, headDim: d, causal: false }),
        feeds: { query: tensor(q, [b, 1, heads * d]), key: tensor(toBshd(k, b, heads, seqK, d), [b, seqK, heads * d]), value: tensor(toBshd(v, b, heads, seqK, d), [b, seqK, heads * d]) },
      })),
    engine('GQA', 'com.microsoft GroupQueryAttention: this step\'s key/value + past_key/past_value [B, kvHeads, S − 1, D]; only output fetched', oneRow,
      (shape, { q, k, v }) => {
        const { batch: b, heads, kvHeads, seqK, headDim: d } = shape;
        const K = splitLast(k, shape), V = splitLast(v, shape);
        return {
          model: msGroupQueryAttention(shape),
          feeds: {
            query: tensor(q, [b, 1, heads * d]), key: tensor(K.last, [b, 1, kvHeads * d]), value: tensor(V.last, [b, 1, kvHeads * d]),
            past_key: tensor(K.past, [b, kvHeads, seqK - 1, d]), past_value: tensor(V.past, [b, kvHeads, seqK - 1, d]),
            seqlens_k: tensor(Int32Array.from({ length: b }, () => seqK - 1), [b], 'int32'),
            total_sequence_length: tensor(Int32Array.of(seqK), [], 'int32'),
          },
          fetches: ['output'],
        };
      }),
  ];
}

export async function createDecodeEngines(spec, deps) {
  if (spec.kind === 'ours') return oursEngines(spec, deps);
  if (spec.kind === 'ort') return ortEngines(spec, deps);
  throw new Error(`decode section: unknown engine kind ${spec.kind}`);
}
