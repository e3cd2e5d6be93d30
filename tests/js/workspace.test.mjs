// The memory check before a call uses the sizes the C++ side exports (attentionWorkspaceBytes,
// attentionCachedWorkspaceBytes, linearWorkspaceBytes, the layer's forwardWorkspaceBytes): a
// call that cannot fit gets a RangeError naming the function and the MiB before anything is
// allocated, and the number checked is the export's (spied on a module of our own).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import createAttnModule from '../../dist/attn.mjs';
import { createLibrary } from '../../dist/api.mjs';
import { createAttention, randomTensor, rng } from './helpers.mjs';

const MiB = 2 ** 20;
const alignUp = (n) => Math.ceil(n / 16) * 16;  // the arena's alignment (src/js/heap.mjs)
const NEEDS = (fn, mib) => new RegExp(`^${fn.replace('.', '\\.')}: this call needs ${mib} MiB of wasm memory, ` +
  'more than the 4064 MiB a wasm32 module can use; split the batch or the heads$');

let M;
let lib;
before(async () => {
  M = await createAttnModule({ wasmBinary: await readFile(new URL('../../dist/attn.wasm', import.meta.url)) });
  lib = createLibrary(M);
});
after(() => lib.dispose());

// Replaces M[name] (or a method of the layer's core) by a spy that records its arguments and
// returns `bytes` (default: the export's own answer); returns the calls and a restore().
function spy(target, name, bytes) {
  const real = target[name];
  const calls = [];
  target[name] = function (...args) {
    const exported = real.apply(this, args);
    calls.push({ args, exported });
    return bytes ?? exported;
  };
  return { calls, restore: () => { target[name] = real; } };
}

test('linear checks memory with the exported linearWorkspaceBytes', () => {
  const [rows, inFeatures, outFeatures] = [5, 7, 3];
  const random = rng(1);
  const input = randomTensor(rows * inFeatures, random), weight = randomTensor(outFeatures * inFeatures, random);
  const s = spy(M, 'linearWorkspaceBytes');
  try {
    lib.linear(input, weight, { inFeatures, outFeatures });
    assert.deepEqual(s.calls.map((c) => c.args), [[rows, inFeatures, outFeatures]]);
    assert.ok(s.calls[0].exported >= 4 * (outFeatures * inFeatures + rows * inFeatures), 'the weights packed and the input in tiles');
  } finally {
    s.restore();
  }
  const huge = spy(M, 'linearWorkspaceBytes', 4096 * MiB);
  try {
    const staged = alignUp(input.byteLength) + alignUp(weight.byteLength) + alignUp(4 * rows * outFeatures);
    assert.throws(() => lib.linear(input, weight, { inFeatures, outFeatures }),
      (e) => e instanceof RangeError && NEEDS('linear', Math.ceil((staged + 4096 * MiB) / MiB)).test(e.message));
  } finally {
    huge.restore();
  }
});

test('attention, attentionWeights and attentionBackward check memory with the exported attentionWorkspaceBytes', () => {
  const shape = { heads: 2, kvHeads: 1, seqQ: 20, seqK: 5, headDim: 4 };  // 40 rows a kv head: the blocked path
  const random = rng(2);
  const q = randomTensor(2 * 20 * 4, random), k = randomTensor(5 * 4, random), v = randomTensor(5 * 4, random);
  const sinks = new Float32Array([0.5, -0.5]);
  const s = spy(M, 'attentionWorkspaceBytes');
  try {
    lib.attention(q, k, v, shape);
    lib.attentionWeights(q, k, shape);
    lib.attentionBackward(q, k, v, randomTensor(q.length, random), { ...shape, sinks });
    const [forward, weights, backward] = s.calls;
    assert.equal(s.calls.length, 3);
    // Before staging, an address only says whether the tensor is given.
    assert.deepEqual([forward.args[1], forward.args[0].value, forward.args[0].sinks, forward.args[0].seqK], [false, 1, 0, 5]);
    assert.deepEqual([weights.args[0].value, weights.args[0].weights], [0, 1]);
    assert.deepEqual([backward.args[1], backward.args[0].sinks], [true, 1]);
    assert.ok(backward.exported > forward.exported, 'the backward holds more than the forward');
    assert.ok(forward.exported > weights.exported, 'without values, no V is packed');
  } finally {
    s.restore();
  }
  const huge = spy(M, 'attentionWorkspaceBytes', 4096 * MiB);
  try {
    const staged = alignUp(q.byteLength) + alignUp(k.byteLength) + alignUp(v.byteLength) + alignUp(q.byteLength);
    assert.throws(() => lib.attention(q, k, v, shape),
      (e) => e instanceof RangeError && NEEDS('attention', Math.ceil((staged + 4096 * MiB) / MiB)).test(e.message));
  } finally {
    huge.restore();
  }
});

test('attention over a cache checks memory with the export for that cache', () => {
  const cache = lib.createKVCache({ batch: 1, kvHeads: 1, headDim: 4, maxSeq: 8 });
  const random = rng(3);
  cache.append(randomTensor(6 * 4, random), randomTensor(6 * 4, random), { seq: 6 });
  const s = spy(M, 'attentionCachedWorkspaceBytes');
  try {
    lib.attention(randomTensor(2 * 4, random), cache, null, { heads: 2, seqQ: 1, causal: true });
    assert.equal(s.calls.length, 1);
    assert.equal(s.calls[0].args[0].seqK, 6);
    assert.ok(s.calls[0].exported > 0);
  } finally {
    s.restore();
    cache.dispose();
  }
});

test("the layer's forward checks memory with its exported forwardWorkspaceBytes", () => {
  const [e, heads, batch, seq] = [8, 2, 2, 3];
  const layer = new lib.MultiHeadAttention({ embedDim: e, numHeads: heads });
  const random = rng(4);
  const w = () => randomTensor(e * e, random);
  layer.setWeights({ wq: w(), wk: w(), wv: w(), wo: w(), bq: new Float32Array(e), bk: new Float32Array(e),
    bv: new Float32Array(e), bo: new Float32Array(e) });
  const x = randomTensor(batch * seq * e, random);
  const core = M.MultiHeadAttentionCore.prototype;
  const s = spy(core, 'forwardWorkspaceBytes');
  try {
    layer.forward(x, null, null, { batch, causal: true });
    assert.equal(s.calls.length, 1);
    const { args: [call], exported } = s.calls[0];
    assert.deepEqual([call.batch, call.seqQ, call.seqK, call.causal], [batch, seq, seq, true]);
    // At least Q, the attention output, K and V: 4 × batch · seq · embedDim floats.
    assert.ok(exported >= 4 * 4 * batch * seq * e, `${exported} bytes`);
  } finally {
    s.restore();
  }
  const huge = spy(core, 'forwardWorkspaceBytes', 4096 * MiB);
  try {
    const staged = alignUp(x.byteLength) + alignUp(x.byteLength);  // the query in, out the same size
    assert.throws(() => layer.forward(x, null, null, { batch }),
      (err) => err instanceof RangeError && NEEDS('MultiHeadAttention.forward', Math.ceil((staged + 4096 * MiB) / MiB)).test(err.message));
  } finally {
    huge.restore();
  }
  const cache = layer.createCache({ batch, maxSeq: 8 });
  const cached = spy(core, 'forwardCachedWorkspaceBytes');
  try {
    layer.forward(x, null, null, { cache });
    assert.equal(cached.calls.length, 1);
    assert.ok(cached.calls[0].exported > 0);
  } finally {
    cached.restore();
    cache.dispose();
    layer.dispose();
  }
});

// Every work item that may run at once holds its own workspace: 8 threads of the blocked path,
// each packing Kᵀ and V of 2^23 keys (headDim 1, V padded to a 16-column panel: 17 floats a
// key, 544 MiB), need 8 × 544 MiB besides the 64 MiB of K and V — more than wasm32 has, though
// one workspace and the arguments would fit (the estimate before counted one).
test('a call whose workspaces on every thread cannot fit gets a RangeError before anything is allocated', async () => {
  const threaded = await createAttention({ threads: 8 });
  try {
    const seqK = 2 ** 23;
    const key = new Float32Array(seqK), value = new Float32Array(seqK), query = new Float32Array(128);
    const usage = threaded.memoryUsage();
    assert.throws(() => threaded.attention(query, key, value, { heads: 1, seqQ: 128, seqK, headDim: 1 }), (e) => {
      const m = /^attention: this call needs (\d+) MiB of wasm memory, more than the 4064 MiB a wasm32 module can use; split the batch or the heads$/.exec(e.message);
      assert.ok(e instanceof RangeError && m, e.message);
      assert.ok(Number(m[1]) >= 8 * 544 + 64 && Number(m[1]) <= 8 * 546 + 65, `${m[1]} MiB`);
      return true;
    });
    assert.deepEqual(threaded.memoryUsage(), usage, 'nothing was allocated');
  } finally {
    threaded.dispose();
  }
});
