// The attention engines the benchmark compares, each set up as its own documentation recommends
// for speed, behind one interface. Nothing here depends on where it runs: the caller passes the
// libraries in (`deps`), so the Node benchmark (scripts/bench/), the Chromium benchmark and the
// demo's benchmark panel (panel.mjs) share this file.
//
//   const engines = await createEngines({ kind: 'ort', threads: 1 }, { ort });
//   → [{ name, config, prepare(shape, inputs) → Promise<{ run, read, release? }> }]
//   run(): one attention call (it may return a promise); read(i): element i of the last output,
//   in 'bhsd' order (for the cross-check of results); shape: { batch, heads, seqQ, seqK, headDim, causal }.
//
// kinds: 'ours' (deps.createAttention; spec.threads, spec.simd), 'ort' (deps.ort; spec.threads,
// spec.graphs ⊆ ['ops', 'mha']; deps.ortWasmPaths), 'tfjs' (deps.tf, deps.tfWasm: the backend
// module's exports; spec.threads), 'plain' (none).
import { msMultiHeadAttention, standardAttention } from './onnx-graphs.mjs';
import { plainAttention } from './plain-attention.mjs';
import { randomArray } from '../random-arrays.mjs';

// The same seeded inputs in every process and page, so every engine computes the same thing
// (keys and values with kvHeads heads where a shape has them: the decode section's).
export function makeInputs({ batch, heads, kvHeads = heads, seqQ, seqK, headDim }) {
  return {
    q: randomArray(batch * heads * seqQ * headDim, 1),
    k: randomArray(batch * kvHeads * seqK * headDim, 2),
    v: randomArray(batch * kvHeads * seqK * headDim, 3),
  };
}

// [B,H,S,D] → [B,S,H·D] (onnxruntime's MultiHeadAttention takes that layout).
export function toBshd(x, b, h, s, d) {
  const y = new Float32Array(x.length);
  for (let bi = 0; bi < b; bi++) {
    for (let hi = 0; hi < h; hi++) {
      for (let si = 0; si < s; si++) {
        const from = ((bi * h + hi) * s + si) * d;
        y.set(x.subarray(from, from + d), ((bi * s + si) * h + hi) * d);
      }
    }
  }
  return y;
}
const bshdIndex = (i, { heads, seqQ, headDim }) => {
  const d = i % headDim, s = Math.floor(i / headDim) % seqQ, bh = Math.floor(i / (headDim * seqQ));
  return ((Math.floor(bh / heads) * seqQ + s) * heads + (bh % heads)) * headDim + d;
};

async function oursEngine({ threads = 1, simd }, { createAttention }) {
  const options = { threads, strict: true };
  if (simd) options.simd = simd;
  const t0 = performance.now();
  const lib = await createAttention(options);
  const loadMs = performance.now() - t0;
  const { version, simd: build, threads: got, threadsReason } = lib.info;
  return {
    name: `attention-wasm ${got}T${simd && simd !== 'auto' ? ` ${simd}` : ''}`,
    config: { version, simd: build, threads: got, threadsReason, requested: options, loadMs },
    lib,
    async prepare(shape, { q, k, v }) {
      const out = new Float32Array(q.length);
      return { run: () => lib.attention(q, k, v, { ...shape, out }), read: (i) => out[i] };
    },
  };
}

// onnxruntime-web, wasm backend. env.wasm.numThreads sizes ORT's one global thread pool (per
// process or page), so each thread count needs its own process or page; ORT 1.30's wasm session
// options carry no thread count (intraOpNumThreads is set to match anyway). Arena and memory
// pattern are on, as in native ORT (ORT-web passes them as given, default off).
export const ORT_SESSION_OPTIONS = {
  executionProviders: ['wasm'], graphOptimizationLevel: 'all', executionMode: 'sequential',
  enableCpuMemArena: true, enableMemPattern: true,
};
async function ortEngines({ threads = 1, graphs = ['ops', 'mha'] }, { ort, ortWasmPaths }) {
  Object.assign(ort.env.wasm, { numThreads: threads, proxy: false });
  if (ortWasmPaths) ort.env.wasm.wasmPaths = ortWasmPaths;
  const options = { ...ORT_SESSION_OPTIONS, intraOpNumThreads: threads, interOpNumThreads: 1 };
  // The first session initialises the runtime (and may lower numThreads where threads cannot run).
  await (await ort.InferenceSession.create(standardAttention({ batch: 1, heads: 1, seqQ: 1, seqK: 1, headDim: 1 }), options)).release();
  const got = ort.env.wasm.numThreads;
  const config = (graph) => ({
    version: ort.env.versions?.web, graph, numThreads: got, proxy: ort.env.wasm.proxy, simd: ort.env.wasm.simd ?? true,
    ...options, executionProviders: options.executionProviders.join(','),
  });
  const engine = (graph, build, feeds, read) => ({
    name: `onnxruntime-web ${graph === 'ops' ? 'ops' : 'MHA'} ${got}T`,
    config: config(graph === 'ops' ? 'Transpose→MatMul→Mul→[Add]→Softmax→MatMul' : 'com.microsoft MultiHeadAttention'),
    async prepare(shape, inputs) {
      const session = await ort.InferenceSession.create(build(shape), options);
      const f = feeds(shape, inputs);
      let last = null;
      return {
        run: async () => { last = Object.values(await session.run(f))[0].data; },
        read: (i) => read(last, i, shape),
        release: () => session.release(),
      };
    },
  });
  const tensor = (x, dims) => new ort.Tensor('float32', x, dims);
  const made = {
    ops: engine('ops', standardAttention, ({ batch: b, heads: h, seqQ, seqK, headDim: d }, { q, k, v }) => ({
      Q: tensor(q, [b, h, seqQ, d]), K: tensor(k, [b, h, seqK, d]), V: tensor(v, [b, h, seqK, d]),
    }), (o, i) => o[i]),
    mha: engine('mha', msMultiHeadAttention, ({ batch: b, heads: h, seqQ, seqK, headDim: d }, { q, k, v }) => ({
      query: tensor(toBshd(q, b, h, seqQ, d), [b, seqQ, h * d]),
      key: tensor(toBshd(k, b, h, seqK, d), [b, seqK, h * d]),
      value: tensor(toBshd(v, b, h, seqK, d), [b, seqK, h * d]),
    }), (o, i, shape) => o[bshdIndex(i, shape)]),
  };
  return graphs.map((g) => made[g]);
}

// TensorFlow.js, wasm backend (XNNPACK), in production mode (no debug checks). Threads only where
// the backend has them (cross-origin-isolated pages; never in Node).
async function tfjsEngine({ threads = 1 }, { tf, tfWasm }) {
  tf.enableProdMode();
  if (threads > 1) tfWasm.setThreadsCount(threads);
  if (!(await tf.setBackend('wasm'))) throw new Error('tfjs: the wasm backend did not initialise');
  await tf.ready();
  const got = tfWasm.getThreadsCount();
  return {
    name: `tfjs-wasm ${got}T`,
    config: {
      version: tf.version_core, backend: tf.getBackend(), threads: got, prodMode: tf.env().getBool('PROD'),
      simd: await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'), ops: 'matMul(transposeB)→mul→[add]→softmax→matMul, dataSync',
    },
    async prepare({ batch, heads, seqQ, seqK, headDim, causal }, { q, k, v }) {
      const [tq, tk, tv] = [tf.tensor4d(q, [batch, heads, seqQ, headDim]), tf.tensor4d(k, [batch, heads, seqK, headDim]),
        tf.tensor4d(v, [batch, heads, seqK, headDim])];
      const mask = causal ? tf.tensor2d(Float32Array.from({ length: seqQ * seqK },
        (_, e) => (e % seqK <= Math.floor(e / seqK) + seqK - seqQ ? 0 : -1e9)), [seqQ, seqK]) : null;
      let last = null;
      return {
        run: () => {
          const o = tf.tidy(() => {
            let s = tf.mul(tf.matMul(tq, tk, false, true), 1 / Math.sqrt(headDim));
            if (mask) s = tf.add(s, mask);
            return tf.matMul(tf.softmax(s), tv);
          });
          last = o.dataSync();
          o.dispose();
        },
        read: (i) => last[i],
        release: () => { tq.dispose(); tk.dispose(); tv.dispose(); mask?.dispose(); },
      };
    },
  };
}

function plainEngine() {
  return {
    name: 'plain JS',
    config: { code: 'web/bench/plain-attention.mjs: typed arrays, one pass per row' },
    async prepare(shape, { q, k, v }) {
      const out = new Float32Array(q.length);
      return { run: () => plainAttention(q, k, v, { ...shape, out }), read: (i) => out[i] };
    },
  };
}

// Resolves to a list of engines (ORT gives one per graph).
export async function createEngines(spec, deps) {
  if (spec.kind === 'ours') return [await oursEngine(spec, deps)];
  if (spec.kind === 'ort') return ortEngines(spec, deps);
  if (spec.kind === 'tfjs') return [await tfjsEngine(spec, deps)];
  if (spec.kind === 'plain') return [plainEngine()];
  throw new Error(`unknown engine kind ${spec.kind}`);
}
