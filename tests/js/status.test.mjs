// What a call answers across the JS↔C++ boundary (src/bindings.cpp): undefined when it succeeded,
// else a CallError whose kind says why — invalid, out of memory, over budget, a value a float16 or
// int4 cache refused — with what the message needs (the bytes, where the refused value is, the
// core's message) in the same
// crossing. The JS side words its errors from the kind (src/js/heap.mjs), never from the text.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { heap } from '../../dist/heap.mjs';
import { moduleAndLibrary } from './helpers.mjs';

let M;
let lib;
before(async () => ({ M, lib } = await moduleAndLibrary()));
after(() => lib.dispose());

const GiB = 2 ** 30;
const F16_OVERFLOW = "kv cache: a finite value is beyond float16's range (it would be stored as infinity)";
const INT4_NOT_FINITE = 'kv cache: int4 stores finite values only (a value is infinite or NaN)';
const NOTHING_REFUSED = { key: true, batch: 0, head: 0, row: 0, element: 0, value: 0 };
const answer = (kind, message, bytes = 0, refused = NOTHING_REFUSED) => ({ kind: M.Failure[kind], message, bytes, refused });

// A C++ cache of `sizes` (KvCacheConfig; dtype by name), deleted after fn(core).
function withCache(sizes, fn) {
  const core = new M.KvCacheCore();
  try {
    return fn(core, { batch: 1, kvHeads: 1, headDim: 4, valueDim: 4, maxSeq: 8, window: 0, ...sizes, dtype: M.KvType[sizes.dtype ?? 'float32'] });
  } finally {
    core.delete();
  }
}

// Stages `arrays` (Float32Arrays) in wasm memory for fn(...addresses), then frees them.
function staged(arrays, fn) {
  const addresses = arrays.map((a) => {
    const p = M._malloc(a.byteLength) >>> 0;
    heap(M).HEAPF32.set(a, p >>> 2);
    return p;
  });
  try {
    return fn(...addresses);
  } finally {
    for (const p of addresses) M._free(p);
  }
}

test('a call that succeeds answers undefined', () => {
  withCache({}, (core, config) => {
    assert.equal(core.allocate(config), undefined);
    staged([new Float32Array(8), new Float32Array(8)], (k, v) => assert.equal(core.append(k, v, 2, false), undefined));
    assert.equal(core.truncate(1), undefined);
    assert.equal(core.length(), 1);
  });
});

test('an invalid call answers invalid, with the core message', () => {
  withCache({}, (core, config) => {
    assert.deepEqual(core.allocate({ ...config, kvHeads: 0 }),
      answer('invalid', 'kv cache: batch, kv_heads, head_dim, value_dim and max_seq must be positive'));
    assert.equal(core.allocate(config), undefined);
    assert.deepEqual(core.truncate(3), answer('invalid', 'kv cache: truncate needs 0 <= n <= length'));
  });
});

test('an allocation that fails answers out of memory, with its bytes; the next failure is its own', () => {
  withCache({}, (core, config) => {
    // 3 GiB of keys: one block past what wasm32 can allocate at once.
    assert.deepEqual(core.allocate({ ...config, headDim: 3 * 2 ** 28, valueDim: 1, maxSeq: 1 }),
      answer('outOfMemory', 'kv cache: out of memory', 3 * GiB));
    // Sizes past wasm32's size_t: the allocation asked for SIZE_MAX.
    assert.deepEqual(core.allocate({ ...config, kvHeads: 2 ** 20, headDim: 2 ** 20, maxSeq: 2 ** 20 }),
      answer('outOfMemory', 'kv cache: out of memory', 2 ** 32 - 1));
    // Whether a call ran out of memory is the call's own: an invalid call after these is invalid.
    assert.deepEqual(core.truncate(1), answer('invalid', 'kv cache: truncate needs 0 <= n <= length'));
    assert.equal(core.allocate(config), undefined);
  });
});

test('a call past its budget answers over budget, with the bytes it needs, and allocates nothing', () => {
  const held = M.heapInUse();
  const refused = M.linear(0, 0, 0, 0, 5, 7, 3, 0);
  assert.equal(refused.kind, M.Failure.overBudget);
  assert.ok(Number.isInteger(refused.bytes) && refused.bytes >= 4 * 3 * 7, `${refused.bytes} bytes`);
  assert.deepEqual(refused, answer('overBudget', '', refused.bytes));
  assert.equal(M.heapInUse(), held);
});

test('a float16 cache that refuses a value answers float16 overflow, with where it is', () => {
  withCache({ batch: 2, kvHeads: 2, valueDim: 3, dtype: 'float16' }, (core, config) => {
    assert.equal(core.allocate(config), undefined);
    const key = new Float32Array(2 * 2 * 2 * 4), value = new Float32Array(2 * 2 * 2 * 3);  // seq 2, bhsd
    value[((1 * 2 + 1) * 2 + 0) * 3 + 2] = -1e5;  // value: batch 1, kv head 1, row 0, element 2
    staged([key, value], (k, v) => {
      assert.deepEqual(core.append(k, v, 2, false),
        answer('float16Overflow', F16_OVERFLOW, 0, { key: false, batch: 1, head: 1, row: 0, element: 2, value: -1e5 }));
    });
    key[((0 * 2 + 1) * 2 + 1) * 4 + 3] = 70000;  // key: batch 0, kv head 1, row 1, element 3
    staged([key, value], (k, v) => {
      assert.deepEqual(core.append(k, v, 2, false),
        answer('float16Overflow', F16_OVERFLOW, 0, { key: true, batch: 0, head: 1, row: 1, element: 3, value: 70000 }));
      // Told by the call's own answer, not by what the cache last refused.
      assert.deepEqual(core.append(k, v, 0, false), answer('invalid', 'kv cache: append needs key, value and seq >= 1'));
    });
    assert.equal(core.length(), 0, 'nothing appended');
  });
});

test('an int4 cache that refuses ±Infinity or NaN answers int4 not finite, with where it is', () => {
  withCache({ batch: 2, kvHeads: 2, valueDim: 3, dtype: 'int4' }, (core, config) => {
    assert.equal(core.allocate(config), undefined);
    const key = new Float32Array(2 * 2 * 2 * 4), value = new Float32Array(2 * 2 * 2 * 3);  // seq 2, bhsd
    value[((1 * 2 + 1) * 2 + 1) * 3 + 2] = NaN;  // value: batch 1, kv head 1, row 1, element 2
    staged([key, value], (k, v) => {
      assert.deepEqual(core.append(k, v, 2, false),
        answer('int4NotFinite', INT4_NOT_FINITE, 0, { key: false, batch: 1, head: 1, row: 1, element: 2, value: NaN }));
    });
    key[((0 * 2 + 1) * 2 + 0) * 4 + 3] = -Infinity;  // key: batch 0, kv head 1, row 0, element 3
    staged([key, value], (k, v) => {
      assert.deepEqual(core.append(k, v, 2, false),
        answer('int4NotFinite', INT4_NOT_FINITE, 0, { key: true, batch: 0, head: 1, row: 0, element: 3, value: -Infinity }));
    });
    assert.equal(core.length(), 0, 'nothing appended');
  });
});

// lib.linear with the module's entry answering `failure`; returns what it threw.
function linearAnswering(failure) {
  const real = M.linear;
  M.linear = () => failure;
  try {
    lib.linear(new Float32Array(4 * 8).fill(1), new Float32Array(8 * 8).fill(0.5), { inFeatures: 8, outFeatures: 8 });
  } catch (error) {
    return error;
  } finally {
    M.linear = real;
  }
  assert.fail('no error');
}

test('the JS side words each kind of failure, whatever the message says', () => {
  const oom = linearAnswering(answer('outOfMemory', 'linear: no room', 12345));
  assert.equal(oom.constructor, Error);
  assert.match(oom.message, /^attention-wasm: linear: no room \(asked for 13 KiB; [0-9.]+ [KM]iB in use, wasm memory [0-9.]+ MiB of at most 4\.00 GiB\); dispose\(\)/);
  const invalid = linearAnswering(answer('invalid', 'linear: out of memory, says the text'));
  assert.equal(invalid.constructor, Error);
  assert.equal(invalid.message, 'attention-wasm: linear: out of memory, says the text');
  const budget = linearAnswering(answer('overBudget', '', 2 ** 40));
  assert.equal(budget.constructor, RangeError);
  assert.match(budget.message, /^linear: this call needs 1048577 MiB of wasm memory, more than the 4064 MiB a wasm32 module can use; split the batch or the heads$/);
  const result = lib.linear(new Float32Array(4 * 8).fill(1), new Float32Array(8 * 8).fill(0.5), { inFeatures: 8, outFeatures: 8 });
  assert.deepEqual(result, new Float32Array(4 * 8).fill(4), 'the entry as it was');
});

test('a float16 overflow reaches KVCache.append as a RangeError naming its place, from the overflow given', () => {
  const cache = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 8, dtype: 'float16' });
  const real = M.KvCacheCore.prototype.append;
  M.KvCacheCore.prototype.append = () => answer('float16Overflow', 'whatever', 0, { key: false, batch: 0, head: 1, row: 2, element: 3, value: 1e6 });
  try {
    assert.throws(() => cache.append(new Float32Array(2 * 3 * 4), new Float32Array(2 * 3 * 4)),
      (e) => e instanceof RangeError && e.message.startsWith('KVCache.append: value[batch 0, kvHead 1, position 2, element 3] = 1000000 is beyond float16\'s range'));
  } finally {
    M.KvCacheCore.prototype.append = real;
    cache.dispose();
  }
});

test('heap(M) follows the memory a worker grew, which the glue\'s views do not yet', () => {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 4, shared: true });
  const glue = { wasmMemory: memory, HEAPU8: new Uint8Array(memory.buffer), HEAP32: new Int32Array(memory.buffer), HEAPF32: new Float32Array(memory.buffer) };
  assert.equal(heap(glue), glue, 'the glue\'s views while they are current');
  memory.grow(2);  // as a worker's allocation does
  const { HEAPU8, HEAP32, HEAPF32 } = heap(glue);
  assert.deepEqual([HEAPU8.length, HEAP32.length, HEAPF32.length], [3 * 65536, 3 * 16384, 3 * 16384]);
  assert.equal(glue.HEAPU8.length, 65536);
  HEAPF32[HEAPF32.length - 1] = 1.5;
  assert.equal(new Float32Array(memory.buffer)[HEAPF32.length - 1], 1.5);
});
