// MultiHeadAttention with the options of current models — rotary (both pairings, partial, at
// given positions), windows, softcap, ALiBi (BLOOM's slopes or given), learned sinks, both causal
// alignments — against the JS reference; a Hugging-Face-Llama-style layer and a
// Gemma-2/Mistral-style window layer decoding through caches; sinks as a trained parameter;
// every error path.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceMha } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

function makeWeights(config, seed) {
  const random = rng(seed);
  const { embedDim: e, numHeads } = config;
  const kv = (config.numKvHeads ?? numHeads) * (e / numHeads);
  const w = (n, s = 1 / Math.sqrt(e)) => randomTensor(n, random, s);
  const weights = { wq: w(e * e), wk: w(kv * e), wv: w(kv * e), wo: w(e * e) };
  if (config.bias !== false) Object.assign(weights, { bq: w(e, 0.3), bk: w(kv, 0.3), bv: w(kv, 0.3), bo: w(e, 0.3) });
  if (config.sinks) weights.sinks = randomTensor(numHeads, random, 1);
  return weights;
}

function layer(config, seed = 1) {
  const mha = new lib.MultiHeadAttention(config);
  const weights = makeWeights(config, seed);
  mha.setWeights(weights);
  return { mha, weights };
}

// The reference wants ALiBi as slopes; the layer may have been given `true`.
const refConfig = (config, slopes) => ({ ...config, alibi: config.alibi === true ? slopes : config.alibi });

test("BLOOM's ALiBi slopes, also for a head count that is not a power of two", async () => {
  const { bloomAlibiSlopes } = await import('../../dist/mha-config.mjs');
  assert.deepEqual([...bloomAlibiSlopes(8)], [1, 2, 3, 4, 5, 6, 7, 8].map((h) => 2 ** -h));
  // transformers' build_alibi_tensor for 12 heads: 2^(−h) for h = 1…8, then 2^(−(2k+1)/2) for k = 0…3.
  assertClose(bloomAlibiSlopes(12), Float64Array.from([...[1, 2, 3, 4, 5, 6, 7, 8].map((h) => 2 ** -h), 2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]), 'slopes', 1e-7);
});

test('every variant against the reference, both alignments, at given positions', async () => {
  const { bloomAlibiSlopes } = await import('../../dist/mha-config.mjs');
  const configs = [
    { embedDim: 32, numHeads: 4, numKvHeads: 2, rotary: { rotaryDim: 4 } },
    { embedDim: 32, numHeads: 4, rotary: { interleaved: true, base: 500000 }, window: [2, 1] },
    { embedDim: 32, numHeads: 4, numKvHeads: 1, softcap: 3, alibi: true, sinks: true, bias: false },
    { embedDim: 24, numHeads: 3, alibi: Float32Array.from([0.5, 0.1, 0.02]), window: [Infinity, 0], rotary: { rotaryDim: 6 } },
  ];
  for (const config of configs) {
    const { mha, weights } = layer(config, 3);
    const ref = refConfig(config, bloomAlibiSlopes(config.numHeads));
    const batch = 2, seq = 7;
    const x = randomTensor(batch * seq * config.embedDim, rng(4));
    for (const causal of [true, 'upper-left', false]) {
      assertClose(mha.forward(x, null, null, { batch, causal }), referenceMha(ref, weights, x, null, null, { batch, causal }).out,
        `${JSON.stringify(config)} causal ${causal}`, 5e-5);
    }
    if (config.rotary) {
      const positions = Int32Array.from({ length: batch * seq }, (_, i) => (i * 37) % 50);
      assertClose(mha.forward(x, null, null, { batch, causal: true, positions }),
        referenceMha(ref, weights, x, null, null, { batch, causal: true, positions }).out, 'positions [batch, seq]', 5e-5);
    }
    mha.dispose();
  }
});

test('a Hugging-Face-Llama-style layer (rotary, GQA, no bias): prefill then decode steps equal one causal forward', () => {
  const config = { embedDim: 64, numHeads: 8, numKvHeads: 2, bias: false, rotary: { base: 500000 } };
  const { mha } = layer(config, 5);
  const seq = 11, x = randomTensor(seq * 64, rng(6));
  const full = mha.forward(x, null, null, { causal: true });
  for (const dtype of ['float32', 'float16']) {
    const cache = mha.createCache({ maxSeq: 16, dtype });
    const outs = [mha.forward(x.subarray(0, 6 * 64), null, null, { cache })];
    for (let t = 6; t < seq; t++) outs.push(mha.forward(x.subarray(t * 64, (t + 1) * 64), null, null, { cache }));
    assertClose(Float32Array.from(outs.flatMap((o) => [...o])), full, `decoding, ${dtype} cache`, dtype === 'float32' ? 2e-5 : 2e-3);
    cache.dispose();
  }
  mha.dispose();
});

test('a Gemma-2-style layer (softcap, sliding window) and a Mistral-style ring: decoding equals the full forward', () => {
  const window = 5;
  const config = { embedDim: 32, numHeads: 4, numKvHeads: 2, rotary: {}, softcap: 50, window: [window - 1, 0] };
  const { mha, weights } = layer(config, 7);
  const seq = 17, x = randomTensor(seq * 32, rng(8));
  const full = mha.forward(x, null, null, { causal: true });
  assertClose(full, referenceMha(config, weights, x, null, null, { causal: true }).out, 'full forward', 5e-5);
  const ring = mha.createCache({ window, maxSeq: window + 2 });
  const outs = [mha.forward(x.subarray(0, 3 * 32), null, null, { cache: ring })];
  for (let t = 3; t < seq; t++) outs.push(mha.forward(x.subarray(t * 32, (t + 1) * 32), null, null, { cache: ring }));
  assertClose(Float32Array.from(outs.flatMap((o) => [...o])), full, 'ring decoding', 2e-5);
  assert.equal(ring.length, seq);
  ring.dispose();
  mha.dispose();
});

test('sinks are a learned parameter: set, got, differentiated, stepped, saved with the optimizer state', () => {
  const config = { embedDim: 16, numHeads: 2, sinks: true, rotary: { rotaryDim: 4 } };
  const { mha, weights } = layer(config, 9);
  assert.deepEqual(mha.getWeights().sinks, weights.sinks);
  const x = randomTensor(5 * 16, rng(10)), dOut = randomTensor(5 * 16, rng(11));
  mha.forward(x, null, null, { train: true, causal: true });
  const grads = mha.backward(dOut).weights;
  assert.equal(grads.sinks.length, 2);
  // dL/dsinks against central differences of the reference (L = Σ out ⊙ dOut, in double).
  const loss = (sinks) => referenceMha(config, { ...weights, sinks }, x, null, null, { causal: true }).out
    .reduce((acc, y, i) => acc + y * dOut[i], 0);
  for (let h = 0; h < 2; h++) {
    const up = Float64Array.from(weights.sinks), down = Float64Array.from(weights.sinks);
    up[h] += 1e-4;
    down[h] -= 1e-4;
    const want = (loss(up) - loss(down)) / 2e-4;
    assert.ok(Math.abs(grads.sinks[h] - want) <= 1e-4 + 1e-3 * Math.abs(want), `d sinks[${h}] ${grads.sinks[h]} vs ${want}`);
  }
  mha.sgdStep(grads, { lr: 0.5 });
  assertClose(mha.getWeights().sinks, Float64Array.from(weights.sinks, (s, h) => s - 0.5 * grads.sinks[h]), 'SGD on the sinks', 1e-6);
  mha.forward(x, null, null, { train: true, causal: true });
  mha.adamStep(mha.backward(dOut).weights, { lr: 0.01 });
  const state = mha.getOptimizerState();
  assert.equal(state.m.sinks.length, 2);
  assert.ok(state.v.sinks.every((v) => v > 0));
  // Resuming from getWeights + getOptimizerState continues bit for bit.
  const copy = new lib.MultiHeadAttention(config);
  copy.setWeights(mha.getWeights());
  copy.setOptimizerState(state);
  for (const m of [mha, copy]) {
    m.forward(x, null, null, { train: true, causal: true });
    m.adamStep(m.backward(dOut).weights, { lr: 0.01 });
  }
  assert.deepEqual(copy.getWeights(), mha.getWeights());
  assert.throws(() => copy.setWeights({ ...weights, sinks: undefined }), /^TypeError: MultiHeadAttention\.setWeights: weights\.sinks is required \(a Float32Array \[numHeads 2\]\), since the layer has sinks: true$/);
  assert.throws(() => copy.setWeights({ ...weights, sinks: new Float32Array(3) }), /^RangeError: MultiHeadAttention\.setWeights: weights\.sinks has length 3, expected 2/);
  const plain = new lib.MultiHeadAttention({ embedDim: 16, numHeads: 2 });
  assert.throws(() => plain.setWeights(weights), /^TypeError: MultiHeadAttention\.setWeights: weights\.sinks was given, but the layer was created without sinks: true$/);
  for (const m of [mha, copy, plain]) m.dispose();
});

test('rotary and the other variants in the backward: gradients against finite differences', () => {
  const config = { embedDim: 8, numHeads: 2, numKvHeads: 1, rotary: { rotaryDim: 2, interleaved: true }, window: [1, 0], softcap: 2, alibi: Float32Array.from([0.3, 0.1]) };
  const { mha, weights } = layer(config, 12);
  const x = randomTensor(4 * 8, rng(13)), dOut = randomTensor(4 * 8, rng(14));
  mha.forward(x, null, null, { train: true, causal: true });
  const { dQuery, weights: g } = mha.backward(dOut);
  const loss = (w, input = x) => referenceMha(config, w, input, null, null, { causal: true }).out.reduce((a, y, i) => a + y * dOut[i], 0);
  const numeric = (array, at, f) => {
    const up = Float64Array.from(array), down = Float64Array.from(array);
    up[at] += 1e-4;
    down[at] -= 1e-4;
    return (f(up) - f(down)) / 2e-4;
  };
  for (const i of [0, 5, 17, 31]) {
    const want = numeric(x, i, (input) => loss(weights, input));
    assert.ok(Math.abs(dQuery[i] - want) <= 2e-4 + 2e-3 * Math.abs(want), `dQuery[${i}] ${dQuery[i]} vs ${want}`);
  }
  for (const [name, i] of [['wq', 3], ['wk', 9], ['wv', 20], ['wo', 40], ['bq', 1], ['bk', 2]]) {
    const want = numeric(weights[name], i, (a) => loss({ ...weights, [name]: a }));
    assert.ok(Math.abs(g[name][i] - want) <= 2e-4 + 2e-3 * Math.abs(want), `${name}[${i}] ${g[name][i]} vs ${want}`);
  }
  mha.dispose();
});

test('rotary tables that run out: a RangeError naming the method, the positions and the table size', () => {
  const tables = { rotaryDim: 4, cos: new Float32Array(10 * 2).fill(1), sin: new Float32Array(10 * 2) };  // positions 0 … 9
  const { mha } = layer({ embedDim: 16, numHeads: 2, rotary: tables }, 21);
  const x = randomTensor(12 * 16, rng(22));
  assert.throws(() => mha.forward(x, null, null, { causal: true }),
    /^RangeError: MultiHeadAttention\.forward: rotary positions 0 … 11 \(keys at 0 … 11, queries at 0 \+ row\) are outside the rotary tables \[0, 10\) \(config\.rotary\.cos and sin \[maxPosition, rotaryDim\/2\]\); give longer tables, or options\.positions$/);
  const kv = randomTensor(12 * 16, rng(23));
  assert.throws(() => mha.forward(x.subarray(0, 2 * 16), kv, null, { seqK: 12 }),  // cross-attention: keys 0 … 11, queries at 10, 11
    /^RangeError: MultiHeadAttention\.forward: rotary positions 0 … 11 \(keys at 0 … 11, queries at 10 \+ row\) are outside the rotary tables \[0, 10\)/);
  const cache = mha.createCache({ maxSeq: 16 });
  mha.forward(x.subarray(0, 8 * 16), null, null, { cache });
  assert.throws(() => mha.forward(x.subarray(8 * 16), null, null, { cache }),
    /^RangeError: MultiHeadAttention\.forward: rotary positions 8 … 11 \(the cache's length 8 \+ row\) are outside the rotary tables \[0, 10\)/);
  assert.equal(cache.length, 8);
  mha.forward(x.subarray(8 * 16, 10 * 16), null, null, { cache });  // 8 and 9 are in the tables
  assert.equal(cache.length, 10);
  cache.dispose();
  mha.dispose();
});

test('bad variant config and forward options throw before any work', () => {
  const base = { embedDim: 16, numHeads: 2 };
  const cases = [
    [{ rotary: { rotaryDim: 3 } }, RangeError, /^MultiHeadAttention: config\.rotary\.rotaryDim 3 must be even and ≤ headDim 8$/],
    [{ rotary: { rotaryDim: 10 } }, RangeError, /rotaryDim 10 must be even and ≤ headDim 8/],
    [{ rotary: { dims: 4 } }, TypeError, /^MultiHeadAttention: unknown config\.rotary key 'dims'/],
    [{ rotary: { base: -1 } }, RangeError, /config\.rotary\.base must be a finite number > 0/],
    [{ rotary: { cos: new Float32Array(8) } }, TypeError, /config\.rotary\.cos and config\.rotary\.sin go together/],
    [{ rotary: { cos: new Float32Array(8), sin: new Float32Array(8), base: 5 } }, TypeError, /exclude each other/],
    [{ window: [1] }, TypeError, /^MultiHeadAttention: config\.window must be a two-element array/],
    [{ window: [-1, 0] }, RangeError, /^MultiHeadAttention: config\.window \[-1, 0\]: each side must be an integer ≥ 0 or Infinity$/],
    [{ softcap: -5 }, RangeError, /^MultiHeadAttention: config\.softcap must be a finite number > 0/],
    [{ alibi: 'bloom' }, TypeError, /^MultiHeadAttention: config\.alibi must be true \(BLOOM's slopes\), false or a Float32Array \[numHeads\]/],
    [{ alibi: new Float32Array(3) }, RangeError, /^MultiHeadAttention: config\.alibi has length 3, expected numHeads 2$/],
    [{ sinks: 1 }, TypeError, /^MultiHeadAttention: config\.sinks must be a boolean, got number 1$/],
  ];
  for (const [extra, type, message] of cases) {
    assert.throws(() => new lib.MultiHeadAttention({ ...base, ...extra }), (e) => e instanceof type && message.test(e.message), JSON.stringify(extra));
  }
  const { mha } = layer({ ...base, rotary: { rotaryDim: 4, cos: new Float32Array(20), sin: new Float32Array(20) } }, 15);
  const plain = layer(base, 16).mha;
  const x = randomTensor(3 * 16, rng(17));
  assert.throws(() => plain.forward(x, null, null, { positions: Int32Array.from([0, 1, 2]) }), /^TypeError: MultiHeadAttention\.forward: options\.positions are rotary positions, but this layer has no config\.rotary$/);
  assert.throws(() => mha.forward(x, null, null, { positions: [0, 1, 2] }), /^TypeError: MultiHeadAttention\.forward: options\.positions must be an Int32Array/);
  assert.throws(() => mha.forward(x, null, null, { positions: Int32Array.from([0, 1]) }), /^RangeError: MultiHeadAttention\.forward: options\.positions has length 2, expected 3/);
  assert.throws(() => mha.forward(x, null, null, { positions: Int32Array.from([0, 1, 10]) }), /^RangeError: MultiHeadAttention\.forward: options\.positions\[2\] is 10, outside the rotary tables \[0, 10\)$/);
  assert.throws(() => mha.forward(x, null, null, { causal: 'top-left' }), /^TypeError: MultiHeadAttention\.forward: options\.causal must be false, true, 'lower-right' or 'upper-left'/);
  const cache = mha.createCache({ maxSeq: 8 });
  assert.throws(() => mha.forward(x, null, null, { cache, causal: 'upper-left' }), /^RangeError: MultiHeadAttention\.forward: options\.causal 'upper-left' does not apply to options\.cache/);
  assert.equal(cache.length, 0);
  cache.dispose();
  mha.dispose();
  plain.dispose();
});
