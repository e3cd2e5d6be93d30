// Calls interleaved from many async tasks, and several independent library instances in one
// process, all give correct results.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAttention, loadAttention, makeInputs } from './helpers.mjs';

const SHAPES = [
  { heads: 2, seqQ: 7, seqK: 11, headDim: 8 },
  { heads: 4, kvHeads: 1, seqQ: 1, seqK: 300, headDim: 32 },
  { batch: 2, heads: 3, seqQ: 40, headDim: 16, causal: true },
];

test('interleaved calls from many async tasks', async () => {
  const lib = await loadAttention();
  const cases = SHAPES.map((s, i) => ({ shape: s, ...makeInputs(s, i + 1) }));
  const expected = cases.map((c) => lib.attention(c.query, c.key, c.value, c.shape));
  const task = async (t) => {
    for (let n = 0; n < 20; n++) {
      const c = (t + n) % cases.length;
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(lib.attention(cases[c].query, cases[c].key, cases[c].value, cases[c].shape), expected[c]);
    }
  };
  await Promise.all(Array.from({ length: 50 }, (_, t) => task(t)));
});

test('several independent instances in one process', async () => {
  const shared = await loadAttention();
  const [a, b] = await Promise.all([createAttention({ layers: true }), createAttention({ layers: true })]);
  assert.notEqual(a, b);
  assert.notEqual(a, shared);
  const c = SHAPES[2];
  const { query, key, value } = makeInputs(c, 9);
  const want = shared.attention(query, key, value, c);
  // Grow one instance's memory; the others keep their own and keep working.
  const big = { heads: 8, seqQ: 512, seqK: 1024, headDim: 64 };
  const x = makeInputs(big, 4);
  a.attention(x.query, x.key, x.value, { ...big, weightsOut: new Float32Array(8 * 512 * 1024) });
  assert.ok(a.memoryUsage().wasmMemory > b.memoryUsage().wasmMemory);
  for (const lib of [a, b, shared, a, b]) assert.deepEqual(lib.attention(query, key, value, c), want);
  // Objects of one instance are not accepted by another.
  const w = new Float32Array(64), bias = new Float32Array(8);
  const weights = { wq: w, wk: w, wv: w, wo: w, bq: bias, bk: bias, bv: bias, bo: bias };
  const layerA = new a.MultiHeadAttention({ embedDim: 8, numHeads: 2 });
  const layerB = new b.MultiHeadAttention({ embedDim: 8, numHeads: 2 });
  layerA.setWeights(weights);
  layerB.setWeights(weights);
  const cacheA = layerA.createCache({ maxSeq: 4 });
  assert.throws(() => layerB.forward(new Float32Array(8), null, null, { cache: cacheA }),
    /^TypeError: MultiHeadAttention\.forward: options\.cache is a KVCache of another attention-wasm instance \(another loadAttention\(\) or createAttention\(\) call\); a cache lives in the wasm memory of the instance that made it; it works only with the layer that made it: make one with this layer's createCache\(\{ maxSeq \}\)$/);
  cacheA.dispose();
  layerA.dispose();
  layerB.dispose();
});
