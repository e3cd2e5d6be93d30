// attention() and attentionWeights() against the plain JS reference, through the built package.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { referenceAttention } from './reference.mjs';
import { assertClose, loadAttention, makeInputs, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention(); });

function checkAgainstReference(opts, seed = 1) {
  const { query, key, value } = makeInputs(opts, seed);
  const want = referenceAttention(query, key, value, opts);
  const weightsOut = new Float32Array(want.weights.length).fill(NaN);
  const out = lib.attention(query, key, value, { ...opts, weightsOut });
  assertClose(out, want.out, `out ${JSON.stringify(opts, (k, v) => (ArrayBuffer.isView(v) ? v.constructor.name : v))}`);
  assertClose(weightsOut, want.weights, 'weightsOut');
  assertClose(lib.attentionWeights(query, key, withoutValueOptions(opts)), want.weights, 'attentionWeights');
}

function withoutValueOptions(opts) {
  const { valueDim, out, weightsOut, ...rest } = opts;
  return rest;
}

// A mask for option `kind` ('mask', 'attendMask' or 'blockMask') with ~25% masked entries and,
// when it has rows (`rows` > 1), the first row of every slice fully masked.
function randomMask(kind, length, rows, seqK, seed) {
  const random = rng(seed);
  const mask = kind === 'mask' ? new Float32Array(length) : new Uint8Array(length);
  for (let e = 0; e < length; e++) {
    const keep = random() > 0.25 && (rows === 1 || Math.floor(e / seqK) % rows !== 0);
    mask[e] = kind === 'mask' ? (keep ? random() * 2 - 1 : -Infinity) : Number(keep === (kind === 'attendMask'));
  }
  return mask;
}

describe('matches the reference', () => {
  test('head dims around the SIMD width', () => {
    for (const headDim of [1, 3, 4, 5, 7, 8, 15, 16, 17, 64, 80, 128]) {
      checkAgainstReference({ heads: 2, seqQ: 5, seqK: 9, headDim });
    }
  });

  test('odd and unequal sequence lengths, causal and not', () => {
    for (const [seqQ, seqK] of [[1, 1], [1, 2], [2, 1], [33, 33], [113, 203], [203, 113], [64, 65], [1, 257]]) {
      for (const causal of [false, true]) checkAgainstReference({ heads: 1, seqQ, seqK, headDim: 8, causal });
    }
  });

  test('multi-head, grouped-query and multi-query, batch 2', () => {
    for (const kvHeads of [6, 3, 2, 1]) {
      checkAgainstReference({ batch: 2, heads: 6, kvHeads, seqQ: 7, seqK: 13, headDim: 4, causal: kvHeads === 2 });
      checkAgainstReference({ batch: 2, heads: 6, kvHeads, seqQ: 1, seqK: 40, headDim: 16 });  // decode step
    }
  });

  test('valueDim different from headDim', () => {
    checkAgainstReference({ heads: 2, seqQ: 4, seqK: 70, headDim: 8, valueDim: 3 });
    checkAgainstReference({ heads: 2, seqQ: 4, seqK: 6, headDim: 3, valueDim: 33 });
  });

  test('layout bshd, with GQA and causal', () => {
    checkAgainstReference({ batch: 2, heads: 4, kvHeads: 2, seqQ: 6, seqK: 11, headDim: 5, valueDim: 7, layout: 'bshd', causal: true });
  });

  test('every mask kind and shape PyTorch broadcasts, alone and with causal', () => {
    const batch = 2, heads = 4, seqQ = 5, seqK = 70;
    const shapes = [[seqQ, seqK], [batch, 1, seqQ, seqK], [batch, heads, seqQ, seqK], [batch, 1, 1, seqK], [heads, seqQ, seqK],
      [1, heads, seqQ, seqK], [seqK], [batch, heads, 1, seqK], [heads, 1, seqK], [batch * heads, seqQ, seqK]];
    for (const kind of ['mask', 'attendMask', 'blockMask']) {
      for (const [n, maskShape] of shapes.entries()) {
        for (const causal of [false, true]) {
          const length = maskShape.reduce((a, d) => a * d, 1), rows = maskShape.length > 1 ? maskShape.at(-2) : 1;
          const mask = randomMask(kind, length, rows, seqK, 10 * n + (causal ? 1 : 0));
          checkAgainstReference({ batch, heads, kvHeads: 2, seqQ, seqK, headDim: 6, [kind]: mask, maskShape, causal });
        }
      }
    }
  });

  test('explicit scale, scale 0 and large logits', () => {
    checkAgainstReference({ heads: 2, seqQ: 6, seqK: 9, headDim: 4, scale: 0.7 });
    const { query, key } = makeInputs({ heads: 1, seqQ: 3, seqK: 10, headDim: 4 });
    const uniform = lib.attentionWeights(query, key, { heads: 1, seqQ: 3, seqK: 10, headDim: 4, scale: 0 });
    for (const w of uniform) assert.ok(Math.abs(w - 0.1) < 1e-6, `scale 0 gives uniform weights, got ${w}`);
    // Scores of about ±1e3: integer inputs keep them exact; softmax must stay finite and stable.
    const random = rng(5);
    const q = new Float32Array(2 * 16).map(() => Math.round((random() * 2 - 1) * 8));
    const k = new Float32Array(40 * 16).map(() => Math.round((random() * 2 - 1) * 8));
    const v = randomTensor(40 * 3, random);
    const opts = { heads: 1, seqQ: 2, seqK: 40, headDim: 16, valueDim: 3, scale: 1 };
    const want = referenceAttention(q, k, v, opts);
    assertClose(lib.attention(q, k, v, opts), want.out, 'large logits', 1e-3);
  });

  test('defaults: null means undefined for every option', () => {
    const opts = { heads: 2, seqQ: 3, headDim: 4 };
    const { query, key, value } = makeInputs(opts);
    const plain = lib.attention(query, key, value, opts);
    const nulls = lib.attention(query, key, value, {
      ...opts, batch: null, kvHeads: null, seqK: null, valueDim: null, layout: null, scale: null, causal: null,
      mask: null, out: null, weightsOut: null,
    });
    assert.deepEqual(nulls, plain);
    const explicit = lib.attention(query, key, value, {
      ...opts, batch: 1, kvHeads: 2, seqK: 3, valueDim: 4, layout: 'bhsd', scale: 0.5, causal: false,
    });
    assert.deepEqual(explicit, plain);
  });
});

describe('masking edge cases', () => {
  test('a fully masked row gives zeros, never NaN', () => {
    const opts = { heads: 1, seqQ: 3, seqK: 130, headDim: 4 };
    const { query, key, value } = makeInputs(opts);
    const masks = { attendMask: new Uint8Array(3 * 130).fill(1), blockMask: new Uint8Array(3 * 130), mask: new Float32Array(3 * 130) };
    for (const [kind, mask] of Object.entries(masks)) {
      mask.fill(kind === 'attendMask' ? 0 : kind === 'blockMask' ? 1 : -Infinity, 130, 260);  // row 1 sees nothing
      const weightsOut = new Float32Array(3 * 130);
      const out = lib.attention(query, key, value, { ...opts, [kind]: mask, weightsOut });
      assert.deepEqual([...out.subarray(4, 8)], [0, 0, 0, 0]);
      assert.ok(weightsOut.subarray(130, 260).every((w) => w === 0));
      assert.ok(out.every(Number.isFinite));
      const want = referenceAttention(query, key, value, { ...opts, [kind]: mask });
      assertClose(out, want.out, 'other rows');
    }
  });

  test('causal with seqQ > seqK: rows before the first key are zeros', () => {
    const opts = { heads: 1, seqQ: 5, seqK: 2, headDim: 2, causal: true };
    const { query, key } = makeInputs(opts);
    const w = lib.attentionWeights(query, key, opts);
    assert.deepEqual([...w], [0, 0, 0, 0, 0, 0, 1, 0, w[8], w[9]]);
    assert.ok(Math.abs(w[8] + w[9] - 1) < 1e-6);
  });

  test('causal with seqQ == seqK equals torch.tril', () => {
    const opts = { heads: 1, seqQ: 4, headDim: 3, causal: true };
    const { query, key } = makeInputs(opts);
    const w = lib.attentionWeights(query, key, opts);
    for (let i = 0; i < 4; i++) {
      for (let j = 0; j < 4; j++) assert.equal(w[i * 4 + j] > 0, j <= i, `weight (${i}, ${j})`);
    }
  });
});

describe('arrays: views, ownership, outputs', () => {
  const opts = { heads: 2, seqQ: 5, seqK: 7, headDim: 3 };

  test('views with a byteOffset into a larger buffer work', () => {
    const { query, key, value } = makeInputs(opts);
    const want = lib.attention(query, key, value, opts);
    const buffer = new ArrayBuffer(4 * (query.length + key.length + value.length + 3));
    const q = new Float32Array(buffer, 4, query.length); q.set(query);
    const k = new Float32Array(buffer, 4 * (1 + query.length), key.length); k.set(key);
    const v = new Float32Array(buffer, 4 * (2 + query.length + key.length), value.length); v.set(value);
    assert.deepEqual(lib.attention(q, k, v, opts), want);
    const out = new Float32Array(new ArrayBuffer(4 * (want.length + 5)), 8, want.length);
    assert.equal(lib.attention(q, k, v, { ...opts, out }), out);
    assert.deepEqual(out, want);
  });

  test('inputs are never modified', () => {
    const { query, key, value } = makeInputs(opts);
    const copies = [query.slice(), key.slice(), value.slice()];
    const mask = new Float32Array(5 * 7).fill(0.5);
    lib.attention(query, key, value, { ...opts, mask, weightsOut: new Float32Array(2 * 5 * 7) });
    assert.deepEqual([query, key, value], copies);
    assert.ok(mask.every((m) => m === 0.5));
  });

  test('returned arrays are owned by the caller: later calls never overwrite them', () => {
    const a = makeInputs(opts, 1);
    const b = makeInputs(opts, 2);
    const first = lib.attention(a.query, a.key, a.value, opts);
    const saved = first.slice();
    const firstWeights = lib.attentionWeights(a.query, a.key, opts);
    const savedWeights = firstWeights.slice();
    lib.attention(b.query, b.key, b.value, opts);
    lib.attentionWeights(b.query, b.key, opts);
    assert.deepEqual(first, saved);
    assert.deepEqual(firstWeights, savedWeights);
    assert.notEqual(first.buffer, lib.attention(a.query, a.key, a.value, opts).buffer);
  });

  test('out and weightsOut are filled completely and out is returned', () => {
    const { query, key, value } = makeInputs(opts);
    const out = new Float32Array(2 * 5 * 3).fill(NaN);
    const weightsOut = new Float32Array(2 * 5 * 7).fill(NaN);
    const ret = lib.attention(query, key, value, { ...opts, out, weightsOut });
    assert.equal(ret, out);
    assert.ok(out.every(Number.isFinite) && weightsOut.every(Number.isFinite));
    const w = new Float32Array(2 * 5 * 7).fill(NaN);
    assert.equal(lib.attentionWeights(query, key, { ...opts, out: w }), w);
    assert.deepEqual(w, weightsOut);
  });

  test('many calls in a row, with wasm memory growth in between', () => {
    const small = makeInputs(opts, 3);
    const want = lib.attention(small.query, small.key, small.value, opts);
    const memoryBefore = lib.memoryUsage().wasmMemory;
    for (let i = 0; i < 200; i++) {
      assert.deepEqual(lib.attention(small.query, small.key, small.value, opts), want);
      if (i === 100) {
        // ~48 MiB of inputs plus weights: forces the wasm heap past its initial 16 MiB.
        const big = { heads: 4, seqQ: 512, seqK: 1024, headDim: 64 };
        const x = makeInputs(big, 9);
        const weightsOut = new Float32Array(4 * 512 * 1024);
        const out = lib.attention(x.query, x.key, x.value, { ...big, weightsOut });
        assert.ok(out.every(Number.isFinite));
        const rowSum = weightsOut.subarray(0, 1024).reduce((s, w) => s + w, 0);
        assert.ok(Math.abs(rowSum - 1) < 1e-4, `weights row sums to 1, got ${rowSum}`);
        assert.ok(lib.memoryUsage().wasmMemory > memoryBefore, 'the big call grew wasm memory');
      }
    }
  });
});
