// A bounded soak: random valid and invalid calls on a two-thread instance for
// ATTN_SOAK_SECONDS (default 30, at most 60 in npm test; set it higher for a long run): attention
// with masks, causal and both layouts (outputs, weights and lse), the backward, layer training
// steps and cache decoding, each checked against the double-precision JS reference; invalid calls
// must throw the documented error (type and message) and leave the library working. The heap in
// use (without the arena) must end where it began, to a few bytes of allocator rounding. Seeded:
// a failure names its seed and call (ATTN_SOAK_SEED to replay it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAttention } from '../../dist/node.mjs';
import { assertClose, randomTensor, rng } from './helpers.mjs';
import { referenceAttention, referenceAttentionBackward, referenceMha } from './reference.mjs';

const SECONDS = Number(process.env.ATTN_SOAK_SECONDS ?? 30);
const SEED = Number(process.env.ATTN_SOAK_SEED ?? 20261201);
let lib;
before(async () => { lib = await createAttention({ threads: 2, layers: true }); });
after(() => lib.dispose());

const pick = (r, list) => list[Math.floor(r() * list.length)];
const int = (r, lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
const inUse = () => { const u = lib.memoryUsage(); return u.heapInUse - u.arena; };

// A random attention problem: shape, layout, causal, and a mask of one of several kinds and shapes.
function attentionCase(r) {
  const kvHeads = int(r, 1, 3), heads = kvHeads * int(r, 1, 3);
  const o = {
    batch: int(r, 1, 2), heads, kvHeads, seqQ: int(r, 1, 20), seqK: int(r, 1, 24), headDim: int(r, 1, 17),
    valueDim: int(r, 1, 9), layout: pick(r, ['bhsd', 'bshd']), causal: r() < 0.4,
  };
  const kind = pick(r, ['none', 'attend-plane', 'additive-batch', 'attend-head', 'block-padding', 'additive-bias']);
  const shapes = { 'attend-plane': [o.seqQ, o.seqK], 'additive-batch': [o.batch, 1, o.seqQ, o.seqK], 'attend-head': [o.batch, heads, o.seqQ, o.seqK],
    'block-padding': [o.batch, 1, 1, o.seqK], 'additive-bias': [heads, o.seqQ, o.seqK] };
  if (kind !== 'none') {
    const length = shapes[kind].reduce((n, d) => n * d, 1);
    o.maskShape = shapes[kind];
    if (kind.startsWith('additive')) o.mask = Float32Array.from({ length }, () => (r() < 0.1 ? -Infinity : r() - 0.5));
    if (kind.startsWith('attend')) o.attendMask = Uint8Array.from({ length }, () => (r() < 0.8 ? 1 : 0));
    if (kind.startsWith('block')) o.blockMask = Uint8Array.from({ length }, () => (r() < 0.2 ? 1 : 0));
  }
  const q = randomTensor(o.batch * heads * o.seqQ * o.headDim, r);
  const k = randomTensor(o.batch * kvHeads * o.seqK * o.headDim, r);
  const v = randomTensor(o.batch * kvHeads * o.seqK * o.valueDim, r);
  return { o, q, k, v };
}

// A few layers that live through the soak (training changes them); their weights are read back
// with getWeights() for the reference.
function makeLayer(r, config) {
  const mha = new lib.MultiHeadAttention(config);
  const e = config.embedDim, kv = (config.numKvHeads ?? config.numHeads) * (e / config.numHeads);
  const kdim = config.kdim ?? e, vdim = config.vdim ?? e;
  mha.setWeights({
    wq: randomTensor(e * e, r, 0.4), wk: randomTensor(kv * kdim, r, 0.4), wv: randomTensor(kv * vdim, r, 0.4), wo: randomTensor(e * e, r, 0.4),
    bq: randomTensor(e, r, 0.2), bk: randomTensor(kv, r, 0.2), bv: randomTensor(kv, r, 0.2), bo: randomTensor(e, r, 0.2),
  });
  return mha;
}

const validCalls = {
  attention(r) {
    const { o, q, k, v } = attentionCase(r);
    const weightsOut = r() < 0.5 ? new Float32Array(o.batch * o.heads * o.seqQ * o.seqK) : undefined;
    const lseOut = r() < 0.5 ? new Float32Array(o.batch * o.heads * o.seqQ) : undefined;
    const out = lib.attention(q, k, v, { ...o, weightsOut, lseOut });
    const want = referenceAttention(q, k, v, o);
    assertClose(out, want.out, 'out');
    if (weightsOut) assertClose(weightsOut, want.weights, 'weights');
    if (lseOut) lseOut.forEach((l, i) => assert.ok(l === want.lse[i] || Math.abs(l - want.lse[i]) <= 1e-4 + 1e-5 * Math.abs(want.lse[i]), `lse[${i}]: ${l} vs ${want.lse[i]}`));
    return o;
  },
  attentionWeights(r) {
    const { o, q, k } = attentionCase(r);
    const { valueDim, ...shape } = o;
    assertClose(lib.attentionWeights(q, k, shape), referenceAttention(q, k, new Float32Array(o.batch * o.kvHeads * o.seqK * valueDim), o).weights, 'weights');
    return shape;
  },
  attentionBackward(r) {
    const { o, q, k, v } = attentionCase(r);
    const dOut = randomTensor(o.batch * o.heads * o.seqQ * o.valueDim, r);
    let saved = {};
    if (r() < 0.5) {
      const lse = new Float32Array(o.batch * o.heads * o.seqQ);
      saved = { lse, out: lib.attention(q, k, v, { ...o, lseOut: lse }) };
    }
    const got = lib.attentionBackward(q, k, v, dOut, { ...o, ...saved });
    const want = referenceAttentionBackward(q, k, v, dOut, o);
    for (const name of ['dQuery', 'dKey', 'dValue']) assertClose(got[name], want[name], name, 1e-4);
    return o;
  },
  trainingStep(r, { layers }) {
    const { mha, config } = pick(r, layers);
    const e = config.embedDim, kdim = config.kdim ?? e, vdim = config.vdim ?? e, h = config.numHeads;
    const batch = int(r, 1, 2), seqQ = int(r, 1, 9), cross = kdim !== e || r() < 0.5;
    const seqK = cross ? int(r, 1, 11) : seqQ;
    const x = randomTensor(batch * seqQ * e, r);
    const key = cross ? randomTensor(batch * seqK * kdim, r) : null;
    const value = cross ? randomTensor(batch * seqK * vdim, r) : null;
    const opts = { batch, causal: r() < 0.4 };
    if (r() < 0.3) opts.keyPaddingMask = Uint8Array.from({ length: batch * seqK }, () => (r() < 0.2 ? 1 : 0));
    if (r() < 0.3) opts.attendMask = Uint8Array.from({ length: batch * h * seqQ * seqK }, () => (r() < 0.8 ? 1 : 0));
    const weights = mha.getWeights();
    const y = mha.forward(x, key, value, { ...opts, train: true });
    assertClose(y, referenceMha(config, weights, x, key, value, opts).out, 'layer out', 5e-5);
    const { weights: grads, dQuery } = mha.backward(randomTensor(y.length, r, 0.1));
    assert.ok(dQuery.every(Number.isFinite));
    if (r() < 0.5) {
      const lr = 0.01;
      mha.sgdStep(grads, { lr });
      const stepped = mha.getWeights();  // w − lr·g, in float32
      for (const name of Object.keys(weights)) {
        weights[name].forEach((w, i) => {
          const want = Math.fround(w + Math.fround(Math.fround(-lr) * grads[name][i]));
          assert.ok(Math.abs(stepped[name][i] - want) <= 1e-7, `sgd ${name}[${i}]: ${stepped[name][i]} vs ${want}`);
        });
      }
    } else {
      mha.adamStep(grads, { lr: 0.001 });
    }
    assert.throws(() => mha.backward(new Float32Array(y.length)), /^Error: MultiHeadAttention\.backward: the weights changed/);
    return { config, batch, seqQ, seqK, cross };
  },
  cacheDecoding(r, { decoder }) {
    const { mha, config } = decoder;
    const e = config.embedDim, batch = int(r, 1, 2), total = int(r, 1, 14);
    const x = randomTensor(batch * total * e, r);
    const cache = mha.createCache({ batch, maxSeq: total + int(r, 0, 3) });
    const got = new Float32Array(x.length);
    for (let at = 0; at < total;) {
      const n = Math.min(total - at, int(r, 1, 4));
      const chunk = new Float32Array(batch * n * e);
      for (let b = 0; b < batch; b++) chunk.set(x.subarray((b * total + at) * e, (b * total + at + n) * e), b * n * e);
      const y = mha.forward(chunk, null, null, { cache, batch });
      for (let b = 0; b < batch; b++) got.set(y.subarray(b * n * e, (b + 1) * n * e), (b * total + at) * e);
      at += n;
    }
    assert.equal(cache.length, total);
    cache.dispose();
    assertClose(got, referenceMha(config, mha.getWeights(), x, null, null, { batch, causal: true }).out, 'decoded', 5e-5);
    return { batch, total };
  },
};

// Each returns [the call, the error class, a message pattern].
const invalidCalls = {
  wrongLength: (r) => {
    const { o, q, k, v } = attentionCase(r);
    return [() => lib.attention(q, k, v.subarray(1), o), RangeError, /^attention: value has length \d+, expected \d+/];
  },
  unknownOption: (r) => {
    const { o, q, k, v } = attentionCase(r);
    return [() => lib.attention(q, k, v, { ...o, sequence: 3 }), TypeError, /^attention: unknown option 'sequence'/];
  },
  badHeads: (r) => {
    const { o, q, k, v } = attentionCase(r);
    return [() => lib.attention(q, k, v, { ...o, heads: o.kvHeads * 2 + 1, kvHeads: 2 }), RangeError, /heads/];
  },
  badMask: (r) => {
    const { o, q, k, v } = attentionCase(r);
    const bad = { ...o, attendMask: undefined, blockMask: undefined, maskShape: undefined, mask: new Float64Array(o.seqQ * o.seqK) };
    return [() => lib.attention(q, k, v, bad), TypeError, /mask must be a Float32Array/];
  },
  backwardHalfSaved: (r) => {
    const { o, q, k, v } = attentionCase(r);
    const dOut = new Float32Array(o.batch * o.heads * o.seqQ * o.valueDim);
    return [() => lib.attentionBackward(q, k, v, dOut, { ...o, lse: new Float32Array(o.batch * o.heads * o.seqQ) }), TypeError, /lse and options\.out go together/];
  },
  staleBackward: (r, { layers }) => {
    const { mha, config } = pick(r, layers);
    const e = config.embedDim;
    if (config.kdim && config.kdim !== e) return [() => mha.forward(new Float32Array(e)), TypeError, /key is required/];
    mha.forward(new Float32Array(2 * e).fill(0.1), null, null, { train: true });
    mha.setWeights(mha.getWeights());
    return [() => mha.backward(new Float32Array(2 * e)), Error, /weights changed \(setWeights\(\)\)/];
  },
  badWeights: (r, { layers }) => {
    const { mha } = pick(r, layers);
    const w = mha.getWeights();
    return [() => mha.setWeights({ ...w, wo: w.wo.subarray(1) }), RangeError, /weights\.wo has length/];
  },
  badOptimizerState: (r, { layers }) => {
    const { mha } = pick(r, layers);
    const state = mha.getOptimizerState();
    state.v.wq[0] = -1;
    return [() => mha.setOptimizerState(state), RangeError, /state\.v\.wq\[0\] must be finite and >= 0/];
  },
  cacheOverflow: (r, { decoder }) => {
    const cache = decoder.mha.createCache({ maxSeq: 2 });
    decoder.mha.forward(new Float32Array(decoder.config.embedDim), null, null, { cache });
    return [() => { try { decoder.mha.forward(new Float32Array(2 * decoder.config.embedDim), null, null, { cache }); } finally { cache.dispose(); } },
      RangeError, /^MultiHeadAttention\.forward: options\.cache has room for 1 more positions/];
  },
  disposedLayer: (r) => {
    const mha = makeLayer(r, { embedDim: 4, numHeads: 2 });
    mha.dispose();
    return [() => mha.forward(new Float32Array(4)), Error, /^MultiHeadAttention\.forward: this layer was disposed$/];
  },
  badLinear: () => [() => lib.linear(new Float32Array(6), new Float32Array(5), { inFeatures: 3, outFeatures: 2 }), RangeError, /weight has length 5, expected 6/],
};

test(`soak: ${SECONDS} s of random valid and invalid calls on 2 threads against the reference`, { timeout: (SECONDS + 60) * 1000 }, () => {
  assert.equal(lib.info.threads, 2);
  const r = rng(SEED);
  const layers = [
    { config: { embedDim: 12, numHeads: 3 } },
    { config: { embedDim: 8, numHeads: 4, numKvHeads: 2, kdim: 5, vdim: 7 } },
  ].map((l) => ({ ...l, mha: makeLayer(r, l.config) }));
  const decoderConfig = { embedDim: 16, numHeads: 4, numKvHeads: 1 };
  const world = { layers, decoder: { config: decoderConfig, mha: makeLayer(r, decoderConfig) } };
  const valid = Object.entries(validCalls), invalid = Object.entries(invalidCalls);
  const counts = {};
  const step = (n) => {
    const kind = r() < 0.75 ? pick(r, valid) : pick(r, invalid);
    const what = `call ${n} (${kind[0]}, seed ${SEED})`;
    counts[kind[0]] = (counts[kind[0]] ?? 0) + 1;
    if (kind[0] in invalidCalls) {
      const [call, type, message] = kind[1](r, world);
      assert.throws(call, (e) => e instanceof type && message.test(e.message), what);
    } else {
      try {
        kind[1](r, world);
      } catch (error) {
        error.message = `${what}: ${error.message}`;
        throw error;
      }
    }
  };
  // The layers keep a training tape (sized by their last training forward) and Adam moments:
  // bring them to the same state before each sample of the heap.
  const settle = () => {
    for (const { mha, config } of layers) {
      const e = config.embedDim, key = new Float32Array(3 * (config.kdim ?? e)), value = new Float32Array(3 * (config.vdim ?? e));
      mha.forward(new Float32Array(2 * e), key, value, { train: true });
      mha.adamStep(mha.backward(new Float32Array(2 * e)).weights, { lr: 1e-4 });
    }
  };
  for (let n = 0; n < 200; n++) step(n);  // warm-up: every kind, the arena near its size
  settle();
  const start = Date.now();
  const heapBefore = inUse();
  let calls = 0, peak = heapBefore;
  while (Date.now() - start < SECONDS * 1000) {
    step(200 + calls++);
    if (calls % 100 === 0) peak = Math.max(peak, inUse());
  }
  settle();
  const heapAfter = inUse();
  console.log(`soak: ${calls} calls in ${((Date.now() - start) / 1000).toFixed(1)} s (seed ${SEED}); heap in use without the arena ` +
    `${heapBefore} → ${heapAfter} bytes (peak ${peak}); ${Object.entries(counts).map(([k, c]) => `${k} ${c}`).join(', ')}`);
  // dlmalloc may hand out a chunk a few bytes larger than asked when the rest is too small to
  // split, so the total moves by some bytes with the history; a leak of even one byte a call
  // over these thousands of calls would not fit in this margin.
  assert.ok(Math.abs(heapAfter - heapBefore) <= 4096 && calls > 4096, `heap in use ${heapBefore} → ${heapAfter} bytes over ${calls} calls`);
  for (const { mha } of [...layers, world.decoder]) mha.dispose();
  assert.ok(lib.attention(new Float32Array(4), new Float32Array(4), new Float32Array(4), { heads: 1, seqQ: 1, headDim: 4 }).every((x) => x === 0));
});
