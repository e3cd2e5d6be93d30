// Training the layer: gradients of forward(..., { train: true }) + backward() against finite
// differences of the JS reference, the optimizer steps, their errors, and a training run whose
// loss drops (learning to attend to the key equal to the query).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { referenceMha } from './reference.mjs';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

function randomLayer(config, seed) {
  const r = rng(seed);
  const e = config.embedDim;
  const kv = (config.numKvHeads ?? config.numHeads) * (e / config.numHeads);
  const kdim = config.kdim ?? e, vdim = config.vdim ?? e;
  const w = { wq: randomTensor(e * e, r, 0.5), wk: randomTensor(kv * kdim, r, 0.5), wv: randomTensor(kv * vdim, r, 0.5), wo: randomTensor(e * e, r, 0.5) };
  if (config.bias !== false) Object.assign(w, { bq: randomTensor(e, r, 0.3), bk: randomTensor(kv, r, 0.3), bv: randomTensor(kv, r, 0.3), bo: randomTensor(e, r, 0.3) });
  return w;
}

function checkGradients(config, opts, seed) {
  const weights = randomLayer(config, seed);
  const r = rng(seed + 1);
  const e = config.embedDim, batch = opts.batch ?? 1;
  const x = randomTensor(batch * 3 * e, r);
  const key = opts.cross ? randomTensor(batch * 4 * (config.kdim ?? e), r) : null;
  const value = opts.cross ? randomTensor(batch * 4 * (config.vdim ?? e), r) : null;
  const g = randomTensor(batch * 3 * e, r);
  const { cross, ...masks } = opts;  // causal and the masks
  const fopts = { ...masks, batch };
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(weights);
  mha.forward(x, key, value, { ...fopts, train: true });
  const got = mha.backward(g);
  mha.dispose();

  const w64 = Object.fromEntries(Object.entries(weights).map(([k, v]) => [k, Float64Array.from(v)]));
  const inputs = { x: Float64Array.from(x), key: key && Float64Array.from(key), value: value && Float64Array.from(value) };
  const loss = () => referenceMha(config, w64, inputs.x, inputs.key, inputs.value, fopts).out.reduce((s, y, i) => s + y * g[i], 0);
  const numeric = (arr) => Float64Array.from(arr, (keep, i) => {
    arr[i] = keep + 1e-5;
    const up = loss();
    arr[i] = keep - 1e-5;
    const down = loss();
    arr[i] = keep;
    return (up - down) / 2e-5;
  });
  const close = (a, b, what) => a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) <= 1e-4 + 1e-3 * Math.abs(b[i]), `${what}[${i}]: ${v} vs ${b[i]}`));
  for (const name of Object.keys(weights)) close(got.weights[name], numeric(w64[name]), name);
  close(got.dQuery, numeric(inputs.x), 'dQuery');
  if (opts.cross) {
    close(got.dKey, numeric(inputs.key), 'dKey');
    close(got.dValue, numeric(inputs.value), 'dValue');
  } else {
    assert.equal(got.dKey, undefined);
  }
}

test('layer gradients match finite differences of the reference', () => {
  checkGradients({ embedDim: 4, numHeads: 2, numKvHeads: 1 }, {}, 1);
  checkGradients({ embedDim: 4, numHeads: 2 }, { batch: 2, causal: true, keyPaddingMask: new Uint8Array([0, 0, 1, 0, 0, 0]) }, 2);
  checkGradients({ embedDim: 6, numHeads: 3, kdim: 2, vdim: 5, bias: false }, { cross: true, attendMask: new Uint8Array(12).map((_, i) => i % 5 !== 3), maskShape: [3, 4] }, 3);
  // Broadcast masks, kept on the tape as given: padding per batch entry, a bias per head.
  checkGradients({ embedDim: 4, numHeads: 2 }, { batch: 2, cross: true, blockMask: Uint8Array.of(0, 1, 0, 0, 0, 0, 1, 0), maskShape: [2, 1, 1, 4] }, 4);
  checkGradients({ embedDim: 4, numHeads: 2 }, { batch: 2, cross: true, mask: Float32Array.from({ length: 24 }, (_, i) => Math.sin(i)), maskShape: [2, 3, 4] }, 5);
});

test('sgdStep applies w − lr·grad to the weights in wasm memory', () => {
  const config = { embedDim: 4, numHeads: 2 };
  const weights = randomLayer(config, 7);
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(weights);
  const x = randomTensor(3 * 4, rng(8));
  mha.forward(x, null, null, { train: true });
  const { weights: grads } = mha.backward(randomTensor(12, rng(9)));
  mha.sgdStep(grads, { lr: 0.05 });
  const stepped = new lib.MultiHeadAttention(config);
  stepped.setWeights(Object.fromEntries(Object.entries(weights).map(([k, w]) => [k, w.map((v, i) => v - 0.05 * grads[k][i])])));
  const a = mha.forward(x), b = stepped.forward(x);
  a.forEach((v, i) => assert.ok(Math.abs(v - b[i]) < 1e-6, `out[${i}]`));
  mha.dispose();
  stepped.dispose();
});

test('training errors are clear', () => {
  const mha = new lib.MultiHeadAttention({ embedDim: 4, numHeads: 2 });
  mha.setWeights(randomLayer({ embedDim: 4, numHeads: 2 }, 1));
  assert.throws(() => mha.backward(new Float32Array(4)), /^Error: MultiHeadAttention\.backward: call forward\(\.\.\., \{ train: true \}\) first$/);
  const x = new Float32Array(8);
  mha.forward(x, null, null, { train: true });
  assert.throws(() => mha.backward(new Float32Array(3)), /^RangeError: MultiHeadAttention\.backward: dOut has length 3, expected 8 \(batch 1 × seqQ 2 × embedDim 4\)$/);
  const { weights } = mha.backward(new Float32Array(8));
  assert.throws(() => mha.sgdStep({ ...weights, wq: undefined }, { lr: 0.1 }), /^TypeError: MultiHeadAttention\.sgdStep: grads\.wq is required/);
  assert.throws(() => mha.sgdStep(weights, { lr: -1 }), /^RangeError: MultiHeadAttention\.sgdStep: options\.lr must be a positive number, got number -1$/);
  assert.throws(() => mha.adamStep(weights, { beta1: 1 }), /^RangeError: MultiHeadAttention\.adamStep: options\.beta1 must be in \[0, 1\)/);
  const cache = mha.createCache({ maxSeq: 4 });
  assert.throws(() => mha.forward(x, null, null, { cache, train: true }), /^TypeError: MultiHeadAttention\.forward: options\.train does not work with options\.cache/);
  cache.dispose();
  mha.dispose();
});

test('training learns to attend to the key equal to the query (Adam, fixed seed)', () => {
  // Cross-attention: the keys are the queries shuffled, the values are the keys, so the right
  // output for query i is the key equal to it, i.e. query i itself. Loss: mean squared error.
  const e = 8, n = 6, batch = 4;
  const config = { embedDim: e, numHeads: 1 };
  const mha = new lib.MultiHeadAttention(config);
  mha.setWeights(randomLayer(config, 11));
  const r = rng(12);
  const xq = randomTensor(batch * n * e, r);
  const xk = new Float32Array(xq.length);
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < n; i++) xk.set(xq.subarray((b * n + (i * 5 + 3) % n) * e, (b * n + (i * 5 + 3) % n + 1) * e), (b * n + i) * e);
  }
  const losses = [];
  for (let step = 0; step < 300; step++) {
    const y = mha.forward(xq, xk, xk, { batch, train: true });
    let loss = 0;
    const dy = y.map((v, i) => { const d = v - xq[i]; loss += d * d; return (2 * d) / y.length; });
    losses.push(loss / y.length);
    const { weights } = mha.backward(dy);
    mha.adamStep(weights, { lr: 0.02 });
  }
  mha.dispose();
  console.log(`training loss: ${losses[0].toFixed(4)} → ${losses[99].toFixed(4)} (100 steps) → ${losses.at(-1).toFixed(4)} (300 steps)`);
  assert.ok(losses.at(-1) < losses[0] / 10, `loss ${losses[0].toFixed(4)} → ${losses.at(-1).toFixed(4)}`);
});
