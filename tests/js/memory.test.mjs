// Memory: no leak over 10,000 mixed calls (including calls that throw), the FinalizationRegistry
// safety net, a failed allocation inside wasm that leaves the library usable, and a disposed
// instance that gives its memory back to the process.
// (Each test file runs in its own process; this one grows its module to 4 GiB on purpose.)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { before, test } from 'node:test';
import { createAttention, loadAttention, makeInputs, randomTensor, rng } from './helpers.mjs';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
let lib;
before(async () => { lib = await loadAttention({ layers: true }); });  // the tests below mix in the layer

const SHAPES = [
  { heads: 2, seqQ: 5, seqK: 9, headDim: 8 },
  { batch: 2, heads: 4, kvHeads: 2, seqQ: 33, seqK: 70, headDim: 16, causal: true },
  { heads: 3, seqQ: 1, seqK: 200, headDim: 64, layout: 'bshd' },
];

function mixedCall(n, inputs, layer, x) {
  const shape = SHAPES[n % SHAPES.length];
  const { query, key, value } = inputs[n % SHAPES.length];
  switch (n % 7) {
    case 0: return lib.attention(query, key, value, shape);
    case 1: return lib.attentionWeights(query, key, shape);
    case 2: assert.throws(() => lib.attention(query, key, new Float32Array(3), shape), RangeError); return null;
    case 3: assert.throws(() => lib.attention(query, key, value, { ...shape, headDim: 0 }), RangeError); return null;
    case 4: return layer.forward(x);
    case 5: {
      const cache = layer.createCache({ maxSeq: 6 });
      layer.forward(x.subarray(0, 16), null, null, { cache });  // 1 position
      assert.throws(() => layer.forward(x, null, null, { cache }), RangeError);  // 1 + 6 > 6
      cache.dispose();
      return null;
    }
    default: return lib.linear(x, x.subarray(0, 32), { inFeatures: 16, outFeatures: 2 });
  }
}

test('10,000 mixed calls leave the wasm heap where it was', () => {
  const inputs = SHAPES.map((s, i) => makeInputs(s, i + 1));
  const layer = new lib.MultiHeadAttention({ embedDim: 16, numHeads: 4 });
  const r = rng(3);
  layer.setWeights({ wq: randomTensor(256, r), wk: randomTensor(256, r), wv: randomTensor(256, r), wo: randomTensor(256, r),
    bq: randomTensor(16, r), bk: randomTensor(16, r), bv: randomTensor(16, r), bo: randomTensor(16, r) });
  const x = randomTensor(6 * 16, r);
  for (let n = 0; n < 42; n++) mixedCall(n, inputs, layer, x);  // every combination once: the arena reaches its size
  // In use besides the arena, whose block each disposed cache gives back and the next call takes again.
  const held = ({ heapInUse, arena }) => heapInUse - arena;
  const before = lib.memoryUsage();
  for (let n = 0; n < 10000; n++) mixedCall(n, inputs, layer, x);
  const after = lib.memoryUsage();
  assert.equal(held(after), held(before), `heap in use besides the arena: ${held(before)} → ${held(after)} bytes`);
  assert.equal(after.wasmMemory, before.wasmMemory);
  layer.dispose();
  assert.ok(held(lib.memoryUsage()) < held(before), 'dispose() frees the packed weights');
});

test('objects dropped without dispose() are freed by the FinalizationRegistry', async () => {
  const baseline = lib.memoryUsage().heapInUse;
  (() => {
    for (let n = 0; n < 20; n++) {
      const layer = new lib.MultiHeadAttention({ embedDim: 64, numHeads: 4 });
      const w = new Float32Array(64 * 64);
      const b = new Float32Array(64);
      layer.setWeights({ wq: w, wk: w, wv: w, wo: w, bq: b, bk: b, bv: b, bo: b });
      layer.createCache({ maxSeq: 256 });
    }
  })();
  assert.ok(lib.memoryUsage().heapInUse > baseline + 20 * 64 * 64 * 16, 'the layers hold memory');
  for (let tries = 0; tries < 50 && lib.memoryUsage().heapInUse > baseline; tries++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));  // finalizers run between tasks
  }
  assert.ok(lib.memoryUsage().heapInUse <= baseline, `heap in use back to ${baseline} bytes, got ${lib.memoryUsage().heapInUse}`);
});

test('a failed allocation inside wasm is a clear Error; the library stays usable', () => {
  const layer = new lib.MultiHeadAttention({ embedDim: 1024, numHeads: 8, bias: false });
  const w = new Float32Array(1024 * 1024);
  layer.setWeights({ wq: w, wk: w, wv: w, wo: w });
  const caches = [];
  let error;
  try {
    for (let n = 0; n < 16; n++) caches.push(layer.createCache({ maxSeq: 32768 }));  // 256 MiB each
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof Error, 'wasm32 memory runs out before 16 caches of 256 MiB');
  assert.match(error.message, new RegExp('^attention-wasm: kv cache: out of memory \\(asked for 256\\.0 MiB; [0-9.]+ [GM]iB in use, ' +
    'wasm memory [0-9.]+ [GM]iB of at most 4\\.00 GiB\\); dispose\\(\\) layers and caches that are no longer needed, call lib\\.trim\\(\\)'));
  for (const c of caches) c.dispose();
  const x = new Float32Array(2 * 1024).fill(0.5);
  assert.ok(layer.forward(x).every(Number.isFinite), 'the layer still works');
  const small = makeInputs(SHAPES[0]);
  assert.ok(lib.attention(small.query, small.key, small.value, SHAPES[0]).every(Number.isFinite), 'attention still works');
  layer.dispose();
});

// The process's resident memory (a child's, with gc exposed) before an instance, with 512 MiB of
// cache written, and after lib.dispose() while the app still holds the disposed lib, cache and
// layer (the layers build's) and a method of the instance (as a page's or a module's top-level
// constants do). Resident, not wasm memory: only the engine's collection returns it.
function residentAfterDispose(threads, layers) {
  const script = `
    const { createAttention } = await import(${JSON.stringify(new URL('./helpers.mjs', import.meta.url).href)});
    const rss = () => process.memoryUsage().rss;
    const settle = async (done) => {
      for (let tries = 0; tries < 100 && !done(); tries++) { gc(); await new Promise((resolve) => setTimeout(resolve, 20)); }
    };
    (await createAttention({ threads: ${threads}, layers: ${layers} })).dispose();  // the code is loaded and compiled once
    await settle(() => false);
    const baseline = rss();
    const lib = await createAttention({ threads: ${threads}, layers: ${layers} });
    const cache = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: 65536 });
    ((block) => { while (cache.length < cache.maxSeq) cache.append(block, block); })(new Float32Array(8192 * 8 * 128).fill(0.5));
    const layer = ${layers} ? new lib.MultiHeadAttention({ embedDim: 64, numHeads: 4 }) : null;
    const attend = lib.attention;
    const filled = rss();
    cache.dispose();
    layer?.dispose();
    lib.dispose();
    await settle(() => rss() < baseline + 2 ** 25);
    console.log(JSON.stringify({ baseline, filled, after: rss(), held: [cache.disposed, layer?.disposed ?? 'no layer', typeof attend, lib.trim()] }));`;
  const out = execFileSync(process.execPath, [...process.execArgv, '--expose-gc', '--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 60000 });
  return JSON.parse(out);
}

// The default builds, and the threaded layers build (which starts with the default's glue).
for (const [threads, layers] of [[1, false], [2, false], [2, true]]) {
  test(`a disposed instance gives its memory back (${threads} thread${threads > 1 ? 's' : ''}${layers ? ', layers' : ''}), though the app holds its disposed objects`, () => {
    const { baseline, filled, after, held } = residentAfterDispose(threads, layers);
    const mib = (n) => `${(n / 2 ** 20).toFixed(0)} MiB`;
    assert.deepEqual(held, [true, layers || 'no layer', 'function', 0]);
    assert.ok(filled > baseline + 2 ** 29 - 2 ** 25, `the cache was resident: ${mib(baseline)} → ${mib(filled)}`);
    assert.ok(after < baseline + 2 ** 25, `resident memory back near ${mib(baseline)} (within 32 MiB), got ${mib(after)}`);
  });
}

test('after lib.dispose() its caches and layers work until disposed; then the instance holds no memory', async () => {
  const mine = await createAttention({ threads: 1, layers: true });
  const cache = mine.createKVCache({ kvHeads: 1, headDim: 8, maxSeq: 4 });
  const layer = new mine.MultiHeadAttention({ embedDim: 8, numHeads: 2 });
  mine.dispose();
  cache.append(new Float32Array(8), new Float32Array(8));
  assert.equal(cache.length, 1);
  assert.ok(mine.memoryUsage().heapInUse > 0, 'memoryUsage() while a cache of it lives');
  cache.dispose();
  assert.ok(mine.memoryUsage().heapInUse > 0, 'and while a layer lives');
  layer.dispose();
  assert.throws(() => mine.memoryUsage(), /^Error: attention-wasm: memoryUsage\(\) after lib\.dispose\(\) and the disposal of its every cache and layer: the instance holds no memory$/);
  assert.equal(mine.trim(), 0);
  assert.throws(() => cache.append(new Float32Array(8), new Float32Array(8)), /^Error: KVCache\.append: this cache was disposed$/);
  assert.throws(() => layer.forward(new Float32Array(8)), /^Error: MultiHeadAttention\.forward: this layer was disposed$/);
  assert.throws(() => mine.attention(new Float32Array(8), new Float32Array(8), new Float32Array(8), { heads: 1, seqQ: 1, headDim: 8 }),
    /^Error: attention-wasm: attention\(\) after lib\.dispose\(\)/);
});
