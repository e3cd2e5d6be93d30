// Type-checked with tsc --strict: correct calls compile, wrong ones must not (@ts-expect-error
// fails the check if the types ever stop catching them).
import { createAttention, loadAttention, type AttentionLayersLibrary, type AttentionLibrary, type AttentionOptions, type KVCacheDtype, type RotaryOptions } from 'attention-wasm';
import { loadAttention as loadBaseline } from 'attention-wasm/simd128';

const lib: AttentionLayersLibrary = await loadAttention({ wasmUrl: new URL('https://cdn.example/attn-layers.wasm'), layers: true });
const q = new Float32Array(8);
const options: AttentionOptions = { heads: 2, seqQ: 1, headDim: 4, causal: true, attendMask: new Uint8Array(1), layout: 'bshd' };
const out: Float32Array = lib.attention(q, q, q, options);
const w: Float32Array = lib.attentionWeights(q, q, { heads: 2, seqQ: 1, headDim: 4, out: null });
const version: string = lib.info.version;
const isolated: AttentionLibrary = await createAttention();
const inUse: number = isolated.memoryUsage().heapInUse;
console.log(inUse);
console.log(out, w, version, lib.memoryUsage().wasmMemory);

// @ts-expect-error a plain array is not a Float32Array
lib.attention([1, 2], q, q, options);
// @ts-expect-error headDim is required
lib.attention(q, q, q, { heads: 2, seqQ: 1 });
// @ts-expect-error no such layout
lib.attention(q, q, q, { ...options, layout: 'bsdh' });
// @ts-expect-error attentionWeights has no valueDim
lib.attentionWeights(q, q, { heads: 2, seqQ: 1, headDim: 4, valueDim: 4 });
// @ts-expect-error info is read-only
lib.info.threads = 2;
// Masks: each option names its meaning; a shape as PyTorch's mask.shape.
const masked: Float32Array = lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, mask: new Float32Array(2), maskShape: [2, 1, 1],
  attentionMask: new Uint8Array(1) });
lib.attentionWeights(q, q, { heads: 2, seqQ: 1, headDim: 4, blockMask: new Uint8Array(1), keyPaddingMask: new Uint8Array(1) });
lib.attentionBackward(q, q, q, q, { heads: 2, seqQ: 1, headDim: 4, attendMask: new Uint8Array(2), maskShape: [2, 1, 1] });
console.log(masked);
// @ts-expect-error a boolean mask names its polarity: attendMask or blockMask
lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, mask: new Uint8Array(1) });
// @ts-expect-error maskShape is an array of numbers
lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, mask: new Float32Array(1), maskShape: '1x1' });
// @ts-expect-error attentionMask is a Uint8Array
lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, attentionMask: new Float32Array(1) });

const rotated: Float32Array = lib.rotary(q, { heads: 2, seq: 1, headDim: 4, rotaryDim: 2, positions: new Int32Array(1), out: q });
const rotaryOptions: RotaryOptions = { heads: 1, seq: 2, headDim: 4, interleaved: true, cos: q, sin: q, layout: 'bshd' };
console.log(rotated, lib.rotary(q, rotaryOptions));
// @ts-expect-error positions are an Int32Array
lib.rotary(q, { heads: 2, seq: 1, headDim: 4, positions: new Float32Array(1) });
// @ts-expect-error seq is required (rotary has no seqQ)
lib.rotary(q, { heads: 2, seqQ: 1, headDim: 4 });

const mha = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, numKvHeads: 1 });
mha.setWeights({ wq: q, wk: q, wv: q, wo: q, bq: q, bk: q, bv: q, bo: q });
const cache = mha.createCache({ maxSeq: 16 });
const y: Float32Array = mha.forward(q, null, null, { cache, keyPaddingMask: new Uint8Array(1) });
mha.forward(q, null, null, { blockMask: new Uint8Array(2), maskShape: [2, 1, 1], attentionMask: new Uint8Array(1) });
cache.reorder([0]);
cache.reorder(Int32Array.of(0));
// @ts-expect-error reorder takes integers (an Int32Array or an array)
cache.reorder(new Float32Array(1));
mha.forward(q, null, null, { train: true });
const grads = mha.backward(q).weights;
mha.adamStep(grads, { lr: 0.01 });
const saved = { weights: mha.getWeights(), state: mha.getOptimizerState() };
mha.setWeights(saved.weights);
mha.setOptimizerState(saved.state);
const step: number = saved.state.step;
const freed: number = lib.trim();
console.log(step, freed, lib.memoryUsage().wasmMemoryLimit);
const { dQuery } = lib.attentionBackward(q, q, q, q, { heads: 2, seqQ: 1, headDim: 4 });
console.log(dQuery);
const length: number = cache.length;
const headDim: number = mha.config.headDim;
console.log(y, length, headDim);
cache.dispose();
mha.dispose();
// @ts-expect-error numHeads is required
new lib.MultiHeadAttention({ embedDim: 8 });
// @ts-expect-error keyPaddingMask is a Uint8Array
mha.forward(q, null, null, { keyPaddingMask: new Float32Array(1) });
// @ts-expect-error length is read-only
cache.length = 3;
// @ts-expect-error the state needs its moments
mha.setOptimizerState({ step: 1 });

// Builds: SIMD level, relocation, the single-build entry point.
const relaxed = await loadAttention({ simd: 'relaxed', strict: true, baseUrl: '/assets/attention-wasm/', maxThreads: 4 });
const level: 'relaxed-simd' | 'simd128' = relaxed.info.simd;
const why: string = relaxed.info.simdReason;
const baseline: AttentionLibrary = await loadBaseline({ simd: 'simd128' });
console.log(level, why, baseline.info.threads);
// @ts-expect-error no such SIMD level
await loadAttention({ simd: 'avx' });
// @ts-expect-error baseUrl is a string or URL
await loadAttention({ baseUrl: 1 });
// The feature sets: an inference instance (the default) has no layer API in its type.
const inference: AttentionLibrary = await loadAttention();
const isLayers: boolean = inference.info.layers;
const layersInfo: true = lib.info.layers;
console.log(isLayers, layersInfo, inference.linear(q, q, { inFeatures: 4, outFeatures: 2 }));
// @ts-expect-error MultiHeadAttention needs loadAttention({ layers: true })
new inference.MultiHeadAttention({ embedDim: 8, numHeads: 2 });
// (Inside a function: a call typed never would end the control flow after it.)
// @ts-expect-error attentionBackward needs loadAttention({ layers: true })
const backwardOfInference = () => inference.attentionBackward(q, q, q, q, { heads: 2, seqQ: 1, headDim: 4 });
// @ts-expect-error the inference type is not the layers type
const notLayers: AttentionLayersLibrary = await createAttention({ layers: false });
const maybe = await loadAttention({ layers: Math.random() > 0.5 });  // either, as a union
// An inference instance has the member too (a function that throws): `in` does not tell them apart.
if ('MultiHeadAttention' in maybe) {
  // @ts-expect-error either instance's type: the inference one's constructor takes nothing
  new maybe.MultiHeadAttention({ embedDim: 8, numHeads: 2 });
}
const hasLayers = (l: AttentionLibrary | AttentionLayersLibrary): l is AttentionLayersLibrary => l.info.layers;
console.log(notLayers, backwardOfInference, hasLayers(maybe) ? new maybe.MultiHeadAttention({ embedDim: 8, numHeads: 2 }).config.embedDim : maybe.info.simd);
// @ts-expect-error layers is a boolean
await loadAttention({ layers: 'yes' });
// The score variants, the standalone KV cache and the layer's variants.
const local = lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, causal: 'upper-left', window: [3, 0], softcap: 30,
  alibiSlopes: new Float32Array(2), sinks: new Float32Array(2) });
const kv = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 8, dtype: 'int8', window: 4 });
kv.append(q, q, { seq: 1 });
const overCache: Float32Array = lib.attention(q, kv, null, { heads: 2, seqQ: 1, window: [3, 0], causal: 'lower-right', headDim: 4 });
const ring = lib.createKVCache({ kvHeads: 1, headDim: 4, window: 4 });  // maxSeq defaults to the window
ring.dispose();
const bytes: number = kv.bytes;
kv.truncate(0);
kv.dispose();
const llama = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, rotary: { base: 500000 }, window: [4095, 0], softcap: 50, alibi: true, sinks: true });
const slopes: Float32Array | null = llama.config.alibi;
console.log(local, overCache, bytes, slopes, llama.config.rotary?.rotaryDim);
llama.dispose();
const bf16 = lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 4, dtype: 'bfloat16' });
const dtype: KVCacheDtype = bf16.dtype;
console.log(dtype);
bf16.dispose();
const int4: KVCacheDtype = 'int4';
lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 4, dtype: int4 }).dispose();
// @ts-expect-error dtype is one of five
lib.createKVCache({ kvHeads: 1, headDim: 4, maxSeq: 4, dtype: 'float8' });
// A wide layer (Whisper's cross-attention: a head size of its own, no k bias) decoding over a cross-attention cache.
const whisper = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, headDim: 3, kdim: 4, vdim: 4, bias: { k: false }, scale: 1 });
whisper.setWeights({ wq: new Float32Array(6 * 8), wk: new Float32Array(6 * 4), wv: new Float32Array(6 * 4), wo: new Float32Array(8 * 6),
  bq: new Float32Array(6), bv: new Float32Array(6), bo: new Float32Array(8) });
const crossCache = whisper.createCrossCache(new Float32Array(5 * 4), null, { dtype: 'float16' });
const meanWeights = new Float32Array(5);
whisper.forward(q, null, null, { cache: crossCache, weightsOut: meanWeights, averageAttnWeights: true });
const biases: boolean | Readonly<{ q: boolean; k: boolean; v: boolean; o: boolean }> = whisper.config.bias;
const scale: number = whisper.config.scale;
console.log(biases, scale, crossCache.length);
crossCache.dispose();
whisper.dispose();
// @ts-expect-error the projections are q, k, v and o
new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2, bias: { out: false } });
// @ts-expect-error averageAttnWeights is a boolean
mha.forward(q, null, null, { weightsOut: meanWeights, averageAttnWeights: 'mean' });
// @ts-expect-error causal takes two alignment names
lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, causal: 'top-left' });
