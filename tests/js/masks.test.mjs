// Masks as a porter brings them, in every shape PyTorch broadcasts and every polarity its conventions
// use, passed through every mask option into every entry point: attention, attentionWeights,
// attentionBackward, attention over a KV cache, the layer's forward and the layer over its cache.
// Every call is exact or refused, never a silent other answer:
//   - what it computes is what the option says (mask: added; attendMask: 1 = may attend; blockMask:
//     1 = masked; keyPaddingMask: 1 = padding; attentionMask: 1 = a real token), over the shape
//     the mask really has — the expected answer is built here from each convention's definition,
//     with an index function per shape written out by hand (no broadcasting code shared);
//   - a boolean mask passed as `mask` (PyTorch's name for both of its opposite conventions) is refused;
//   - a mask whose length fits two shapes (batch == heads, batch == seqQ) is refused unless
//     options.maskShape says which; and a convention passed to its own option with its shape
//     known is never refused.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { referenceAttention, referenceAttentionBackward, referenceMha } from './reference.mjs';
import { assertClose, loadAttention, randomTensor, rng } from './helpers.mjs';

let lib;
before(async () => { lib = await loadAttention({ layers: true }); });

// Two sizes, each with a collision of lengths: batch == heads ([batch, 1, seqQ, seqK] vs
// [heads, seqQ, seqK], T5's position bias), and batch == seqQ ([batch, 1, 1, seqK] vs [seqQ, seqK]).
const SIZES = [
  { batch: 3, heads: 3, kvHeads: 1, seqQ: 4, seqK: 5, headDim: 4 },
  { batch: 2, heads: 4, kvHeads: 2, seqQ: 2, seqK: 6, headDim: 4 },
];

// The shapes a porter's mask has (PyTorch's mask.shape), each with the index of element
// (b, h, i, j) of [batch, heads, seqQ, seqK] in it.
const SHAPES = [
  { name: '[seqK]', dims: (s) => [s.seqK], at: (s, b, h, i, j) => j },
  { name: '[seqQ, seqK]', dims: (s) => [s.seqQ, s.seqK], at: (s, b, h, i, j) => i * s.seqK + j },
  { name: '[batch, 1, 1, seqK] (padding)', dims: (s) => [s.batch, 1, 1, s.seqK], at: (s, b, h, i, j) => b * s.seqK + j },
  { name: '[batch, 1, seqQ, seqK]', dims: (s) => [s.batch, 1, s.seqQ, s.seqK], at: (s, b, h, i, j) => (b * s.seqQ + i) * s.seqK + j },
  { name: '[heads, seqQ, seqK] (a position bias)', dims: (s) => [s.heads, s.seqQ, s.seqK], at: (s, b, h, i, j) => (h * s.seqQ + i) * s.seqK + j },
  { name: '[1, heads, seqQ, seqK]', dims: (s) => [1, s.heads, s.seqQ, s.seqK], at: (s, b, h, i, j) => (h * s.seqQ + i) * s.seqK + j },
  { name: '[batch, heads, seqQ, seqK]', dims: (s) => [s.batch, s.heads, s.seqQ, s.seqK], at: (s, b, h, i, j) => ((b * s.heads + h) * s.seqQ + i) * s.seqK + j },
  { name: '[batch·heads, seqQ, seqK] (nn.MultiheadAttention)', dims: (s) => [s.batch * s.heads, s.seqQ, s.seqK], at: (s, b, h, i, j) => ((b * s.heads + h) * s.seqQ + i) * s.seqK + j },
  { name: '[batch, heads, 1, seqK]', dims: (s) => [s.batch, s.heads, 1, s.seqK], at: (s, b, h, i, j) => (b * s.heads + h) * s.seqK + j },
];

// What each option computes from a mask's entry m: an additive score term (−∞ masks).
const MEANING = {
  mask: (m) => m,
  attendMask: (m) => (m ? 0 : -Infinity),
  blockMask: (m) => (m ? -Infinity : 0),
  keyPaddingMask: (m) => (m ? -Infinity : 0),
  attentionMask: (m) => (m ? 0 : -Infinity),
};

// The conventions a porter brings: each one's array type and the option that says it.
const CONVENTIONS = [
  { name: 'additive (float attn_mask, Hugging Face 4-D float masks)', own: 'mask', array: 'float' },
  { name: "PyTorch SDPA's boolean attn_mask (True = may attend)", own: 'attendMask', array: 'bool' },
  { name: "nn.MultiheadAttention's boolean attn_mask (True = masked)", own: 'blockMask', array: 'bool' },
];
const PADDING = [
  { name: "PyTorch's key_padding_mask (True = padding)", own: 'keyPaddingMask' },
  { name: "Hugging Face's attention_mask (1 = a real token)", own: 'attentionMask' },
];

function brought(kind, length, seed) {
  const random = rng(seed);
  if (kind === 'float') return Float32Array.from({ length }, () => (random() < 0.2 ? -Infinity : random() * 4 - 2));
  return Uint8Array.from({ length }, () => (random() < 0.3 ? 1 : 0));
}

// The full additive mask [batch, heads, seqQ, seqK] that `option` makes of `array` of `shape`.
function expand(s, option, array, at) {
  const full = new Float64Array(s.batch * s.heads * s.seqQ * s.seqK);
  for (let b = 0; b < s.batch; b++) {
    for (let h = 0; h < s.heads; h++) {
      for (let i = 0; i < s.seqQ; i++) {
        for (let j = 0; j < s.seqK; j++) full[((b * s.heads + h) * s.seqQ + i) * s.seqK + j] = MEANING[option](array[at(s, b, h, i, j)]);
      }
    }
  }
  return full;
}

// How many shapes a mask of this length could have, for these sizes (dimensions of size 1 are
// the same had or broadcast).
function shapesOfLength(s, length) {
  const seen = new Set();
  for (let bits = 0; bits < 8; bits++) {
    const has = [bits & 4 && s.batch > 1, bits & 2 && s.heads > 1, bits & 1 && s.seqQ > 1].map(Boolean);
    const n = s.seqK * (has[0] ? s.batch : 1) * (has[1] ? s.heads : 1) * (has[2] ? s.seqQ : 1);
    if (n === length) seen.add(has.join());
  }
  return seen.size;
}

// The entry points: run(s, options) → the arrays to compare; want(s, additive mask) → the same
// from the references. `s` gives batch, heads, seqQ, seqK (heads: the layer's numHeads).
function entryPoints() {
  const inputs = (s, seed) => {
    const random = rng(seed);
    return {
      query: randomTensor(s.batch * s.heads * s.seqQ * s.headDim, random),
      key: randomTensor(s.batch * s.kvHeads * s.seqK * s.headDim, random),
      value: randomTensor(s.batch * s.kvHeads * s.seqK * s.headDim, random),
      dOut: randomTensor(s.batch * s.heads * s.seqQ * s.headDim, random),
    };
  };
  const shapeOf = ({ batch, heads, kvHeads, seqQ, seqK, headDim }) => ({ batch, heads, kvHeads, seqQ, seqK, headDim });
  const layers = new Map();  // one layer per size
  const layerFor = (s) => {
    if (!layers.has(s)) {
      const e = s.heads * s.headDim, random = rng(s.heads * 10 + s.batch);
      const weights = { wq: randomTensor(e * e, random, 0.4), wk: randomTensor(e * e, random, 0.4), wv: randomTensor(e * e, random, 0.4),
        wo: randomTensor(e * e, random, 0.4), bq: randomTensor(e, random), bk: randomTensor(e, random), bv: randomTensor(e, random),
        bo: randomTensor(e, random) };
      const mha = new lib.MultiHeadAttention({ embedDim: e, numHeads: s.heads });
      mha.setWeights(weights);
      const x = randomTensor(s.batch * s.seqK * e, random);  // seqK positions; queries are the last seqQ
      layers.set(s, { mha, weights, config: { embedDim: e, numHeads: s.heads }, e, x, xq: x.subarray(0, s.batch * s.seqQ * e) });
    }
    return layers.get(s);
  };
  // The last seqQ of seqK positions of a [batch, seqK, e] activation.
  const lastRows = (x, s, e) => {
    const out = new Float32Array(s.batch * s.seqQ * e);
    for (let b = 0; b < s.batch; b++) out.set(x.subarray((b * s.seqK + s.seqK - s.seqQ) * e, (b + 1) * s.seqK * e), b * s.seqQ * e);
    return out;
  };
  const firstRows = (x, s, e, n) => {
    const out = new Float32Array(s.batch * n * e);
    for (let b = 0; b < s.batch; b++) out.set(x.subarray(b * s.seqK * e, (b * s.seqK + n) * e), b * n * e);
    return out;
  };
  return {
    attention: {
      run: (s, o) => {
        const t = inputs(s, 1), weightsOut = new Float32Array(s.batch * s.heads * s.seqQ * s.seqK);
        return [lib.attention(t.query, t.key, t.value, { ...shapeOf(s), ...o, weightsOut }), weightsOut];
      },
      want: (s, mask) => {
        const t = inputs(s, 1), r = referenceAttention(t.query, t.key, t.value, { ...shapeOf(s), mask });
        return [r.out, r.weights];
      },
    },
    attentionWeights: {
      run: (s, o) => [lib.attentionWeights(inputs(s, 2).query, inputs(s, 2).key, { ...shapeOf(s), ...o })],
      want: (s, mask) => [referenceAttention(inputs(s, 2).query, inputs(s, 2).key, null, { ...shapeOf(s), mask }).weights],
    },
    attentionBackward: {
      run: (s, o) => {
        const t = inputs(s, 3), g = lib.attentionBackward(t.query, t.key, t.value, t.dOut, { ...shapeOf(s), ...o });
        return [g.dQuery, g.dKey, g.dValue];
      },
      want: (s, mask) => {
        const t = inputs(s, 3), g = referenceAttentionBackward(t.query, t.key, t.value, t.dOut, { ...shapeOf(s), mask });
        return [g.dQuery, g.dKey, g.dValue];
      },
      atol: 1e-5,
    },
    'attention over a KV cache': {
      run: (s, o) => {
        const t = inputs(s, 4);
        const cache = lib.createKVCache({ batch: s.batch, kvHeads: s.kvHeads, headDim: s.headDim, maxSeq: s.seqK });
        try {
          cache.append(t.key, t.value);
          return [lib.attention(t.query, cache, null, { heads: s.heads, seqQ: s.seqQ, ...o })];
        } finally {
          cache.dispose();
        }
      },
      want: (s, mask) => { const t = inputs(s, 4); return [referenceAttention(t.query, t.key, t.value, { ...shapeOf(s), mask }).out]; },
    },
    'MultiHeadAttention.forward (cross-attention)': {
      run: (s, o) => { const l = layerFor(s); return [l.mha.forward(l.xq, l.x, l.x, { batch: s.batch, ...o })]; },
      want: (s, mask) => { const l = layerFor(s); return [referenceMha(l.config, l.weights, l.xq, l.x, l.x, { batch: s.batch, mask }).out]; },
      atol: 5e-5,
    },
    'MultiHeadAttention.forward over its cache': {
      run: (s, o) => {
        const l = layerFor(s);
        const cache = l.mha.createCache({ batch: s.batch, maxSeq: s.seqK });
        try {
          l.mha.forward(firstRows(l.x, s, l.e, s.seqK - s.seqQ), null, null, { batch: s.batch, cache });
          return [l.mha.forward(lastRows(l.x, s, l.e), null, null, { cache, ...o })];
        } finally {
          cache.dispose();
        }
      },
      want: (s, mask) => {
        const l = layerFor(s);  // causal (lower-right): the cache's rule
        return [referenceMha(l.config, l.weights, lastRows(l.x, s, l.e), l.x, l.x, { batch: s.batch, mask, causal: true }).out];
      },
      atol: 5e-5,
    },
    dispose: () => { for (const l of layers.values()) l.mha.dispose(); },
  };
}

let points;
before(() => { points = entryPoints(); });
after(() => points?.dispose());

// Runs one call: returns 'exact' or 'refused' (and asserts it is one of the two).
function outcome(point, s, options, mask, what) {
  let got;
  try {
    got = point.run(s, options);
  } catch (error) {
    assert.ok(error instanceof TypeError || error instanceof RangeError, `${what}: refused with a ${error.name}: ${error.message}`);
    return 'refused';
  }
  const want = point.want(s, mask);
  for (let n = 0; n < want.length; n++) assertClose(got[n], want[n], `${what} [${n}]`, point.atol ?? 2e-5);
  return 'exact';
}

const ENTRY_POINTS = ['attention', 'attentionWeights', 'attentionBackward', 'attention over a KV cache',
  'MultiHeadAttention.forward (cross-attention)', 'MultiHeadAttention.forward over its cache'];

describe('every mask shape × convention × option × entry point is exact or refused', () => {
  for (const name of ENTRY_POINTS) {
    test(name, () => {
      const point = points[name];
      let exact = 0, refused = 0;
      for (const s of SIZES) {
        for (const shape of SHAPES) {
          const dims = shape.dims(s), length = dims.reduce((n, d) => n * d, 1);
          for (const [c, convention] of CONVENTIONS.entries()) {
            const array = brought(convention.array, length, 100 * c + SHAPES.indexOf(shape) + length);
            for (const option of ['mask', 'attendMask', 'blockMask']) {
              for (const stated of [false, true]) {
                const options = { [option]: array, ...(stated ? { maskShape: dims } : {}) };
                const what = `${name}: ${convention.name} ${shape.name} ${JSON.stringify(dims)} as options.${option}` +
                  `${stated ? ' with maskShape' : ''}, sizes ${JSON.stringify(s)}`;
                const result = outcome(point, s, options, expand(s, option, array, shape.at), what);
                if (result === 'exact') exact++; else refused++;
                const known = stated || shapesOfLength(s, length) === 1;
                if (option === convention.own && known) assert.equal(result, 'exact', `${what}: its own option, its shape known`);
                if (!known) assert.equal(result, 'refused', `${what}: a length that fits two shapes`);
                if (option === 'mask' && convention.array === 'bool') assert.equal(result, 'refused', `${what}: a boolean mask as options.mask`);
              }
            }
          }
        }
        // Padding, [batch, seqK]: through the padding options and, a porter's other guess, the mask options.
        for (const [p, convention] of PADDING.entries()) {
          const array = brought('bool', s.batch * s.seqK, 500 + p);
          const at = (z, b, h, i, j) => b * z.seqK + j;
          for (const option of ['keyPaddingMask', 'attentionMask', 'attendMask', 'blockMask', 'mask']) {
            const what = `${name}: ${convention.name} as options.${option}, sizes ${JSON.stringify(s)}`;
            const result = outcome(point, s, { [option]: array }, expand(s, option, array, at), what);
            if (result === 'exact') exact++; else refused++;
            if (option === convention.own) assert.equal(result, 'exact', `${what}: its own option`);
          }
          // With a mask beside it (T5: a bias per head, and the padding).
          const bias = brought('float', s.heads * s.seqQ * s.seqK, 600 + p);
          const padded = expand(s, convention.own, array, at);
          const both = expand(s, 'mask', bias, SHAPES[4].at).map((m, e) => m + padded[e]);
          const what = `${name}: a [heads, seqQ, seqK] bias with ${convention.name}`;
          assert.equal(outcome(point, s, { mask: bias, maskShape: [s.heads, s.seqQ, s.seqK], [convention.own]: array }, both, what), 'exact', what);
        }
      }
      assert.ok(exact > 0 && refused > 0, `${exact} exact, ${refused} refused`);
    });
  }
});
