// Every argument error of a MultiHeadAttention method names the method and the argument and says
// what was expected and what came (`MultiHeadAttention.forward: options.batch must be …, got …`),
// with the documented error type; it is thrown before the wasm heap is touched, and the layer
// keeps working afterwards. One row per error path: [method, call, type, message start].
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

const e = 8;
const random = rng(14);
const x = randomTensor(e, random);        // one position of a layer with embedDim 8
const x2 = randomTensor(2 * e, random);   // two positions

const made = [];  // every layer the tests make, disposed at the end
function disposeAll() {
  for (const mha of made.splice(0)) mha.dispose();
}

// A layer with weights set: embedDim 8, numHeads 2, and `config`'s changes.
function layer(config = {}) {
  const mha = new lib.MultiHeadAttention({ embedDim: e, numHeads: 2, ...config });
  made.push(mha);
  const { kdim = e, vdim = e, bias = true } = config;
  const w = (n) => randomTensor(n, random, 0.3);
  const weights = { wq: w(e * e), wk: w(e * kdim), wv: w(e * vdim), wo: w(e * e) };
  if (bias) Object.assign(weights, { bq: w(e), bk: w(e), bv: w(e), bo: w(e) });
  if (config.sinks) weights.sinks = w(2);
  mha.setWeights(weights);
  return mha;
}

// [method, () => call, error type, what the message starts with after `MultiHeadAttention.<method>: `]
function cases() {
  const mha = layer();
  const cross = layer({ kdim: 4, vdim: 6 });
  const rotary = layer({ rotary: { cos: new Float32Array(4 * 2), sin: new Float32Array(4 * 2) } });
  const unbiased = layer({ bias: false });
  const withSinks = layer({ sinks: true });
  const cache = mha.createCache({ maxSeq: 1 });
  const pairs = mha.createCache({ batch: 2, maxSeq: 4 });
  const local = layer({ window: [1, 0] });
  const ring = local.createCache({ window: 2 });
  const crossCache = cross.createCache({ maxSeq: 4 });
  const good = mha.getWeights();
  const state = mha.getOptimizerState();
  const trained = layer();
  trained.forward(x, null, null, { train: true });
  const grads = trained.backward(new Float32Array(e)).weights;
  const stale = layer();
  stale.forward(x, null, null, { train: true });
  stale.sgdStep(grads, { lr: 0.1 });
  const tired = layer();  // Adam's step counter is full
  tired.setOptimizerState({ ...tired.getOptimizerState(), step: 2 ** 31 - 1 });
  const unset = new lib.MultiHeadAttention({ embedDim: e, numHeads: 2 });
  made.push(unset);
  const f = (options, key = null, value = null, query = x, on = mha) => () => on.forward(query, key, value, options);
  const rows = [
    // forward: options
    ['forward', f(5), TypeError, 'options must be an object, got number 5'],
    ['forward', f({ causl: true }), TypeError, "unknown option 'causl' (known options: batch, seqQ, seqK, mask"],
    ['forward', f({ batch: 0 }), RangeError, 'options.batch must be a positive integer, got 0'],
    ['forward', f({ seqQ: 1.5 }), RangeError, 'options.seqQ must be a positive integer, got 1.5'],
    ['forward', f({ seqK: 'one' }), TypeError, 'options.seqK must be a number, got string "one"'],
    ['forward', f({ train: 1 }), TypeError, 'options.train must be a boolean, got number 1'],
    ['forward', f({ causal: 'top-left' }), TypeError, "options.causal must be false, true, 'lower-right' or 'upper-left', got string \"top-left\""],
    // forward: tensors
    ['forward', f({}, null, null, [1, 2]), TypeError, 'query must be a Float32Array, got Array(2)'],
    ['forward', f({}, null, null, new Float32Array(9)), RangeError, 'query has length 9, not a positive multiple of batch 1 × 8 features'],
    ['forward', f({ seqQ: 2 }), RangeError, 'query has length 8, expected 16 (batch 1 × seqQ 2 × 8 features)'],
    ['forward', f({}, [1]), TypeError, 'key must be a Float32Array, got Array(1)'],
    ['forward', f({ seqK: 2 }, x), RangeError, 'key has length 8, expected 16 (batch 1 × seqK 2 × 8 features)'],
    ['forward', f({}, x, new Float32Array(3)), RangeError, 'value has length 3, expected 8 (batch 1 × seqK 1 × 8 features)'],
    ['forward', f({ seqK: 3 }), RangeError, 'options.seqK (3) must equal seqQ (1) when key is the query'],
    ['forward', f({}, null, null, x, cross), TypeError, "key is required, since this layer's kdim (4) differs from embedDim (8)"],
    ['forward', f({}, new Float32Array(4), null, x, cross), TypeError, "value is required, since this layer's vdim (6) differs from the key's features (4)"],
    ['forward', f({ mask: [1] }), TypeError, 'options.mask must be a Float32Array (added to the scores; -Infinity masks), got Array(1)'],
    ['forward', f({ mask: new Uint8Array(1) }), TypeError, 'options.mask is a Uint8Array, but a boolean mask means opposite things in PyTorch'],
    ['forward', f({ mask: new Float32Array(3) }), RangeError, 'options.mask has length 3, expected the length of a mask that broadcasts to [batch, heads, seqQ, seqK]'],
    ['forward', f({ blockMask: new Uint8Array(4) }, null, null, x2), RangeError,
      'options.blockMask has length 4, which fits [1, heads 2, 1, seqK 2] and [1, 1, seqQ 2, seqK 2] alike: say which with options.maskShape'],
    ['forward', f({ attendMask: new Uint8Array(1), maskShape: [2, 1] }), RangeError, 'options.attendMask has length 1, but options.maskShape [2, 1] holds 2'],
    ['forward', f({ keyPaddingMask: new Int8Array(1) }), TypeError, "options.keyPaddingMask must be a Uint8Array [batch, seqK] (1 = padding, ignored: PyTorch's key_padding_mask), got Int8Array(1)"],
    ['forward', f({ keyPaddingMask: new Uint8Array(2) }), RangeError, 'options.keyPaddingMask has length 2, expected 1 (batch 1 × seqK 1)'],
    ['forward', f({ keyPaddingMask: new Uint8Array(1), attentionMask: new Uint8Array(1) }), TypeError, 'options.keyPaddingMask and options.attentionMask both say'],
    ['forward', f({ out: new Float32Array(7) }), RangeError, 'options.out has length 7, expected 8 (batch 1 × seqQ 1 × embedDim 8)'],
    ['forward', f({ out: new Float64Array(8) }), TypeError, 'options.out must be a Float32Array, got Float64Array(8)'],
    ['forward', f({ weightsOut: new Float32Array(1) }), RangeError, 'options.weightsOut has length 1, expected 2 (batch 1 × numHeads 2 × seqQ 1 × seqK 1), per head (averageAttnWeights: true for their mean)'],
    // forward: rotary positions
    ['forward', f({ positions: Int32Array.of(0) }), TypeError, 'options.positions are rotary positions, but this layer has no config.rotary'],
    ['forward', f({ positions: [0] }, null, null, x, rotary), TypeError, 'options.positions must be an Int32Array ([seqQ] or [batch, seqQ]), got Array(1)'],
    ['forward', f({ positions: Int32Array.of(0, 1) }, null, null, x, rotary), RangeError, 'options.positions has length 2, expected 1 ([seqQ 1])'],
    ['forward', f({ positions: Int32Array.of(0) }, x2, null, x, rotary), RangeError, 'options.positions are used for queries and keys alike, so seqK (2) must equal seqQ (1)'],
    ['forward', f({ positions: Int32Array.of(4) }, null, null, x, rotary), RangeError, 'options.positions[0] is 4, outside the rotary tables [0, 4)'],
    // forward: options.cache
    ['forward', f({ cache: {} }), TypeError, 'options.cache must be a KVCache from createCache(), got Object'],
    ['forward', f({ cache: crossCache }), Error, "options.cache belongs to another MultiHeadAttention layer (it holds that layer's keys and values); make one with this layer's createCache({ maxSeq })"],
    ['forward', f({ cache, batch: 2 }, null, null, x2), RangeError, 'options.batch (2) differs from options.cache.batch (1)'],
    ['forward', f({ cache: pairs }), RangeError, "query has length 8, not a positive multiple of batch 2 (options.cache's batch) × 8 features"],
    ['forward', f({ cache: pairs, seqQ: 2 }), RangeError, "query has length 8, expected 32 (batch 2 (options.cache's batch) × seqQ 2 × 8 features)"],
    ['forward', f({ cache }, x), TypeError, 'with options.cache, key and value must be null (they are projected from the query)'],
    ['forward', f({ cache, seqK: 1 }), TypeError, 'options.seqK is not used with options.cache (keys come from the cache)'],
    ['forward', f({ cache, causal: false }), RangeError, 'options.causal cannot be false with options.cache: cached decoding is always causal'],
    ['forward', f({ cache: crossCache }, null, null, x, cross), RangeError, 'options.cache needs kdim == vdim == embedDim (this layer has kdim 4, vdim 6)'],
    ['forward', f({ cache }, null, null, x2), RangeError, 'options.cache has room for 1 more positions (maxSeq 1, length 0), got seqQ 2'],
    ['forward', f({ cache: ring }, null, null, new Float32Array(3 * e), local), RangeError,
      'appending 3 positions at length 0 to options.cache (a ring) (window 2, maxSeq 2) needs 3 slots, more than maxSeq: 3 for them and 0 for the positions before them that their window reaches (the last min(length, window − 1) = 0); append at most 2 now (1 once the ring holds 1 position), or make maxSeq ≥ 4 (window − 1 + 3) to append 3 at any length'],
    ['forward', f({ cache, causal: 'upper-left' }), RangeError, "options.causal 'upper-left' does not apply to options.cache"],
    ['forward', f({ cache, train: true }), TypeError, 'options.train does not work with options.cache (a cache has no gradients)'],
    ['forward', f({}, null, null, x, unset), Error, 'call setWeights() first'],
    // setWeights
    ['setWeights', () => mha.setWeights(null), TypeError, 'weights must be an object with wq, wk, wv and wo, got null'],
    ['setWeights', () => mha.setWeights({ ...good, wz: good.wq }), TypeError, "unknown weights key 'wz' (known keys: wq, bq, wk, bk"],
    ['setWeights', () => mha.setWeights({ ...good, wk: undefined }), TypeError, 'weights.wk is required (a Float32Array [numKvHeads·headDim 8 × kdim 8])'],
    ['setWeights', () => mha.setWeights({ ...good, wq: new Float32Array(63) }), RangeError, 'weights.wq has length 63, expected 64 (embedDim 8 × embedDim 8)'],
    ['setWeights', () => mha.setWeights({ ...good, wv: Array.from(good.wv) }), TypeError, 'weights.wv must be a Float32Array, got Array(64)'],
    ['setWeights', () => mha.setWeights({ ...good, bo: undefined }), TypeError, 'weights.bo is required (a Float32Array [8]), since the layer has bias: true'],
    ['setWeights', () => mha.setWeights({ ...good, bk: new Float32Array(3) }), RangeError, 'weights.bk has length 3, expected 8 (numKvHeads·headDim 8)'],
    ['setWeights', () => unbiased.setWeights(good), TypeError, 'weights.bq was given, but the layer was created with bias: false'],
    ['setWeights', () => withSinks.setWeights(good), TypeError, 'weights.sinks is required (a Float32Array [numHeads 2]), since the layer has sinks: true'],
    ['setWeights', () => withSinks.setWeights({ ...good, sinks: new Float32Array(3) }), RangeError, 'weights.sinks has length 3, expected 2 (numHeads 2)'],
    ['setWeights', () => withSinks.setWeights({ ...good, sinks: Float32Array.of(0, NaN) }), RangeError, 'weights.sinks[1] is NaN; sinks must be finite or -Infinity'],
    ['setWeights', () => mha.setWeights({ ...good, sinks: new Float32Array(2) }), TypeError, 'weights.sinks was given, but the layer was created without sinks: true'],
    // getWeights
    ['getWeights', () => unset.getWeights(), Error, 'call setWeights() first'],
    // backward
    ['backward', () => mha.backward(new Float32Array(e)), Error, 'call forward(..., { train: true }) first'],
    ['backward', () => stale.backward(new Float32Array(e)), Error, 'the weights changed (sgdStep()) after the forward(..., { train: true })'],
    ['backward', () => trained.backward(new Float32Array(7)), RangeError, 'dOut has length 7, expected 8 (batch 1 × seqQ 1 × embedDim 8)'],
    ['backward', () => trained.backward([0]), TypeError, 'dOut must be a Float32Array, got Array(1)'],
    // sgdStep
    ['sgdStep', () => mha.sgdStep(grads, null), TypeError, 'options must be an object with lr, got null'],
    ['sgdStep', () => mha.sgdStep(grads, { lr: 0.1, momentum: 0.9 }), TypeError, "unknown option 'momentum' (known options: lr)"],
    ['sgdStep', () => mha.sgdStep(grads, { lr: -1 }), RangeError, 'options.lr must be a positive number, got number -1'],
    ['sgdStep', () => mha.sgdStep(grads), RangeError, 'options.lr must be a positive number, got undefined'],
    ['sgdStep', () => mha.sgdStep(undefined, { lr: 0.1 }), TypeError, 'grads must be an object (the weights of a backward() result), got undefined'],
    ['sgdStep', () => mha.sgdStep({ ...grads, wq: undefined }, { lr: 0.1 }), TypeError, 'grads.wq is required (a Float32Array of 64)'],
    ['sgdStep', () => mha.sgdStep({ ...grads, dQuery: grads.wq }, { lr: 0.1 }), TypeError, "unknown grads key 'dQuery' (known keys: wq, wk, wv, wo, bq, bk, bv, bo)"],
    ['sgdStep', () => mha.sgdStep({ ...grads, bv: new Float32Array(2) }, { lr: 0.1 }), RangeError, 'grads.bv has length 2, expected 8 (8 gradients)'],
    ['sgdStep', () => mha.sgdStep({ ...grads, wo: new Float64Array(64) }, { lr: 0.1 }), TypeError, 'grads.wo must be a Float32Array, got Float64Array(64)'],
    // adamStep
    ['adamStep', () => mha.adamStep(grads, null), TypeError, 'options must be an object, got null'],
    ['adamStep', () => mha.adamStep(grads, { learningRate: 0.1 }), TypeError, "unknown option 'learningRate' (known options: lr, beta1, beta2, eps)"],
    ['adamStep', () => mha.adamStep(grads, { lr: Infinity }), RangeError, 'options.lr must be a positive number, got number Infinity'],
    ['adamStep', () => mha.adamStep(grads, { beta1: 1 }), RangeError, 'options.beta1 must be in [0, 1), got number 1'],
    ['adamStep', () => mha.adamStep(grads, { beta2: '0.9' }), RangeError, 'options.beta2 must be in [0, 1), got string "0.9"'],
    ['adamStep', () => mha.adamStep(grads, { eps: 0 }), RangeError, 'options.eps must be a positive number, got number 0'],
    ['adamStep', () => tired.adamStep(grads), RangeError, "2147483647 steps taken, the most Adam's step counter holds"],
    ['adamStep', () => mha.adamStep({ ...grads, bq: undefined }), TypeError, 'grads.bq is required (a Float32Array of 8)'],
    // setOptimizerState
    ['setOptimizerState', () => unset.setOptimizerState(state), Error, 'call setWeights() first'],
    ['setOptimizerState', () => mha.setOptimizerState(null), TypeError, 'state must be an object { step, m, v } from getOptimizerState(), got null'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, lr: 1 }), TypeError, "unknown state key 'lr' (known keys: step, m, v)"],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, step: -1 }), RangeError, 'state.step must be an integer from 0 to 2147483647, got number -1'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, m: undefined }), TypeError, 'state.m must be an object in setWeights layout, from getOptimizerState(), got undefined'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, m: { ...state.m, bo: undefined } }), TypeError, 'state.m.bo is required (a Float32Array of 8)'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, v: { ...state.v, wk: new Float32Array(5) } }), RangeError, 'state.v.wk has length 5, expected 64 (64 values)'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, m: { ...state.m, wo: new Float32Array(64).fill(NaN) } }), RangeError, 'state.m.wo[0] must be finite, got NaN'],
    ['setOptimizerState', () => mha.setOptimizerState({ ...state, v: { ...state.v, bq: new Float32Array(8).fill(-1) } }), RangeError,
      'state.v.bq[0] must be finite and >= 0 (a second moment), got -1'],
    // createCache
    ['createCache', () => mha.createCache(), TypeError, 'options must be an object with maxSeq, got undefined'],
    ['createCache', () => mha.createCache({ maxSeq: 2, kvHeads: 2 }), TypeError, "unknown option 'kvHeads' (known options: batch, maxSeq, dtype, window)"],
    ['createCache', () => mha.createCache({ maxSeq: 2, batch: -1 }), RangeError, 'options.batch must be a positive integer, got -1'],
    ['createCache', () => mha.createCache({ maxSeq: 0.5 }), RangeError, 'options.maxSeq must be a positive integer, got 0.5'],
    ['createCache', () => mha.createCache({}), TypeError, 'options.maxSeq is required (a positive integer), or a window'],
    ['createCache', () => mha.createCache({ maxSeq: 4, window: 0 }), RangeError, 'options.window must be a positive integer, got 0'],
    ['createCache', () => mha.createCache({ maxSeq: 4, window: 8 }), RangeError, 'options.maxSeq (4) must be at least options.window (8): the ring holds the window'],
    ['createCache', () => mha.createCache({ maxSeq: 4, dtype: 'int2' }), TypeError, "options.dtype must be 'float32', 'float16', 'bfloat16', 'int8' or 'int4', got string \"int2\""],
    ['createCache', () => mha.createCache({ maxSeq: 2 ** 28 }), RangeError, 'this cache needs 16384 MiB of wasm memory, more than the'],
  ];
  return { rows, mha };
}

test('every argument error of the layer names the method and the argument, before the heap is touched', () => {
  const { rows, mha } = cases();
  const before = mha.forward(x2);
  const methods = new Set();
  for (const [method, call, type, start] of rows) {
    const heap = lib.memoryUsage().heapInUse;
    const expected = `MultiHeadAttention.${method}: ${start}`;
    assert.throws(call, (error) => {
      assert.equal(error.constructor, type, `${expected}: got ${error.constructor.name}: ${error.message}`);
      assert.ok(error.message.startsWith(expected), `expected a message starting with\n  ${expected}\ngot\n  ${error.message}`);
      return true;
    }, expected);
    assert.equal(lib.memoryUsage().heapInUse, heap, `${expected}: the heap changed`);
    methods.add(method);
  }
  assert.deepEqual([...methods].sort(),
    ['adamStep', 'backward', 'createCache', 'forward', 'getWeights', 'setOptimizerState', 'setWeights', 'sgdStep']);

  // The layer that got most of the bad calls still computes the same, trains and caches.
  assert.deepEqual(mha.forward(x2), before);
  mha.forward(x2, null, null, { train: true });
  const { weights: grads } = mha.backward(new Float32Array(2 * e));
  mha.sgdStep(grads, { lr: 0.01 });
  mha.adamStep(grads, { lr: 0.01 });
  assert.equal(mha.getOptimizerState().step, 1);
  const cache = mha.createCache({ maxSeq: 2 });
  assert.equal(mha.forward(x2, null, null, { cache }).length, 2 * e);
  assert.equal(cache.length, 2);
  disposeAll();
});

test('after dispose, every method names itself and says the layer was disposed', () => {
  const mha = layer();
  const weights = mha.getWeights();
  mha.dispose();
  const calls = {
    setWeights: () => mha.setWeights(weights), getWeights: () => mha.getWeights(), forward: () => mha.forward(x),
    backward: () => mha.backward(new Float32Array(e)), sgdStep: () => mha.sgdStep(weights, { lr: 0.1 }),
    adamStep: () => mha.adamStep(weights), getOptimizerState: () => mha.getOptimizerState(),
    setOptimizerState: () => mha.setOptimizerState({ step: 0, m: weights, v: weights }), createCache: () => mha.createCache({ maxSeq: 2 }),
  };
  for (const [method, call] of Object.entries(calls)) {
    const expected = `MultiHeadAttention.${method}: this layer was disposed`;
    assert.throws(call, (error) => error.constructor === Error && error.message === expected, expected);
  }
  disposeAll();
});
