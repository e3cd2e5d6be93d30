// MultiHeadAttention and KVCache through the built package, against the plain JS reference.
// Tolerance: |got − want| <= 5e-5 + 1e-4·|want| (three float GEMMs around the attention).
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { referenceMha } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

// Random weights for a config, scaled by 1/√in so activations stay near [-1, 1].
function randomWeights(config, seed = 1) {
  const random = rng(seed);
  const e = config.embedDim;
  const kv = (config.numKvHeads ?? config.numHeads) * (e / config.numHeads);
  const kdim = config.kdim ?? e;
  const vdim = config.vdim ?? e;
  const w = {
    wq: randomTensor(e * e, random, 1 / Math.sqrt(e)), wk: randomTensor(kv * kdim, random, 1 / Math.sqrt(kdim)),
    wv: randomTensor(kv * vdim, random, 1 / Math.sqrt(vdim)), wo: randomTensor(e * e, random, 1 / Math.sqrt(e)),
  };
  if (config.bias !== false) {
    Object.assign(w, { bq: randomTensor(e, random, 0.5), bk: randomTensor(kv, random, 0.5), bv: randomTensor(kv, random, 0.5), bo: randomTensor(e, random, 0.5) });
  }
  return w;
}

function layer(config, seed) {
  const weights = randomWeights(config, seed);
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(weights);
  return { mha, weights };
}

const close = (got, want, what) => assertClose(got, want, what, 5e-5);

describe('forward matches torch.nn.MultiheadAttention semantics', () => {
  test('self-attention, with and without bias, batch 1 and 2, causal and not', () => {
    for (const bias of [true, false]) {
      const config = { embedDim: 16, numHeads: 4, bias };
      const { mha, weights } = layer(config, 2);
      for (const batch of [1, 2]) {
        for (const causal of [false, true]) {
          const x = randomTensor(batch * 5 * 16, rng(batch));
          const weightsOut = new Float32Array(batch * 4 * 5 * 5);
          const want = referenceMha(config, weights, x, null, null, { batch, causal });
          close(mha.forward(x, null, null, { batch, causal, weightsOut }), want.out, `out bias=${bias} batch=${batch} causal=${causal}`);
          close(weightsOut, want.weights, 'weightsOut');
        }
      }
      mha.dispose();
    }
  });

  test('cross-attention with kdim and vdim different from embedDim, seqK != seqQ, out', () => {
    const config = { embedDim: 12, numHeads: 3, kdim: 7, vdim: 5 };
    const { mha, weights } = layer(config, 3);
    const random = rng(4);
    const [xq, xk, xv] = [randomTensor(2 * 4 * 12, random), randomTensor(2 * 9 * 7, random), randomTensor(2 * 9 * 5, random)];
    const want = referenceMha(config, weights, xq, xk, xv, { batch: 2 });
    const out = new Float32Array(2 * 4 * 12);
    assert.equal(mha.forward(xq, xk, xv, { batch: 2, seqQ: 4, seqK: 9, out }), out);
    close(out, want.out, 'out');
    close(mha.forward(xq, xk, xv, { batch: 2 }), want.out, 'seqQ and seqK inferred from lengths');
    mha.dispose();
  });

  test('value defaults to key, key defaults to query', () => {
    const config = { embedDim: 8, numHeads: 2 };
    const { mha } = layer(config, 5);
    const x = randomTensor(3 * 8, rng(6));
    const y = randomTensor(4 * 8, rng(7));
    assert.deepEqual(mha.forward(x, y), mha.forward(x, y, y));
    assert.deepEqual(mha.forward(x), mha.forward(x, x, x));
    mha.dispose();
  });

  test('grouped-query layers (Llama style)', () => {
    for (const numKvHeads of [4, 2, 1]) {
      const config = { embedDim: 32, numHeads: 8, numKvHeads };
      const { mha, weights } = layer(config, 8);
      const x = randomTensor(2 * 7 * 32, rng(9));
      close(mha.forward(x, null, null, { batch: 2, causal: true }), referenceMha(config, weights, x, null, null, { batch: 2, causal: true }).out, `numKvHeads ${numKvHeads}`);
      mha.dispose();
    }
  });

  test('every mask kind with key padding; a fully padded row outputs bo', () => {
    const config = { embedDim: 8, numHeads: 2 };
    const { mha, weights } = layer(config, 10);
    const batch = 2, seq = 6;
    const x = randomTensor(batch * seq * 8, rng(11));
    const plane = seq * seq;
    // batch equals heads: a mask of batch·seqQ·seqK may be [batch, 1, seqQ, seqK] or [heads, seqQ,
    // seqK], so its shape is stated.
    const masks = [
      {},
      { attendMask: Uint8Array.from({ length: plane }, (_, i) => (i % 4 !== 1 ? 1 : 0)) },
      { mask: Float32Array.from({ length: batch * plane }, (_, i) => (i % 5 === 0 ? -Infinity : Math.sin(i))), maskShape: [batch, 1, seq, seq] },
      { blockMask: Uint8Array.from({ length: 2 * plane }, (_, i) => (i % 3 === 0 ? 1 : 0)), maskShape: [2, seq, seq] },
      { attendMask: Uint8Array.from({ length: batch * 2 * plane }, (_, i) => (i % 3 !== 0 ? 1 : 0)) },
    ];
    // Entry 0 pads its last key; entry 1 pads every key.
    const keyPaddingMask = Uint8Array.from({ length: batch * seq }, (_, i) => (i === seq - 1 || i >= seq ? 1 : 0));
    for (const mask of masks) {
      const weightsOut = new Float32Array(batch * 2 * plane);
      const out = mha.forward(x, null, null, { batch, ...mask, keyPaddingMask, weightsOut });
      const want = referenceMha(config, weights, x, null, null, { batch, ...mask, keyPaddingMask });
      close(out, want.out, `out with mask ${Object.keys(mask)}`);
      close(weightsOut, want.weights, 'weightsOut');
      for (let i = seq; i < 2 * seq; i++) assert.deepEqual(out.subarray(i * 8, i * 8 + 8), weights.bo, `padded row ${i} equals bo`);
    }
    mha.dispose();
  });

  test('a model exported from nn.MultiheadAttention loads by splitting in_proj_weight into thirds', () => {
    const e = 8;
    const config = { embedDim: e, numHeads: 2 };
    const random = rng(12);
    const inProjWeight = randomTensor(3 * e * e, random, 0.3);  // [3E, E]: q, k, v stacked
    const inProjBias = randomTensor(3 * e, random);
    const outProj = { weight: randomTensor(e * e, random, 0.3), bias: randomTensor(e, random) };
    const mha = new lib.MultiHeadAttention(config);
    mha.setWeights({
      wq: inProjWeight.subarray(0, e * e), wk: inProjWeight.subarray(e * e, 2 * e * e), wv: inProjWeight.subarray(2 * e * e),
      bq: inProjBias.subarray(0, e), bk: inProjBias.subarray(e, 2 * e), bv: inProjBias.subarray(2 * e),
      wo: outProj.weight, bo: outProj.bias,
    });
    const x = randomTensor(3 * e, random);
    const want = referenceMha(config, {
      wq: inProjWeight.slice(0, e * e), wk: inProjWeight.slice(e * e, 2 * e * e), wv: inProjWeight.slice(2 * e * e),
      bq: inProjBias.slice(0, e), bk: inProjBias.slice(e, 2 * e), bv: inProjBias.slice(2 * e), wo: outProj.weight, bo: outProj.bias,
    }, x);
    close(mha.forward(x), want.out, 'out');
    mha.dispose();
  });
});

describe('KV cache', () => {
  // Feeds the sequence in chunks through a cache and compares each chunk with the matching rows
  // of one causal forward over the whole sequence.
  function checkChunks(mha, batch, chunks, seed) {
    const e = mha.config.embedDim;
    const total = chunks.reduce((a, b) => a + b, 0);
    const x = randomTensor(batch * total * e, rng(seed));
    const full = mha.forward(x, null, null, { batch, causal: true });
    const cache = mha.createCache({ batch, maxSeq: total });
    let at = 0;
    for (const n of chunks) {
      const chunk = new Float32Array(batch * n * e);
      for (let b = 0; b < batch; b++) chunk.set(x.subarray((b * total + at) * e, (b * total + at + n) * e), b * n * e);
      const out = mha.forward(chunk, null, null, { seqQ: n, cache });
      at += n;
      assert.equal(cache.length, at);
      for (let b = 0; b < batch; b++) {
        close(out.subarray(b * n * e, (b + 1) * n * e), full.subarray((b * total + at - n) * e, (b * total + at) * e), `chunk ending at ${at}, batch ${b}`);
      }
    }
    cache.dispose();
  }

  test('chunked decoding equals one causal forward (several chunkings, batch 2, GQA)', () => {
    const { mha } = layer({ embedDim: 16, numHeads: 4 }, 20);
    checkChunks(mha, 1, [5, 1, 1, 3], 21);
    checkChunks(mha, 2, [1, 1, 1, 1, 1], 22);
    mha.dispose();
    const gqa = layer({ embedDim: 24, numHeads: 6, numKvHeads: 2, bias: false }, 23).mha;
    checkChunks(gqa, 2, [5, 1, 1, 3], 24);
    checkChunks(gqa, 1, [2, 67, 1], 25);
    gqa.dispose();
  });

  test('reset() starts a new sequence; filling exactly to maxSeq works; overflow leaves the cache intact', () => {
    const { mha } = layer({ embedDim: 8, numHeads: 2 }, 30);
    const x = randomTensor(4 * 8, rng(31));
    const cache = mha.createCache({ batch: 1, maxSeq: 4 });
    assert.deepEqual([cache.batch, cache.maxSeq, cache.length], [1, 4, 0]);
    const first = mha.forward(x, null, null, { cache });
    assert.equal(cache.length, 4);
    assert.throws(() => mha.forward(x.subarray(0, 8), null, null, { cache }),
      /^RangeError: MultiHeadAttention\.forward: options\.cache has room for 0 more positions \(maxSeq 4, length 4\), got seqQ 1$/);
    assert.equal(cache.length, 4);
    cache.reset();
    assert.equal(cache.length, 0);
    mha.forward(x.subarray(0, 24), null, null, { cache });
    assert.throws(() => mha.forward(x.subarray(0, 16), null, null, { cache }), RangeError);
    assert.equal(cache.length, 3);
    // The intact cache still works: the last row as the 4-row call gave it. One row and four take
    // different paths, equal to float rounding, not bit for bit (only thread counts are).
    const last = mha.forward(x.subarray(24), null, null, { cache });
    assertClose(last, first.subarray(24), 'the row after a refused overflow', 1e-6);
    cache.dispose();
    mha.dispose();
  });

  test('wrong uses of a cache throw clear errors', () => {
    const a = layer({ embedDim: 8, numHeads: 2 }, 40).mha;
    const b = layer({ embedDim: 8, numHeads: 2 }, 41).mha;
    const x = randomTensor(8, rng(42));
    const cache = a.createCache({ batch: 1, maxSeq: 8 });
    assert.throws(() => b.forward(x, null, null, { cache }), /^Error: MultiHeadAttention.forward: options\.cache belongs to another MultiHeadAttention layer \(it holds that layer's keys and values\); make one with this layer's createCache\(\{ maxSeq \}\)$/);
    assert.throws(() => a.forward(x, null, null, { cache, batch: 2 }), /^RangeError: MultiHeadAttention\.forward: options\.batch \(2\) differs from options\.cache\.batch \(1\)$/);
    assert.throws(() => a.forward(x, x, null, { cache }), /^TypeError: MultiHeadAttention\.forward: with options\.cache, key and value must be null/);
    assert.throws(() => a.forward(x, null, null, { cache, causal: false }), /^RangeError: MultiHeadAttention\.forward: options\.causal cannot be false with options\.cache/);
    assert.throws(() => a.forward(x, null, null, { cache: {} }), /^TypeError: MultiHeadAttention\.forward: options\.cache must be a KVCache from createCache\(\), got Object$/);
    assert.equal(cache.length, 0);
    cache.dispose();
    cache.dispose();  // harmless
    assert.throws(() => cache.length, /^Error: KVCache\.length: this cache was disposed$/);
    assert.throws(() => a.forward(x, null, null, { cache }), /^Error: MultiHeadAttention\.forward: the KV cache was disposed$/);
    const cross = layer({ embedDim: 8, numHeads: 2, kdim: 4 }, 43).mha;
    const crossCache = cross.createCache({ maxSeq: 4 });
    assert.throws(() => cross.forward(x, null, null, { cache: crossCache }), /^RangeError: MultiHeadAttention\.forward: options\.cache needs kdim == vdim == embedDim/);
    crossCache.dispose();
    for (const m of [a, b, cross]) m.dispose();
  });
});

describe('errors', () => {
  const throwsFrom = (fn, type, message) => assert.throws(fn, (e) => {
    assert.equal(e.constructor, type, `${e.constructor.name}: ${e.message}`);
    assert.match(e.message, message);
    return true;
  });

  test('config', () => {
    throwsFrom(() => new lib.MultiHeadAttention(), TypeError, /^MultiHeadAttention: config must be an object with at least embedDim and numHeads, got undefined$/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 8 }), TypeError, /^MultiHeadAttention: config\.numHeads is required \(a positive integer\)$/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 10, numHeads: 3 }), RangeError, /^MultiHeadAttention: config\.embedDim \(10\) must be a multiple of config\.numHeads \(3\), or config\.headDim given/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 12, numHeads: 4, numKvHeads: 3 }), RangeError, /^MultiHeadAttention: config\.numHeads \(4\) must be a multiple of config\.numKvHeads \(3\)$/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, bias: 1 }), TypeError, /^MultiHeadAttention: config\.bias must be a boolean or \{ q, k, v, o \} \(booleans, default true\), got number 1$/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, kDim: 4 }), TypeError, /^MultiHeadAttention: unknown config key 'kDim' \(known keys: embedDim, numHeads/);
    throwsFrom(() => new lib.MultiHeadAttention({ embedDim: 8, numHeads: 0 }), RangeError, /^MultiHeadAttention: config\.numHeads must be a positive integer, got 0$/);
  });

  test('setWeights: each weight, its shape, and the bias rule', () => {
    const config = { embedDim: 8, numHeads: 2, numKvHeads: 1, kdim: 6 };
    const good = randomWeights(config, 50);
    const mha = new lib.MultiHeadAttention(config);
    throwsFrom(() => mha.forward(new Float32Array(8)), Error, /^MultiHeadAttention\.forward: call setWeights\(\) first$/);
    throwsFrom(() => mha.setWeights({ ...good, wk: new Float32Array(48) }), RangeError, /^MultiHeadAttention\.setWeights: weights\.wk has length 48, expected 24 \(numKvHeads·headDim 4 × kdim 6\)$/);
    throwsFrom(() => mha.setWeights({ ...good, wq: undefined }), TypeError, /^MultiHeadAttention\.setWeights: weights\.wq is required \(a Float32Array \[embedDim 8 × embedDim 8\]\)$/);
    throwsFrom(() => mha.setWeights({ ...good, wo: new Float64Array(64) }), TypeError, /^MultiHeadAttention\.setWeights: weights\.wo must be a Float32Array, got Float64Array\(64\)$/);
    throwsFrom(() => mha.setWeights({ ...good, bv: new Float32Array(8) }), RangeError, /^MultiHeadAttention\.setWeights: weights\.bv has length 8, expected 4 \(numKvHeads·headDim 4\)$/);
    throwsFrom(() => mha.setWeights({ ...good, bq: null }), TypeError, /^MultiHeadAttention\.setWeights: weights\.bq is required \(a Float32Array \[8\]\), since the layer has bias: true$/);
    throwsFrom(() => mha.setWeights({ ...good, wz: good.wq }), TypeError, /^MultiHeadAttention\.setWeights: unknown weights key 'wz'/);
    const noBias = new lib.MultiHeadAttention({ ...config, bias: false });
    throwsFrom(() => noBias.setWeights(good), TypeError, /^MultiHeadAttention\.setWeights: weights\.bq was given, but the layer was created with bias: false$/);
    mha.setWeights(good);
    noBias.dispose();
    mha.dispose();
  });

  test('forward: activations, masks, outputs', () => {
    const config = { embedDim: 8, numHeads: 2, kdim: 4, vdim: 4 };
    const { mha } = layer(config, 60);
    const xq = new Float32Array(2 * 8), xk = new Float32Array(3 * 4);
    throwsFrom(() => mha.forward([1, 2]), TypeError, /^MultiHeadAttention\.forward: query must be a Float32Array, got Array\(2\)$/);
    throwsFrom(() => mha.forward(new Float32Array(7), xk), RangeError, /^MultiHeadAttention\.forward: query has length 7, not a positive multiple of batch 1 × 8 features$/);
    throwsFrom(() => mha.forward(xq, xk, null, { seqQ: 3 }), RangeError, /^MultiHeadAttention\.forward: query has length 16, expected 24 \(batch 1 × seqQ 3 × 8 features\)$/);
    throwsFrom(() => mha.forward(xq), TypeError, /^MultiHeadAttention\.forward: key is required, since this layer's kdim \(4\) differs from embedDim \(8\)$/);
    throwsFrom(() => mha.forward(xq, xk, new Float32Array(8)), RangeError, /^MultiHeadAttention\.forward: value has length 8, expected 12 \(batch 1 × seqK 3 × 4 features\)$/);
    throwsFrom(() => mha.forward(xq, xk, null, { mask: new Int8Array(6) }), TypeError, /^MultiHeadAttention\.forward: options\.mask must be a Float32Array/);
    throwsFrom(() => mha.forward(xq, xk, null, { attendMask: new Uint8Array(5) }), RangeError, /^MultiHeadAttention\.forward: options\.attendMask has length 5, expected the length of a mask/);
    throwsFrom(() => mha.forward(xq, xk, null, { keyPaddingMask: new Float32Array(3) }), TypeError,
      /^MultiHeadAttention\.forward: options\.keyPaddingMask must be a Uint8Array \[batch, seqK\] \(1 = padding, ignored: PyTorch's key_padding_mask\), got Float32Array\(3\)$/);
    throwsFrom(() => mha.forward(xq, xk, null, { keyPaddingMask: new Uint8Array(2) }), RangeError, /^MultiHeadAttention\.forward: options\.keyPaddingMask has length 2, expected 3 \(batch 1 × seqK 3\)$/);
    throwsFrom(() => mha.forward(xq, xk, null, { out: new Float32Array(3) }), RangeError, /^MultiHeadAttention\.forward: options\.out has length 3, expected 16/);
    throwsFrom(() => mha.forward(xq, xk, null, { weightsOut: new Float32Array(3) }), RangeError, /^MultiHeadAttention\.forward: options\.weightsOut has length 3, expected 12 \(batch 1 × numHeads 2 × seqQ 2 × seqK 3\), per head \(averageAttnWeights: true for their mean\)$/);
    throwsFrom(() => mha.forward(xq, xk, null, { causl: true }), TypeError, /^MultiHeadAttention\.forward: unknown option 'causl'/);
    assert.ok(mha.forward(xq, xk).every(Number.isFinite), 'still works after errors');
    mha.dispose();
  });

  test('use after dispose is a clear Error; disposing twice is harmless', () => {
    const { mha, weights } = layer({ embedDim: 8, numHeads: 2 }, 70);
    const cache = mha.createCache({ maxSeq: 2 });
    mha.dispose();
    mha.dispose();
    assert.equal(mha.disposed, true);
    throwsFrom(() => mha.forward(new Float32Array(8)), Error, /^MultiHeadAttention\.forward: this layer was disposed$/);
    throwsFrom(() => mha.setWeights(weights), Error, /^MultiHeadAttention\.setWeights: this layer was disposed$/);
    throwsFrom(() => mha.createCache({ maxSeq: 2 }), Error, /^MultiHeadAttention\.createCache: this layer was disposed$/);
    assert.equal(cache.length, 0);  // a cache outlives its layer safely, and can still be freed
    cache.dispose();
  });
});
