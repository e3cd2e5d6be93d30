// Threads: the choice of build, bit-identical results with and without threads (within each
// SIMD level: npm test runs this file on SIMD128 and again on relaxed SIMD), disposal, and Node
// processes that exit by themselves.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import { makeLoaders } from '../../dist/loader.mjs';
import { nodePlatform } from '../../dist/node.mjs';
import { HeapArena } from '../../dist/heap.mjs';
import { makeCallBlock } from '../../dist/call-block.mjs';
import { makeRotary } from '../../dist/rotary.mjs';
import { browserCores, chooseThreads } from '../../dist/threads.mjs';
import { createAttention, EXPECTED_SIMD, makeInputs, pinned, randomTensor, rng } from './helpers.mjs';

let single, threaded;
before(async () => {
  [single, threaded] = await Promise.all([createAttention({ threads: 1, layers: true }), createAttention({ threads: 2, layers: true })]);
});
after(() => {
  single.dispose();
  threaded.dispose();
});

test('chooseThreads: auto, requests, caps, and the not-isolated fallback', () => {
  const node = { isNode: true, cores: 4 };
  const page = { isNode: false, crossOriginIsolated: false, sharedMemory: false, cores: 8 };
  const isolated = { isNode: false, crossOriginIsolated: true, sharedMemory: true, cores: 8 };
  assert.deepEqual(chooseThreads({}, node), { threads: 4, reason: 'auto: 4 of 4 cores' });
  assert.deepEqual(chooseThreads({ maxThreads: 2 }, isolated), { threads: 2, reason: 'auto: 2 of 8 cores' });
  assert.deepEqual(chooseThreads({}, { ...node, cores: 1 }), { threads: 1, reason: 'one core' });
  assert.deepEqual(chooseThreads({ maxThreads: 1 }, node), { threads: 1, reason: 'auto: 1 of 4 cores' }, 'capped, not one core');
  assert.deepEqual(chooseThreads({ threads: 1 }, node), { threads: 1, reason: 'requested 1 thread' });
  assert.deepEqual(chooseThreads({ threads: 3 }, isolated), { threads: 3, reason: 'requested 3 threads' });
  assert.deepEqual(chooseThreads({}, page), { threads: 1, reason: 'not cross-origin isolated (no SharedArrayBuffer)' });
  // Not isolated, even with a SharedArrayBuffer constructor (older browsers had one): no threads.
  assert.deepEqual(chooseThreads({}, { ...page, sharedMemory: true }).threads, 1);
  // strict: the Error says what is missing and how to get it, not what a fallback would do.
  assert.throws(() => chooseThreads({ threads: 2, strict: true }, page), (e) => {
    assert.equal(e.message, 'attention-wasm: 2 threads were requested, but this page is not cross-origin isolated (no ' +
      'SharedArrayBuffer). Serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp.');
    return true;
  });
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(m);
  try {
    assert.equal(chooseThreads({ threads: 2 }, page).threads, 1);
    assert.equal(chooseThreads({ threads: 4 }, page).threads, 1);
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings.length, 1, 'warns once');
  assert.match(warnings[0], /; using 1 thread\. Serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp\.$/);
});

test('chooseThreads: an isolated page without SharedArrayBuffer (WebKitGTK) is told so, not to add the headers', () => {
  const webkit = { isNode: false, crossOriginIsolated: true, sharedMemory: false, cores: 2 };
  const reason = 'cross-origin isolated, but this browser gives pages no SharedArrayBuffer';
  assert.deepEqual(chooseThreads({}, webkit), { threads: 1, reason });
  const problem = 'attention-wasm: 2 threads were requested, but this browser gives pages no SharedArrayBuffer, not even ' +
    'cross-origin-isolated ones (WebKitGTK is one such browser)';
  const hint = 'The page already sends the isolation headers; no header changes this.';
  assert.throws(() => chooseThreads({ threads: 2, strict: true }, webkit), { message: `${problem}. ${hint}` });
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(m);
  try {
    assert.deepEqual(chooseThreads({ threads: 2 }, webkit), { threads: 1, reason });
    assert.deepEqual(chooseThreads({ threads: 3 }, webkit), { threads: 1, reason });
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(warnings, [`${problem}; using 1 thread. ${hint}`], 'its own warning, once, without the header advice');
});

test("browserCores: WebKit's 4 (any machine with fewer than 8 cores) counts as 2; other engines' counts as they are", () => {
  const apple = 'Apple Computer, Inc.';
  const note = 'WebKit reports 4 cores for any machine with fewer than 8, so 2 are assumed';
  assert.deepEqual(browserCores({ hardwareConcurrency: 4, vendor: apple }), { cores: 2, coresNote: note });
  assert.deepEqual(browserCores({ hardwareConcurrency: 8, vendor: apple }), { cores: 8 });
  assert.deepEqual(browserCores({ hardwareConcurrency: 1, vendor: apple }).cores, 1);
  assert.deepEqual(browserCores({ hardwareConcurrency: 4, vendor: 'Google Inc.' }), { cores: 4 });
  assert.deepEqual(browserCores({ hardwareConcurrency: 2, vendor: '' }), { cores: 2 });
  assert.deepEqual(browserCores(undefined), { cores: 1 });
  // What 'auto' then asks for in an isolated WebKit page with shared memory (Safari).
  const safari = { isNode: false, crossOriginIsolated: true, sharedMemory: true, ...browserCores({ hardwareConcurrency: 4, vendor: apple }) };
  assert.deepEqual(chooseThreads({}, safari), { threads: 2, reason: `auto: 2 (${note})` });
  assert.deepEqual(chooseThreads({ threads: 4 }, safari).threads, 4, 'an explicit count is taken as asked');
});

test('loadAttention options for threads are checked', async () => {
  await assert.rejects(createAttention({ threads: 0 }), /^RangeError: createAttention: options\.threads must be 'auto' or an integer from 1 to 64, got number 0$/);
  await assert.rejects(createAttention({ threads: 'many' }), /^RangeError: createAttention: options\.threads/);
  await assert.rejects(createAttention({ maxThreads: 1.5 }), /^RangeError: createAttention: options\.maxThreads/);
  await assert.rejects(createAttention({ strict: 'yes' }), /^TypeError: createAttention: options\.strict must be a boolean/);
});

test('threaded results are bit-identical to single-threaded ones', () => {
  assert.equal(single.info.threads, 1);
  assert.equal(threaded.info.threads, 2);
  assert.deepEqual([single.info.simd, threaded.info.simd], [EXPECTED_SIMD, EXPECTED_SIMD]);
  const shapes = [
    { heads: 1, seqQ: 300, seqK: 300, headDim: 32 },                   // one head: split into row chunks
    { batch: 2, heads: 8, kvHeads: 2, seqQ: 65, seqK: 130, headDim: 64, causal: true },
    { heads: 32, kvHeads: 8, seqQ: 1, seqK: 500, headDim: 128 },       // decode
    { heads: 4, seqQ: 20, seqK: 33, headDim: 16, layout: 'bshd', attendMask: new Uint8Array(20 * 33).map((_, i) => i % 7 !== 0) },
  ];
  for (const [n, shape] of shapes.entries()) {
    const { query, key, value } = makeInputs(shape, n + 1);
    const weights = [1, 2].map(() => new Float32Array((shape.batch ?? 1) * shape.heads * shape.seqQ * shape.seqK));
    const a = single.attention(query, key, value, { ...shape, weightsOut: weights[0] });
    const b = threaded.attention(query, key, value, { ...shape, weightsOut: weights[1] });
    assert.ok(a.every((x, i) => Object.is(x, b[i])), `outputs of shape ${n}`);
    assert.ok(weights[0].every((x, i) => Object.is(x, weights[1][i])), `weights of shape ${n}`);
  }
  // The layer: projections split by panel, attention by head, a cache over several steps.
  const r = rng(5);
  const w = () => ({ wq: randomTensor(64 * 64, r, 0.1), wk: randomTensor(64 * 64, r, 0.1), wv: randomTensor(64 * 64, r, 0.1),
    wo: randomTensor(64 * 64, r, 0.1), bq: randomTensor(64, r), bk: randomTensor(64, r), bv: randomTensor(64, r), bo: randomTensor(64, r) });
  const weightsOfLayer = w();
  const layers = [single, threaded].map((lib) => {
    const m = new lib.MultiHeadAttention({ embedDim: 64, numHeads: 8 });
    m.setWeights(weightsOfLayer);
    return m;
  });
  const x = randomTensor(40 * 64, r);
  const [y1, y2] = layers.map((m) => m.forward(x, null, null, { causal: true }));
  assert.ok(y1.every((v, i) => Object.is(v, y2[i])), 'layer outputs');
  const caches = layers.map((m) => m.createCache({ maxSeq: 40 }));
  for (const [at, n] of [[0, 30], [30, 1], [31, 9]]) {
    const [s1, s2] = layers.map((m, k) => m.forward(x.subarray(at * 64, (at + n) * 64), null, null, { cache: caches[k] }));
    assert.ok(s1.every((v, i) => Object.is(v, s2[i])), `cached step at ${at}`);
  }
  caches.forEach((c) => c.dispose());
  layers.forEach((m) => m.dispose());
});

test('a wide layer (headDim, scale, a bias on some projections) trains, decodes and cross-attends bit-identically on 1 and 2 threads', () => {
  const config = { embedDim: 40, numHeads: 4, numKvHeads: 2, headDim: 24, kdim: 12, vdim: 12, scale: 1, bias: { k: false, o: false },
    rotary: { rotaryDim: 8 } };
  const r = rng(6);
  const weights = { wq: randomTensor(96 * 40, r, 0.1), wk: randomTensor(48 * 12, r, 0.1), wv: randomTensor(48 * 12, r, 0.1),
    wo: randomTensor(40 * 96, r, 0.1), bq: randomTensor(96, r), bv: randomTensor(48, r) };
  const x = randomTensor(2 * 30 * 40, r), enc = randomTensor(2 * 50 * 12, r), dOut = randomTensor(x.length, r);
  const [a, b] = [single, threaded].map((lib) => {
    const m = new lib.MultiHeadAttention(config);
    m.setWeights(weights);
    const weightsOut = new Float32Array(2 * 30 * 50);
    const crossOut = m.forward(x, enc, null, { batch: 2, train: true, weightsOut, averageAttnWeights: true });
    const grads = m.backward(dOut);
    const cache = m.createCrossCache(enc, null, { batch: 2, dtype: 'bfloat16' });
    const steps = [0, 1, 2].map((t) => m.forward(x.subarray(t * 80, (t + 1) * 80), null, null, { batch: 2, cache }));
    cache.dispose();
    m.dispose();
    return [...crossOut, ...weightsOut, ...grads.dQuery, ...grads.dKey, ...Object.values(grads.weights).flatMap((g) => [...g]),
      ...steps.flatMap((s) => [...s])];
  });
  assert.ok(a.every((v, i) => Object.is(v, b[i])));
});

// Decode steps over a cache in each dtype: split over kv heads, and over chunks of keys when
// there is one kv head (MQA), the same split whatever the threads.
test('decode steps over a cache are bit-identical with 1 and 2 threads, each dtype, split keys included', () => {
  const seqK = 2100, headDim = 64;
  for (const [heads, kvHeads, seqQ] of [[8, 8, 1], [32, 8, 1], [16, 1, 1], [8, 2, 4]]) {
    const { query, key, value } = makeInputs({ heads, kvHeads, seqQ, seqK, headDim }, heads + kvHeads + seqQ);
    for (const dtype of ['float32', 'float16', 'bfloat16', 'int8', 'int4']) {
      const [a, b] = [single, threaded].map((lib) => {
        const cache = lib.createKVCache({ kvHeads, headDim, maxSeq: seqK, dtype });
        cache.append(key, value);
        const lseOut = new Float32Array(heads * seqQ);
        const out = lib.attention(query, cache, null, { heads, seqQ, causal: true, lseOut });
        cache.dispose();
        return [...out, ...lseOut];
      });
      assert.ok(a.every((x, i) => Object.is(x, b[i])), `${dtype} heads ${heads}/${kvHeads} seqQ ${seqQ}`);
    }
  }
});

// The probe hooks behind docs/performance.md's account of the pool's choice (test-only, like
// setPoolForEveryCall): the job's cost timed at sizing, and per size class (powers of two from half
// a job) its preference, pairs and paired sums. Decode steps over the cache whose estimated time
// is nearest four jobs are timed; 300 of them make two bursts the other way.
test('Module.poolChoiceState: the job\'s cost, and the pairs of the class a timed call falls in', async () => {
  let M;
  const { createAttention: withModule } = makeLoaders({ ...nodePlatform, start: async (...args) => (M = await nodePlatform.start(...args)) });
  const lib = await withModule({ ...pinned, threads: 2 });
  try {
    const job = M.poolChoiceState(0);
    assert.ok(job > 0, `the job's cost ${job} ns`);
    const field = (c, k) => M.poolChoiceState(1 + 6 * c + k);
    for (let c = 0; c < 5; c++) assert.equal(field(c, 1), 0, `class ${c}: no pairs yet`);
    assert.ok(Number.isNaN(M.poolChoiceState(31)) && Number.isNaN(M.poolChoiceState(-1)), 'NaN past the fields');
    const heads = 8, kvHeads = 2, headDim = 64;
    const estimate = (keys) => heads * keys * (2 * headDim + 2 * headDim + 8) / 64;  // ns, as parallel.cpp estimates it
    const jobs = (keys) => Math.abs(Math.log2(estimate(keys) / (4 * job)));
    const seqK = [256, 1024, 4096, 16384].reduce((a, b) => (jobs(b) < jobs(a) ? b : a));
    const estimated = estimate(seqK);
    const c = Math.min(4, Math.floor(Math.log2(estimated / (job / 2))));
    const { query, key, value } = makeInputs({ heads, kvHeads, seqQ: 1, seqK, headDim }, 5);
    const cache = lib.createKVCache({ kvHeads, headDim, maxSeq: seqK });
    cache.append(key, value);
    const before = M.poolJobs();
    for (let i = 0; i < 300; i++) lib.attention(query, cache, null, { heads, seqQ: 1 });
    cache.dispose();
    assert.ok(M.poolJobs() > before, 'some steps went to the pool');
    assert.ok(field(c, 1) >= 4, `class ${c} (job ${job} ns, ${seqK} keys): ${field(c, 1)} pairs`);
    for (let k = 2; k <= 5; k++) assert.ok(field(c, k) > 0 && Number.isFinite(field(c, k)), `class ${c} sum ${k}: ${field(c, k)}`);
    assert.equal(field(c, 0), field(c, 4) / field(c, 5) < field(c, 2) / field(c, 3) ? 1 : 0, 'it prefers the way of the lower time per ns');
  } finally {
    lib.dispose();
  }
});

// A threaded build's memory is shared, and V8 copies between it and ordinary memory 6-8 times
// slower when the two addresses differ modulo 8 (32 KB: 20 against 2.7 µs in Node 20), as a view
// into the middle of a larger array often does: the arena stages each array at its own remainder.
test('a threaded build stages each view at its own address modulo 8, with the same results', async () => {
  let M;
  const { createAttention: withModule } = makeLoaders({ ...nodePlatform, start: async (...args) => (M = await nodePlatform.start(...args)) });
  const lib = await withModule({ ...pinned, threads: 2 });
  try {
    const arena = new HeapArena(M);
    const floats = new Float32Array(64), bytes = new Uint8Array(64);
    const call = arena.stage('test', { a: floats.subarray(1, 9), b: floats.subarray(2, 10), c: bytes.subarray(3, 20) },
      { out: floats.subarray(5, 13), count: 8 });
    assert.deepEqual(['a', 'b', 'c', 'out', 'count'].map((name) => call.address(name) % 8), [4, 0, 3, 4, 0]);
    arena.trim();
    // Views at an odd float into larger arrays, in and out: the single-threaded build's results.
    const shape = { heads: 4, kvHeads: 2, seqQ: 9, seqK: 17, headDim: 16, causal: true };
    const { query, key, value } = makeInputs(shape, 7);
    const inside = (array, at) => {
      const big = new Float32Array(array.length + 4);
      big.set(array, at);
      return big.subarray(at, at + array.length);
    };
    const want = single.attention(query, key, value, shape);
    const out = inside(new Float32Array(want.length), 3);
    const weightsOut = inside(new Float32Array(4 * 9 * 17), 1);
    lib.attention(inside(query, 1), inside(key, 3), inside(value, 2), { ...shape, out, weightsOut });
    assert.ok(want.every((x, i) => Object.is(x, out[i])), 'outputs');
    const weights = single.attentionWeights(query, key, shape);
    assert.ok(weights.every((x, i) => Object.is(x, weightsOut[i])), 'weights');
  } finally {
    lib.dispose();
  }
});

// rotary() stages a whole tensor in a threaded build's shared memory in one piece: at its own
// remainder modulo 8 too, with the single-threaded build's results.
test('a threaded build stages rotary()\'s tensor at its address modulo 8, with the same results', async () => {
  let M;
  const { createAttention: withModule } = makeLoaders({ ...nodePlatform, start: async (...args) => (M = await nodePlatform.start(...args)) });
  const lib = await withModule({ ...pinned, threads: 2 });
  try {
    const arena = new HeapArena(M), remainders = [];
    const spy = Object.assign(Object.create(arena), {
      stage: (fn, inputs, outputs) => {
        const call = arena.stage(fn, inputs, outputs);
        remainders.push(call.address('chunk') % 8);
        return call;
      },
    });
    const rotary = makeRotary(M, spy, makeCallBlock(M));
    const shape = { batch: 1, heads: 2, seq: 5, headDim: 8 };
    const x = randomTensor(2 * 5 * 8 + 1, rng(3)).subarray(1);  // an odd float into a larger array
    const got = rotary(x, shape);
    assert.deepEqual(remainders, [4], 'the chunk at x\'s remainder');
    const want = single.rotary(x, shape);
    assert.ok(want.every((v, i) => Object.is(v, got[i])), 'results');
  } finally {
    lib.dispose();
  }
});

test('dispose() ends the pool: later calls throw, and a fresh load works', async () => {
  const lib = await createAttention({ threads: 2 });
  const { query, key, value } = makeInputs({ heads: 2, seqQ: 4, headDim: 8 });
  lib.attention(query, key, value, { heads: 2, seqQ: 4, headDim: 8 });
  lib.dispose();
  lib.dispose();  // harmless
  assert.throws(() => lib.attention(query, key, value, { heads: 2, seqQ: 4, headDim: 8 }), /^Error: attention-wasm: attention\(\) after lib\.dispose\(\)/);
  const again = await createAttention({ threads: 2 });
  assert.equal(again.attention(query, key, value, { heads: 2, seqQ: 4, headDim: 8 }).length, 64);
  again.dispose();
});

test('a Node process that used threads exits by itself', () => {
  const script = `
    const { loadAttention } = await import(${JSON.stringify(new URL('./helpers.mjs', import.meta.url).href)});
    const lib = await loadAttention();
    const x = new Float32Array(4 * 256 * 32).fill(0.1);
    lib.attention(x, x, x, { heads: 4, seqQ: 256, headDim: 32 });
    console.log(lib.info.threads);`;
  const start = performance.now();
  const out = execFileSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20000 });
  const seconds = (performance.now() - start) / 1000;
  assert.ok(Number(out) > 1, `the child used threads (${out.trim()})`);
  assert.ok(seconds < 5, `exited after ${seconds.toFixed(1)} s`);
});
