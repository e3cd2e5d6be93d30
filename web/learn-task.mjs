// What "Watch it learn" trains, shared by its worker (learn-worker.mjs) and the tests: a layer
// with d = 4 and one head, W_q and W_k from small seeded random numbers, W_v = W_o = I fixed; its
// task, to give the sentences of "Real words as tokens" (English and Chinese: the same four
// features) the outputs of the hand-made head there (W_q of words.mjs, W_k = W_v = I).
import { randomArray } from './random-arrays.mjs';
import { E, IDENTITY, SENTENCES, WQ } from './sentences.mjs';

export const CONFIG = { embedDim: E, numHeads: 1, bias: false };
export const LEARNING_RATE = 0.05;  // Adam's; the loss falls below STOP_LOSS in about 200 steps
export const STOP_LOSS = 1e-4;
export const MAX_STEPS = 3000;

export function initialWeights() {
  const small = (seed) => randomArray(E * E, seed).map((x) => x * 0.5);
  return { wq: small(11), wk: small(12), wv: IDENTITY, wo: IDENTITY };
}

export const TARGET_SHARE = 0.3;  // a weight the hand-made head gives a word at least this much is outlined

// { sentences: [{ lang, tokens, n, embedding, target, targets }], size: the number of output
// elements }; targets[i]: the words the hand-made head gives word i at least TARGET_SHARE of its weight.
export function makeTask(lib) {
  const sentences = Object.entries(SENTENCES).map(([lang, words]) => {
    const n = words.length;
    const embedding = Float32Array.from(words.flatMap(([, features]) => features));
    const query = lib.linear(embedding, WQ, { inFeatures: E, outFeatures: E });
    const options = { heads: 1, seqQ: n, headDim: E };
    const target = lib.attention(query, embedding, embedding, options);
    const weights = lib.attentionWeights(query, embedding, options);
    const targets = Array.from({ length: n }, (_, i) => [...Array(n).keys()].filter((j) => weights[i * n + j] >= TARGET_SHARE));
    return { lang, tokens: words.map(([w]) => w), n, embedding, target, targets };
  });
  return { sentences, size: sentences.reduce((s, x) => s + x.target.length, 0) };
}

// What the page shows of a layer on one sentence: its weights α̂, W_q and W_k.
export function snapshot(layer, s) {
  const weights = new Float32Array(s.n * s.n);
  layer.forward(s.embedding, null, null, { weightsOut: weights });
  const { wq, wk } = layer.getWeights();
  return { weights, wq, wk, words: s.tokens, targets: s.targets, lang: s.lang };
}

// JSON of the layer's weights (mha.getWeights(): nn.Linear layout), one line per matrix. Nine
// significant digits give back every float32 exactly.
export function weightsJson(layer, losses) {
  const number = (x) => String(Number(x.toPrecision(9)));
  const { embedDim, numHeads, numKvHeads, kdim, vdim, bias } = layer.config;
  const config = { embedDim, numHeads, numKvHeads, kdim, vdim, bias };
  const weights = Object.entries(layer.getWeights()).map(([name, w]) => `    "${name}": [${Array.from(w, number).join(', ')}]`);
  return [
    '{',
    '  "format": "attention-wasm MultiHeadAttention weights",',
    `  "config": ${JSON.stringify(config)},`,
    `  "step": ${losses.length},`,
    `  "loss": ${losses.length ? number(losses.at(-1)) : 'null'},`,
    '  "layout": "nn.Linear: W is [out, in], row-major; y = x·Wᵀ + b",',
    '  "load": "/* lib = await loadAttention({ layers: true }) */ const layer = new lib.MultiHeadAttention(json.config); layer.setWeights(Object.fromEntries(Object.entries(json.weights).map(([k, v]) => [k, Float32Array.from(v)])))",',
    '  "weights": {',
    weights.join(',\n'),
    '  }',
    '}',
  ].join('\n') + '\n';
}
