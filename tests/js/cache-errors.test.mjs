// The messages of wrong cache use: a cache of another library instance, a cache given to calls
// that take none, a standalone cache given to a layer, a layer's cache given as a tensor; sizes
// past a 32-bit int; a ring's room; a layer's cache made before its weights; a float16 value
// beyond float16's range. Each says what is actually wrong.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAttention, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib, other;
before(async () => {
  lib = await loadAttention({ layers: true });
  other = await createAttention({ threads: 1, layers: true });
});
after(() => other.dispose());

const throwsExactly = (fn, type, message) => assert.throws(fn, (e) => {
  assert.equal(e.constructor, type, `${e.name}: ${e.message}`);
  assert.equal(e.message, message);
  return true;
});

function smallLayer(on, config = {}) {
  const mha = new on.MultiHeadAttention({ embedDim: 8, numHeads: 2, bias: false, ...config });
  const w = () => randomTensor(64, rng(3), 0.3);
  mha.setWeights({ wq: w(), wk: w(), wv: w(), wo: w() });
  return mha;
}

test('a cache of another instance, given to attention() or a layer, says so', () => {
  const foreign = other.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 4 });
  foreign.append(new Float32Array(4), new Float32Array(4));
  const q = new Float32Array(4);
  const another = 'a KVCache of another attention-wasm instance (another loadAttention() or createAttention() call); ' +
    'a cache lives in the wasm memory of the instance that made it';
  for (const options of [{ heads: 1, seqQ: 1 }, { heads: 1, seqQ: 1, headDim: 4 }]) {
    throwsExactly(() => lib.attention(q, foreign, null, options), TypeError,
      `attention: key is ${another}; use it with that instance's attention(), or make the cache with this instance's createKVCache()`);
  }
  assert.equal(other.attention(q, foreign, null, { heads: 1, seqQ: 1 }).length, 4);  // its own instance takes it
  const layer = smallLayer(lib);
  const foreignLayerCache = smallLayer(other).createCache({ maxSeq: 4 });
  throwsExactly(() => layer.forward(new Float32Array(8), null, null, { cache: foreignLayerCache }), TypeError,
    `MultiHeadAttention.forward: options.cache is ${another}; it works only with the layer that made it: make one with this layer's createCache({ maxSeq })`);
  foreign.dispose();
  foreignLayerCache.dispose();
  layer.dispose();
});

test('attentionWeights and attentionBackward do not take a cache, and say so', () => {
  const cache = lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 4 });
  const q = new Float32Array(4);
  const none = (fn) => `${fn}: key is a KVCache; ${fn} does not take a cache (only attention(query, cache, null, options) does): `;
  throwsExactly(() => lib.attentionWeights(q, cache, { heads: 1, seqQ: 1 }), TypeError, `${none('attentionWeights')}pass the keys ` +
    'as a Float32Array, or use attention(query, cache, null, { heads, seqQ, weightsOut }) for the weights over a cache');
  for (const [key, value, name] of [[cache, null, 'key'], [q, cache, 'value']]) {
    throwsExactly(() => lib.attentionBackward(q, key, value, q, { heads: 1, seqQ: 1, headDim: 4 }), TypeError,
      `${none('attentionBackward').replace('key', name)}the backward pass needs the keys and values as Float32Arrays ` +
      '(a cache holds them for decoding, which has no gradients)');
  }
  throwsExactly(() => lib.attention(q, q, cache, { heads: 1, seqQ: 1, headDim: 4 }), TypeError,
    'attention: value is a KVCache; a cache goes in the key argument, with value null: attention(query, cache, null, options)');
  cache.dispose();
});

test("a standalone cache given to a layer says how to make the layer's own", () => {
  const layer = smallLayer(lib);
  const standalone = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 4 });
  throwsExactly(() => layer.forward(new Float32Array(8), null, null, { cache: standalone }), Error,
    'MultiHeadAttention.forward: options.cache was made by lib.createKVCache(), not by this layer: a layer stores its own projected ' +
    "(and rotated) keys and values in a cache it makes; make one with this layer's createCache({ maxSeq })");
  standalone.dispose();
  layer.dispose();
});

test('a cache given to a layer as its query, key or value says it goes in options.cache', () => {
  const layer = smallLayer(lib);
  const own = layer.createCache({ maxSeq: 4 });
  const x = new Float32Array(8);
  const where = 'a layer takes its cache in options.cache, with key and value null: forward(query, null, null, { cache })';
  for (const [args, name] of [[[own, null, null], 'query'], [[x, own, null], 'key'], [[x, x, own], 'value']]) {
    throwsExactly(() => layer.forward(...args, {}), TypeError, `MultiHeadAttention.forward: ${name} is a KVCache; ${where}`);
  }
  assert.equal(own.length, 0);
  assert.equal(layer.forward(x, null, null, { cache: own }).length, 8);  // where it goes
  own.dispose();
  layer.dispose();
});

test('sizes past a 32-bit int name the limit', () => {
  throwsExactly(() => lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 2 ** 31 }), RangeError,
    'createKVCache: options.maxSeq must be at most 2147483647 (2^31 − 1: sizes are 32-bit integers), got 2147483648');
  throwsExactly(() => lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 0 }), RangeError, 'createKVCache: options.maxSeq must be a positive integer, got 0');
});

test("a ring's room: the arithmetic and the advice are right", () => {
  // window 16, maxSeq 16, length 10: 8 more need 10 + 8 = 18 slots; 6 fit now, 1 once 15 are held.
  const ring = lib.createKVCache({ kvHeads: 1, headDim: 2, window: 16 });
  ring.append(new Float32Array(10 * 2), new Float32Array(10 * 2));
  const eight = new Float32Array(8 * 2);
  throwsExactly(() => ring.append(eight, eight), RangeError,
    'KVCache.append: appending 8 positions at length 10 to this ring (window 16, maxSeq 16) needs 18 slots, more than maxSeq: ' +
    '8 for them and 10 for the positions before them that their window reaches (the last min(length, window − 1) = 10); ' +
    'append at most 6 now (1 once the ring holds 15 positions), or make maxSeq ≥ 23 (window − 1 + 8) to append 8 at any length');
  assert.equal(ring.length, 10);
  ring.append(new Float32Array(6 * 2), new Float32Array(6 * 2));  // the advice holds: 6 fit
  assert.equal(ring.length, 16);
  const two = new Float32Array(2 * 2);
  throwsExactly(() => ring.append(two, two), RangeError,
    'KVCache.append: appending 2 positions at length 16 to this ring (window 16, maxSeq 16) needs 17 slots, more than maxSeq: ' +
    '2 for them and 15 for the positions before them that their window reaches (the last min(length, window − 1) = 15); ' +
    'append at most 1 now, or make maxSeq ≥ 17 (window − 1 + 2) to append 2 at any length');
  ring.append(two.subarray(0, 2), two.subarray(0, 2));
  assert.equal(ring.length, 17);
  ring.dispose();
});

test("a layer's cache may be made before its weights: it depends only on the config", () => {
  const mha = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, numKvHeads: 1, bias: false });
  const early = mha.createCache({ maxSeq: 4, dtype: 'float16' });
  assert.deepEqual([early.kvHeads, early.headDim, early.dtype, early.length], [1, 4, 'float16', 0]);
  assert.throws(() => mha.forward(new Float32Array(8), null, null, { cache: early }), /^Error: MultiHeadAttention\.forward: call setWeights\(\) first$/);
  const w = (seed, n) => randomTensor(n, rng(seed), 0.3);
  mha.setWeights({ wq: w(1, 64), wk: w(2, 32), wv: w(3, 32), wo: w(4, 64) });
  const late = mha.createCache({ maxSeq: 4, dtype: 'float16' });
  const x = w(5, 3 * 8);
  assert.deepEqual(mha.forward(x, null, null, { cache: early }), mha.forward(x, null, null, { cache: late }));
  early.dispose();
  late.dispose();
  mha.dispose();
});

test('a float16 cache refuses a finite value beyond its range, names it, and appends nothing', () => {
  for (const window of [0, 3]) {
    const cache = lib.createKVCache({ batch: 2, kvHeads: 2, headDim: 4, valueDim: 3, maxSeq: 3, dtype: 'float16', window: window || null });
    const key = randomTensor(2 * 2 * 2 * 4, rng(1)), value = randomTensor(2 * 2 * 2 * 3, rng(2));
    cache.append(key, value);
    const q = randomTensor(2 * 2 * 4, rng(3));
    const options = { heads: 2, seqQ: 1, window: window ? [window - 1, 0] : null };
    const before = lib.attention(q, cache, null, options);
    const k = randomTensor(2 * 2 * 4, rng(4)), v = randomTensor(2 * 2 * 3, rng(5));
    v[(1 * 2 + 1) * 3 + 2] = -70000;  // batch 1, kv head 1, element 2 of the one new position (2)
    throwsExactly(() => cache.append(k, v), RangeError,
      'KVCache.append: value[batch 1, kvHead 1, position 2, element 2] = -70000 is beyond float16\'s range (±65504; it would be ' +
      "stored as −Infinity and attention would return NaN), so nothing was appended; store this cache with dtype 'bfloat16' (float32's range in 2 bytes) or 'float32'");
    k[5] = 65520;  // the first value that rounds to infinity
    assert.throws(() => cache.append(k, v), /^RangeError: KVCache\.append: key\[batch 0, kvHead 1, position 2, element 1\] = 65520 is beyond float16's range/);
    assert.equal(cache.length, 2);
    assert.deepEqual(lib.attention(q, cache, null, options), before);  // nothing written (a ring: nothing overwritten)
    k[5] = 65519;  // rounds to 65504
    v[(1 * 2 + 1) * 3 + 2] = -Infinity;  // not an overflow: stored as it is
    cache.append(k, v);
    assert.equal(cache.length, 3);
    cache.dispose();
  }
  // A layer's projections into a float16 cache: the same check, naming the projected row.
  const mha = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, bias: false });
  const w = () => randomTensor(64, rng(6), 0.3);
  mha.setWeights({ wq: w(), wk: w(), wv: w(), wo: w() });
  const cache = mha.createCache({ maxSeq: 4, dtype: 'float16' });
  mha.forward(randomTensor(8, rng(7)), null, null, { cache });
  assert.throws(() => mha.forward(new Float32Array(8).fill(1e6), null, null, { cache }),
    /^RangeError: MultiHeadAttention\.forward: the projected key\[batch 0, kvHead \d, position 1, element \d\] = -?[\d.e+]+ is beyond float16's range .* nothing was appended; store this cache with dtype/);
  assert.equal(cache.length, 1);
  cache.dispose();
  mha.dispose();
});
