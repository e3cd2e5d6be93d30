// The call path keeps what it can from call to call (the module's call block, heap views, the
// last shape's tensor parts): a loop of calls with the same shapes must still see every change —
// an option, an array of another length, an array that was detached, memory that grew — in the
// single-threaded build and in the threaded one (whose views of shared memory may lag).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { FIELD } from '../../dist/call-block.mjs';
import { heap } from '../../dist/heap.mjs';
import { makeLoaders } from '../../dist/loader.mjs';
import { nodePlatform } from '../../dist/node.mjs';
import { assertClose, createAttention, makeInputs, pinned, randomTensor, rng } from './helpers.mjs';
import { referenceAttention, referenceRotary } from './reference.mjs';

let builds;
before(async () => {
  const [single, threaded] = await Promise.all([createAttention({ threads: 1 }), createAttention({ threads: 2 })]);
  builds = { single, threaded };
});
after(() => Object.values(builds).forEach((lib) => lib.dispose()));

const SHAPE = { heads: 4, kvHeads: 2, seqQ: 3, seqK: 5, headDim: 8 };
const detach = (array) => structuredClone(array.buffer, { transfer: [array.buffer] });

test('the same shapes with a changed option: each call answers its own options', () => {
  const { query, key, value } = makeInputs(SHAPE, 1);
  const window = [1, 0];
  const calls = [
    {}, { causal: true }, { causal: true, window }, { scale: 0.5 }, { softcap: 2 }, { causal: 'upper-left' },
    { causal: true, window },  // the same array as before, changed below
  ];
  for (const [name, lib] of Object.entries(builds)) {
    window[1] = 0;
    calls.forEach((extra, i) => {
      if (i === calls.length - 1) window[0] = 3;  // the array the previous calls saw, mutated
      const options = { ...SHAPE, ...extra };
      const out = new Float32Array(SHAPE.heads * SHAPE.seqQ * SHAPE.headDim);
      lib.attention(query, key, value, { ...options, out });
      assertClose(out, referenceAttention(query, key, value, options).out, `${name}, call ${i} (${JSON.stringify(extra)})`);
    });
    window[0] = 1;
  }
});

test('the same options with an array of another length, or another shape of the same length: refused, naming the shape', () => {
  for (const lib of Object.values(builds)) {
    const { query, key, value } = makeInputs(SHAPE, 2);
    lib.attention(query, key, value, SHAPE);
    const longer = new Float32Array(query.length + SHAPE.headDim);
    assert.throws(() => lib.attention(longer, key, value, SHAPE),
      { name: 'RangeError', message: 'attention: query has length 104, expected 96 (batch 1 × heads 4 × seqQ 3 × headDim 8)' });
    assert.throws(() => lib.attention(query, key, value, { ...SHAPE, out: new Float32Array(95) }),
      { name: 'RangeError', message: 'attention: options.out has length 95, expected 96 (batch 1 × heads 4 × seqQ 3 × valueDim 8)' });
    // Each size alone changed: the query that fitted the last call is refused with this call's shape.
    for (const [size, to, expected] of [['heads', 8, 192], ['seqQ', 6, 192], ['headDim', 4, 48], ['batch', 2, 192]]) {
      const changed = { ...SHAPE, [size]: to };
      const formula = ['batch', 'heads', 'seqQ', 'headDim'].map((n) => `${n} ${changed[n] ?? 1}`).join(' × ');
      assert.throws(() => lib.attention(query, key, value, changed),
        { name: 'RangeError', message: `attention: query has length 96, expected ${expected} (${formula})` }, size);
    }
    assert.throws(() => lib.attention(query, key, value, { ...SHAPE, layout: 'bshd', out: new Float32Array(95) }),
      { name: 'RangeError', message: 'attention: options.out has length 95, expected 96 (batch 1 × seqQ 3 × heads 4 × valueDim 8)' });
    // Another shape whose query has the same length: its own formula, not the last call's.
    const other = { ...SHAPE, heads: 2, kvHeads: 1, seqQ: 6 };
    assert.throws(() => lib.attention(longer, key.subarray(0, 40), value.subarray(0, 40), other),
      { name: 'RangeError', message: 'attention: query has length 104, expected 96 (batch 1 × heads 2 × seqQ 6 × headDim 8)' });
    const o = makeInputs(other, 3);
    assertClose(lib.attention(o.query, o.key, o.value, other), referenceAttention(o.query, o.key, o.value, other).out, 'the other shape');
  }
});

test('a detached array between calls: refused (a query, an output, a cache\'s key), nothing else changed', () => {
  for (const [name, lib] of Object.entries(builds)) {
    const { query, key, value } = makeInputs(SHAPE, 4);
    const want = lib.attention(query, key, value, SHAPE);
    const gone = query.slice();
    detach(gone);
    assert.throws(() => lib.attention(gone, key, value, SHAPE),
      { name: 'RangeError', message: 'attention: query has length 0, expected 96 (batch 1 × heads 4 × seqQ 3 × headDim 8)' }, name);
    const out = new Float32Array(want.length);
    detach(out);
    assert.throws(() => lib.attention(query, key, value, { ...SHAPE, out }), /^RangeError: attention: options\.out has length 0, expected 96/);
    assert.deepEqual(lib.attention(query, key, value, SHAPE), want, `${name}: the next call as before`);

    const cache = lib.createKVCache({ kvHeads: 2, headDim: 8, maxSeq: 8 });
    const k = randomTensor(2 * 8, rng(5)), v = randomTensor(2 * 8, rng(6));
    cache.append(k, v);
    detach(k);
    assert.throws(() => cache.append(k, v), /^RangeError: KVCache\.append: key has length 0/);
    assert.equal(cache.length, 1, 'nothing appended');
    cache.dispose();
  }
});

test('memory that grew between calls (and during one): the same answers, read from the grown memory', () => {
  const decode = { heads: 4, seqQ: 1 };
  for (const [name, lib] of Object.entries(builds)) {
    const random = rng(7);
    const cache = lib.createKVCache({ kvHeads: 2, headDim: 8, maxSeq: 16 });
    const k = randomTensor(2 * 16 * 8, random), v = randomTensor(2 * 16 * 8, random);
    cache.append(k, v);
    const query = randomTensor(4 * 8, random);
    const want = lib.attention(query, cache, null, decode);
    const before = lib.memoryUsage().wasmMemory;
    // A cache that does not fit in the memory there is: it grows (and its keys lie past the old end).
    const big = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: 2 ** 14 });
    assert.ok(lib.memoryUsage().wasmMemory > before, `${name}: memory grew`);
    big.append(randomTensor(8 * 128, random), randomTensor(8 * 128, random));
    assert.deepEqual(lib.attention(query, cache, null, decode), want, `${name}: after growth`);
    // A call whose staging lies past the memory as it was (the arena's block grows with it).
    const wide = { heads: 4, kvHeads: 2, seqQ: 1, seqK: 2 ** 15, headDim: 8 };
    const w = makeInputs(wide, 8);
    const grownAgain = lib.memoryUsage().wasmMemory;
    const out = lib.attention(w.query, w.key, w.value, wide);
    assert.ok(lib.memoryUsage().wasmMemory >= grownAgain);
    assertClose(out, referenceAttention(w.query, w.key, w.value, wide).out, `${name}: a call staged in new memory`);
    assert.deepEqual(lib.attention(query, cache, null, decode), want, `${name}: and after it`);
    big.dispose();
    cache.dispose();
    lib.trim();
  }
});

// A pool worker that grows memory: each item of rotary()'s job (32 rows) allocates its table of
// cos/sin (32 × headDim floats, here 4 MiB) on the thread that runs it. With room at the top of
// the heap for the call's tensor (the threaded build rotates it in place in one block) and one
// table and a half, the caller's item (the first: the workers are asleep) takes the table's room
// and the first worker's item grows the memory, which the glue on the calling thread does not
// see: its views keep their old length. The call's results must still be read right, and so must
// the next call's, staged in a block that lies partly past the glue's views. Every call goes to the
// pool (the module's test-only setPoolForEveryCall): whether the pool pays for a call of this size
// is no part of the test.
test('memory a pool worker grew during a call: that call\'s results, then a call staged past the glue\'s views', async () => {
  let M;
  const { createAttention: withModule } = makeLoaders({ ...nodePlatform, start: async (...args) => (M = await nodePlatform.start(...args)) });
  const lib = await withModule({ ...pinned, threads: 4 });
  M.setPoolForEveryCall(true);
  try {
    const headDim = 32768, table = 32 * headDim * 4, MiB = 2 ** 20;
    const x = randomTensor(384 * headDim, rng(21));
    const first = { heads: 1, seq: 256, headDim };  // eight items
    const want = lib.rotary(x.subarray(0, 256 * headDim), first);
    const size = () => M.wasmMemory.buffer.byteLength;
    // An allocation more than 1.2x the memory grows it by just what it asks (Emscripten adds 20 %
    // only to smaller growths): freed, and taken again but for the room wanted, that room is left.
    let filler = 0;
    const leaveRoom = () => {
      if (filler) M._free(filler);
      const asked = 2 * size();
      M._free(M._malloc(asked));
      filler = M._malloc(asked - (32 * MiB + MiB + 1.5 * table));  // the tensor's block, the angles' step tables, 1.5 tables
      assert.ok(filler, 'the filler was allocated');
    };
    leaveRoom();
    let byWorker = false, calls = 0, setUps = 1;
    while (!byWorker && calls++ < 30) {
      await new Promise((resolve) => setTimeout(resolve, 300));  // the workers asleep: the caller starts first
      const before = size();
      assert.deepEqual(lib.rotary(x.subarray(0, 256 * headDim), first), want, `call ${calls}`);
      if (size() === before) continue;  // the caller ran every item itself before a worker woke
      byWorker = M.HEAPU8.length < size();
      if (!byWorker && setUps++ < 3) leaveRoom();  // a worker took the room first, and the caller grew memory
    }
    assert.ok(byWorker, `a worker grew memory during a call, and the glue's views still end where they did (${calls} calls)`);
    // A 48 MiB tensor: a new block, from the room the growth left, past the views' end.
    const views = M.HEAPU8.length;
    const second = { heads: 1, seq: 384, headDim };
    const out = lib.rotary(x, second);
    assert.equal(M.HEAPU8.length, views, 'the call ran without growing memory (the glue\'s views are as they were)');
    assert.deepEqual(out.subarray(0, 256 * headDim), want, 'its first 256 rows as before');
    const exact = referenceRotary(x.subarray(256 * headDim), { heads: 1, seq: 128, headDim, positionOffset: 256 });
    const last = out.subarray(256 * headDim);
    for (let i = 0; i < last.length; i++) {
      if (!(Math.abs(last[i] - exact[i]) <= 2 ** -21 + 384 * 2 ** -49)) assert.fail(`rotary[${256 * headDim + i}] = ${last[i]}, want ${exact[i]}`);
    }
    M._free(filler);
  } finally {
    M.setPoolForEveryCall(false);
    lib.dispose();
  }
});

test('heap(M, end): the glue\'s views while they reach end, else views of the memory\'s buffer, made once per buffer', () => {
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 4, shared: true });
  const glue = { HEAPU8: new Uint8Array(memory.buffer), wasmMemory: memory };
  assert.equal(heap(glue, 65536), glue, 'within the glue\'s views');
  memory.grow(1);  // as a worker would: the glue's views are not replaced
  assert.equal(heap(glue, 65536), glue, 'an older view of shared memory is still valid below its end');
  const fresh = heap(glue, 65537);
  assert.notEqual(fresh, glue);
  assert.equal(fresh.HEAPU8.length, 2 * 65536);
  assert.equal(fresh.HEAP32.buffer, fresh.HEAPF64.buffer);
  assert.equal(heap(glue, 65537), fresh, 'made once for that buffer');
  fresh.HEAP32[16384] = 7;  // at byte 65536: past the glue's views, in the grown memory
  assert.equal(new Int32Array(memory.buffer)[16384], 7);
  memory.grow(1);
  const again = heap(glue);
  assert.equal(again.HEAPU8.length, 3 * 65536, 'a buffer grown again: views of it');
  glue.HEAPU8 = new Uint8Array(memory.buffer);  // the glue caught up
  assert.equal(heap(glue), glue);
  const single = { HEAPU8: new Uint8Array(65536) };  // a single-threaded build: the glue's views are the memory's
  assert.equal(heap(single), single);
});

test('the call block\'s fields: JS writes each where C++ reads it (src/bindings.h asserts each offset)', () => {
  // The C++ side fails to compile unless every JsAttentionCall field sits at the byte listed in
  // src/bindings.h; here that list must be CALL_FIELDS, in order (a swap of two int32 fields on
  // either side would otherwise pass every size check).
  const source = readFileSync(new URL('../../src/bindings.h', import.meta.url), 'utf8');
  const listed = [...source.matchAll(/^ATTN_JS_FIELD_AT\(JsAttentionCall, (\w+), (\d+)\);$/gm)].map(([, name, byte]) => [name, Number(byte)]);
  assert.deepEqual(listed, Object.keys(FIELD).map((name) => [name, 4 * FIELD[name]]));
});

test('a cache check answers one way: lib.attention\'s over a cache and a layer\'s createCache both write their values into the call block (answer_check), none crosses as an Embind value object', () => {
  const source = ['bindings.cpp', 'bindings_layers.cpp'].map((file) => readFileSync(new URL(`../../src/${file}`, import.meta.url), 'utf8')).join('\n');
  assert.doesNotMatch(source, /value_object<\w*Check\w*>/, 'no value object carries a check');
  const checks = source.match(/attn::check_call\(|\.check_cache\(/g) ?? [];
  const answered = source.match(/return answer_check\((attn::check_call|m\.check_cache)\(/g) ?? [];
  assert.deepEqual([answered.length, checks.length], [2, 2], 'both checks, each answered by answer_check');
});
