// The engines of the benchmark's decode section: one decode step — one new position
// of every query head against S positions of keys and values — behind the interface of
// web/bench-engines.mjs, so web/bench-host.mjs runs them in a Node process or a Chromium page.
// shape: { batch, heads, kvHeads, seqQ: 1, seqK: S, headDim }; inputs { q, k, v } in 'bhsd'
// (k and v with kvHeads heads). Each step appends the step's key and value (position S − 1) to
// the S − 1 positions before it, as a real decoder does.
//   ours (deps.createAttention; spec.threads): a standalone KV cache (lib.createKVCache) per
//     dtype, and a plain lib.attention() call that copies all of K and V in on every step;
//   ort (deps.ort; spec.threads): onnxruntime-web's wasm backend fed the same K/V on every step
//     (it has no way to keep them in its memory between runs): the standard-ops graph (the query
//     heads of each group as its rows), the com.microsoft MultiHeadAttention op (kvHeads = heads
//     only) and the com.microsoft GroupQueryAttention op with a past, its decoders' own op.
import { ORT_SESSION_OPTIONS, createEngines, toBshd } from '../../web/bench-engines.mjs';
import { msGroupQueryAttention, msMultiHeadAttention, standardAttention } from '../../web/onnx-graphs.mjs';

export const DTYPES = ['float32', 'float16', 'int8'];

// k [B, Hkv, S, D] → { past: [B, Hkv, S−1, D], last: [B, Hkv, 1, D] }
export function splitLast(x, { batch, kvHeads, seqK, headDim }) {
  const past = new Float32Array(batch * kvHeads * (seqK - 1) * headDim);
  const last = new Float32Array(batch * kvHeads * headDim);
  for (let h = 0; h < batch * kvHeads; h++) {
    const from = h * seqK * headDim;
    past.set(x.subarray(from, from + (seqK - 1) * headDim), h * (seqK - 1) * headDim);
    last.set(x.subarray(from + (seqK - 1) * headDim, from + seqK * headDim), h * headDim);
  }
  return { past, last };
}

async function oursEngines({ threads = 1 }, { createAttention }) {
  const requested = { threads, strict: true };
  const t0 = performance.now();
  const lib = await createAttention(requested);
  const loadMs = performance.now() - t0;
  const { version, simd, threads: got, threadsReason } = lib.info;
  const config = (how) => ({ version, simd, threads: got, threadsReason, requested, loadMs, how });
  const cacheEngine = (dtype) => ({
    name: `attention-wasm ${got}T cache ${dtype}`,
    config: config(`lib.createKVCache({ dtype: '${dtype}', maxSeq: S }); per step: truncate(S − 1), append(key, value) of the step, attention(query, cache, null, { heads, seqQ: 1, out })`),
    dtype,
    async prepare(shape, { q, k, v }) {
      const { batch, heads, kvHeads, seqK, headDim } = shape;
      const K = splitLast(k, shape), V = splitLast(v, shape);
      const cache = lib.createKVCache({ batch, kvHeads, headDim, maxSeq: seqK, dtype });
      cache.append(K.past, V.past);
      const out = new Float32Array(q.length);
      return {
        run: () => {
          cache.truncate(seqK - 1);
          cache.append(K.last, V.last);
          lib.attention(q, cache, null, { heads, seqQ: 1, out });
        },
        read: (i) => out[i],
        release: () => cache.dispose(),
      };
    },
  });
  return [
    ...DTYPES.map(cacheEngine),
    {
      name: `attention-wasm ${got}T attention() copying K/V`,
      config: config('lib.attention(query, key, value, { heads, kvHeads, seqQ: 1, out }): all S positions of K and V copied into wasm memory on every step'),
      async prepare({ batch, heads, kvHeads, seqK, headDim }, { q, k, v }) {
        const out = new Float32Array(q.length);
        return { run: () => lib.attention(q, k, v, { batch, heads, kvHeads, seqQ: 1, seqK, headDim, out }), read: (i) => out[i] };
      },
    },
  ];
}

async function ortEngines({ threads = 1 }, { ort, ortWasmPaths }) {
  // The same runtime set-up as the main benchmark's ORT engines (numThreads, session options).
  const [base] = await createEngines({ kind: 'ort', threads, graphs: ['ops'] }, { ort, ortWasmPaths });
  const got = base.config.numThreads;
  const options = { ...ORT_SESSION_OPTIONS, intraOpNumThreads: got, interOpNumThreads: 1 };
  const tensor = (x, dims, type = 'float32') => new ort.Tensor(type, x, dims);
  const engine = (name, graph, applies, build) => ({
    name: `onnxruntime-web ${name} ${got}T`,
    config: { ...base.config, graph },
    async prepare(shape, inputs) {
      if (!applies(shape)) throw new Error(`not applicable: ${graph} needs kvHeads = heads`);
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
  const always = () => true;
  return [
    // A decode step's query heads of one group are rows of one [group, D] × [D, S] product.
    engine('ops', 'Transpose→MatMul→Mul→Softmax→MatMul, query [B, kvHeads, heads/kvHeads, D]', always,
      ({ batch: b, heads, kvHeads, seqK, headDim: d }, { q, k, v }) => ({
        model: standardAttention({ batch: b, heads: kvHeads, seqQ: heads / kvHeads, seqK, headDim: d, causal: false }),
        feeds: { Q: tensor(q, [b, kvHeads, heads / kvHeads, d]), K: tensor(k, [b, kvHeads, seqK, d]), V: tensor(v, [b, kvHeads, seqK, d]) },
      })),
    engine('MHA', 'com.microsoft MultiHeadAttention, key/value [B, S, H·D]', (s) => s.kvHeads === s.heads,
      ({ batch: b, heads, seqK, headDim: d }, { q, k, v }) => ({
        model: msMultiHeadAttention({ batch: b, heads, seqQ: 1, seqK, headDim: d, causal: false }),
        feeds: { query: tensor(q, [b, 1, heads * d]), key: tensor(toBshd(k, b, heads, seqK, d), [b, seqK, heads * d]), value: tensor(toBshd(v, b, heads, seqK, d), [b, seqK, heads * d]) },
      })),
    engine('GQA', 'com.microsoft GroupQueryAttention: this step\'s key/value + past_key/past_value [B, kvHeads, S − 1, D]; only output fetched', always,
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
