// The standalone KV cache: createKVCache, append, attention(query, cache, null, options) against
// the JS reference on the unquantised keys and values (float32 element-wise; float16, bfloat16,
// int8 and int4 by normalised mean squared error), bfloat16's and int4's rounding, int4's refusal
// of ±Infinity and NaN, chunked appends, truncate, reset, rings, every error path, bytes, memory
// returned on dispose and by the FinalizationRegistry.
import assert from 'node:assert/strict';
import { test, before } from 'node:test';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { indexOf, referenceAttention } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

let lib, layered;  // the default build; the layers build for the layer's tests
before(async () => { [lib, layered] = await Promise.all([loadAttention(), loadAttention({ layers: true })]); });

// Normal data (Box–Muller), as a real model's projections look.
function normalTensor(n, random) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return a;
}

const DTYPES = ['float32', 'float16', 'bfloat16', 'int8', 'int4'];
// The NMSE each dtype is held to on normal data (docs/api.md's table gives what it measures).
const NMSE_BOUND = { float32: 1e-10, float16: 1e-6, bfloat16: 2e-5, int8: 1e-4, int4: 3e-2 };

const nmse = (got, want) => {
  let e = 0, norm = 0;
  for (let i = 0; i < got.length; i++) { e += (got[i] - want[i]) ** 2; norm += want[i] ** 2; }
  return e / norm;
};

// Positions [from, from + n) of a [batch, kvHeads, seq, dim] tensor, as their own tensor.
function slicePositions(x, batch, heads, seq, dim, from, n) {
  const out = new Float32Array(batch * heads * n * dim);
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      out.set(x.subarray(indexOf('bhsd', heads, seq, dim, b, h, from, 0), indexOf('bhsd', heads, seq, dim, b, h, from + n, 0)),
        indexOf('bhsd', heads, n, dim, b, h, 0, 0));
    }
  }
  return out;
}

const shape = { batch: 2, heads: 8, kvHeads: 2, seq: 40, headDim: 64, valueDim: 48 };
function data(seed = 1, s = shape) {
  const random = rng(seed);
  return {
    query: normalTensor(s.batch * s.heads * s.seq * s.headDim, random),
    key: normalTensor(s.batch * s.kvHeads * s.seq * s.headDim, random),
    value: normalTensor(s.batch * s.kvHeads * s.seq * s.valueDim, random),
  };
}

test('each dtype against the reference on the unquantised keys and values', () => {
  const { batch, heads, kvHeads, seq, headDim, valueDim } = shape;
  const { query, key, value } = data();
  for (const dtype of DTYPES) {
    const cache = lib.createKVCache({ batch, kvHeads, headDim, valueDim, maxSeq: 64, dtype });
    cache.append(key, value);
    assert.equal(cache.length, seq);
    for (const seqQ of [1, 9]) {
      const q = new Float32Array(batch * heads * seqQ * headDim);
      for (let b = 0; b < batch; b++) for (let h = 0; h < heads; h++) {
        q.set(query.subarray(indexOf('bhsd', heads, seq, headDim, b, h, seq - seqQ, 0), indexOf('bhsd', heads, seq, headDim, b, h, seq, 0)),
          indexOf('bhsd', heads, seqQ, headDim, b, h, 0, 0));
      }
      const options = { heads, seqQ, causal: true };
      const got = lib.attention(q, cache, null, options);
      const want = referenceAttention(q, key, value, { ...options, batch, kvHeads, seqK: seq, headDim, valueDim }).out;
      const error = nmse(got, want);
      if (dtype === 'float32') assertClose(got, want, 'float32 cache');
      assert.ok(error <= NMSE_BOUND[dtype], `${dtype} seqQ ${seqQ}: NMSE ${error}`);
    }
    cache.dispose();
  }
});

// The few-rows path: a GQA decode step (4 query heads per kv head), speculative steps of 2, 5 and
// 8 positions (8, 20 and 32 rows per kv head) and an MQA step, over a cache longer than the
// kernel's key chunks (so their merge), with weightsOut and lseOut; 9 positions (36 rows) take the
// blocked path. float32 element-wise against the reference, the others by NMSE.
test('decode and few-position steps over a long cache, GQA and MQA, each dtype, with weights and lse', () => {
  const seq = 1100, headDim = 32, valueDim = 24;
  for (const [heads, kvHeads] of [[8, 2], [8, 1]]) {
    const s = { batch: 1, heads, kvHeads, seq, headDim, valueDim };
    const { query, key, value } = data(3, s);
    for (const dtype of DTYPES) {
      const cache = lib.createKVCache({ kvHeads, headDim, valueDim, maxSeq: seq, dtype });
      cache.append(key, value);
      for (const seqQ of kvHeads === 1 ? [1] : [1, 2, 5, 8, 9]) {
        const q = slicePositions(query, 1, heads, seq, headDim, seq - seqQ, seqQ);
        const options = { heads, seqQ, causal: true };
        const weightsOut = new Float32Array(heads * seqQ * seq), lseOut = new Float32Array(heads * seqQ);
        const got = lib.attention(q, cache, null, { ...options, weightsOut, lseOut });
        const want = referenceAttention(q, key, value, { ...options, kvHeads, seqK: seq, headDim, valueDim });
        const what = `${dtype} heads ${heads}/${kvHeads} seqQ ${seqQ}`;
        if (dtype === 'float32') {
          assertClose(got, want.out, `${what} out`);
          assertClose(weightsOut, want.weights, `${what} weights`);
          assertClose(lseOut, want.lse, `${what} lse`, 1e-4);
        }
        const bound = NMSE_BOUND[dtype];
        for (const [name, x, y] of [['out', got, want.out], ['weights', weightsOut, want.weights]]) {
          const error = nmse(x, y);
          assert.ok(error <= bound, `${what} ${name}: NMSE ${error}`);
        }
      }
      cache.dispose();
    }
  }
});

test('bytes per position: int4 < int8 < float16 = bfloat16 < float32, int8 at most 0.27 of float32, int4 0.15', () => {
  const sizes = { kvHeads: 8, headDim: 128, maxSeq: 100 };
  const bytes = Object.fromEntries(DTYPES.map((dtype) => {
    const cache = lib.createKVCache({ ...sizes, dtype });
    const b = cache.bytes;
    cache.dispose();
    return [dtype, b];
  }));
  assert.equal(bytes.float32, 100 * 8 * 128 * 2 * 4);
  assert.equal(bytes.float16 * 2, bytes.float32);
  assert.equal(bytes.bfloat16 * 2, bytes.float32);
  assert.ok(bytes.int8 <= 0.27 * bytes.float32, `int8 ${bytes.int8} vs float32 ${bytes.float32}`);
  assert.equal(bytes.int4, 100 * 8 * 2 * (4 * 16 + 4 * 2));  // a row of 128: 4 blocks of 16 bytes, 4 bfloat16 scales
  assert.ok(bytes.int4 <= 0.15 * bytes.float32, `int4 ${bytes.int4} vs float32 ${bytes.float32}`);
});

test('a one-position bfloat16 cache returns the stored value: ties to even, NaN, ±Inf, the largest float32, subnormals', () => {
  // One key: its weight is 1 whatever its score, so the output is the value as stored. The keys
  // are ordinary numbers; the values carry what bfloat16 rounding must get right (PyTorch's
  // c10::BFloat16: round to nearest even, NaN → NaN, past the largest bfloat16 → ∞).
  const cases = [
    [1 + 2 ** -8, 1],                        // a tie: to the even neighbour (1)
    [1 + 3 * 2 ** -8, 1 + 2 ** -6],          // a tie: to the even neighbour (1 + 2^-6)
    [1 + 2 ** -8 + 2 ** -20, 1 + 2 ** -7],   // just above a tie: up
    [-(1 + 2 ** -8 - 2 ** -20), -1],         // just below a tie: down
    [NaN, NaN],
    [Infinity, Infinity],
    [-Infinity, -Infinity],
    [3.4028234663852886e38, Infinity],       // the largest float32 rounds past the largest bfloat16
    [-3.3895313892515355e38, -3.3895313892515355e38],  // the largest bfloat16 itself
    [1.5 * 2 ** -130, 1.5 * 2 ** -130],      // a subnormal bfloat16
    [2 ** -140, 0],                          // below half the smallest subnormal
    [0.1, 0.10009765625],
  ];
  const valueDim = cases.length;
  const cache = lib.createKVCache({ kvHeads: 1, headDim: 4, valueDim, maxSeq: 2, dtype: 'bfloat16' });
  cache.append(Float32Array.of(0.5, -0.25, 2, 1), Float32Array.from(cases, ([x]) => x));
  const out = lib.attention(Float32Array.of(1, 2, 3, 4, -1, 0, 1, 0), cache, null, { heads: 2, seqQ: 1 });
  for (let h = 0; h < 2; h++) {
    cases.forEach(([x, want], c) => assert.ok(Object.is(out[h * valueDim + c], want), `value ${x}: got ${out[h * valueDim + c]}, want ${want}`));
  }
  cache.dispose();
});

test('a one-position int4 cache returns its values as quantised: ties to even, the extremes, a block of zeros, a partial block', () => {
  // One key: the output is the value as stored. Values 0-31 are block 0 (max |x| 7: scale 1, so
  // q = x rounded, ties to even); 32-63 a block of zeros (scale 0); 64-69 a partial block whose
  // largest, 0.7, sets a scale of 0.7 / 7 rounded to bfloat16, 0.10009765625.
  const x = new Float32Array(70), want = new Float32Array(70);
  const block0 = [[7, 7], [-7, -7], [2.5, 2], [3.5, 4], [-0.5, -0], [6.5, 6], [1.49, 1], [-2.51, -3], [0.5, 0], [-6.9, -7]];
  block0.forEach(([v, q], i) => { x[i] = v; want[i] = q; });
  const scale = 0.10009765625;
  [0.7, -0.7, 0.35, 0.1, -0.05, 0.25].forEach((v, i) => { x[64 + i] = v; want[64 + i] = Math.round(Math.fround(v) / scale) * scale; });
  want[64 + 2] = 3 * scale;  // 0.35 / 0.1000977 = 3.4966: 3
  const cache = lib.createKVCache({ kvHeads: 1, headDim: 4, valueDim: 70, maxSeq: 2, dtype: 'int4' });
  cache.append(Float32Array.of(0.5, -0.25, 2, 1), x);
  const out = lib.attention(Float32Array.of(1, 2, 3, 4), cache, null, { heads: 1, seqQ: 1 });
  // The weighted sum rounds the probability (1) times the scale to 2^-16 of itself (int16): within
  // 2^-15 of the stored value, where the quantisation steps are 1/7 of the block's largest apart.
  for (let c = 0; c < 70; c++) assert.ok(Math.abs(out[c] - want[c]) <= 2 ** -15 * Math.abs(want[c]), `value ${c} (${x[c]}): got ${out[c]}, want ${want[c]}`);
  for (let c = 32; c < 64; c++) assert.equal(out[c], 0);
  cache.dispose();
});

test('int4 refuses ±Infinity and NaN with a RangeError naming the position, and appends nothing', () => {
  const kvHeads = 2, headDim = 40, valueDim = 33;
  const { query, key, value } = data(12, { batch: 1, heads: 4, kvHeads, seq: 6, headDim, valueDim });
  for (const window of [0, 4]) {
    const cache = lib.createKVCache({ kvHeads, headDim, valueDim, maxSeq: 6, dtype: 'int4', ...(window ? { window } : {}) });
    cache.append(slicePositions(key, 1, kvHeads, 6, headDim, 0, 4), slicePositions(value, 1, kvHeads, 6, valueDim, 0, 4));
    const q = query.subarray(0, 4 * headDim);
    const options = { heads: 4, seqQ: 1, window: [3, 0] };
    const before = lib.attention(q, cache, null, options);
    for (const bad of [Infinity, -Infinity, NaN]) {
      const k = slicePositions(key, 1, kvHeads, 6, headDim, 4, 2), v = slicePositions(value, 1, kvHeads, 6, valueDim, 4, 2);
      v[indexOf('bhsd', kvHeads, 2, valueDim, 0, 1, 1, 32)] = bad;  // kvHead 1, position 5, element 32
      assert.throws(() => cache.append(k, v), new RegExp(`^RangeError: KVCache\\.append: value\\[batch 0, kvHead 1, position 5, element 32\\] = ${String(bad)} ` +
        "is not finite, and dtype 'int4' stores finite values only \\(each block of 32 values is scaled by its largest\\), so nothing was appended; " +
        "store this cache with dtype 'int8', 'bfloat16' or 'float32' to keep it$"));
      k[indexOf('bhsd', kvHeads, 2, headDim, 0, 0, 0, 39)] = bad;  // the key comes first: kvHead 0, position 4, element 39
      assert.throws(() => cache.append(k, v), /^RangeError: KVCache\.append: key\[batch 0, kvHead 0, position 4, element 39\] = /);
      assert.equal(cache.length, 4);
      assert.deepEqual(lib.attention(q, cache, null, options), before);
    }
    cache.dispose();
  }
  // The layer's forward into its int4 cache: the projected value that is not finite.
  const e = 16, mha = new layered.MultiHeadAttention({ embedDim: e, numHeads: 2, bias: false });
  const random = rng(13);
  mha.setWeights({ wq: randomTensor(e * e, random), wk: randomTensor(e * e, random), wv: randomTensor(e * e, random), wo: randomTensor(e * e, random) });
  const cache = mha.createCache({ maxSeq: 4, dtype: 'int4' });
  const x = randomTensor(2 * e, random);
  mha.forward(x.subarray(0, e), null, null, { cache });
  x[e + 3] = Infinity;
  assert.throws(() => mha.forward(x.subarray(e), null, null, { cache }),
    /^RangeError: MultiHeadAttention\.forward: the projected key\[batch 0, kvHead 0, position 1, element \d+\] = -?Infinity is not finite, and dtype 'int4' stores finite values only/);
  assert.equal(cache.length, 1);
  cache.dispose();
  mha.dispose();
});

test('chunked appends (5, 1, 1, 3) and bshd appends equal one append, bit for bit', () => {
  const s = { batch: 1, heads: 4, kvHeads: 2, seq: 10, headDim: 16, valueDim: 16 };
  const { query, key, value } = data(3, s);
  for (const dtype of DTYPES) {
    const whole = lib.createKVCache({ kvHeads: 2, headDim: 16, maxSeq: 10, dtype });
    const parts = lib.createKVCache({ kvHeads: 2, headDim: 16, maxSeq: 10, dtype });
    whole.append(key, value);
    let at = 0;
    for (const n of [5, 1, 1, 3]) {
      const k = slicePositions(key, 1, 2, 10, 16, at, n), v = slicePositions(value, 1, 2, 10, 16, at, n);
      if (n === 1) parts.append(k, v, { seq: 1, layout: 'bshd' });  // one position: both layouts are the same bytes
      else parts.append(k, v);
      at += n;
    }
    const q = query.subarray(0, 4 * 1 * 16);
    assert.deepEqual(lib.attention(q, parts, null, { heads: 4, seqQ: 1 }), lib.attention(q, whole, null, { heads: 4, seqQ: 1 }));
    whole.dispose();
    parts.dispose();
  }
});

test('bshd appends: [batch, seq, kvHeads, dim]', () => {
  const s = { batch: 2, heads: 2, kvHeads: 2, seq: 6, headDim: 4, valueDim: 3 };
  const { query, key, value } = data(4, s);
  const toBshd = (x, dim) => {
    const out = new Float32Array(x.length);
    for (let b = 0; b < 2; b++) for (let h = 0; h < 2; h++) for (let t = 0; t < 6; t++) for (let c = 0; c < dim; c++) {
      out[indexOf('bshd', 2, 6, dim, b, h, t, c)] = x[indexOf('bhsd', 2, 6, dim, b, h, t, c)];
    }
    return out;
  };
  const a = lib.createKVCache({ batch: 2, kvHeads: 2, headDim: 4, valueDim: 3, maxSeq: 6 });
  const b = lib.createKVCache({ batch: 2, kvHeads: 2, headDim: 4, valueDim: 3, maxSeq: 6 });
  a.append(key, value);
  b.append(toBshd(key, 4), toBshd(value, 3), { layout: 'bshd' });
  const q = query.subarray(0, 2 * 2 * 2 * 4);
  assert.deepEqual(lib.attention(q, a, null, { heads: 2, seqQ: 2, causal: true }), lib.attention(q, b, null, { heads: 2, seqQ: 2, causal: true }));
});

test('truncate then append equals appending the same positions; reset starts over', () => {
  const s = { batch: 1, heads: 2, kvHeads: 1, seq: 12, headDim: 8, valueDim: 8 };
  const { query, key, value } = data(5, s);
  const other = data(6, s);
  const cache = lib.createKVCache({ kvHeads: 1, headDim: 8, maxSeq: 12, dtype: 'int8' });
  const clean = lib.createKVCache({ kvHeads: 1, headDim: 8, maxSeq: 12, dtype: 'int8' });
  cache.append(slicePositions(key, 1, 1, 12, 8, 0, 7), slicePositions(value, 1, 1, 12, 8, 0, 7));
  cache.append(slicePositions(other.key, 1, 1, 12, 8, 7, 3), slicePositions(other.value, 1, 1, 12, 8, 7, 3));  // a rejected draft
  cache.truncate(7);
  assert.equal(cache.length, 7);
  cache.append(slicePositions(key, 1, 1, 12, 8, 7, 5), slicePositions(value, 1, 1, 12, 8, 7, 5));
  clean.append(key, value);
  const q = query.subarray(0, 2 * 2 * 8);
  const options = { heads: 2, seqQ: 2, causal: true, window: [5, 0], softcap: 30, alibiSlopes: Float32Array.from([0.5, 0.25]) };
  assert.deepEqual(lib.attention(q, cache, null, options), lib.attention(q, clean, null, options));
  cache.reset();
  assert.equal(cache.length, 0);
  cache.append(key, value);
  assert.deepEqual(lib.attention(q, cache, null, options), lib.attention(q, clean, null, options));
  assert.throws(() => cache.truncate(13), /^RangeError: KVCache\.truncate: n must be an integer from 0 to length 12, got number 13$/);
});

test('a ring (window) gives exact sliding-window attention with true positions, and never overflows', () => {
  const window = 5;
  const s = { batch: 1, heads: 2, kvHeads: 1, seq: 30, headDim: 8, valueDim: 8 };
  const { query, key, value } = data(7, s);
  const alibiSlopes = Float32Array.from([0.3, 0.1]);
  for (const dtype of ['float32', 'int8', 'int4']) {
    const ring = lib.createKVCache({ kvHeads: 1, headDim: 8, window, maxSeq: window + 2, dtype });  // chunks of 3
    for (let at = 0; at < 30; at += 3) {
      ring.append(slicePositions(key, 1, 1, 30, 8, at, 3), slicePositions(value, 1, 1, 30, 8, at, 3));
      const length = at + 3;
      const q = new Float32Array(2 * 3 * 8);
      for (let h = 0; h < 2; h++) q.set(query.subarray(indexOf('bhsd', 2, 30, 8, 0, h, length - 3, 0), indexOf('bhsd', 2, 30, 8, 0, h, length, 0)), h * 3 * 8);
      const got = lib.attention(q, ring, null, { heads: 2, seqQ: 3, causal: true, window: [window - 1, 0], alibiSlopes });
      const want = referenceAttention(q, key.subarray(0, length * 8), value.subarray(0, length * 8),
        { heads: 2, kvHeads: 1, seqQ: 3, seqK: length, headDim: 8, causal: true, window: [window - 1, 0], alibiSlopes }).out;
      if (dtype === 'float32') assertClose(got, want, `ring at length ${length}`);
      else assert.ok(nmse(got, want) < NMSE_BOUND[dtype], `${dtype} ring at length ${length}`);
    }
    assert.equal(ring.length, 30);
    assert.throws(() => ring.append(new Float32Array(4 * 8), new Float32Array(4 * 8)),
      /^RangeError: KVCache\.append: appending 4 positions at length 30 to this ring \(window 5, maxSeq 7\) needs 8 slots, more than maxSeq: 4 for them and 4 for the positions before them/);
    assert.throws(() => lib.attention(query.subarray(0, 2 * 4 * 8), ring, null, { heads: 2, seqQ: 4, window: [4, 0] }),
      /^RangeError: attention: this ring \(window 5, maxSeq 7\) no longer holds every key the last 4 positions see: the first of them looks back to position 22, and the ring holds positions 23 … 29; attend with at most 3 queries at a time, or use maxSeq ≥ 8/);
    assert.throws(() => ring.truncate(25), /^RangeError: KVCache\.truncate: this ring \(window 5, maxSeq 7\) no longer holds the 4 positions before 25; it can go back to 27 at the earliest/);
    ring.dispose();
  }
});

test('errors: overflow leaves the cache intact; shapes, dtype, options and use after dispose', () => {
  const cache = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 3 });
  const k = randomTensor(2 * 2 * 4, rng(8)), v = randomTensor(2 * 2 * 4, rng(9));
  cache.append(k, v);
  const q = randomTensor(4 * 4, rng(10));
  const before = lib.attention(q, cache, null, { heads: 4, seqQ: 1 });
  assert.throws(() => cache.append(k, v), /^RangeError: KVCache\.append: the cache has room for 1 more positions \(maxSeq 3, length 2\), got seq 2$/);
  assert.equal(cache.length, 2);
  assert.deepEqual(lib.attention(q, cache, null, { heads: 4, seqQ: 1 }), before);
  assert.throws(() => cache.append(k, new Float32Array(15)), /^RangeError: KVCache\.append: value has length 15, expected 16 \(batch 1 × kvHeads 2 × seq 2 × valueDim 4\)$/);
  assert.throws(() => cache.append(new Float32Array(7), v), /^RangeError: KVCache\.append: key has length 7, not a positive multiple of batch 1 × kvHeads 2 × headDim 4$/);
  assert.throws(() => cache.append(k, v, { layout: 'bsdh' }), /^RangeError: KVCache\.append: options\.layout must be 'bhsd' or 'bshd'/);
  assert.throws(() => cache.append(k, v, { step: 1 }), /^TypeError: KVCache\.append: unknown option 'step'/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 4, seqQ: 1, headDim: 8 }), /^RangeError: attention: options\.headDim \(number 8\) differs from the KV cache's headDim 4$/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 4, seqQ: 1, kvHeads: 4 }), /^RangeError: attention: options\.kvHeads \(number 4\) differs from the KV cache's kvHeads 2$/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 3, seqQ: 1 }), /^RangeError: attention: options\.heads \(3\) must be a multiple of the KV cache's kvHeads \(2\)$/);
  assert.throws(() => lib.attention(q, cache, v, { heads: 4, seqQ: 1 }), /^TypeError: attention: value must be null when key is a KVCache/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 4, seqQ: 3 }), /^RangeError: attention: options\.seqQ \(3\) is more than the KV cache's length 2/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 4, seqQ: 1, causal: 'upper-left' }), /'upper-left' does not apply to a KV cache/);
  assert.throws(() => lib.attention(q.subarray(1), cache, null, { heads: 4, seqQ: 1 }), /^RangeError: attention: query has length 15, expected 16/);
  assert.throws(() => lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 3, dtype: 'float8' }),
    /^TypeError: createKVCache: options\.dtype must be 'float32', 'float16', 'bfloat16', 'int8' or 'int4', got string "float8"$/);
  assert.throws(() => lib.createKVCache({ kvHeads: 2, headDim: 4 }), /^TypeError: createKVCache: options\.maxSeq is required/);
  assert.throws(() => lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 3, window: 4 }), /^RangeError: createKVCache: options\.maxSeq \(3\) must be at least options\.window \(4\)/);
  assert.throws(() => lib.createKVCache({ kvHeads: 0, headDim: 4, maxSeq: 3 }), /^RangeError: createKVCache: options\.kvHeads must be a positive integer, got 0$/);
  const empty = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 3 });
  assert.throws(() => lib.attention(q, empty, null, { heads: 4, seqQ: 1 }), /^RangeError: attention: the KV cache is empty/);
  empty.dispose();
  cache.dispose();
  cache.dispose();  // harmless
  assert.equal(cache.disposed, true);
  assert.throws(() => cache.length, /^Error: KVCache\.length: this cache was disposed$/);
  assert.throws(() => cache.append(k, v), /^Error: KVCache\.append: this cache was disposed$/);
  assert.throws(() => lib.attention(q, cache, null, { heads: 4, seqQ: 1 }), /^Error: attention: the KV cache was disposed$/);
});

test('heapInUse returns to its level after dispose, and a dropped cache is freed by the FinalizationRegistry', async () => {
  const baseline = lib.memoryUsage().heapInUse;
  const cache = lib.createKVCache({ kvHeads: 4, headDim: 64, maxSeq: 1024, dtype: 'float16' });
  assert.ok(lib.memoryUsage().heapInUse >= baseline + cache.bytes);
  cache.dispose();
  assert.ok(lib.memoryUsage().heapInUse <= baseline);
  (() => { for (let n = 0; n < 10; n++) lib.createKVCache({ kvHeads: 4, headDim: 64, maxSeq: 1024 }); })();
  assert.ok(lib.memoryUsage().heapInUse > baseline);
  for (let tries = 0; tries < 50 && lib.memoryUsage().heapInUse > baseline; tries++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(lib.memoryUsage().heapInUse <= baseline, `heap in use back to ${baseline} bytes, got ${lib.memoryUsage().heapInUse}`);
});

test("a layer's createCache makes the same kind of KVCache, in every dtype and as a ring", () => {
  const e = 32, numHeads = 4, numKvHeads = 2;
  const random = rng(20);
  const mha = new layered.MultiHeadAttention({ embedDim: e, numHeads, numKvHeads });
  const w = (n) => randomTensor(n, random, 0.3);
  const kv = numKvHeads * (e / numHeads);
  mha.setWeights({ wq: w(e * e), wk: w(kv * e), wv: w(kv * e), wo: w(e * e), bq: w(e), bk: w(kv), bv: w(kv), bo: w(e) });
  const x = normalTensor(10 * e, random);
  const decode = (cache) => {
    const outs = [mha.forward(x.subarray(0, 6 * e), null, null, { cache })];
    for (let t = 6; t < 10; t++) outs.push(mha.forward(x.subarray(t * e, (t + 1) * e), null, null, { cache }));
    return Float32Array.from(outs.flatMap((o) => [...o]));
  };
  const exact = mha.forward(x, null, null, { causal: true });
  const standalone = layered.createKVCache({ kvHeads: numKvHeads, headDim: e / numHeads, maxSeq: 4 });
  for (const dtype of DTYPES) {
    const cache = mha.createCache({ maxSeq: 10, dtype });
    assert.equal(cache.constructor, standalone.constructor);
    assert.deepEqual([cache.kvHeads, cache.headDim, cache.valueDim, cache.dtype, cache.window], [numKvHeads, e / numHeads, e / numHeads, dtype, 0]);
    const got = decode(cache);
    assert.equal(cache.length, 10);
    const error = nmse(got, exact);
    assert.ok(error <= (dtype === 'float32' ? 1e-12 : NMSE_BOUND[dtype]), `${dtype}: NMSE ${error}`);
    cache.dispose();
  }
  assert.throws(() => mha.forward(x.subarray(0, e), null, null, { cache: standalone }),
    /^Error: MultiHeadAttention\.forward: options\.cache was made by lib\.createKVCache\(\), not by this layer: a layer stores its own projected \(and rotated\) keys and values in a cache it makes; make one with this layer's createCache\(\{ maxSeq \}\)$/);
  // This layer has no window, so a ring (which keeps only its window) cannot serve it, even
  // while the sequence is shorter than the window.
  assert.throws(() => mha.createCache({ window: 20, maxSeq: 26, dtype: 'float16' }), /^RangeError: MultiHeadAttention\.createCache: this layer attends to every earlier position/);
  const windowed = new layered.MultiHeadAttention({ embedDim: e, numHeads, numKvHeads, window: [19, 0] });
  windowed.setWeights(mha.getWeights());
  const ring = windowed.createCache({ window: 20, maxSeq: 26, dtype: 'float16' });
  assert.equal(ring.window, 20);
  const viaRing = (() => {
    const outs = [windowed.forward(x.subarray(0, 6 * e), null, null, { cache: ring })];
    for (let t = 6; t < 10; t++) outs.push(windowed.forward(x.subarray(t * e, (t + 1) * e), null, null, { cache: ring }));
    return Float32Array.from(outs.flatMap((o) => [...o]));
  })();
  assert.ok(nmse(viaRing, exact) <= 1e-6);  // window 20 ≥ every distance here: the same as no window
  windowed.dispose();
  assert.throws(() => mha.createCache({ window: 8, maxSeq: 4 }), /^RangeError: MultiHeadAttention\.createCache: options\.maxSeq \(4\) must be at least options\.window \(8\)/);
  assert.throws(() => mha.createCache({ maxSeq: 4, dtype: 'int2' }), /^TypeError: MultiHeadAttention\.createCache: options\.dtype must be 'float32', 'float16', 'bfloat16', 'int8' or 'int4'/);
  ring.dispose();
  standalone.dispose();
  mha.dispose();
});
