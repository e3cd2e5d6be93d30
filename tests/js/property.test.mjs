// Property-based tests (fast-check): random valid calls match the plain JS reference; random
// invalid calls throw the documented TypeError or RangeError, and the library keeps working.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { before, test } from 'node:test';
import { referenceAttention } from './reference.mjs';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention(); });

const validCall = fc.record({
  batch: fc.integer({ min: 1, max: 2 }),
  kvHeads: fc.integer({ min: 1, max: 3 }),
  group: fc.integer({ min: 1, max: 3 }),
  seqQ: fc.integer({ min: 1, max: 20 }),
  seqK: fc.integer({ min: 1, max: 70 }),
  headDim: fc.integer({ min: 1, max: 20 }),
  valueDim: fc.integer({ min: 1, max: 20 }),
  layout: fc.constantFrom('bhsd', 'bshd'),
  causal: fc.boolean(),
  mask: fc.constantFrom('none', 'attendMask', 'blockMask', 'mask'),
  maskDims: fc.integer({ min: 0, max: 7 }),  // which of batch, heads, seqQ it has (the rest broadcast)
  scale: fc.option(fc.double({ min: -2, max: 2, noNaN: true }), { nil: undefined }),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
}).map((c) => {
  const random = rng(c.seed);
  const heads = c.kvHeads * c.group;
  const options = { batch: c.batch, heads, kvHeads: c.kvHeads, seqQ: c.seqQ, seqK: c.seqK, headDim: c.headDim,
    valueDim: c.valueDim, layout: c.layout, causal: c.causal, scale: c.scale };
  if (c.mask !== 'none') {
    const dims = [c.maskDims & 4 ? c.batch : 1, c.maskDims & 2 ? heads : 1, c.maskDims & 1 ? c.seqQ : 1, c.seqK];
    const n = dims.reduce((a, d) => a * d, 1);
    options.maskShape = dims;
    options[c.mask] = c.mask === 'mask'
      ? Float32Array.from({ length: n }, () => (random() < 0.2 ? -Infinity : random() * 2 - 1))
      : Uint8Array.from({ length: n }, () => (random() < 0.8 ? 1 : 0));
  }
  return {
    options,
    query: randomTensor(c.batch * heads * c.seqQ * c.headDim, random),
    key: randomTensor(c.batch * c.kvHeads * c.seqK * c.headDim, random),
    value: randomTensor(c.batch * c.kvHeads * c.seqK * c.valueDim, random),
  };
});

function matchesReference({ query, key, value, options }) {
  const got = lib.attention(query, key, value, options);
  const want = referenceAttention(query, key, value, options).out;
  for (let i = 0; i < got.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= 2e-5 + 1e-4 * Math.abs(want[i]))) return false;
  }
  return true;
}

test('random valid calls match the reference', () => {
  fc.assert(fc.property(validCall, matchesReference), { numRuns: 200, seed: 20261129 });
});

// Each mutation breaks one thing and names the error type the contract promises.
const MUTATIONS = [
  [TypeError, (c) => ({ ...c, query: Array.from(c.query) })],
  [TypeError, (c) => ({ ...c, key: new Float64Array(c.key) })],
  [RangeError, (c) => ({ ...c, value: c.value.subarray(1) })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, heads: c.options.heads + 1, kvHeads: c.options.heads + 2 } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, headDim: -c.options.headDim } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, seqQ: c.options.seqQ + 0.5 } })],
  [TypeError, (c) => ({ ...c, options: { ...c.options, seqk: 3 } })],
  [TypeError, (c) => ({ ...c, options: { ...c.options, heads: undefined } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, layout: 'hsbd' } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, scale: Number.NaN } })],
  [TypeError, (c) => ({ ...c, options: { ...c.options, causal: 'yes' } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, attendMask: new Uint8Array(c.options.batch * c.options.heads * c.options.seqQ * c.options.seqK + 1), mask: undefined, blockMask: undefined, maskShape: undefined } })],
  [TypeError, (c) => ({ ...c, options: { ...c.options, mask: new Int16Array(4), attendMask: undefined, blockMask: undefined } })],
  [TypeError, (c) => ({ ...c, options: { ...c.options, mask: new Uint8Array(c.options.seqQ * c.options.seqK), attendMask: undefined, blockMask: undefined } })],
  [RangeError, (c) => ({ ...c, options: { ...c.options, out: new Float32Array(1) } })],
];

test('random invalid calls throw TypeError or RangeError, and the library keeps working', () => {
  fc.assert(fc.property(validCall, fc.integer({ min: 0, max: MUTATIONS.length - 1 }), (call, m) => {
    const [type, mutate] = MUTATIONS[m];
    const bad = mutate(call);
    assert.throws(() => lib.attention(bad.query, bad.key, bad.value, bad.options), type);
    return matchesReference(call);
  }), { numRuns: 300, seed: 7 });
});
