// The inference builds (what loadAttention() loads by default): they load at every thread count,
// give the same bits as the layers builds (the same kernel code) on attention, attention weights,
// linear, rotary and decode steps over every cache dtype and a ring; their layer API throws a
// TypeError that says how to load it; the feature set is a load option like the others
// (wasmBinary names it, contradictions are refused, loadAttention() keeps one instance per set).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import * as raw from '../../dist/node.mjs';
import * as simd128Entry from '../../dist/node-simd128.mjs';
import { EXPECTED_SIMD, createAttention, makeInputs, randomTensor, rng } from './helpers.mjs';

const dist = (file) => new URL(`../../dist/${file}`, import.meta.url);
const relaxed = EXPECTED_SIMD === 'relaxed-simd';
const prefix = (layers) => (layers ? 'attn-layers' : 'attn');
const file = (layers, threaded) => `${prefix(layers)}${relaxed ? '-relaxed' : ''}${threaded ? '-mt' : ''}.wasm`;

// Everything an inference app calls, on `lib`: the outputs, in one array per call.
function inferenceCalls(lib) {
  const random = rng(7);
  const shape = { batch: 2, heads: 4, kvHeads: 2, seqQ: 5, seqK: 9, headDim: 16, causal: true };
  const { query, key, value } = makeInputs(shape, 3);
  const results = {
    attention: lib.attention(query, key, value, shape),
    weights: lib.attentionWeights(query, key, shape),
    linear: lib.linear(randomTensor(3 * 24, random), randomTensor(10 * 24, random), { inFeatures: 24, outFeatures: 10 }),
    rotary: lib.rotary(randomTensor(2 * 4 * 5 * 16, random), { batch: 2, heads: 4, seq: 5, headDim: 16, positionOffset: 3 }),
  };
  const [kvHeads, heads, headDim] = [2, 8, 32];
  for (const [dtype, length] of [['float32', { maxSeq: 64 }], ['float16', { maxSeq: 64 }], ['bfloat16', { maxSeq: 64 }],
    ['int8', { maxSeq: 64 }], ['int4', { maxSeq: 64 }], ['float16', { window: 8 }]]) {
    const cache = lib.createKVCache({ kvHeads, headDim, dtype, ...length });
    const [prefill, steps] = length.window ? [6, 5] : [20, 3];  // the ring wraps
    cache.append(randomTensor(kvHeads * prefill * headDim, random), randomTensor(kvHeads * prefill * headDim, random), { seq: prefill });
    for (let step = 0; step < steps; step++) {  // decode steps: append one position, attend over the cache
      cache.append(randomTensor(kvHeads * headDim, random), randomTensor(kvHeads * headDim, random), { seq: 1 });
      const window = length.window ? { window: [length.window - 1, 0] } : {};
      results[`${dtype}${length.window ? ' ring' : ''} step ${step}`] =
        lib.attention(randomTensor(heads * headDim, random), cache, null, { heads, seqQ: 1, ...window });
    }
    cache.dispose();
  }
  return results;
}

for (const threads of [1, 2]) {
  test(`the inference build (${file(false, threads > 1)}) gives the layers build's bits, and refuses the layer API`, async () => {
    const [inference, layers] = await Promise.all([createAttention({ threads, layers: false }), createAttention({ threads, layers: true })]);
    try {
      assert.deepEqual([inference.info.layers, inference.info.threads, inference.info.simd], [false, threads, EXPECTED_SIMD]);
      assert.deepEqual([layers.info.layers, layers.info.threads], [true, threads]);
      const [got, want] = [inferenceCalls(inference), inferenceCalls(layers)];
      for (const name of Object.keys(want)) assert.deepEqual(got[name], want[name], `${name}: the same bits`);

      const remedy = 'this instance was loaded without the layer and training API (MultiHeadAttention, attentionBackward), ' +
        'which loadAttention() leaves out of its download; load with loadAttention({ layers: true }) (or createAttention({ layers: true })) to use it';
      assert.throws(() => new inference.MultiHeadAttention({ embedDim: 8, numHeads: 2 }),
        (e) => e instanceof TypeError && e.message === `MultiHeadAttention: ${remedy}`);
      const { query, key, value } = makeInputs({ heads: 1, seqQ: 2, headDim: 4 });
      assert.throws(() => inference.attentionBackward(query, key, value, query, { heads: 1, seqQ: 2, headDim: 4 }),
        (e) => e instanceof TypeError && e.message === `attentionBackward: ${remedy}`);
      assert.equal(inference.attention(query, key, value, { heads: 1, seqQ: 2, headDim: 4 }).length, 8, 'still works after');
      inference.dispose();  // then it is the disposed instance's error, as every call's
      assert.throws(() => inference.attentionBackward(query, key, value, query, { heads: 1, seqQ: 2, headDim: 4 }),
        /^Error: attention-wasm: attentionBackward\(\) after lib\.dispose\(\); load the library again$/);
    } finally {
      inference.dispose();
      layers.dispose();
    }
  });
}

// info.layers is what the module registered, and the loader passes the layer's JavaScript exactly
// when the build it chose has the layer (it imports mha.mjs only then): createLibrary refuses a pair
// that disagrees rather than make a library whose info or layer API is wrong.
test("createLibrary: the module's feature set and the layer's JavaScript agree, or it throws", async () => {
  const [{ createLibrary }, { makeMultiHeadAttention }, { default: createAttnModule }] = await Promise.all([
    import('../../dist/api.mjs'), import('../../dist/mha.mjs'), import('../../dist/attn.mjs')]);
  for (const layers of [false, true]) {
    const M = await createAttnModule({ wasmBinary: await readFile(dist(`${prefix(layers)}.wasm`)) });
    assert.throws(() => createLibrary(M, { makeMultiHeadAttention: layers ? null : makeMultiHeadAttention }),
      new RegExp(`^Error: attention-wasm: the module ${layers ? 'has' : 'lacks'} the layer, but the library was made ${layers ? 'without' : 'with'} its JavaScript`));
    const lib = createLibrary(M, { makeMultiHeadAttention: layers ? makeMultiHeadAttention : null });
    assert.equal(lib.info.layers, layers);
    lib.dispose();
  }
});

test('wasmBinary names the feature set too; a contradicting layers option is refused', async () => {
  for (const threaded of [false, true]) {
    const [inferenceBytes, layersBytes] = await Promise.all([readFile(dist(file(false, threaded))), readFile(dist(file(true, threaded)))]);
    const threads = threaded ? 2 : 1;
    for (const [bytes, layers] of [[inferenceBytes, false], [layersBytes, true]]) {
      const lib = await createAttention({ wasmBinary: bytes, threads });
      assert.equal(lib.info.layers, layers);
      lib.dispose();
    }
    const what = `${threaded ? 'threaded' : 'single-threaded'} ${EXPECTED_SIMD} build`;
    await assert.rejects(raw.createAttention({ wasmBinary: inferenceBytes, layers: true, threads }), (e) => e instanceof TypeError &&
      e.message === `createAttention: options.wasmBinary is ${file(false, threaded)}, the ${what}, but options.layers is true (that needs ${file(true, threaded)})`);
    await assert.rejects(raw.createAttention({ wasmBinary: layersBytes, layers: false, threads }), (e) => e instanceof TypeError &&
      e.message === `createAttention: options.wasmBinary is ${file(true, threaded)}, the ${what} with the layer and training API, ` +
      `but options.layers is false (that needs ${file(false, threaded)})`);
  }
  await assert.rejects(raw.createAttention({ layers: 'yes' }), /^TypeError: createAttention: options\.layers must be a boolean, got string "yes"$/);
});

test('loadAttention() shares one instance per feature set', async () => {
  const inference = await raw.loadAttention();
  const layers = await raw.loadAttention({ layers: true });
  try {
    assert.notEqual(inference, layers);
    assert.deepEqual([inference.info.layers, layers.info.layers], [false, true]);
    assert.equal(await raw.loadAttention({ layers: false }), inference);
    assert.equal(await raw.loadAttention(), inference);
    assert.equal(await raw.loadAttention({ layers: true }), layers);
    await assert.rejects(raw.loadAttention({ layers: 1 }), /^TypeError: loadAttention: options\.layers must be a boolean, got number 1$/);
  } finally {
    inference.dispose();
    layers.dispose();
  }
  const again = await raw.loadAttention({ layers: true });
  assert.ok(again !== layers && again.info.layers, 'after dispose() a load starts afresh');
  again.dispose();
});

test("'attention-wasm/simd128' has both feature sets of its one build", async () => {
  for (const layers of [false, true]) {
    const lib = await simd128Entry.createAttention({ layers });
    assert.deepEqual([lib.info.simd, lib.info.threads, lib.info.layers], ['simd128', 1, layers]);
    lib.dispose();
  }
});
