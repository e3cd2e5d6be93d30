// Past 2 GiB: every build grows its memory up to all of wasm32's 4 GiB, the threaded
// one (shared memory) too. For each: caches adding up to about 3 GiB, then attention over the
// last one, whose keys lie past 2 GiB (where an address read as a signed int32 is negative),
// against the JS reference, and calls whose arguments are staged up there; then memory runs out
// past 4 GiB with an Error that gives the sizes, and the instance keeps working. And nothing
// disposed strands the address space: after any of it, the largest cache is a fresh instance's.
// Filling is cheap: a cache's memory is not touched until positions are appended, so the
// process's resident memory grows by a few MiB, not GiB. (Each test file runs in its own process.)
import assert from 'node:assert/strict';
import { freemem } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { referenceAttention, referenceRotary } from './reference.mjs';
import { assertClose, createAttention, loadAttention, randomTensor, rng } from './helpers.mjs';

const MiB = 2 ** 20, GiB = 2 ** 30;
const LIMIT = 2 ** 32 - 2 ** 16;  // -sMAXIMUM_MEMORY=4GB: Emscripten stops one 64 KiB page short
// The module's whole memory, should the system back it (Linux backs only what is touched).
const FREE_NEEDED = 4 * GiB;
const lacking = freemem() < FREE_NEEDED &&
  `needs ${FREE_NEEDED / GiB} GiB of free memory for a 4 GiB wasm memory; the host has ${(freemem() / GiB).toFixed(1)} GiB free`;
if (lacking) console.log(`memory4g: skipped: ${lacking}`);

const FILLER = { kvHeads: 8, headDim: 128, maxSeq: 65536 };  // 256 MiB of keys and 256 MiB of values
const FILLER_BYTES = 512 * MiB;
// The last cache: 3 batch entries × 2 kv heads, ~0.5 GiB; positions appended to each batch entry
// lie ~100 MiB apart.
const LAST = { batch: 3, kvHeads: 2, headDim: 64, valueDim: 48, maxSeq: 200000 };
const SEQ = 37;
const OOM_TAIL = /\(asked for [0-9.]+ [KMG]iB; [0-9.]+ GiB in use, wasm memory [0-9.]+ GiB of at most 4\.00 GiB\); dispose\(\) layers and caches that are no longer needed, call lib\.trim\(\), or split the work into smaller calls/;

// Where a cache's keys start in wasm memory (through the class's internal accessor).
const keysAddress = (cache) => cache.constructor.coreFor(cache, 'test').address();

// The single-threaded default build, and the threaded layers build (the layer's steps run there):
// both feature sets, at the cost of one.
const LAYERS = { 1: false, 2: true };

for (const threads of [1, 2]) {
  describe(threads === 1 ? 'single-threaded build' : 'threaded layers build (shared memory)', { skip: lacking }, () => {
    let lib;
    const fillers = [];
    let last, key, value;
    before(async () => { lib = await loadAttention({ threads, layers: LAYERS[threads] }); });
    after(() => {
      for (const c of fillers) c.dispose();
      last?.dispose();
      lib?.dispose();
    });

    test('caches adding up to 3 GiB; attention over the last one, past 2 GiB, is correct', () => {
      assert.equal(lib.info.threads, threads);
      assert.equal(lib.memoryUsage().wasmMemoryLimit, LIMIT);
      lib.trim();  // from here on nothing below is free but a few blocks of the warm-up, all < 16 MiB
      const started = performance.now();
      while (fillers.length < 5) fillers.push(lib.createKVCache(FILLER));
      last = lib.createKVCache(LAST);
      const filled = performance.now() - started;
      const usage = lib.memoryUsage();
      assert.ok(usage.heapInUse > 3 * GiB - 32 * MiB, `about 3 GiB in use, got ${usage.heapInUse}`);
      assert.ok(usage.wasmMemory > usage.heapInUse && usage.wasmMemory <= LIMIT, `wasm memory ${usage.wasmMemory}`);
      const address = keysAddress(last);
      assert.ok(address >= 2 ** 31, `the last cache's keys start past 2 GiB, at ${address}`);
      assert.ok(keysAddress(fillers[0]) < address, 'addresses read unsigned');

      const r = rng(threads);
      const { batch, kvHeads, headDim, valueDim } = LAST;
      const heads = 4, seqQ = 5;
      key = randomTensor(batch * kvHeads * SEQ * headDim, r);
      value = randomTensor(batch * kvHeads * SEQ * valueDim, r);
      last.append(key, value);
      const query = randomTensor(batch * heads * seqQ * headDim, r);
      const options = { heads, seqQ, causal: true };
      const want = referenceAttention(query, key, value, { ...options, batch, kvHeads, seqK: SEQ, headDim, valueDim });
      const lseOut = new Float32Array(batch * heads * seqQ);
      assertClose(lib.attention(query, last, null, { ...options, lseOut }), want.out, 'attention over the cache past 2 GiB');
      assertClose(lseOut, want.lse, 'its log-sum-exp', 1e-5);
      console.log(`${threads} thread(s): 5 × 512 MiB + ${(last.bytes / MiB).toFixed(0)} MiB of caches in ${filled.toFixed(0)} ms; ` +
        `wasm memory ${(usage.wasmMemory / GiB).toFixed(2)} GiB, the last cache's keys at ${(address / GiB).toFixed(2)} GiB, ` +
        `process resident ${(process.memoryUsage().rss / MiB).toFixed(0)} MiB`);
    });

    test('calls whose arguments and results are staged past 2 GiB', () => {
      // More than 16 MiB: nothing below is free that large, so the block comes from the top.
      const rows = 2 ** 17, inFeatures = 64, outFeatures = 16;  // 32 MiB in, 8 MiB out
      const y = lib.linear(new Float32Array(rows * inFeatures).fill(1), new Float32Array(outFeatures * inFeatures).fill(0.5),
        { inFeatures, outFeatures });
      assert.equal(y.length, rows * outFeatures);
      assert.ok(y.every((v) => v === 32), 'every output is 64 × 0.5');

      // Rotary with tables of 2 × 16 MiB (maxPosition 2^17): the tables, positions and rows it
      // rotates in wasm memory all lie past 2 GiB.
      const r = rng(7);
      const headDim = 64, half = 32, maxPosition = 2 ** 17, seq = 300, heads = 3;
      const cos = randomTensor(maxPosition * half, r), sin = randomTensor(maxPosition * half, r);
      const positions = Int32Array.from({ length: seq }, () => Math.floor(r() * maxPosition));
      const x = randomTensor(heads * seq * headDim, r);
      const options = { heads, seq, headDim, cos, sin, positions };
      assertClose(lib.rotary(x, options), referenceRotary(x, options), 'rotary past 2 GiB', 1e-5);
      assert.equal(lib.memoryUsage().arena, 0, 'the large block was given back');
    });

    test('past 4 GiB: out of memory gives the sizes and a hint; the instance keeps working', () => {
      let error;
      try {
        for (;;) fillers.push(lib.createKVCache(FILLER));
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof Error, 'memory ran out');
      assert.match(error.message, /^attention-wasm: kv cache: out of memory \(asked for 512\.0 MiB; /);
      assert.match(error.message, OOM_TAIL);
      assert.match(error.message, /; or store it smaller: dtype 'float16' or 'bfloat16' halves it, 'int8' quarters it, 'int4' takes 0\.14 of it, fewer positions \(maxSeq\) shrink it$/);
      const full = lib.memoryUsage();
      assert.ok(full.heapInUse > LIMIT - FILLER_BYTES - 64 * MiB, `memory is full: ${full.heapInUse} bytes in use`);
      assert.ok(full.wasmMemory > 2 ** 32 - 1.5 * FILLER_BYTES, `wasm memory grew to ${full.wasmMemory}`);
      console.log(`${threads} thread(s): out of memory at ${(full.heapInUse / GiB).toFixed(2)} GiB in use: ${error.message.slice(0, 120)}…`);

      // A call's arguments that do not fit (less than 512 MiB is free: the last filler did not fit):
      // the arena's malloc fails.
      const rows = 2 ** 21, inFeatures = 64;  // 512 MiB in, 8 MiB out
      assert.throws(() => lib.linear(new Float32Array(rows * inFeatures), new Float32Array(inFeatures), { inFeatures, outFeatures: 1 }),
        (e) => e instanceof Error && /^attention-wasm: out of memory for the call's arguments and results \(asked for 520\.\d MiB; /.test(e.message) &&
          OOM_TAIL.test(e.message));
      // Sizes that can never fit are RangeErrors before anything is allocated.
      assert.throws(() => lib.createKVCache({ ...FILLER, maxSeq: 65536 * 9 }), (e) => e instanceof RangeError &&
        /^createKVCache: this cache needs 4608 MiB of wasm memory, more than the 4064 MiB a wasm32 module can use; store it smaller: /.test(e.message));
      assert.throws(() => lib.createKVCache({ ...FILLER, valueDim: 1, maxSeq: 65536 * 9 }), (e) => e instanceof RangeError &&
        /^createKVCache: this cache needs 2304 MiB in one block of wasm memory, more than the 2047 MiB one wasm32 allocation can hold; store it smaller: /.test(e.message));
      assert.deepEqual(lib.memoryUsage(), full, 'the failures allocated nothing');

      // Freeing two fillers makes room again; the cache past 2 GiB still gives the same answer.
      fillers.pop().dispose();
      fillers.pop().dispose();
      fillers.push(lib.createKVCache({ ...FILLER, dtype: 'int8' }));
      const { batch, kvHeads, headDim, valueDim } = LAST;
      const r = rng(9);
      const query = randomTensor(batch * 4 * headDim, r);
      const want = referenceAttention(query, key, value, { heads: 4, seqQ: 1, batch, kvHeads, seqK: SEQ, headDim, valueDim });
      assertClose(lib.attention(query, last, null, { heads: 4, seqQ: 1 }), want.out, 'decode over the cache past 2 GiB');
      if (!lib.info.layers) return;
      const layer = new lib.MultiHeadAttention({ embedDim: 32, numHeads: 4, bias: false });
      const w = () => randomTensor(32 * 32, r, 0.2);
      layer.setWeights({ wq: w(), wk: w(), wv: w(), wo: w() });
      assert.ok(layer.forward(randomTensor(3 * 32, r)).every(Number.isFinite), 'a new layer works');
      layer.dispose();
    });
  });
}

// The largest cache (kvHeads 8, headDim 128, float32: 8 KiB a position) that `lib` can make now,
// in MiB, to 1 MiB: by bisection over maxSeq (each try freed at once, a failed one included).
function largestCache(lib) {
  const perPosition = 8 * 128 * 4 * 2;
  let fits = 0, fails = Math.floor(LIMIT / perPosition);
  while (fails - fits > MiB / perPosition) {
    const maxSeq = Math.floor((fits + fails) / 2);
    try {
      lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq }).dispose();
      fits = maxSeq;
    } catch {
      fails = maxSeq;
    }
  }
  return Math.floor((fits * perPosition) / MiB);
}

// What a page or app does with an instance and then disposes, step by step; after each, the
// largest cache must be within a few MiB of a fresh instance's (the allocator's own blocks).
const DISPOSED_WORK = {
  // (Out of memory with the heap still short of 4 GiB: the allocator stopped growing its top block
  // in place for good.)
  'a 4000 MiB cache that did not fit beside a 1 GiB one': (lib) => {
    const cache = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: GiB / (8 * 128 * 4 * 2) });
    assert.throws(() => lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: (4000 * MiB) / (8 * 128 * 4 * 2) }), /out of memory/);
    cache.dispose();
  },
  // (A call's staging block lands above the 1 GiB cache; a 3 GiB cache did not fit after.)
  'a 1 GiB cache, 256 positions appended': (lib) => {
    const cache = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: GiB / (8 * 128 * 4 * 2) });
    const block = new Float32Array(256 * 8 * 128).fill(0.5);
    cache.append(block, block);
    cache.dispose();
    const big = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: (3 * GiB) / (8 * 128 * 4 * 2) });
    big.dispose();
  },
  'caches until out of memory': (lib) => {
    const caches = [];
    try {
      for (;;) caches.push(lib.createKVCache(FILLER));
    } catch {
      for (const c of caches) c.dispose();
    }
  },
  'a layer, its cache and a decode step, a call staging 40 MiB': (lib) => {
    const layer = new lib.MultiHeadAttention({ embedDim: 256, numHeads: 4 });
    const w = new Float32Array(256 * 256).fill(0.01);
    layer.setWeights({ wq: w, wk: w, wv: w, wo: w, bq: w.subarray(0, 256), bk: w.subarray(0, 256), bv: w.subarray(0, 256), bo: w.subarray(0, 256) });
    const cache = layer.createCache({ maxSeq: 4096 });
    layer.forward(new Float32Array(256), null, null, { cache });
    lib.linear(new Float32Array(2 ** 19 * 16), new Float32Array(4 * 16), { inFeatures: 16, outFeatures: 4 });
    cache.dispose();
    layer.dispose();
  },
};

for (const threads of [1, 2]) {
  test(`nothing disposed strands memory (${threads} thread${threads > 1 ? 's' : ''}): the largest cache stays a fresh instance's`, { skip: lacking }, async () => {
    const fresh = await createAttention({ threads, layers: LAYERS[threads] });
    const baseline = largestCache(fresh);
    fresh.dispose();
    assert.ok(baseline > 4000, `a fresh instance makes a cache of ${baseline} MiB`);
    const lib = await createAttention({ threads, layers: LAYERS[threads] });
    try {
      for (const [what, work] of Object.entries(DISPOSED_WORK).filter(([what]) => LAYERS[threads] || !what.startsWith('a layer'))) {
        work(lib);
        const largest = largestCache(lib);
        assert.ok(largest >= baseline - 8, `after ${what}: the largest cache is ${largest} MiB, a fresh instance's ${baseline} MiB`);
      }
    } finally {
      lib.dispose();
    }
  });
}
