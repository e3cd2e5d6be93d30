// tensorParts (src/js/shapes.mjs): the tensors' shapes that consecutive calls of one shape share
// are frozen, so no caller can change another call's shapes (or its error messages).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tensorParts } from '../../src/js/shapes.mjs';

test('tensorParts: one shape\'s parts are shared between calls and frozen, every level of them', () => {
  const shape = { batch: 2, heads: 4, kvHeads: 2, seqQ: 3, seqK: 5, headDim: 8, valueDim: 6, layout: 'bhsd' };
  const parts = tensorParts(shape);
  assert.equal(tensorParts({ ...shape }), parts, 'the same shape gets the same parts');
  assert.deepEqual(parts.key, [['batch', 2], ['kvHeads', 2], ['seqK', 5], ['headDim', 8]]);
  assert.ok(Object.isFrozen(parts));
  for (const [name, pairs] of Object.entries(parts)) {
    assert.ok(Object.isFrozen(pairs) && pairs.every(Object.isFrozen), name);
  }
  assert.throws(() => { parts.query[2][1] = 99; }, TypeError);
  assert.deepEqual(tensorParts({ ...shape, layout: 'bshd' }).query, [['batch', 2], ['seqQ', 3], ['heads', 4], ['headDim', 8]]);
});
