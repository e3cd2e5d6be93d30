// The score variants from JS — causal alignments, windows, softcap, ALiBi, sinks — against the
// plain JS reference (tests/js/reference.mjs) on attention, attentionWeights, lseOut and
// attentionBackward; every error path; fast-check properties; the finite-input NaN repro.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { before, test } from 'node:test';
import { referenceAttention, referenceAttentionBackward } from './reference.mjs';
import { assertClose, loadAttention, makeInputs, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

const slopesFor = (n) => Float32Array.from({ length: n }, (_, h) => 2 ** (-8 * (h + 1) / n));

// attention, attentionWeights and lseOut of one call against the reference.
function checkForward(options, seed = 1, atol = 2e-5) {
  const { query, key, value } = makeInputs(options, seed);
  const rows = (options.batch ?? 1) * options.heads * options.seqQ;
  const seqK = options.seqK ?? options.seqQ;
  const weightsOut = new Float32Array(rows * seqK), lseOut = new Float32Array(rows);
  const out = lib.attention(query, key, value, { ...options, weightsOut, lseOut });
  const want = referenceAttention(query, key, value, options);
  assertClose(out, want.out, 'out', atol);
  assertClose(weightsOut, want.weights, 'weights', atol);
  for (let r = 0; r < rows; r++) {
    if (want.lse[r] === -Infinity) assert.equal(lseOut[r], -Infinity, `lse[${r}]`);
    else assert.ok(Math.abs(lseOut[r] - want.lse[r]) <= 1e-4 * (1 + Math.abs(want.lse[r])), `lse[${r}] ${lseOut[r]} vs ${want.lse[r]}`);
  }
  const { valueDim, ...weightOptions } = options;
  assertClose(lib.attentionWeights(query, key, weightOptions), want.weights, 'attentionWeights', atol);
}

test('causal: lower-right (true), upper-left, on the blocked and the decode path', () => {
  for (const causal of [true, 'lower-right', 'upper-left']) {
    for (const [seqQ, seqK] of [[7, 19], [19, 7], [1, 40], [33, 33]]) {
      checkForward({ heads: 4, kvHeads: 2, seqQ, seqK, headDim: 8, causal });
      checkForward({ heads: 2, kvHeads: 2, seqQ: Math.min(seqQ, 2), seqK, headDim: 8, causal });
    }
  }
});

test('windows intersect causal, both alignments, sides 0, 1, ≥ seqK and Infinity', () => {
  for (const window of [[0, 0], [1, 1], [3, 0], [0, 5], [100, 2], [Infinity, 0], [2, Infinity], [Infinity, Infinity]]) {
    for (const causal of [false, true, 'upper-left']) {
      checkForward({ heads: 2, seqQ: 20, seqK: 45, headDim: 5, causal, window });
      checkForward({ heads: 2, seqQ: 45, seqK: 20, headDim: 5, causal, window, layout: 'bshd' });
    }
  }
});

test('softcap, with logits of ±1e3', () => {
  for (const softcap of [0.5, 20, 50]) {
    const options = { heads: 2, seqQ: 9, seqK: 70, headDim: 16, softcap, scale: 300, causal: true };
    checkForward(options, 3, 2e-5 + 1e-6 * softcap);
  }
});

test('ALiBi slopes [heads] and [batch, heads]', () => {
  for (const perBatch of [false, true]) {
    for (const causal of [false, true, 'upper-left']) {
      const alibiSlopes = slopesFor(perBatch ? 8 : 4);
      checkForward({ batch: 2, heads: 4, kvHeads: 2, seqQ: 13, seqK: 29, headDim: 6, causal, alibiSlopes });
    }
  }
});

test('sinks: rows sum to less than 1; a fully masked row gives zeros and lse = sink', () => {
  const sinks = Float32Array.from([0.5, -1, 2, 0]);
  checkForward({ heads: 4, kvHeads: 1, seqQ: 6, seqK: 30, headDim: 4, sinks });
  const options = { heads: 4, seqQ: 3, seqK: 5, headDim: 4, sinks, attendMask: new Uint8Array(15).fill(1) };
  options.attendMask.fill(0, 0, 5);  // row 0 sees nothing
  const { query, key, value } = makeInputs(options, 2);
  const lseOut = new Float32Array(12), weightsOut = new Float32Array(60);
  const out = lib.attention(query, key, value, { ...options, lseOut, weightsOut });
  for (let h = 0; h < 4; h++) {
    assert.equal(lseOut[h * 3], sinks[h]);
    for (let c = 0; c < 4; c++) assert.equal(out[h * 3 * 4 + c], 0);
    const sum = weightsOut.subarray((h * 3 + 1) * 5, (h * 3 + 2) * 5).reduce((a, b) => a + b, 0);
    assert.ok(sum < 1, `row sum ${sum}`);
  }
});

test('every variant together, and the backward of each against the reference (with dSinks)', () => {
  const base = { batch: 2, heads: 4, kvHeads: 2, seqQ: 7, seqK: 11, headDim: 5, valueDim: 3 };
  const variants = [
    { causal: 'upper-left' }, { causal: true, window: [2, 0] }, { window: [1, 3] }, { softcap: 1.5 },
    { alibiSlopes: slopesFor(4) }, { sinks: Float32Array.from([0.3, -0.5, 1, 0]) },
    { causal: true, window: [4, 0], softcap: 3, alibiSlopes: slopesFor(8), sinks: Float32Array.from([1, 0, -1, 0.5]), layout: 'bshd' },
  ];
  for (const v of variants) {
    const options = { ...base, ...v };
    checkForward(options, 4);
    const { query, key, value } = makeInputs(options, 5);
    const dOut = randomTensor(query.length / 5 * 3, rng(6));
    const got = lib.attentionBackward(query, key, value, dOut, options);
    const want = referenceAttentionBackward(query, key, value, dOut, options);
    for (const name of ['dQuery', 'dKey', 'dValue']) assertClose(got[name], want[name], `${JSON.stringify(v)} ${name}`, 1e-5);
    assert.equal('dSinks' in got, !!v.sinks);
    if (v.sinks) assertClose(got.dSinks, want.dSinks, 'dSinks', 1e-5);
    // From the forward's saved lse and out, too.
    const lseOut = new Float32Array(2 * 4 * 7);
    const out = lib.attention(query, key, value, { ...options, lseOut });
    const saved = lib.attentionBackward(query, key, value, dOut, { ...options, lse: lseOut, out });
    for (const name of Object.keys(got)) assertClose(saved[name], want[name], `${JSON.stringify(v)} ${name} (saved)`, 1e-5);
  }
});

test('bad variant options throw before any work, naming the function and the option', () => {
  const options = { heads: 2, seqQ: 3, headDim: 4 };
  const { query, key, value } = makeInputs(options);
  const cases = [
    [{ causal: 'top-left' }, TypeError, /^attention: options\.causal must be false, true, 'lower-right' or 'upper-left', got string "top-left"$/],
    [{ causal: 1 }, TypeError, /options\.causal must be/],
    [{ window: [-1, 0] }, RangeError, /^attention: options\.window \[-1, 0\]: each side must be an integer ≥ 0 or Infinity$/],
    [{ window: [1.5, 0] }, RangeError, /options\.window \[1\.5, 0\]/],
    [{ window: [NaN, 0] }, RangeError, /options\.window \[NaN, 0\]/],
    [{ window: [1] }, TypeError, /^attention: options\.window must be a two-element array \[left, right\], got \[1\]$/],
    [{ window: 4 }, TypeError, /options\.window must be a two-element array/],
    [{ softcap: -1 }, RangeError, /^attention: options\.softcap must be a finite number > 0 \(or 0 for none\), got -1$/],
    [{ softcap: NaN }, RangeError, /options\.softcap/],
    [{ softcap: Infinity }, RangeError, /options\.softcap/],
    [{ softcap: '50' }, TypeError, /options\.softcap must be a number/],
    [{ alibiSlopes: [0.5, 0.25] }, TypeError, /^attention: options\.alibiSlopes must be a Float32Array, got Array\(2\)$/],
    [{ alibiSlopes: new Float32Array(3) }, RangeError, /^attention: options\.alibiSlopes has length 3, expected 2 \(\[heads\]\) or 2/],
    [{ alibiSlopes: Float32Array.from([NaN, 1]) }, RangeError, /options\.alibiSlopes\[0\] is NaN; slopes must be finite/],
    [{ sinks: new Float32Array(3) }, RangeError, /^attention: options\.sinks has length 3, expected heads 2$/],
    [{ sinks: Float32Array.from([Infinity, 0]) }, RangeError, /options\.sinks\[0\] is Infinity; sinks must be finite or -Infinity/],
    [{ sinks: new Float64Array(2) }, TypeError, /options\.sinks must be a Float32Array, got Float64Array\(2\)/],
  ];
  for (const [bad, type, message] of cases) {
    assert.throws(() => lib.attention(query, key, value, { ...options, ...bad }), (e) => e instanceof type && message.test(e.message), JSON.stringify(bad));
  }
  assert.throws(() => lib.attentionWeights(query, key, { ...options, window: [0] }), /^TypeError: attentionWeights: options\.window/);
  assert.throws(() => lib.attentionBackward(query, key, value, query, { ...options, softcap: -2 }), /^RangeError: attentionBackward: options\.softcap/);
  // null means not given, as for every option.
  assertClose(lib.attention(query, key, value, { ...options, window: null, softcap: null, alibiSlopes: null, sinks: null, causal: null }),
    referenceAttention(query, key, value, options).out, 'nulls');
});

test('finite inputs never give NaN: scores that overflow float32, on both paths', () => {
  for (const seqQ of [5, 4]) {  // 5 query rows: the blocked path; 4: the few-rows path
    const out = lib.attention(new Float32Array(seqQ).fill(1e9), Float32Array.from([0, 1]), Float32Array.from([1, 2]),
      { heads: 1, seqQ, seqK: 2, headDim: 1, scale: 1e30 });
    assert.deepEqual([...out], new Array(seqQ).fill(2));
  }
  const out = lib.attention(new Float32Array(5).fill(3e38), Float32Array.from([0, 1e-10]), Float32Array.from([1, 2]),
    { heads: 1, seqQ: 5, seqK: 2, headDim: 1 });
  assert.deepEqual([...out], [2, 2, 2, 2, 2]);
});

// ---- properties ----

const shape = fc.record({
  heads: fc.integer({ min: 1, max: 3 }),
  seqQ: fc.integer({ min: 1, max: 24 }),
  seqK: fc.integer({ min: 1, max: 40 }),
  headDim: fc.integer({ min: 1, max: 9 }),
  causal: fc.constantFrom(false, true, 'upper-left'),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
});
const call = (s, extra) => {
  const options = { heads: s.heads, seqQ: s.seqQ, seqK: s.seqK, headDim: s.headDim, causal: s.causal, ...extra };
  const { query, key, value } = makeInputs(options, s.seed);
  return lib.attention(query, key, value, options);
};

test('property: window [Infinity, Infinity] is no window, bit for bit', () => {
  fc.assert(fc.property(shape, (s) => assert.deepEqual(call(s, { window: [Infinity, Infinity] }), call(s, {}))), { numRuns: 60 });
});

test('property: a huge softcap is no softcap (to float precision)', () => {
  fc.assert(fc.property(shape, (s) => assertClose(call(s, { softcap: 1e7 }), call(s, {}), 'softcap 1e7', 1e-6)), { numRuns: 60 });
});

test('property: sinks of -Infinity are no sinks, bit for bit', () => {
  fc.assert(fc.property(shape, (s) => assert.deepEqual(call(s, { sinks: new Float32Array(s.heads).fill(-Infinity) }), call(s, {}))), { numRuns: 60 });
});

test("property: 'upper-left' ≡ 'lower-right' when seqQ = seqK", () => {
  fc.assert(fc.property(shape, fc.option(fc.tuple(fc.nat(10), fc.nat(10)), { nil: undefined }), (s, window) => {
    const square = { ...s, seqK: s.seqQ };
    assert.deepEqual(call({ ...square, causal: 'upper-left' }, { window }), call({ ...square, causal: 'lower-right' }, { window }));
  }), { numRuns: 60 });
});

test('property: finite q, k, v and a finite scale never give NaN, on both paths', () => {
  fc.assert(fc.property(shape, fc.integer({ min: -20, max: 18 }), fc.double({ min: -1e30, max: 1e30, noNaN: true }),
    fc.boolean(), (s, exponent, scale, decode) => {
      const options = { heads: s.heads, seqQ: decode ? 1 : s.seqQ, seqK: s.seqK, headDim: s.headDim, causal: s.causal, scale };
      const { query, key, value } = makeInputs(options, s.seed);
      for (const x of [query, key]) for (let i = 0; i < x.length; i++) x[i] *= 10 ** exponent;
      const weightsOut = new Float32Array(options.heads * options.seqQ * s.seqK);
      const lseOut = new Float32Array(options.heads * options.seqQ);
      const out = lib.attention(query, key, value, { ...options, weightsOut, lseOut });
      for (const [name, x] of [['out', out], ['weights', weightsOut], ['lse', lseOut]]) {
        assert.ok(!x.some(Number.isNaN), `${name} has NaN (scale ${scale}, inputs ×1e${exponent})`);
      }
    }), { numRuns: 150 });
});
