// The JS API on the builds an engine loads: one library per entry of ?runs= (a JSON list of
// createAttention options), each checked against the double-precision JS reference (the layer
// and the backward on the layers builds), and a digest
// of all its outputs' bits, so that tests/browser/engines.test.mjs can tell which runs (and which
// engines) computed bit-identical results. Leaves { runs: [{ options, info, errors, digest }] }
// or { error } in window.__result.
import { createAttention } from '/dist/index.mjs';
import { referenceAttention, referenceAttentionBackward, referenceLinear, referenceMha } from '/tests/js/reference.mjs';

function random(seed) {  // mulberry32, as tests/js/helpers.mjs
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const tensor = (n, r, scale = 1) => Float32Array.from({ length: n }, () => (r() * 2 - 1) * scale);

// Largest |got − want| / (atol + rtol·|want|): at most 1 means within tolerance.
function worst(got, want, atol, rtol) {
  let w = got.length === want.length ? 0 : Infinity;
  for (let i = 0; i < got.length; i++) w = Math.max(w, Math.abs(got[i] - want[i]) / (atol + rtol * Math.abs(want[i])));
  return Number.isNaN(w) ? Infinity : w;
}

const SHAPES = [
  { heads: 8, seqQ: 64, headDim: 64 },
  { batch: 2, heads: 4, kvHeads: 2, seqQ: 33, seqK: 70, headDim: 40, causal: true },
  { heads: 2, seqQ: 9, seqK: 17, headDim: 8, valueDim: 5, layout: 'bshd', attendMask: Uint8Array.from({ length: 9 * 17 }, (_, i) => (i % 5 ? 1 : 0)) },
];

// Every output of one library for the fixed inputs, and its worst error against the reference.
function run(lib) {
  const outputs = [];
  const errors = {};
  const note = (name, value) => { errors[name] = Math.max(errors[name] ?? 0, value); };
  for (const [n, shape] of SHAPES.entries()) {
    const r = random(n + 1);
    const kv = shape.kvHeads ?? shape.heads;
    const seqK = shape.seqK ?? shape.seqQ;
    const b = shape.batch ?? 1;
    const query = tensor(b * shape.heads * shape.seqQ * shape.headDim, r);
    const key = tensor(b * kv * seqK * shape.headDim, r);
    const value = tensor(b * kv * seqK * (shape.valueDim ?? shape.headDim), r);
    const weightsOut = new Float32Array(b * shape.heads * shape.seqQ * seqK);
    const out = lib.attention(query, key, value, { ...shape, weightsOut });
    const want = referenceAttention(query, key, value, shape);
    note('attention', worst(out, want.out, 2e-5, 1e-4));
    note('weights', worst(weightsOut, want.weights, 2e-5, 1e-4));
    outputs.push(out, weightsOut);
    if (!lib.info.layers) continue;
    const dOut = tensor(out.length, r);
    const grads = lib.attentionBackward(query, key, value, dOut, shape);
    const wantGrads = referenceAttentionBackward(query, key, value, dOut, shape);
    for (const g of ['dQuery', 'dKey', 'dValue']) note('attentionBackward', worst(grads[g], wantGrads[g], 1e-5, 1e-4));
    outputs.push(grads.dQuery, grads.dKey, grads.dValue);
  }
  const r = random(7);
  const x = tensor(20 * 48, r), w = tensor(24 * 48, r), bias = tensor(24, r);
  const y = lib.linear(x, w, { inFeatures: 48, outFeatures: 24, bias });
  note('linear', worst(y, referenceLinear(x, 20, 48, w, bias, 24), 1e-5, 1e-4));
  outputs.push(y);
  if (!lib.info.layers) return { outputs, errors };  // an inference build: the layer needs loadAttention({ layers: true })
  const config = { embedDim: 32, numHeads: 4, numKvHeads: 2 };
  const weights = { wq: tensor(32 * 32, r, 0.2), wk: tensor(16 * 32, r, 0.2), wv: tensor(16 * 32, r, 0.2), wo: tensor(32 * 32, r, 0.2),
    bq: tensor(32, r), bk: tensor(16, r), bv: tensor(16, r), bo: tensor(32, r) };
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(weights);
  const input = tensor(2 * 11 * 32, r);
  const layer = mha.forward(input, null, null, { batch: 2, causal: true });
  mha.dispose();
  note('MultiHeadAttention', worst(layer, referenceMha(config, weights, input, input, input, { batch: 2, causal: true }).out, 1e-5, 1e-4));
  outputs.push(layer);
  return { outputs, errors };
}

// FNV-1a over the bits of every output, in order.
function digest(outputs) {
  let h = 0x811c9dc5;
  for (const out of outputs) {
    for (const word of new Uint32Array(out.buffer, out.byteOffset, out.length)) h = Math.imul(h ^ word, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

try {
  const runs = [];
  for (const options of JSON.parse(new URLSearchParams(location.search).get('runs'))) {
    const lib = await createAttention(options);
    const { outputs, errors } = run(lib);
    runs.push({ options, info: { ...lib.info }, errors, digest: digest(outputs) });
    lib.dispose();
  }
  window.__result = { runs };
} catch (error) {
  window.__result = { error: `${error.name}: ${error.message}` };
}
