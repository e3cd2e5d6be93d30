// lib.linear(): x·Wᵀ + b against the plain JS reference, and its argument errors.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceLinear } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention(); });

test('matches x·Wᵀ + b on odd sizes, with and without bias', () => {
  const random = rng(3);
  for (const [rows, inF, outF] of [[1, 1, 1], [3, 5, 7], [4, 8, 8], [9, 257, 19], [2, 600, 3]]) {
    const x = randomTensor(rows * inF, random);
    const w = randomTensor(outF * inF, random, 1 / Math.sqrt(inF));
    const b = randomTensor(outF, random);
    assertClose(lib.linear(x, w, { inFeatures: inF, outFeatures: outF, bias: b }), referenceLinear(x, rows, inF, w, b, outF), `linear ${rows}x${inF}->${outF}`);
    assertClose(lib.linear(x, w, { inFeatures: inF, outFeatures: outF, rows }), referenceLinear(x, rows, inF, w, null, outF), 'no bias');
  }
  const out = new Float32Array(2);
  assert.equal(lib.linear(new Float32Array([1, 2]), new Float32Array([3, 4, 5, 6]), { inFeatures: 2, outFeatures: 2, out }), out);
  assert.deepEqual([...out], [11, 17]);
});

test('argument errors', () => {
  const x = new Float32Array(6), w = new Float32Array(6);
  assert.throws(() => lib.linear(x, w, { inFeatures: 4, outFeatures: 1 }), /^RangeError: linear: input has length 6, not a positive multiple of inFeatures 4$/);
  assert.throws(() => lib.linear(x, w, { inFeatures: 3, outFeatures: 3 }), /^RangeError: linear: weight has length 6, expected 9 \(outFeatures 3 × inFeatures 3\)$/);
  assert.throws(() => lib.linear([1], w, { inFeatures: 1, outFeatures: 6 }), /^TypeError: linear: input must be a Float32Array, got Array\(1\)$/);
  assert.throws(() => lib.linear(x, w, { inFeatures: 3, outFeatures: 2, bias: new Float32Array(3) }), /^RangeError: linear: options\.bias has length 3, expected 2/);
  assert.throws(() => lib.linear(x, w, { inFeatures: 3 }), /^TypeError: linear: options\.outFeatures is required/);
  assert.throws(() => lib.linear(x, w, { in: 3, outFeatures: 2 }), /^TypeError: linear: unknown option 'in'/);
});
