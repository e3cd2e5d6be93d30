// Out of memory, for real (this file's process grows its module to the 4 GiB wasm32 limit, cheaply:
// caches are not touched until used; each test file runs in its own process):
// - the arena gives back the block a huge call took, so a cache made next uses
//   that memory instead of growing it; lib.trim(); out-of-memory errors give the sizes and a hint;
// - adamStep with memory so full that its allocations fail one after another
//   fails cleanly each time (no half-allocated moments, no projection stepped, the step not
//   counted) and, once memory is freed, takes exactly the step a fresh layer takes.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ threads: 1, layers: true }); });  // both tests fill memory through a layer

const MiB = 2 ** 20;
const KEEP = 16 * MiB;  // ARENA_KEEP_BYTES in src/js/heap.mjs
const LIMIT = 2 ** 32 - 2 ** 16;  // -sMAXIMUM_MEMORY=4GB: Emscripten stops one 64 KiB page short
const OOM_TAIL = /\(asked for [0-9.]+ [KMG]iB; [0-9.]+ [KMG]iB in use, wasm memory [0-9.]+ [KMG]iB of at most 4\.00 GiB\); dispose\(\) layers and caches that are no longer needed, call lib\.trim\(\), or split the work into smaller calls$/;
// A cache's message adds how to store it smaller.
const CACHE_OOM_TAIL = new RegExp(OOM_TAIL.source.replace(/\$$/, '') + "; or store it smaller: dtype 'float16' or 'bfloat16' halves it, 'int8' quarters it, 'int4' takes 0\\.14 of it, fewer positions \\(maxSeq\\) shrink it$");

function layer(e, seed) {
  const r = rng(seed);
  const mha = new lib.MultiHeadAttention({ embedDim: e, numHeads: 8 });
  const w = () => randomTensor(e * e, r, 1 / Math.sqrt(e));
  const b = () => randomTensor(e, r, 0.1);
  mha.setWeights({ wq: w(), wk: w(), wv: w(), wo: w(), bq: b(), bk: b(), bv: b(), bo: b() });
  return mha;
}

test('a huge call gives its arena block back; a cache that needs the memory can then be made', () => {
  const baseline = lib.memoryUsage();
  assert.equal(baseline.wasmMemoryLimit, LIMIT);
  const small = lib.linear(new Float32Array(4 * 8).fill(1), new Float32Array(8 * 8).fill(0.5), { inFeatures: 8, outFeatures: 8 });
  assert.ok(small.every((v) => v === 4));
  const usual = lib.memoryUsage().arena;
  assert.ok(usual > 0 && usual <= KEEP, `a usual call keeps its block (${usual} bytes)`);

  // 512 MiB through the arena (256 MiB in, 256 MiB out) and 256 MiB of scratch inside wasm.
  const rows = 2 ** 20, features = 64;
  const input = new Float32Array(rows * features).fill(0.25);
  const weight = new Float32Array(features * features).fill(0.5);
  const out = lib.linear(input, weight, { inFeatures: features, outFeatures: features });
  assert.equal(out[0], 8);
  assert.equal(out[out.length - 1], 8);
  const after = lib.memoryUsage();
  assert.ok(after.wasmMemory > 768 * MiB, `wasm memory grew (${after.wasmMemory} bytes) and stays`);
  assert.ok(after.arena <= KEEP, `the 512 MiB block was given back (arena ${after.arena} bytes)`);
  assert.ok(after.heapInUse <= baseline.heapInUse + KEEP, `heap in use back near ${baseline.heapInUse}, got ${after.heapInUse}`);

  // 560 MiB of cache in two blocks of 280 MiB: it fits without growing memory only if the 512 MiB
  // the arena held (next to the 256 MiB of scratch) is free again.
  const mha = layer(512, 1);
  const cache = mha.createCache({ maxSeq: 143360 });
  assert.equal(cache.bytes, 560 * MiB);
  assert.equal(lib.memoryUsage().wasmMemory, after.wasmMemory, 'the cache took the freed memory; wasm memory did not grow');
  mha.forward(randomTensor(3 * 512, rng(2)), null, null, { cache });
  assert.equal(cache.length, 3);
  assert.ok(lib.memoryUsage().arena > 0, 'the call kept its block');
  cache.dispose();
  assert.equal(lib.memoryUsage().arena, 0, 'a disposed cache takes the arena\'s block with it (made after the cache, it may lie above it)');

  lib.linear(new Float32Array(8).fill(1), new Float32Array(64).fill(1), { inFeatures: 8, outFeatures: 8 });
  assert.ok(lib.trim() > 0, 'trim() frees the block the last call kept and says how much');
  assert.equal(lib.memoryUsage().arena, 0);
  assert.equal(lib.trim(), 0);
  assert.ok(lib.linear(new Float32Array(8).fill(1), new Float32Array(64).fill(1), { inFeatures: 8, outFeatures: 8 }).every((v) => v === 8), 'works after trim');
  mha.dispose();
});

test('adamStep with memory full fails cleanly at every allocation and then takes the right step', () => {
  const e = 512;  // four moment pairs of 1 MiB each, an update buffer of 1 MiB, gradients 4 MiB
  const mha = layer(e, 3);
  const x = randomTensor(4 * e, rng(4));
  mha.forward(x, null, null, { train: true });
  const { weights: grads } = mha.backward(randomTensor(4 * e, rng(5)));
  const before = mha.getWeights();

  // What one Adam step from the same weights and gradients gives, on a fresh layer.
  const fresh = new lib.MultiHeadAttention({ embedDim: e, numHeads: 8 });
  fresh.setWeights(before);
  fresh.adamStep(grads, { lr: 0.01 });
  const want = fresh.getWeights();
  fresh.dispose();
  // The step stages its gradients (4.1 MiB) in the arena's block, which disposing `fresh` gave
  // back: a call that stages more leaves it that large before memory fills up.
  lib.linear(new Float32Array(2 ** 20 + 2 ** 16), new Float32Array(1), { inFeatures: 1, outFeatures: 1 });
  assert.ok(lib.memoryUsage().arena > 4.2 * MiB, 'the arena holds a block for the step');

  // Fill wasm memory with caches, large then small, until nothing fits. A cache of this layer
  // holds 2 KiB a position for keys and as much for values; with maxSeq 257 its two buffers and
  // its C++ object take a little more than one Adam moment (512·513 floats), so each such cache
  // freed makes room for one more of the step's allocations.
  const caches = [];
  for (const maxSeq of [65536, 257, 8]) {
    for (;;) {
      try {
        caches.push({ maxSeq, cache: mha.createCache({ maxSeq }) });
      } catch (error) {
        assert.match(error.message, /^attention-wasm: kv cache: out of memory /);
        assert.match(error.message, CACHE_OOM_TAIL);
        break;
      }
    }
  }
  assert.ok(lib.memoryUsage().wasmMemory > LIMIT - 64 * MiB, 'memory is full');
  const tiny = caches.filter((c) => c.maxSeq === 8);
  const medium = caches.filter((c) => c.maxSeq === 257);

  // Free the last medium caches (next to each other at the top of the heap) one at a time and
  // try the step each time: the step's 9 allocations (m and v of 4 projections, the update) fail
  // one after the other: the 1st, then the 2nd with the 1st made, …
  const failures = [];
  let stepped = false;
  while (medium.length && !stepped) {
    try {
      mha.adamStep(grads, { lr: 0.01 });
      stepped = true;
    } catch (error) {
      assert.ok(error instanceof Error);
      assert.match(error.message, /^attention-wasm: multi-head attention: out of memory for the optimizer (state|step) \(asked for 1\.0 MiB; /);
      assert.match(error.message, OOM_TAIL);
      failures.push(error.message.replace(/ \(asked.*/, '').replace(/.*for the /, ''));
      medium.pop().cache.dispose();
    }
  }
  console.log(`adamStep with memory full: ${failures.length} clean failures (${failures.join(', ')}), then the step`);
  assert.ok(stepped, 'the step succeeds once memory is freed');
  assert.ok(failures.filter((f) => f === 'optimizer state').length >= 2, 'some moments were made before one failed');
  for (const c of [...tiny, ...medium]) c.cache.dispose();
  for (const c of caches.filter((c) => c.maxSeq === 65536)) c.cache.dispose();

  const got = mha.getWeights();
  for (const name of Object.keys(want)) {
    assert.ok(Buffer.from(got[name].buffer).equals(Buffer.from(want[name].buffer)), `${name}: exactly one step from the old weights`);
  }
  assert.equal(mha.getOptimizerState().step, 1, 'failed steps were not counted');
  mha.forward(x, null, null, { train: true });
  mha.adamStep(mha.backward(randomTensor(4 * e, rng(6))).weights, { lr: 0.01 });
  assert.equal(mha.getOptimizerState().step, 2);
  assert.ok(mha.forward(x).every(Number.isFinite), 'the layer keeps working');
  mha.dispose();
});
