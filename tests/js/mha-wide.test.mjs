// MultiHeadAttention as wide as current models make it — config.headDim (numHeads × headDim ≠
// embedDim: Qwen3, Gemma), config.scale (T5: 1), config.bias per projection (Qwen2: no o bias;
// Whisper: no k bias), the heads' mean weights (PyTorch's average_attn_weights) — in forward,
// cached decoding and training, against the JS reference; and cross-attention over a cache
// filled once from the encoder's output (Whisper, T5, BART), with every error where the layer
// and the cache disagree.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { referenceMha } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

// The parameters of a config, in setWeights layout, from the definitions: wq [numHeads·headDim,
// embedDim], wk [kv, kdim], wv [kv, vdim], wo [embedDim, numHeads·headDim]; a bias where
// config.bias gives the projection one.
function randomWeights(config, seed, scale = 1) {
  const random = rng(seed);
  const { embedDim: e, numHeads: h } = config;
  const hd = config.headDim ?? e / h, q = h * hd, kv = (config.numKvHeads ?? h) * hd;
  const kdim = config.kdim ?? e, vdim = config.vdim ?? e;
  const has = (p) => (typeof config.bias === 'object' ? config.bias[p] ?? true : config.bias ?? true);
  const w = { wq: randomTensor(q * e, random, scale / Math.sqrt(e)), wk: randomTensor(kv * kdim, random, scale / Math.sqrt(kdim)),
    wv: randomTensor(kv * vdim, random, scale / Math.sqrt(vdim)), wo: randomTensor(e * q, random, scale / Math.sqrt(q)) };
  const sizes = { bq: q, bk: kv, bv: kv, bo: e };
  for (const p of ['q', 'k', 'v', 'o']) if (has(p)) w[`b${p}`] = randomTensor(sizes[`b${p}`], random, 0.5 * scale);
  if (config.sinks) w.sinks = randomTensor(h, random, 1);
  return w;
}

function layer(config, seed = 1) {
  const mha = new lib.MultiHeadAttention(config);
  const weights = randomWeights(config, seed);
  mha.setWeights(weights);
  return { mha, weights };
}

const close = (got, want, what, atol = 5e-5) => assertClose(got, want, what, atol);

const QWEN = { embedDim: 10, numHeads: 4, numKvHeads: 2, headDim: 6, bias: { o: false }, rotary: {} };  // Q: 24 features
const GEMMA = { embedDim: 12, numHeads: 2, numKvHeads: 1, headDim: 10, scale: 0.25, bias: false, softcap: 3, window: [2, 0],
  sinks: true, alibi: Float32Array.from([0.3, 0.05]) };
const WHISPER = { embedDim: 12, numHeads: 4, numKvHeads: 2, headDim: 5, kdim: 7, vdim: 5, bias: { k: false } };
const T5 = { embedDim: 8, numHeads: 2, headDim: 3, scale: 1, bias: false };  // Q: 6 features

describe('a wide layer against the reference', () => {
  test('the resolved config: headDim, scale, bias per projection', () => {
    const { mha } = layer(QWEN);
    assert.equal(mha.config.headDim, 6);
    assert.equal(mha.config.scale, Math.fround(1 / Math.fround(Math.sqrt(6))));  // 1.0f / sqrtf(6), as the layer uses it
    assert.ok(Math.abs(mha.config.scale - 1 / Math.sqrt(6)) < 1e-7);
    assert.deepEqual(mha.config.bias, { q: true, k: true, v: true, o: false });
    assert.ok(Object.isFrozen(mha.config.bias));
    assert.deepEqual(Object.keys(mha.getWeights()).sort(), ['bk', 'bq', 'bv', 'wk', 'wo', 'wq', 'wv']);
    assert.equal(mha.getWeights().wq.length, 24 * 10);
    assert.equal(mha.getWeights().wo.length, 10 * 24);
    mha.dispose();
    const uniform = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, bias: { q: false, k: false, v: false, o: false } });
    assert.equal(uniform.config.bias, false);  // all four agree: a boolean, as before
    assert.equal(uniform.config.scale, 0.5);
    uniform.dispose();
  });

  test('Qwen, Gemma, Whisper and T5 shapes, self and cross, every causal mode, weights per head and averaged', () => {
    for (const config of [QWEN, GEMMA, WHISPER, T5]) {
      const { mha, weights } = layer(config, 2);
      const batch = 2, seqQ = 5, cross = config === WHISPER || config === T5, seqK = cross ? 9 : seqQ;
      const r = rng(3);
      const x = randomTensor(batch * seqQ * config.embedDim, r);
      const key = cross ? randomTensor(batch * seqK * (config.kdim ?? config.embedDim), r) : null;
      const value = cross ? randomTensor(batch * seqK * (config.vdim ?? config.embedDim), r) : null;
      const mask = config === T5 ? Float32Array.from({ length: seqQ * seqK }, (_, i) => Math.sin(i)) : undefined;  // a position bias
      for (const causal of [false, true, 'upper-left']) {
        for (const averageAttnWeights of [false, true]) {
          const what = `${JSON.stringify(config)} causal ${causal} average ${averageAttnWeights}`;
          const weightsOut = new Float32Array(batch * (averageAttnWeights ? 1 : config.numHeads) * seqQ * seqK);
          const opts = { batch, causal, mask };
          const want = referenceMha(config, weights, x, key, value, { ...opts, averageAttnWeights });
          close(mha.forward(x, key, value, { ...opts, weightsOut, averageAttnWeights }), want.out, what);
          close(weightsOut, want.weights, `${what}: weightsOut`);
        }
      }
      mha.dispose();
    }
  });

  test("PyTorch's q_proj_weight, k_proj_weight, v_proj_weight (kdim, vdim ≠ embedDim) and in_proj_bias map to setWeights", () => {
    // nn.MultiheadAttention(E, H, kdim=K, vdim=V, batch_first=True): in_proj_weight is None, the
    // three projections are separate; in_proj_bias [3E] is still one array.
    const E = 8, K = 5, V = 3, r = rng(4);
    const sd = { q_proj_weight: randomTensor(E * E, r, 0.3), k_proj_weight: randomTensor(E * K, r, 0.3), v_proj_weight: randomTensor(E * V, r, 0.3),
      in_proj_bias: randomTensor(3 * E, r), out_proj_weight: randomTensor(E * E, r, 0.3), out_proj_bias: randomTensor(E, r) };
    const config = { embedDim: E, numHeads: 2, kdim: K, vdim: V };
    const mha = new lib.MultiHeadAttention(config);
    const weights = { wq: sd.q_proj_weight, wk: sd.k_proj_weight, wv: sd.v_proj_weight, wo: sd.out_proj_weight,
      bq: sd.in_proj_bias.subarray(0, E), bk: sd.in_proj_bias.subarray(E, 2 * E), bv: sd.in_proj_bias.subarray(2 * E), bo: sd.out_proj_bias };
    mha.setWeights(weights);
    const [q, k, v] = [randomTensor(4 * E, r), randomTensor(6 * K, r), randomTensor(6 * V, r)];
    const weightsOut = new Float32Array(4 * 6);  // need_weights=True, average_attn_weights=True: [batch, seqQ, seqK]
    const want = referenceMha(config, weights, q, k, v, { averageAttnWeights: true });
    close(mha.forward(q, k, v, { weightsOut, averageAttnWeights: true }), want.out, 'out');
    close(weightsOut, want.weights, 'averaged weights');
    mha.dispose();
  });

  test('decoding through a cache equals one causal forward, with the mean weights of each step', () => {
    const config = { ...QWEN, alibi: true };
    const { mha } = layer(config, 5);
    const seq = 9, e = config.embedDim, x = randomTensor(seq * e, rng(6));
    const fullWeights = new Float32Array(seq * seq);
    const full = mha.forward(x, null, null, { causal: true, weightsOut: fullWeights, averageAttnWeights: true });
    for (const dtype of ['float32', 'bfloat16']) {
      const cache = mha.createCache({ maxSeq: seq, dtype });
      const atol = dtype === 'float32' ? 2e-5 : 2e-2;
      close(mha.forward(x.subarray(0, 4 * e), null, null, { cache }), full.subarray(0, 4 * e), `prefill, ${dtype}`, atol);
      for (let t = 4; t < seq; t++) {
        const weightsOut = new Float32Array(t + 1);
        const y = mha.forward(x.subarray(t * e, (t + 1) * e), null, null, { cache, weightsOut, averageAttnWeights: true });
        close(y, full.subarray(t * e, (t + 1) * e), `step ${t}, ${dtype}`, atol);
        close(weightsOut, fullWeights.subarray(t * seq, t * seq + t + 1), `step ${t}'s mean weights, ${dtype}`, atol);
      }
      cache.dispose();
    }
    mha.dispose();
  });
});

describe('training a wide layer', () => {
  // dL/d(every parameter and input) of L = Σ out ⊙ dOut, against central differences of the reference.
  function checkGradients(config, { cross = false, causal = false } = {}, seed = 1) {
    const weights = randomWeights(config, seed, 2);
    const r = rng(seed + 1);
    const e = config.embedDim, batch = 2, seqQ = 3, seqK = cross ? 4 : seqQ;
    const x = randomTensor(batch * seqQ * e, r);
    const key = cross ? randomTensor(batch * seqK * (config.kdim ?? e), r) : null;
    const value = cross ? randomTensor(batch * seqK * (config.vdim ?? e), r) : null;
    const dOut = randomTensor(batch * seqQ * e, r);
    const mha = new lib.MultiHeadAttention(config);
    mha.setWeights(weights);
    mha.forward(x, key, value, { batch, causal, train: true });
    const got = mha.backward(dOut);
    mha.dispose();
    assert.deepEqual(Object.keys(got.weights).sort(), Object.keys(weights).sort());
    const w64 = Object.fromEntries(Object.entries(weights).map(([k, v]) => [k, Float64Array.from(v)]));
    const inputs = { x: Float64Array.from(x), key: key && Float64Array.from(key), value: value && Float64Array.from(value) };
    const loss = () => referenceMha(config, w64, inputs.x, inputs.key, inputs.value, { batch, causal }).out.reduce((s, y, i) => s + y * dOut[i], 0);
    const numeric = (arr) => Float64Array.from(arr, (keep, i) => {
      arr[i] = keep + 1e-5;
      const up = loss();
      arr[i] = keep - 1e-5;
      const down = loss();
      arr[i] = keep;
      return (up - down) / 2e-5;
    });
    const near = (a, b, what) => a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) <= 2e-4 + 2e-3 * Math.abs(b[i]), `${what}[${i}]: ${v} vs ${b[i]}`));
    for (const name of Object.keys(weights)) near(got.weights[name], numeric(w64[name]), `${JSON.stringify(config)}: ${name}`);
    near(got.dQuery, numeric(inputs.x), 'dQuery');
    if (cross) {
      near(got.dKey, numeric(inputs.key), 'dKey');
      near(got.dValue, numeric(inputs.value), 'dValue');
    }
  }

  test('gradients match finite differences of the reference', () => {
    checkGradients({ ...QWEN, embedDim: 6, headDim: 4, rotary: { rotaryDim: 2 } }, { causal: true }, 1);
    checkGradients({ ...WHISPER, embedDim: 5, headDim: 3, kdim: 3, vdim: 4 }, { cross: true }, 2);
    checkGradients({ ...T5, alibi: Float32Array.from([0.2, 0.4]), sinks: true }, { causal: true }, 3);
    checkGradients({ ...GEMMA, embedDim: 4, headDim: 3 }, { causal: true }, 4);
  });

  test('SGD, Adam, getWeights/setWeights and the optimizer state, saved and resumed bit for bit', () => {
    const config = { ...WHISPER, kdim: 12, vdim: 12 };
    const { mha, weights } = layer(config, 7);
    const x = randomTensor(2 * 4 * 12, rng(8)), dOut = randomTensor(x.length, rng(9));
    mha.forward(x, null, null, { batch: 2, train: true });
    const grads = mha.backward(dOut).weights;
    assert.equal(grads.bk, undefined);
    mha.sgdStep(grads, { lr: 0.1 });
    for (const [name, w] of Object.entries(mha.getWeights())) {
      // w + (−lr)·g in float, with lr the float 0.1 the step gets.
      assert.deepEqual(w, Float32Array.from(weights[name], (v, i) => v - Math.fround(Math.fround(0.1) * grads[name][i])), `SGD on ${name}`);
    }
    const train = (m, steps) => {
      for (let i = 0; i < steps; i++) {
        m.forward(x, null, null, { batch: 2, train: true });
        m.adamStep(m.backward(dOut).weights, { lr: 0.01 });
      }
    };
    train(mha, 3);
    const state = mha.getOptimizerState();
    assert.deepEqual(Object.keys(state.m).sort(), ['bo', 'bq', 'bv', 'wk', 'wo', 'wq', 'wv']);
    const copy = new lib.MultiHeadAttention(config);
    copy.setWeights(mha.getWeights());
    copy.setOptimizerState(state);
    train(mha, 2);
    train(copy, 2);
    assert.deepEqual(copy.getWeights(), mha.getWeights());
    assert.deepEqual(copy.getOptimizerState(), mha.getOptimizerState());
    mha.dispose();
    copy.dispose();
  });
});

describe('a cross-attention cache', () => {
  const encoder = (batch, seqK, config, seed) => {
    const r = rng(seed);
    return { key: randomTensor(batch * seqK * (config.kdim ?? config.embedDim), r), value: randomTensor(batch * seqK * (config.vdim ?? config.embedDim), r) };
  };

  test('every dtype: forward over it equals forward given the encoder output, step after step', () => {
    const { mha, weights } = layer(WHISPER, 11);
    const batch = 2, seqK = 13, enc = encoder(batch, seqK, WHISPER, 12);
    for (const [dtype, atol] of [['float32', 5e-5], ['float16', 2e-3], ['bfloat16', 1.5e-2], ['int8', 2e-2], ['int4', 2e-2]]) {
      const cache = mha.createCrossCache(enc.key, enc.value, { batch, dtype });
      assert.deepEqual([cache.batch, cache.kvHeads, cache.headDim, cache.valueDim, cache.maxSeq, cache.length, cache.dtype, cache.window],
        [batch, 2, 5, 5, seqK, seqK, dtype, 0]);
      for (let step = 0; step < 3; step++) {
        const x = randomTensor(batch * (step ? 1 : 4) * 12, rng(20 + step));
        const keyPaddingMask = Uint8Array.from({ length: batch * seqK }, (_, i) => (i >= seqK + 10 ? 1 : 0));  // entry 1 pads its last 3
        const weightsOut = new Float32Array(batch * (step ? 1 : 4) * seqK);
        const got = mha.forward(x, null, null, { batch, cache, keyPaddingMask, weightsOut, averageAttnWeights: true });
        const want = referenceMha(WHISPER, weights, x, enc.key, enc.value, { batch, keyPaddingMask, averageAttnWeights: true });
        close(got, want.out, `${dtype} step ${step}`, atol);
        close(weightsOut, want.weights, `${dtype} step ${step}: weights`, atol);
        if (dtype === 'float32') assert.deepEqual(got, mha.forward(x, enc.key, enc.value, { batch, keyPaddingMask }), 'the same as the forward given the encoder output');
      }
      assert.equal(cache.length, seqK);  // attended to, never appended to
      cache.dispose();
    }
    mha.dispose();
  });

  test('rotary keys at 0 … seqK − 1, queries where the score rule puts them; ALiBi, causal, upper-left, T5 scale', () => {
    const config = { ...T5, kdim: 5, rotary: { rotaryDim: 2 }, alibi: true, window: [4, 1] };
    const { mha } = layer(config, 13);
    const enc = encoder(1, 7, config, 14);
    const cache = mha.createCrossCache(enc.key, enc.value);
    const x = randomTensor(3 * 8, rng(15));
    for (const causal of [false, true, 'upper-left']) {
      assert.deepEqual(mha.forward(x, null, null, { cache, causal }), mha.forward(x, enc.key, enc.value, { causal }), `causal ${causal}`);
    }
    cache.dispose();
    mha.dispose();
  });

  test('a layer without a value of its own: the value is the key; the cache outlives its layer', () => {
    const config = { embedDim: 8, numHeads: 2, kdim: 3, vdim: 3 };
    const { mha } = layer(config, 16);
    const enc = randomTensor(2 * 5 * 3, rng(17));
    const cache = mha.createCrossCache(enc, null, { batch: 2, seqK: 5 });
    const x = randomTensor(2 * 8, rng(18));
    assert.deepEqual(mha.forward(x, null, null, { batch: 2, cache }), mha.forward(x, enc, enc, { batch: 2 }));
    mha.dispose();
    assert.equal(cache.length, 5);
    cache.dispose();
  });

  test("append is refused; truncate(n) keeps the first n frames; reorder is beam search's, as in EncoderDecoderCache", () => {
    const { mha } = layer({ ...WHISPER, rotary: { rotaryDim: 4 } }, 27);
    const batch = 3, seqK = 8, enc = encoder(batch, seqK, WHISPER, 28);
    // The encoder's output of the first n frames of each entry, and of entries in another order.
    const frames = (a, features, n) => Float32Array.from({ length: batch * n * features },
      (_, i) => a[Math.floor(i / (n * features)) * seqK * features + (i % (n * features))]);
    const entries = (a, order) => Float32Array.from({ length: a.length }, (_, i) => a[order[Math.floor(i / (a.length / batch))] * (a.length / batch) + (i % (a.length / batch))]);
    const x = randomTensor(batch * 2 * 12, rng(29));
    const cache = mha.createCrossCache(enc.key, enc.value, { batch });
    assert.throws(() => cache.append(new Float32Array(batch * 2 * 5), new Float32Array(batch * 2 * 5)), (e) => e instanceof TypeError &&
      e.message === "KVCache.append: this is a cross-attention cache (createCrossCache()): it holds the encoder's output, projected once " +
        'by its layer, and takes no other positions; a decoder step appends to its self-attention cache (createCache())');
    assert.equal(cache.length, seqK);
    const order = [2, 0, 2];
    cache.reorder(order);
    assert.deepEqual(mha.forward(x, null, null, { batch, cache }), mha.forward(x, entries(enc.key, order), entries(enc.value, order), { batch }));
    const reordered = { key: entries(enc.key, order), value: entries(enc.value, order) };
    cache.truncate(5);
    assert.deepEqual(mha.forward(x, null, null, { batch, cache }),
      mha.forward(x, frames(reordered.key, 7, 5), frames(reordered.value, 5, 5), { batch }), 'the first 5 frames of each entry');
    cache.dispose();
    mha.dispose();
  });

  test('memory: its bytes are the projected keys and values, dispose gives them back, a refused fill keeps nothing', () => {
    const { mha } = layer(WHISPER, 19);
    const enc = encoder(1, 50, WHISPER, 20);
    mha.createCrossCache(enc.key, enc.value).dispose();  // the arena's staging block, kept between calls
    const before = lib.memoryUsage().heapInUse;
    const cache = mha.createCrossCache(enc.key, enc.value, { dtype: 'float16' });
    assert.equal(cache.bytes, 2 * 2 * 50 * 5 * 2);  // K and V, 2 kv heads × 50 positions × 5 dims, 2 bytes each
    assert.ok(lib.memoryUsage().heapInUse >= before + cache.bytes);
    cache.dispose();
    assert.ok(lib.memoryUsage().heapInUse <= before);
    const big = enc.key.map((v, i) => (i === 7 * 9 + 2 ? 1e6 : v));  // position 9 projects beyond float16's range
    assert.throws(() => mha.createCrossCache(big, enc.value, { dtype: 'float16' }),
      /^RangeError: MultiHeadAttention\.createCrossCache: the projected key\[batch 0, kvHead \d, position 9, element \d\] = [-\d.e+]+ is beyond float16's range/);
    assert.ok(lib.memoryUsage().heapInUse <= before);
    const infinite = enc.key.map((v, i) => (i === 7 * 9 + 2 ? Infinity : v));  // int4 stores finite values only
    assert.throws(() => mha.createCrossCache(infinite, enc.value, { dtype: 'int4' }),
      /^RangeError: MultiHeadAttention\.createCrossCache: the projected key\[batch 0, kvHead \d, position 9, element \d\] = (-?Infinity|NaN) is not finite, and dtype 'int4' stores finite values only/);
    assert.ok(lib.memoryUsage().heapInUse <= before);
    mha.dispose();
  });

  test('errors: what the layer, the cache and the call disagree on is refused, never answered', () => {
    const { mha, weights } = layer(WHISPER, 21);
    const enc = encoder(2, 6, WHISPER, 22);
    const fn = 'MultiHeadAttention.createCrossCache';
    const cases = [
      [() => mha.createCrossCache([1, 2]), TypeError, `${fn}: key must be a Float32Array [batch, seqK, kdim] (the encoder's output), got Array(2)`],
      [() => mha.createCrossCache(new Float32Array(10)), RangeError, `${fn}: key has length 10, not a positive multiple of batch 1 × kdim 7`],
      [() => mha.createCrossCache(enc.key, null, { batch: 2 }), TypeError, `${fn}: value is required, since this layer's vdim (5) differs from its kdim (7)`],
      [() => mha.createCrossCache(enc.key, enc.value.subarray(1), { batch: 2 }), RangeError, `${fn}: value has length 59, expected 60 (batch 2 × seqK 6 × vdim 5)`],
      [() => mha.createCrossCache(enc.key, enc.value, { batch: 2, seqK: 5 }), RangeError, `${fn}: key has length 84, expected 70 (batch 2 × seqK 5 × kdim 7)`],
      [() => mha.createCrossCache(enc.key, enc.value, { maxSeq: 6 }), TypeError, `${fn}: unknown option 'maxSeq' (known options: batch, seqK, dtype)`],
      [() => mha.createCrossCache(enc.key, enc.value, { batch: 2, dtype: 'int3' }), TypeError, /^MultiHeadAttention\.createCrossCache: options\.dtype must be 'float32'/],
    ];
    for (const [call, type, message] of cases) {
      assert.throws(call, (e) => e.constructor === type && (typeof message === 'string' ? e.message === message : message.test(e.message)), String(message));
    }
    const fresh = new lib.MultiHeadAttention(WHISPER);
    assert.throws(() => fresh.createCrossCache(enc.key, enc.value, { batch: 2 }), /^Error: MultiHeadAttention\.createCrossCache: call setWeights\(\) first$/);
    fresh.dispose();
    const tables = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, rotary: { rotaryDim: 4, cos: new Float32Array(10), sin: new Float32Array(10) } });
    tables.setWeights(randomWeights({ embedDim: 8, numHeads: 2 }, 23));
    assert.throws(() => tables.createCrossCache(new Float32Array(6 * 8)), /^RangeError: MultiHeadAttention\.createCrossCache: rotary positions 0 … 5 \(the keys\) are outside the rotary tables \[0, 5\)/);
    tables.dispose();

    const cache = mha.createCrossCache(enc.key, enc.value, { batch: 2 });
    const x = randomTensor(2 * 12, rng(24));
    const forward = 'MultiHeadAttention.forward';
    const forwardCases = [
      [{ cache, batch: 1 }, RangeError, `${forward}: options.batch (1) differs from options.cache.batch (2)`],
      [{ cache, seqK: 6 }, TypeError, `${forward}: options.seqK is not used with options.cache (keys come from the cache)`],
      [{ cache, train: true }, TypeError, `${forward}: options.train does not work with options.cache (a cache has no gradients)`],
      [{ cache, averageAttnWeights: true }, TypeError, `${forward}: options.averageAttnWeights says how to fill options.weightsOut, which was not given`],
      [{ cache, weightsOut: new Float32Array(2 * 6) }, RangeError,
        `${forward}: options.weightsOut has length 12, expected 48 (batch 2 × numHeads 4 × seqQ 1 × seqK 6), per head (averageAttnWeights: true for their mean)`],
    ];
    for (const [options, type, message] of forwardCases) {
      assert.throws(() => mha.forward(x, null, null, options), (e) => e.constructor === type && e.message === message, message);
    }
    assert.throws(() => mha.forward(x.subarray(12), null, null, { cache }), (e) => e instanceof RangeError &&
      e.message === `${forward}: query has length 12, not a positive multiple of batch 2 (options.cache's batch) × 12 features`);
    assert.throws(() => mha.forward(x, enc.key, enc.value, { cache }), /^TypeError: MultiHeadAttention\.forward: options\.cache is a cross-attention cache \(from createCrossCache\(\)\), so key and value must be null: it holds them, projected once$/);
    const other = layer(WHISPER, 25).mha;
    assert.throws(() => other.forward(x, null, null, { cache }), /^Error: MultiHeadAttention\.forward: options\.cache belongs to another MultiHeadAttention layer/);
    other.dispose();
    // Stale: its keys and values came from weights the layer no longer has.
    mha.setWeights(weights);
    assert.throws(() => mha.forward(x, null, null, { cache }), /^Error: MultiHeadAttention\.forward: options\.cache holds keys and values projected with this layer's earlier weights \(the weights changed since: setWeights\(\)\), so attention over it would match neither the old nor the new weights; make a new one with createCrossCache\(\)$/);
    const renewed = mha.createCrossCache(enc.key, enc.value, { batch: 2 });
    mha.forward(x, null, null, { cache: renewed });
    renewed.reset();
    assert.throws(() => mha.forward(x, null, null, { cache: renewed }), /^RangeError: MultiHeadAttention\.forward: options\.cache, a cross-attention cache, holds no positions \(it was reset\(\) or truncated\); make a new one with createCrossCache\(\)$/);
    renewed.dispose();
    cache.dispose();
    assert.throws(() => mha.forward(x, null, null, { cache }), /^Error: MultiHeadAttention\.forward: the KV cache was disposed$/);
    const rotary = layer({ ...WHISPER, rotary: { rotaryDim: 4 } }, 26).mha;
    const rotated = rotary.createCrossCache(enc.key, enc.value, { batch: 2 });
    assert.throws(() => rotary.forward(x, null, null, { cache: rotated, positions: Int32Array.from([3]) }),
      /^TypeError: MultiHeadAttention\.forward: options\.positions do not apply to a cross-attention cache: its keys were rotated at positions 0 … 5 when createCrossCache\(\) filled it/);
    rotated.dispose();
    rotary.dispose();
    mha.dispose();
  });
});

test('a self-attention cache filled with earlier weights is refused until reset()', () => {
  const { mha, weights } = layer({ embedDim: 12, numHeads: 2, numKvHeads: 1, rotary: {} }, 27);
  const x = randomTensor(3 * 12, rng(28));
  const cache = mha.createCache({ maxSeq: 8 });
  mha.forward(x, null, null, { cache });
  mha.forward(x, null, null, { train: true });
  mha.sgdStep(mha.backward(x).weights, { lr: 0.01 });
  assert.throws(() => mha.forward(x, null, null, { cache }), /^Error: MultiHeadAttention\.forward: options\.cache holds keys and values projected with this layer's earlier weights \(the weights changed since: sgdStep\(\)\), so attention over it would match neither the old nor the new weights; reset\(\) it and run the sequence again$/);
  assert.equal(cache.length, 3);
  cache.reset();
  const fresh = mha.createCache({ maxSeq: 8 });
  assert.deepEqual(mha.forward(x, null, null, { cache }), mha.forward(x, null, null, { cache: fresh }));
  mha.setWeights(weights);
  cache.reset();  // an empty cache may be used with any weights
  mha.forward(x, null, null, { cache });
  cache.dispose();
  fresh.dispose();
  mha.dispose();
});

test('wide config and weights errors', () => {
  const fn = 'MultiHeadAttention';
  const cases = [
    [{ embedDim: 10, numHeads: 3 }, RangeError, `${fn}: config.embedDim (10) must be a multiple of config.numHeads (3), or config.headDim given (Qwen3, Gemma: numHeads × headDim need not be embedDim)`],
    [{ embedDim: 10, numHeads: 3, headDim: 0 }, RangeError, `${fn}: config.headDim must be a positive integer, got 0`],
    [{ embedDim: 10, numHeads: 2 ** 16, headDim: 2 ** 16 }, RangeError, `${fn}: config.numHeads × config.headDim (65536 × 65536) must be at most 2^31 − 1`],
    [{ embedDim: 8, numHeads: 2, scale: 0 }, RangeError, `${fn}: config.scale must be a finite number > 0 (it multiplies Q·Kᵀ; default 1/√headDim), got 0`],
    [{ embedDim: 8, numHeads: 2, scale: '1' }, TypeError, `${fn}: config.scale must be a number, got string "1"`],
    [{ embedDim: 8, numHeads: 2, bias: 'none' }, TypeError, `${fn}: config.bias must be a boolean or { q, k, v, o } (booleans, default true), got string "none"`],
    [{ embedDim: 8, numHeads: 2, bias: { out: false } }, TypeError, `${fn}: unknown config.bias key 'out' (known keys: q, k, v, o)`],
    [{ embedDim: 8, numHeads: 2, bias: { o: 0 } }, TypeError, `${fn}: config.bias.o must be a boolean, got number 0`],
    [{ embedDim: 8, numHeads: 2, headDim: 6, rotary: { rotaryDim: 8 } }, RangeError, `${fn}: config.rotary.rotaryDim 8 must be even and ≤ headDim 6`],
  ];
  for (const [config, type, message] of cases) {
    assert.throws(() => new lib.MultiHeadAttention(config), (e) => e.constructor === type && e.message === message, message);
  }
  const mha = new lib.MultiHeadAttention(WHISPER);
  const good = randomWeights(WHISPER, 29);
  const set = 'MultiHeadAttention.setWeights';
  const weightCases = [
    [{ ...good, bk: new Float32Array(10) }, TypeError, `${set}: weights.bk was given, but the layer was created with config.bias.k false`],
    [{ ...good, bq: undefined }, TypeError, `${set}: weights.bq is required (a Float32Array [20]), since the layer has config.bias.q true`],
    [{ ...good, wq: new Float32Array(12 * 12) }, RangeError, `${set}: weights.wq has length 144, expected 240 (numHeads·headDim 20 × embedDim 12)`],
    [{ ...good, wo: new Float32Array(12 * 12) }, RangeError, `${set}: weights.wo has length 144, expected 240 (embedDim 12 × numHeads·headDim 20)`],
  ];
  for (const [weights, type, message] of weightCases) {
    assert.throws(() => mha.setWeights(weights), (e) => e.constructor === type && e.message === message, message);
  }
  mha.dispose();
});
