// lib.attentionBackward() against the plain JS reference gradients (and a finite-difference
// check of the reference itself), across GQA, causal, masks and layouts; and its errors.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceAttention, referenceAttentionBackward } from './reference.mjs';
import { assertClose, loadAttention, makeInputs, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

const SHAPES = [
  { heads: 2, seqQ: 5, seqK: 7, headDim: 4 },
  { batch: 2, heads: 4, kvHeads: 2, seqQ: 9, seqK: 9, headDim: 8, valueDim: 5, causal: true },
  { heads: 3, kvHeads: 1, seqQ: 1, seqK: 40, headDim: 16 },
  { heads: 2, seqQ: 6, seqK: 11, headDim: 3, layout: 'bshd', attendMask: Uint8Array.from({ length: 66 }, (_, i) => (i % 4 ? 1 : 0)) },
  { heads: 1, seqQ: 4, seqK: 4, headDim: 2, mask: Float32Array.from({ length: 16 }, (_, i) => (i < 4 ? -Infinity : Math.sin(i))) },
];

test('gradients match the reference', () => {
  for (const [n, shape] of SHAPES.entries()) {
    const { query, key, value } = makeInputs(shape, n + 1);
    const dOut = randomTensor((shape.batch ?? 1) * shape.heads * shape.seqQ * (shape.valueDim ?? shape.headDim), rng(n + 50));
    const got = lib.attentionBackward(query, key, value, dOut, shape);
    const want = referenceAttentionBackward(query, key, value, dOut, shape);
    for (const name of ['dQuery', 'dKey', 'dValue']) assertClose(got[name], want[name], `${name} of shape ${n}`, 1e-5);
  }
});

test('the reference gradients agree with finite differences', () => {
  const shape = { batch: 1, heads: 2, kvHeads: 1, seqQ: 3, seqK: 4, headDim: 3, causal: true };
  const { query, key, value } = makeInputs(shape, 9);
  const dOut = randomTensor(2 * 3 * 3, rng(10));
  const toF64 = (a) => Float64Array.from(a);
  const [q, k, v] = [query, key, value].map(toF64);
  const loss = () => referenceAttention(q, k, v, shape).out.reduce((s, o, i) => s + o * dOut[i], 0);
  const want = referenceAttentionBackward(q, k, v, dOut, shape);
  for (const [x, grad] of [[q, want.dQuery], [k, want.dKey], [v, want.dValue]]) {
    for (let i = 0; i < x.length; i++) {
      const keep = x[i];
      x[i] = keep + 1e-6;
      const up = loss();
      x[i] = keep - 1e-6;
      const down = loss();
      x[i] = keep;
      assert.ok(Math.abs((up - down) / 2e-6 - grad[i]) < 1e-6, `element ${i}`);
    }
  }
});

test('argument errors', () => {
  const shape = SHAPES[0];
  const { query, key, value } = makeInputs(shape);
  assert.throws(() => lib.attentionBackward(query, key, value, new Float32Array(3), shape),
    /^RangeError: attentionBackward: dOut has length 3, expected 40 \(batch 1 × heads 2 × seqQ 5 × valueDim 4\)$/);
  assert.throws(() => lib.attentionBackward(query, key, value, [1], shape), /^TypeError: attentionBackward: dOut must be a Float32Array/);
  assert.throws(() => lib.attentionBackward(query, key, value, new Float32Array(40), { ...shape, weightsOut: new Float32Array(70) }),
    /^TypeError: attentionBackward: unknown option 'weightsOut'/);
  assert.throws(() => lib.attentionBackward(query, key, value, new Float32Array(40), { ...shape, out: new Float32Array(40) }),
    /^TypeError: attentionBackward: options\.lse and options\.out go together/);
  assert.throws(() => lib.attentionBackward(query, key, value, new Float32Array(40), { ...shape, lse: new Float32Array(3), out: new Float32Array(40) }),
    /^RangeError: attentionBackward: options\.lse has length 3, expected 10 \(batch 1 × heads 2 × seqQ 5\)$/);
});

test('lseOut gives each row\'s log-sum-exp; backward from the saved lse and out gives the same gradients', () => {
  for (const [n, shape] of SHAPES.entries()) {
    const { query, key, value } = makeInputs(shape, n + 1);
    const rows = (shape.batch ?? 1) * shape.heads * shape.seqQ;
    const lse = new Float32Array(rows);
    const out = lib.attention(query, key, value, { ...shape, lseOut: lse });
    // log Σ_j exp(score) from the reference's weights: lse = score − log(weight) for any visible key.
    const { weights } = referenceAttention(query, key, value, shape);
    const seqK = shape.seqK ?? shape.seqQ;
    for (let r = 0; r < rows; r++) {
      const row = weights.subarray(r * seqK, (r + 1) * seqK);
      if (row.every((w) => w === 0)) assert.equal(lse[r], -Infinity, `row ${r} has no visible key`);
      else assert.ok(Number.isFinite(lse[r]), `row ${r}`);
    }
    const dOut = randomTensor(out.length, rng(n + 70));
    const plain = lib.attentionBackward(query, key, value, dOut, shape);
    const saved = lib.attentionBackward(query, key, value, dOut, { ...shape, lse, out });
    for (const name of ['dQuery', 'dKey', 'dValue']) assertClose(saved[name], plain[name], `${name} of shape ${n}`, 1e-6);
  }
  // One row by hand: scores q·k / √d of a 1-key-dim case.
  const lse = new Float32Array(1);
  lib.attention(new Float32Array([2]), new Float32Array([1, -1, 0.5]), new Float32Array(3), { heads: 1, seqQ: 1, seqK: 3, headDim: 1, lseOut: lse });
  assert.ok(Math.abs(lse[0] - Math.log(Math.exp(2) + Math.exp(-2) + Math.exp(1))) < 1e-5);
});
