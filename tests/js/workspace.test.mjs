// The memory check of a call happens in the call's own crossing into the module: JS stages the
// arguments and passes the bytes wasm32 has left (the call's budget); the C++ entry sizes what it
// will allocate (the code that allocates it does: attention_workspace_bytes,
// linear_workspace_bytes, rotary_workspace_bytes, the layer's forward_workspace_bytes (a training forward's tape too),
// fill_cross_cache_bytes, backward_workspace_bytes, set_weights_bytes, rotary_tables_bytes, alibi_bytes,
// adam_step_bytes, set_adam_state_bytes) and, past the budget, returns the bytes it needs before allocating anything, which JS turns into a RangeError naming the
// function and the MiB. Here each entry is run on a module of our own with the budget JS passes
// checked and then cut (a wrapper around the entry), and two calls whose workspaces cannot fit
// run as they are.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAttention, moduleAndLibrary, randomTensor, rng } from './helpers.mjs';

const MiB = 2 ** 20;
const alignUp = (n) => Math.ceil(n / 16) * 16;  // the arena's alignment (src/js/heap.mjs)
const RESERVED = 32 * MiB;  // what a call may not use of wasm32's memory (RESERVED_BYTES in src/js/heap.mjs)
const NEEDS = (fn, mib) => new RegExp(`^${fn.replace('.', '\\.')}: this call needs ${mib} MiB of wasm memory, ` +
  'more than the 4064 MiB a wasm32 module can use; split the batch or the heads$');

let M;
let lib;
before(async () => ({ M, lib } = await moduleAndLibrary()));
after(() => lib.dispose());

// Where an entry takes its budget: a field of its call object (the first argument), or its last argument.
const IN_CALL = { get: (args) => args[0].budget, set: (args, budget) => [{ ...args[0], budget }, ...args.slice(1)] };
const LAST = { get: (args) => args.at(-1), set: (args, budget) => [...args.slice(0, -1), budget] };

// Runs `warm` (default: `call`) as is, so the arena holds a block for the staging, then `call`
// (a public call of `fn` that stages `staged` bytes and reaches the entry target[name] once),
// with the entry wrapped: it gets the bytes wasm32 has left after the staging; cut to 0 it
// refuses, saying how many bytes it needs, allocating nothing; with one byte less than that it
// refuses again, with that many it runs; and the public call throws the RangeError for staged +
// needed bytes, leaving memory as it was (or, when the entry keeps `keeps` bytes of what it
// allocated, as it was and those). Returns the bytes needed.
function checkBudget({ fn, target, name, where, staged, call, warm = call, keeps = 0 }) {
  warm();
  const usage = lib.memoryUsage();
  const real = target[name];
  const passed = [];
  let refused, needed, below, at;
  target[name] = function (...args) {
    passed.push(where.get(args));
    const held = M.heapInUse();
    refused = real.apply(this, where.set(args, 0));
    needed = refused?.bytes;  // a CallError of kind overBudget (src/bindings.cpp)
    below = real.apply(this, where.set(args, needed - 1));
    assert.equal(M.heapInUse(), held, 'the entry allocated nothing before refusing');
    at = real.apply(this, where.set(args, needed));
    return refused;
  };
  try {
    assert.throws(call, (e) => e instanceof RangeError && NEEDS(fn, Math.ceil((staged + needed) / MiB)).test(e.message));
  } finally {
    target[name] = real;
  }
  assert.deepEqual(passed, [usage.wasmMemoryLimit - RESERVED - staged], 'the budget: what is left after staging');
  assert.ok(refused?.kind === M.Failure.overBudget && Number.isInteger(needed) && needed > 0, `${refused?.kind?.constructor.name} ${needed}`);
  assert.deepEqual([below, at], [refused, undefined], 'refused past the budget, run within it');
  const { heapInUse, ...rest } = lib.memoryUsage();
  const { heapInUse: before, ...restBefore } = usage;
  assert.deepEqual(rest, restBefore, 'memory as before the call');
  // What the entry kept, and malloc's few bytes a block on top.
  assert.ok(heapInUse - before >= keeps && heapInUse - before <= (keeps ? keeps + 256 : 0), `${heapInUse - before} bytes more in use`);
  return needed;
}

const sizeOf = (arrays) => Object.values(arrays).reduce((sum, a) => sum + alignUp(a.byteLength), 0);

test('linear: the entry checks its workspace against the budget JS passes', () => {
  const [rows, inFeatures, outFeatures] = [5, 7, 3];
  const random = rng(1);
  const input = randomTensor(rows * inFeatures, random), weight = randomTensor(outFeatures * inFeatures, random);
  const expected = lib.linear(input, weight, { inFeatures, outFeatures });
  const staged = alignUp(input.byteLength) + alignUp(weight.byteLength) + alignUp(4 * rows * outFeatures);
  const needed = checkBudget({ fn: 'linear', target: M, name: 'linear', where: LAST, staged,
    call: () => lib.linear(input, weight, { inFeatures, outFeatures }) });
  assert.ok(needed >= 4 * (outFeatures * inFeatures + rows * inFeatures), 'the weights packed and the input in tiles');
  assert.deepEqual(lib.linear(input, weight, { inFeatures, outFeatures }), expected, 'later calls as before');
});

test('attention, attentionWeights and attentionBackward: the entries check the workspace against the budget', () => {
  const shape = { heads: 2, kvHeads: 1, seqQ: 20, seqK: 5, headDim: 4 };  // 40 rows a kv head: the blocked path
  const random = rng(2);
  const q = randomTensor(2 * 20 * 4, random), k = randomTensor(5 * 4, random), v = randomTensor(5 * 4, random);
  const dOut = randomTensor(q.length, random);
  const sinks = new Float32Array([0.5, -0.5]);
  const size = (...arrays) => arrays.reduce((sum, a) => sum + alignUp(a.byteLength), 0);
  const forward = checkBudget({ fn: 'attention', target: M, name: 'attention', where: LAST, staged: size(q, k, v, q),
    call: () => lib.attention(q, k, v, shape) });
  const weights = checkBudget({ fn: 'attentionWeights', target: M, name: 'attention', where: LAST,
    staged: size(q, k) + alignUp(4 * 2 * 20 * 5), call: () => lib.attentionWeights(q, k, shape) });
  const backward = checkBudget({ fn: 'attentionBackward', target: M, name: 'attentionBackward', where: LAST,
    staged: size(q, k, v, dOut, sinks, q, k, v, sinks), call: () => lib.attentionBackward(q, k, v, dOut, { ...shape, sinks }) });
  assert.ok(backward > forward, 'the backward holds more than the forward');
  assert.ok(forward > weights, 'without values, no V is packed');
});

test('attention over a cache: the entry checks the workspace, sized for that cache, against the budget', () => {
  const cache = lib.createKVCache({ batch: 1, kvHeads: 1, headDim: 4, maxSeq: 8 });
  try {
    const random = rng(3);
    cache.append(randomTensor(6 * 4, random), randomTensor(6 * 4, random), { seq: 6 });
    const query = randomTensor(2 * 4, random);
    checkBudget({ fn: 'attention', target: M, name: 'attentionCached', where: LAST, staged: 2 * alignUp(query.byteLength),
      call: () => lib.attention(query, cache, null, { heads: 2, seqQ: 1, causal: true }) });
  } finally {
    cache.dispose();
  }
});

test("the layer's forward (plain, training, over a cache): the entry checks what it allocates against the budget", () => {
  const [e, heads, batch, seq] = [8, 2, 2, 3];
  const layer = new lib.MultiHeadAttention({ embedDim: e, numHeads: heads });
  const cache = layer.createCache({ batch, maxSeq: 8 });
  try {
    const random = rng(4);
    const w = () => randomTensor(e * e, random);
    layer.setWeights({ wq: w(), wk: w(), wv: w(), wo: w(), bq: new Float32Array(e), bk: new Float32Array(e),
      bv: new Float32Array(e), bo: new Float32Array(e) });
    const x = randomTensor(batch * seq * e, random);
    const core = M.MultiHeadAttentionCore.prototype;
    const staged = 2 * alignUp(x.byteLength);  // the query in, out the same size
    const fn = 'MultiHeadAttention.forward';
    const needed = checkBudget({ fn, target: core, name: 'forward', where: IN_CALL, staged,
      call: () => layer.forward(x, null, null, { batch, causal: true }) });
    // At least Q, the attention output, K and V: 4 × batch · seq · embedDim floats.
    assert.ok(needed >= 4 * 4 * batch * seq * e, `${needed} bytes`);
    // A training forward also fills its tape, kept after the call: the rows' log-sum-exps
    // (batch · heads · seq floats), held with the kernel's workspace, and once that is given back
    // copies of the query, Q and the attention output, K and V (5 × batch · seq · embedDim floats).
    // The first fill keeps it; a refill (warm: the same call) makes a new one, then gives the old back.
    const train = () => layer.forward(x, null, null, { batch, causal: true, train: true });
    const lse = 4 * batch * heads * seq, tape = lse + 4 * 5 * batch * seq * e;
    const first = checkBudget({ fn, target: core, name: 'forwardTrain', where: IN_CALL, staged, call: train,
      warm: () => layer.forward(x, null, null, { batch, causal: true }), keeps: tape });
    const refill = checkBudget({ fn, target: core, name: 'forwardTrain', where: IN_CALL, staged, call: train });
    assert.equal(refill, first, 'a refill needs what a first fill does');
    assert.ok(first >= needed + lse, `${first} bytes: the forward's ${needed} and at least the log-sum-exps`);
    assert.ok(first >= 4 * 4 * batch * seq * e + tape, `${first} bytes: at least Q, the attention output, K, V and the tape`);
    const cached = () => {
      layer.forward(x, null, null, { cache });
      cache.reset();
    };
    checkBudget({ fn, target: core, name: 'forwardCached', where: IN_CALL, staged, call: cached });
  } finally {
    cache.dispose();
    layer.dispose();
  }
});

test("the layer's cross-attention cache: its fill and the forwards over it check what they allocate against the budget", () => {
  const [e, heads, batch, seqK] = [8, 2, 2, 5];
  // Wide: 2 heads of 6 (12 features of Q against 8); the value is the key (vdim = kdim = 3).
  const config = { embedDim: e, numHeads: heads, headDim: 6, kdim: 3, vdim: 3, bias: { k: false } };
  const layer = new lib.MultiHeadAttention(config);
  try {
    const random = rng(6);
    layer.setWeights({ wq: randomTensor(12 * e, random), wk: randomTensor(12 * 3, random), wv: randomTensor(12 * 3, random),
      wo: randomTensor(e * 12, random), bq: randomTensor(12, random), bv: randomTensor(12, random), bo: randomTensor(e, random) });
    const encoder = randomTensor(batch * seqK * 3, random);
    const core = M.MultiHeadAttentionCore.prototype;
    const fill = checkBudget({ fn: 'MultiHeadAttention.createCrossCache', target: core, name: 'fillCrossCache', where: LAST,
      staged: alignUp(encoder.byteLength), call: () => layer.createCrossCache(encoder, null, { batch }).dispose() });
    // At least the projected K and V: 2 × batch · seqK · numKvHeads · headDim floats.
    assert.ok(fill >= 4 * 2 * batch * seqK * 12, `${fill} bytes`);
    const cache = layer.createCrossCache(encoder, null, { batch });
    const x = randomTensor(batch * e, random);
    const weightsOut = new Float32Array(batch * seqK);
    const forward = checkBudget({ fn: 'MultiHeadAttention.forward', target: core, name: 'forwardCross', where: IN_CALL,
      staged: 2 * alignUp(x.byteLength) + alignUp(weightsOut.byteLength),
      call: () => layer.forward(x, null, null, { cache, weightsOut, averageAttnWeights: true }) });
    // Q, the attention output and the per-head weights to average; no K or V is projected.
    assert.ok(forward >= 4 * (2 * batch * 12 + batch * heads * seqK), `${forward} bytes`);
    cache.dispose();
  } finally {
    layer.dispose();
  }
});

test("the layer's setWeights, backward and optimizer: the entries check what they allocate against the budget", () => {
  const [e, heads, batch, seq] = [8, 2, 2, 3];
  const layer = new lib.MultiHeadAttention({ embedDim: e, numHeads: heads, sinks: true });
  try {
    const random = rng(5);
    const w = () => randomTensor(e * e, random);
    const b = () => randomTensor(e, random);
    const weights = { wq: w(), wk: w(), wv: w(), wo: w(), bq: b(), bk: b(), bv: b(), bo: b(), sinks: new Float32Array([0.5, -0.5]) };
    const core = M.MultiHeadAttentionCore.prototype;
    // The first weights stay; warm replaces them, and so does the run within the budget.
    const packed = checkBudget({ fn: 'MultiHeadAttention.setWeights', target: core, name: 'setWeights', where: LAST,
      staged: sizeOf(weights), call: () => layer.setWeights(weights) });
    // Four projections of 8 outputs, each packed in a 16-column panel (× 8 inputs, and the bias), and the sinks.
    assert.equal(packed, 4 * (4 * 16 * (8 + 1) + 2));

    const x = randomTensor(batch * seq * e, random), dOut = randomTensor(x.length, random);
    layer.forward(x, null, null, { batch, train: true });
    const outputs = alignUp(4 * x.length) + sizeOf(weights);  // dQuery and the weights' gradients
    const backward = checkBudget({ fn: 'MultiHeadAttention.backward', target: core, name: 'backward', where: LAST,
      staged: alignUp(dOut.byteLength) + outputs, call: () => layer.backward(dOut) });
    // At least the unpacked weights, dA, dQ, dK and dV.
    assert.ok(backward >= 4 * (4 * e * e + 4 * batch * seq * e), `${backward} bytes`);
    const grads = layer.backward(dOut).weights;

    // SGD allocates nothing: its entry takes no budget.
    const sgd = core.sgdStep;
    const calls = [];
    core.sgdStep = function (...args) {
      const held = M.heapInUse();
      const result = sgd.apply(this, args);
      calls.push([args.length, M.heapInUse() - held]);
      return result;
    };
    try {
      layer.sgdStep(grads, { lr: 1e-3 });
    } finally {
      core.sgdStep = sgd;
    }
    assert.deepEqual(calls, [[2, 0]], 'sgdStep(grads, lr): no budget, nothing allocated');

    // Adam's first step makes both moments (they stay) and an update of the largest group
    // (wq and bq: 72 floats); later steps only the update. Params: 290 floats.
    const params = 4 * (e * e + e) + heads;
    const first = checkBudget({ fn: 'MultiHeadAttention.adamStep', target: core, name: 'adamStep', where: LAST,
      staged: sizeOf(grads), warm: () => layer.sgdStep(grads, { lr: 1e-3 }), keeps: 4 * 2 * params, call: () => layer.adamStep(grads) });
    assert.equal(first, 4 * (2 * params + e * e + e));
    const later = checkBudget({ fn: 'MultiHeadAttention.adamStep', target: core, name: 'adamStep', where: LAST,
      staged: sizeOf(grads), call: () => layer.adamStep(grads) });
    assert.equal(later, 4 * (e * e + e));

    const state = layer.getOptimizerState();
    const restored = checkBudget({ fn: 'MultiHeadAttention.setOptimizerState', target: core, name: 'setAdamState', where: LAST,
      staged: sizeOf(state.m) + sizeOf(state.v), call: () => layer.setOptimizerState(state) });
    assert.equal(restored, 4 * 2 * params, 'both new moments, held with the old until swapped in');
  } finally {
    layer.dispose();
  }
});

test("the layer's rotary tables and ALiBi slopes: the entries check their copies against the budget", () => {
  const core = M.MultiHeadAttentionCore.prototype;
  const random = rng(6);
  const cos = randomTensor(10 * 2, random), sin = randomTensor(10 * 2, random);
  const tables = checkBudget({ fn: 'MultiHeadAttention', target: core, name: 'setRotaryTables', where: LAST,
    staged: sizeOf({ cos, sin }), call: () => new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, rotary: { rotaryDim: 4, cos, sin } }).dispose() });
  assert.equal(tables, cos.byteLength + sin.byteLength);
  const slopes = checkBudget({ fn: 'MultiHeadAttention', target: core, name: 'setAlibi', where: LAST,
    staged: alignUp(2 * 4), call: () => new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, alibi: true }).dispose() });
  assert.equal(slopes, 2 * 4);
});

test('rotary: the entry checks its tables against the budget', () => {
  const x = randomTensor(2 * 5 * 16, rng(7));
  const options = { heads: 2, seq: 5, headDim: 16 };
  const expected = lib.rotary(x, options);
  const needed = checkBudget({ fn: 'rotary', target: M, name: 'rotary', where: LAST, staged: alignUp(x.byteLength),
    call: () => lib.rotary(x, options) });
  // The angles' steps (θ, cos θ, sin θ: 8 pairs of doubles) and one block of 32 rows' cos/sin
  // table (16 floats a row) with its angle state (8 cos and 8 sin, doubles): one thread.
  assert.equal(needed, 3 * 8 * 8 + 32 * 16 * 4 + 2 * 8 * 8);
  assert.deepEqual(lib.rotary(x, options), expected, 'later calls as before');
});

// Calls that really cannot fit, on 8 threads: every work item that may run at once holds its
// own workspace. 8 threads of the blocked path (512 rows: more than a split of the keys takes),
// each packing Kᵀ and V of 2^23 keys (headDim 1, V padded to a 16-column panel: 17 floats a key,
// 544 MiB), need 8 × 544 MiB besides the 64 MiB staged — more than wasm32 has, though one workspace and the arguments would fit. Staging may
// grow wasm memory (by less than one workspace); the call allocates nothing that stays, and the
// same call again leaves memory exactly as it was. (The arena is emptied first: a block as large
// as the staging is not kept after a call. And the worker threads' own start-up, which may still
// malloc a few bytes after the library resolves, is waited for.)
async function checkTooLarge(run, fn, [low, high]) {
  run.lib.trim();
  for (let held = -1, tries = 0; held !== run.lib.memoryUsage().heapInUse && tries < 40; tries++) {
    held = run.lib.memoryUsage().heapInUse;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const before = run.lib.memoryUsage();
  const refuse = () => assert.throws(run.call, (e) => {
    const m = new RegExp(`^${fn.replace('.', '\\.')}: this call needs (\\d+) MiB of wasm memory, more than the 4064 MiB a wasm32 ` +
      'module can use; split the batch or the heads$').exec(e.message);
    assert.ok(e instanceof RangeError && m, e.message);
    assert.ok(Number(m[1]) >= low && Number(m[1]) <= high, `${m[1]} MiB`);
    return true;
  });
  refuse();
  const after = run.lib.memoryUsage();
  assert.deepEqual([after.heapInUse, after.arena], [before.heapInUse, before.arena], 'nothing left allocated');
  assert.ok(after.wasmMemory - before.wasmMemory < 544 * MiB, `wasm memory grew ${after.wasmMemory - before.wasmMemory} bytes`);
  refuse();
  assert.deepEqual(run.lib.memoryUsage(), after, 'the same call again: memory as it was');
}

test('a call whose workspaces on every thread cannot fit gets a RangeError before they are allocated', async () => {
  const threaded = await createAttention({ threads: 8 });
  try {
    const seqK = 2 ** 23;
    const key = new Float32Array(seqK), value = new Float32Array(seqK), query = new Float32Array(512);
    await checkTooLarge({ lib: threaded, call: () => threaded.attention(query, key, value, { heads: 1, seqQ: 512, seqK, headDim: 1 }) },
      'attention', [8 * 544 + 64, 8 * 546 + 65]);
  } finally {
    threaded.dispose();
  }
});

test("a layer's forward whose kernel workspaces cannot fit gets a RangeError before they are allocated", async () => {
  const threaded = await createAttention({ threads: 8, layers: true });
  const layer = new threaded.MultiHeadAttention({ embedDim: 1, numHeads: 1, bias: false });
  try {
    layer.setWeights({ wq: new Float32Array([1]), wk: new Float32Array([1]), wv: new Float32Array([1]), wo: new Float32Array([1]) });
    const seq = 2 ** 23;
    const x = new Float32Array(seq);
    // The kernel's 8 × 544 MiB, the 64 MiB staged, and the layer's work buffer (Q, the attention
    // output, K and V: 128 MiB, and the projections' scratch).
    await checkTooLarge({ lib: threaded, call: () => layer.forward(x) }, 'MultiHeadAttention.forward', [8 * 544 + 64 + 128, 8 * 546 + 65 + 256]);
  } finally {
    layer.dispose();
    threaded.dispose();
  }
});
