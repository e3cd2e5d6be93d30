// Every pair of options that can disagree when attention runs over a KV cache, tried one by one:
// the call's causal and window against a linear cache and rings (attention(query, cache, null,
// options)), the call's sizes against the cache's, and a layer's config against its cache. Each
// gives the exact answer (the JS reference over the same keys passed as arrays, with the call's
// options as given) or a clear RangeError naming both values; never a different answer.
// The rule (src/cache/cache_rule.h): a cache never changes what a call computes; a ring of window W
// keeps the W − 1 positions before each query, so a call over it must look back no further.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceAttention, referenceMha } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib, layered;  // the default build; the layers build for the layer's tests
before(async () => { [lib, layered] = await Promise.all([loadAttention(), loadAttention({ layers: true })]); });

const heads = 2, kvHeads = 1, headDim = 8, total = 10;
const random = rng(5);
const keys = randomTensor(kvHeads * total * headDim, random);
const values = randomTensor(kvHeads * total * headDim, random);
const queries = randomTensor(heads * total * headDim, random);

// Positions [from, to) of the [1, kvHeads, total, headDim] keys (or values).
const rows = (x, from, to) => x.slice(from * headDim, to * headDim);
// The queries of the last seqQ positions of `length`, [1, heads, seqQ, headDim].
function queriesAt(length, seqQ) {
  const q = new Float32Array(heads * seqQ * headDim);
  for (let h = 0; h < heads; h++) q.set(queries.subarray((h * total + length - seqQ) * headDim, (h * total + length) * headDim), h * seqQ * headDim);
  return q;
}

// Filled one position at a time, as a decode loop does (a ring then holds its last maxSeq).
function cacheOf(kind) {
  const cache = lib.createKVCache({ kvHeads, headDim, ...kind.options });
  for (let t = 0; t < total; t++) cache.append(rows(keys, t, t + 1), rows(values, t, t + 1));
  return cache;
}

const CACHES = [
  { name: 'linear', options: { maxSeq: total } },
  { name: 'ring window 4, maxSeq 4', options: { window: 4 }, window: 4, maxSeq: 4 },
  { name: 'ring window 4, maxSeq 8', options: { window: 4, maxSeq: 8 }, window: 4, maxSeq: 8 },
];
const CAUSAL = [undefined, false, true, 'lower-right', 'upper-left'];
const WINDOWS = [undefined, [0, 0], [1, 0], [3, 0], [3, 2], [2, Infinity], [4, 0], [7, 0], [Infinity, 0], [Infinity, Infinity]];

// What the documented rule says a call gets: 'exact', or the start of the error message.
function expected(kind, causal, window, seqQ) {
  if (causal === 'upper-left') return /^attention: options\.causal 'upper-left' does not apply to a KV cache/;
  if (!kind.window) return 'exact';
  const W = kind.window, left = window ? window[0] : Infinity;
  const ring = `this ring \\(window ${W}, maxSeq ${kind.maxSeq}\\)`;
  if (left === Infinity) {
    return new RegExp(`^attention: ${ring} keeps only the ${W - 1} positions before each query, so options\\.window must limit how far back ` +
      `a query looks: window \\[${W - 1}, 0\\] \\(Hugging Face's sliding_window ${W}\\) or narrower, got ${window ? `\\[${window.join(', ')}\\]` : 'none'}`);
  }
  if (left > W - 1) {  // names both windows
    return new RegExp(`^attention: options\\.window \\[${window.join(', ')}\\] looks back ${left} positions, more than ${ring} keeps ` +
      `\\(the ${W - 1} before each query\\); use window \\[${W - 1}, 0\\] \\(Hugging Face's sliding_window ${W}\\) or narrower, or a ring with window ≥ ${left + 1}$`);
  }
  const firstHeld = total - kind.maxSeq;
  if (total - seqQ - left < firstHeld) return new RegExp(`^attention: ${ring} no longer holds every key the last ${seqQ} positions see`);
  return 'exact';
}

test('attention over a cache: every causal × window × cache kind × query count is exact or refused', () => {
  let exact = 0, refused = 0;
  for (const kind of CACHES) {
    const cache = cacheOf(kind);
    for (const causal of CAUSAL) {
      for (const window of WINDOWS) {
        for (const seqQ of [1, 3]) {
          const options = { heads, seqQ, causal, window };
          const what = `${kind.name}, causal ${causal}, window ${window ? `[${window}]` : 'none'}, seqQ ${seqQ}`;
          const want = expected(kind, causal, window, seqQ);
          const q = queriesAt(total, seqQ);
          if (want === 'exact') {
            const got = lib.attention(q, cache, null, options);
            const reference = referenceAttention(q, keys, values, { ...options, kvHeads, headDim, seqK: total }).out;
            assertClose(got, reference, what);
            exact++;
          } else {
            assert.throws(() => lib.attention(q, cache, null, options), (e) => e instanceof RangeError && want.test(e.message), what);
            refused++;
          }
        }
      }
    }
    cache.dispose();
  }
  assert.ok(exact > 100 && refused > 50, `${exact} exact, ${refused} refused`);
});

test('the wider window of the first report: a RangeError naming both windows, not the ring\'s 4-key answer', () => {
  const ring = cacheOf(CACHES[1]);
  const q = queriesAt(total, 1);
  assert.throws(() => lib.attention(q, ring, null, { heads, seqQ: 1, window: [7, 0] }),
    /^RangeError: attention: options\.window \[7, 0\] looks back 7 positions, more than this ring \(window 4, maxSeq 4\) keeps/);
  // The narrower window and Hugging Face's sliding_window 4 ([3, 0]) are the exact answers.
  for (const window of [[3, 0], [1, 0]]) {
    assertClose(lib.attention(q, ring, null, { heads, seqQ: 1, window }),
      referenceAttention(q, keys, values, { heads, kvHeads, headDim, seqQ: 1, seqK: total, window }).out, `window [${window}]`);
  }
  ring.dispose();
});

test("the call's sizes against the cache's: equal is fine, different is refused with both", () => {
  const cache = cacheOf(CACHES[0]);
  const q = queriesAt(total, 2);
  const ok = { heads, seqQ: 2, causal: true };
  const want = lib.attention(q, cache, null, ok);
  assert.deepEqual(lib.attention(q, cache, null, { ...ok, batch: 1, kvHeads, headDim, valueDim: headDim, seqK: total }), want);
  const cases = [
    [{ batch: 2 }, /^attention: options\.batch \(number 2\) differs from the KV cache's batch 1$/],
    [{ kvHeads: 2 }, /^attention: options\.kvHeads \(number 2\) differs from the KV cache's kvHeads 1$/],
    [{ headDim: 4 }, /^attention: options\.headDim \(number 4\) differs from the KV cache's headDim 8$/],
    [{ valueDim: 9 }, /^attention: options\.valueDim \(number 9\) differs from the KV cache's valueDim 8$/],
    [{ seqK: 9 }, /^attention: options\.seqK \(number 9\) differs from the KV cache's length 10$/],
    [{ seqQ: 11 }, /^attention: options\.seqQ \(11\) is more than the KV cache's length 10: the queries are the last seqQ positions appended$/],
  ];
  for (const [extra, message] of cases) {
    assert.throws(() => lib.attention(q, cache, null, { ...ok, ...extra }), (e) => e instanceof RangeError && message.test(e.message), JSON.stringify(extra));
  }
  const gqa = lib.createKVCache({ kvHeads: 2, headDim, maxSeq: 4 });
  gqa.append(new Float32Array(2 * headDim), new Float32Array(2 * headDim));
  assert.throws(() => lib.attention(new Float32Array(3 * headDim), gqa, null, { heads: 3, seqQ: 1 }),
    /^RangeError: attention: options\.heads \(3\) must be a multiple of the KV cache's kvHeads \(2\)$/);
  gqa.dispose();
  cache.dispose();
});

// A layer against a cache it makes: config.window × the cache's kind. When createCache accepts,
// prefill plus decode steps equal one causal forward over the whole sequence (and the reference).
test("a layer's window against its cache: refused at createCache, or decoding equals one causal forward", () => {
  const seq = 14, e = 16;
  const x = randomTensor(seq * e, rng(9));
  const windows = [undefined, [2, 0], [3, 0], [3, 1], [7, 0], [Infinity, 0]];
  const kinds = [{ maxSeq: seq }, { window: 4, maxSeq: 6 }, { window: 8, maxSeq: 10 }, { window: 16, maxSeq: 18 }];
  let decoded = 0;
  for (const window of windows) {
    const config = { embedDim: e, numHeads: 2, numKvHeads: 1, rotary: {}, window };
    const mha = new layered.MultiHeadAttention(config);
    const weights = { wq: randomTensor(e * e, rng(1), 0.3), wk: randomTensor(8 * e, rng(2), 0.3), wv: randomTensor(8 * e, rng(3), 0.3),
      wo: randomTensor(e * e, rng(4), 0.3), bq: randomTensor(e, rng(5), 0.1), bk: randomTensor(8, rng(6), 0.1), bv: randomTensor(8, rng(7), 0.1),
      bo: randomTensor(e, rng(8), 0.1) };
    mha.setWeights(weights);
    const full = mha.forward(x, null, null, { causal: true });
    assertClose(full, referenceMha(config, weights, x, null, null, { causal: true }).out, `layer window ${window}: full forward`, 5e-5);
    for (const kind of kinds) {
      const what = `layer window ${window ? `[${window}]` : 'none'}, cache ${JSON.stringify(kind)}`;
      const left = window ? window[0] : Infinity;
      if (kind.window && left === Infinity) {
        assert.throws(() => mha.createCache(kind), new RegExp(`^RangeError: MultiHeadAttention\\.createCache: this layer attends to every earlier ` +
          `position \\(${window ? `config\\.window \\[Infinity, 0\\] has no left limit` : 'it has no config\\.window'}\\), but a ring \\(options\\.window ` +
          `${kind.window}\\) keeps only the ${kind.window - 1} positions before each query`), what);
        continue;
      }
      if (kind.window && left > kind.window - 1) {
        assert.throws(() => mha.createCache(kind), new RegExp(`^RangeError: MultiHeadAttention\\.createCache: config\\.window \\[${window.join(', ')}\\] ` +
          `looks back ${left} positions, more than a ring with options\\.window ${kind.window} keeps \\(the ${kind.window - 1} before each query\\); ` +
          `use options\\.window ≥ ${left + 1}`), what);
        continue;
      }
      const cache = mha.createCache(kind);
      const outs = [mha.forward(x.subarray(0, 3 * e), null, null, { cache })];
      for (let t = 3; t < seq; t++) outs.push(mha.forward(x.subarray(t * e, (t + 1) * e), null, null, { cache }));
      assertClose(Float32Array.from(outs.flatMap((o) => [...o])), full, what, 5e-5);
      cache.dispose();
      decoded++;
    }
    mha.dispose();
  }
  assert.equal(decoded, 6 + 3 + 4 + 4);  // linear: every window; ring 4: the 3 with left ≤ 3; rings 8 and 16: the 4 with left ≤ 7
});

test("a layer's forward with its cache: options that contradict decoding are refused, the cache unchanged", () => {
  const mha = new layered.MultiHeadAttention({ embedDim: 8, numHeads: 2, window: [3, 0] });
  mha.setWeights({ wq: randomTensor(64, rng(1)), wk: randomTensor(64, rng(2)), wv: randomTensor(64, rng(3)), wo: randomTensor(64, rng(4)),
    bq: new Float32Array(8), bk: new Float32Array(8), bv: new Float32Array(8), bo: new Float32Array(8) });
  const cache = mha.createCache({ window: 4, maxSeq: 6 });
  const x = randomTensor(8, rng(5));
  const cases = [
    [{ causal: false }, RangeError, /options\.causal cannot be false with options\.cache: cached decoding is always causal/],
    [{ causal: 'upper-left' }, RangeError, /options\.causal 'upper-left' does not apply to options\.cache/],
    [{ batch: 2 }, RangeError, /options\.batch \(2\) differs from options\.cache\.batch \(1\)/],
  ];
  for (const [extra, type, message] of cases) {
    assert.throws(() => mha.forward(extra.batch ? new Float32Array(16) : x, null, null, { cache, ...extra }), (e) => e instanceof type && message.test(e.message));
  }
  assert.equal(cache.length, 0);
  mha.forward(x, null, null, { cache, causal: true });  // causal: true says what decoding does anyway
  assert.equal(cache.length, 1);
  cache.dispose();
  mha.dispose();
});
