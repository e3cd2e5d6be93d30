// Beam search: cache.reorder(indices), Hugging Face's reorder_cache(beam_idx). Row b of the result
// is row indices[b] (repeats allowed), for every dtype a cache stores (the library's own list, so
// a new dtype is covered), linear caches and rings that have wrapped, standalone caches and a
// layer's: checked against a cache built with its rows already in that order — the same stored
// bytes, so attention over the two is the same bit for bit, before and after more positions (a
// layer's: against a fresh cache fed what each beam then holds).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { DTYPES } from '../../dist/kvcache.mjs';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

let lib, layered;  // the default build; the layers build for the layer's tests
before(async () => { [lib, layered] = await Promise.all([loadAttention(), loadAttention({ layers: true })]); });

// Index patterns an in-place copy in order would get wrong (a row read after it was overwritten),
// cycles, and rows that several beams continue.
const PATTERNS = [[0, 1, 2, 3], [3, 2, 1, 0], [1, 2, 3, 0], [0, 0, 0, 0], [1, 2, 2, 0], [3, 3, 1, 1], [2, 0, 1, 1]];

// Rows b of a [batch, rest] tensor taken from rows indices[b].
function gather(x, batch, indices) {
  const rest = x.length / batch, out = new Float32Array(x.length);
  indices.forEach((from, b) => out.set(x.subarray(from * rest, (from + 1) * rest), b * rest));
  return out;
}

test('a standalone cache: every dtype, linear and a ring, each index pattern', () => {
  const [batch, kvHeads, heads, headDim, length, more] = [4, 2, 4, 8, 23, 3];
  const random = rng(61);
  const k = randomTensor(batch * kvHeads * length * headDim, random), v = randomTensor(k.length, random);
  const kNext = randomTensor(batch * kvHeads * more * headDim, random), vNext = randomTensor(kNext.length, random);
  const q = randomTensor(batch * heads * more * headDim, random);
  for (const dtype of DTYPES) {
    for (const window of [0, 5]) {
      const sizes = { batch, kvHeads, headDim, dtype, maxSeq: window ? window - 1 + 4 : length + more, ...(window ? { window } : {}) };
      const seen = window ? { window: [window - 1, 0] } : {};
      for (const indices of PATTERNS) {
        const what = `${dtype}${window ? ` ring ${window}` : ''} indices ${indices}`;
        const cache = lib.createKVCache(sizes), want = lib.createKVCache(sizes);
        for (let at = 0; at < length; at += 4) {  // chunks, so a ring wraps several times
          const n = Math.min(4, length - at);
          const slice = (x) => {
            const out = new Float32Array(batch * kvHeads * n * headDim);
            for (let r = 0; r < batch * kvHeads; r++) out.set(x.subarray((r * length + at) * headDim, (r * length + at + n) * headDim), r * n * headDim);
            return out;
          };
          cache.append(slice(k), slice(v));
          want.append(gather(slice(k), batch, indices), gather(slice(v), batch, indices));
        }
        cache.reorder(indices);
        assert.equal(cache.length, length);
        const step = (c, seqQ, extra) => lib.attention(q.subarray(0, batch * heads * seqQ * headDim), c, null, { heads, seqQ, ...extra });
        assert.deepEqual(step(cache, 1, seen), step(want, 1, seen), what);
        cache.append(kNext, vNext);  // decoding goes on in the new order
        want.append(kNext, vNext);
        assert.deepEqual(step(cache, more, { ...seen, causal: true }), step(want, more, { ...seen, causal: true }), `${what}, then appended`);
        cache.dispose();
        want.dispose();
      }
    }
  }
});

test("a layer's cache: beams decoding with a MultiHeadAttention layer, as Hugging Face's generate() does", () => {
  const [batch, e, steps] = [3, 16, 4];
  const random = rng(62);
  const mha = new layered.MultiHeadAttention({ embedDim: e, numHeads: 4, numKvHeads: 2, rotary: {} });
  const w = (n) => randomTensor(n, random, 0.3);
  mha.setWeights({ wq: w(e * e), wk: w(8 * e), wv: w(8 * e), wo: w(e * e), bq: w(e), bk: w(8), bv: w(8), bo: w(e) });
  for (const dtype of DTYPES) {
    // What each beam was fed, chunk by chunk ([batch, n, e] each), in the beams' current order.
    const chunks = [randomTensor(batch * 5 * e, random)];
    const cache = mha.createCache({ batch, maxSeq: 5 + steps, dtype });
    mha.forward(chunks[0], null, null, { cache });
    for (let s = 0; s < steps; s++) {
      const beams = Array.from({ length: batch }, () => Math.floor(random() * batch));  // the beams that go on
      cache.reorder(beams);
      chunks.forEach((chunk, n) => { chunks[n] = gather(chunk, batch, beams); });
      const token = randomTensor(batch * e, random);
      const got = mha.forward(token, null, null, { cache });
      // The same step after feeding a fresh cache what each beam now holds, chunk by chunk as the
      // cache was fed: the same keys and values, so the same output bit for bit.
      const fresh = mha.createCache({ batch, maxSeq: 5 + steps, dtype });
      for (const chunk of chunks) mha.forward(chunk, null, null, { cache: fresh });
      assert.deepEqual(got, mha.forward(token, null, null, { cache: fresh }), `${dtype} step ${s} beams ${beams}`);
      fresh.dispose();
      chunks.push(token);
    }
    cache.dispose();
  }
  mha.dispose();
});

test('reorder refuses bad indices before touching the cache, and names them', () => {
  const cache = lib.createKVCache({ batch: 3, kvHeads: 1, headDim: 4, maxSeq: 4 });
  const k = randomTensor(3 * 2 * 4, rng(63));
  cache.append(k, k);
  const before = lib.attention(new Float32Array(3 * 4).fill(1), cache, null, { heads: 1, seqQ: 1 });
  const cases = [
    [[0, 1], RangeError, "KVCache.reorder: indices has length 2, expected the cache's batch 3 (row b of the result is row indices[b])"],
    [[0, 1, 3], RangeError, 'KVCache.reorder: indices[2] must be an integer from 0 to 2 (a batch entry), got number 3'],
    [[0, -1, 1], RangeError, 'KVCache.reorder: indices[1] must be an integer from 0 to 2 (a batch entry), got number -1'],
    [[0, 1.5, 1], RangeError, 'KVCache.reorder: indices[1] must be an integer from 0 to 2 (a batch entry), got number 1.5'],
    [new Float32Array(3), TypeError, 'KVCache.reorder: indices must be an Int32Array or an array of integers, one per batch entry, got Float32Array(3)'],
    [undefined, TypeError, 'KVCache.reorder: indices must be an Int32Array or an array of integers, one per batch entry, got undefined'],
  ];
  for (const [indices, type, message] of cases) {
    assert.throws(() => cache.reorder(indices), (error) => error.constructor === type && error.message === message, message);
  }
  assert.deepEqual(lib.attention(new Float32Array(3 * 4).fill(1), cache, null, { heads: 1, seqQ: 1 }), before);
  cache.reorder(Int32Array.of(2, 2, 0));
  cache.dispose();
  assert.throws(() => cache.reorder([0, 1, 2]), /^Error: KVCache\.reorder: this cache was disposed$/);
});
