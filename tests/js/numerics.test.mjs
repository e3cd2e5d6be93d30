// The numerics contract (docs/api.md, "Guarantees"): NaN reaches the outputs it touches and only
// those; ±Infinity scores; all-masked rows; scale 0, tiny and huge; denormals.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceAttention } from './reference.mjs';
import { assertClose, loadAttention, makeInputs } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention(); });

const rowOf = (a, i, width) => [...a.subarray(i * width, (i + 1) * width)];
const allNaN = (xs) => xs.every(Number.isNaN);
const allFinite = (xs) => xs.every(Number.isFinite);

test('NaN in a query row: exactly that output row is NaN', () => {
  for (const seqQ of [2, 40]) {  // the few-rows (decode) path and the blocked path
    const opts = { heads: 2, seqQ, seqK: 70, headDim: 8 };
    const { query, key, value } = makeInputs(opts);
    query[(1 * seqQ + 1) * 8 + 3] = NaN;  // head 1, row 1
    const weightsOut = new Float32Array(2 * seqQ * 70);
    const out = lib.attention(query, key, value, { ...opts, weightsOut });
    for (let h = 0; h < 2; h++) {
      for (let i = 0; i < seqQ; i++) {
        const row = rowOf(out, h * seqQ + i, 8);
        const weights = rowOf(weightsOut, h * seqQ + i, 70);
        if (h === 1 && i === 1) assert.ok(allNaN(row) && allNaN(weights), `row ${h},${i} is NaN`);
        else assert.ok(allFinite(row) && allFinite(weights), `row ${h},${i} is finite`);
      }
    }
  }
});

test('NaN in a key row: the rows that may attend it are NaN; causal and boolean masks shield the others', () => {
  for (const seqQ of [3, 20]) {
    const opts = { heads: 1, seqQ, headDim: 4, causal: true };
    const { query, key, value } = makeInputs(opts);
    key[2 * 4] = NaN;  // key 2
    const out = lib.attention(query, key, value, opts);
    for (let i = 0; i < seqQ; i++) assert.equal(allNaN(rowOf(out, i, 4)), i >= 2, `row ${i}`);
    const mask = new Uint8Array(seqQ * seqQ).fill(1);
    for (let i = 0; i < seqQ; i++) mask[i * seqQ + 2] = 0;  // nobody attends key 2
    assert.ok(allFinite(lib.attention(query, key, value, { ...opts, attendMask: mask })), 'a boolean mask excludes the NaN key');
  }
});

test('NaN in a value row reaches the rows that weigh it, never other heads', () => {
  const opts = { heads: 2, kvHeads: 2, seqQ: 5, headDim: 4 };
  const { query, key, value } = makeInputs(opts);
  value[(0 * 5 + 3) * 4 + 1] = NaN;  // kv head 0, key 3, column 1
  const out = lib.attention(query, key, value, opts);
  for (let i = 0; i < 5; i++) {
    assert.ok(Number.isNaN(out[(0 * 5 + i) * 4 + 1]), `head 0 row ${i} column 1`);
    assert.ok(allFinite(rowOf(out, 5 + i, 4)), `head 1 row ${i}`);
  }
});

test('+Infinity scores take all the weight, shared equally; -Infinity scores get none', () => {
  // headDim 1, scale 1: score(i, j) = q_i · k_j, so 1e30 · 1e30 overflows to +Infinity.
  const query = new Float32Array([1e30, 1]);
  const key = new Float32Array([1, 1e30, -1e30, 1e30]);
  const value = new Float32Array([1, 2, 3, 4]);
  const opts = { heads: 1, seqQ: 2, seqK: 4, headDim: 1, scale: 1 };
  const w = lib.attentionWeights(query, key, opts);
  assert.deepEqual([...w.subarray(0, 4)], [0, 0.5, 0, 0.5]);  // keys 1 and 3 score +∞, key 2 −∞
  const out = lib.attention(query, key, value, opts);
  assert.equal(out[0], 3);  // (2 + 4) / 2
  assert.ok(Number.isFinite(out[1]));
  // A +Infinity additive mask does the same.
  const mask = new Float32Array([0, 0, Infinity, 0, 0, 0, 0, 0]);
  assert.deepEqual([...lib.attentionWeights(new Float32Array([1, 1]), new Float32Array(4), { ...opts, mask }).subarray(0, 4)], [0, 0, 1, 0]);
});

test('a row whose every score is -Infinity gives zeros', () => {
  const opts = { heads: 1, seqQ: 2, seqK: 3, headDim: 2 };
  const { query, key, value } = makeInputs(opts);
  const mask = new Float32Array([-Infinity, -Infinity, -Infinity, 0, 0, 0]);
  const weightsOut = new Float32Array(6);
  const out = lib.attention(query, key, value, { ...opts, mask, weightsOut });
  assert.deepEqual([...out.subarray(0, 2)], [0, 0]);
  assert.deepEqual([...weightsOut.subarray(0, 3)], [0, 0, 0]);
});

test('scale 0, tiny and huge', () => {
  const opts = { heads: 2, seqQ: 4, seqK: 9, headDim: 5 };
  const { query, key, value } = makeInputs(opts);
  for (const scale of [0, 1e-30, Number.MIN_VALUE]) {
    const w = lib.attentionWeights(query, key, { ...opts, scale });
    for (const x of w) assert.ok(Math.abs(x - 1 / 9) < 1e-6, `scale ${scale}: uniform weights, got ${x}`);
  }
  // Huge scales turn the softmax into an argmax (ties split); never NaN.
  const w = lib.attentionWeights(query, key, { ...opts, scale: 1e30 });
  for (let r = 0; r < 8; r++) {
    const row = rowOf(w, r, 9);
    assert.ok(allFinite(row));
    assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-6);
    assert.equal(Math.max(...row), 1, `row ${r} picks one key`);
  }
  const want = referenceAttention(query, key, value, { ...opts, scale: 3.5 });
  assertClose(lib.attention(query, key, value, { ...opts, scale: 3.5 }), want.out, 'scale 3.5');
});

test('denormal inputs give the right (tiny or uniform) answers', () => {
  const opts = { heads: 1, seqQ: 3, seqK: 5, headDim: 4 };
  const tiny = 1e-40;  // below float32's normal range
  const query = new Float32Array(12).fill(tiny);
  const key = new Float32Array(20).fill(-tiny);
  const value = Float32Array.from({ length: 20 }, (_, i) => i * tiny);
  const w = lib.attentionWeights(query, key, opts);
  for (const x of w) assert.ok(Math.abs(x - 0.2) < 1e-6);
  const out = lib.attention(query, key, value, opts);
  const want = referenceAttention(query, key, value, opts).out;
  out.forEach((x, i) => assert.ok(Math.abs(x - want[i]) <= 1e-45 + 1e-3 * Math.abs(want[i]), `out[${i}] ${x} vs ${want[i]}`));
});
