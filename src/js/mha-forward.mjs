// MultiHeadAttention.forward's arguments: checked (before the heap is touched) and resolved into
// a plan — the sizes and what to stage — and then the C++ args.
import { checkRoom } from './cache-rule.mjs';
import { isAnyKVCache } from './kvcache.mjs';
import { MASK_OPTIONS, NO_MASK_SHAPE, resolveMasks } from './masks.mjs';
import { bool, checkFloat32, checkKnownKeys, describe, dim, given, kindOf } from './shapes.mjs';
import { resolveCausal } from './variants.mjs';

const FN = 'MultiHeadAttention.forward';
const FORWARD_OPTIONS = ['batch', 'seqQ', 'seqK', ...MASK_OPTIONS, 'causal', 'positions', 'weightsOut',
  'averageAttnWeights', 'out', 'cache', 'train'];

// Length of an activation [batch, seq, features]: returns seq, inferred from the length when
// `seq` is not given. `whose` says where the batch came from when the call did not give it.
function activationSeq(name, array, batch, features, seq, seqName, whose = '') {
  if (isAnyKVCache(array)) {
    throw new TypeError(`${FN}: ${name} is a KVCache; a layer takes its cache in options.cache, with key and value null: ` +
      'forward(query, null, null, { cache })');
  }
  if (kindOf(array) !== 'Float32Array') throw new TypeError(`${FN}: ${name} must be a Float32Array, got ${describe(array)}`);
  if (seq === undefined) {
    const inferred = array.length / (batch * features);
    if (!Number.isInteger(inferred) || inferred < 1) {
      throw new RangeError(`${FN}: ${name} has length ${array.length}, not a positive multiple of batch ${batch}${whose} × ${features} features`);
    }
    return inferred;
  }
  checkFloat32(name, array, batch * seq * features, `batch ${batch}${whose} × ${seqName} ${seq} × ${features} features`, FN);
  return seq;
}

// options.positions: an Int32Array [seqQ] or [batch, seqQ] of rotary positions, for the
// queries and (self-attention or a cache) the keys alike; only for a layer with rotary, and not
// over a cross-attention cache (its keys were rotated when it was filled).
function checkPositions(rotary, positions, batch, seqQ, seqK, cache, cross) {
  if (!given(positions)) return undefined;
  if (!rotary) throw new TypeError(`${FN}: options.positions are rotary positions, but this layer has no config.rotary`);
  if (cross) {
    throw new TypeError(`${FN}: options.positions do not apply to a cross-attention cache: its keys were rotated at positions ` +
      `0 … ${seqK - 1} when createCrossCache() filled it, and the queries sit where the score rule puts them`);
  }
  if (kindOf(positions) !== 'Int32Array') {
    throw new TypeError(`${FN}: options.positions must be an Int32Array ([seqQ] or [batch, seqQ]), got ${describe(positions)}`);
  }
  if (positions.length !== seqQ && positions.length !== batch * seqQ) {
    throw new RangeError(`${FN}: options.positions has length ${positions.length}, expected ${seqQ} ([seqQ ${seqQ}])` +
      (batch > 1 ? ` or ${batch * seqQ} ([batch ${batch}, seqQ ${seqQ}])` : ''));
  }
  if (!cache && seqK !== seqQ) {
    throw new RangeError(`${FN}: options.positions are used for queries and keys alike, so seqK (${seqK}) must equal seqQ (${seqQ})`);
  }
  if (rotary.maxPosition) {
    const bad = positions.findIndex((p) => p < 0 || p >= rotary.maxPosition);
    if (bad >= 0) throw new RangeError(`${FN}: options.positions[${bad}] is ${positions[bad]}, outside the rotary tables [0, ${rotary.maxPosition})`);
  }
  return positions;
}

// Without options.positions the rows sit where the score rule puts them: keys at 0 … seqK − 1 and
// queries at off + t (off = seqK − seqQ, or 0 for 'upper-left'); with a cache, both at its length
// + t. Those must be in the rotary tables, if the layer has tables.
function checkDefaultPositions(rotary, { cache, length, seqQ, seqK, align }) {
  if (!rotary?.maxPosition) return;
  const off = cache ? length : align === 'upperLeft' ? 0 : seqK - seqQ;
  const first = cache ? length : Math.min(0, off), last = cache ? length + seqQ - 1 : Math.max(seqK, off + seqQ) - 1;
  if (first >= 0 && last < rotary.maxPosition) return;
  const how = cache ? `the cache's length ${length} + row` : `keys at 0 … ${seqK - 1}, queries at ${off} + row`;
  throw new RangeError(`${FN}: rotary positions ${first} … ${last} (${how}) are outside the rotary tables [0, ${rotary.maxPosition}) ` +
    '(config.rotary.cos and sin [maxPosition, rotaryDim/2]); give longer tables, or options.positions');
}

// Checks forward(query, key, value, options) for a layer with `config`; `cacheOf(cache)` returns
// `{ core, cross }` for a KVCache (throwing unless it is this layer's): its C++ core and whether
// createCrossCache() made it. The plan: `inputs` and `outputs` for the arena, `cacheCore` (or
// null), `cross`, and what forwardArgs and the caller need.
export function planForward(config, cacheOf, query, key, value, options) {
  checkKnownKeys(FN, options ?? {}, FORWARD_OPTIONS);
  const opts = options ?? {};
  const size = (name, fallback) => dim(opts, name, fallback, 'options', FN);
  const { embedDim: e, kdim, vdim, numHeads } = config;
  if (given(opts.cache) && !isAnyKVCache(opts.cache)) {
    throw new TypeError(`${FN}: options.cache must be a KVCache from createCache(), got ${describe(opts.cache)}`);
  }
  const { core: cacheCore, cross } = given(opts.cache) ? cacheOf(opts.cache) : { core: null, cross: false };
  const cache = cacheCore && !cross ? opts.cache : null;  // a self-attention cache: appended to

  const batch = size('batch', cacheCore ? opts.cache.batch : 1);
  if (cacheCore && batch !== opts.cache.batch) {
    throw new RangeError(`${FN}: options.batch (${batch}) differs from options.cache.batch (${opts.cache.batch})`);
  }
  const whose = cacheCore && !given(opts.batch) ? " (options.cache's batch)" : '';
  const seqQ = activationSeq('query', query, batch, e, given(opts.seqQ) ? size('seqQ') : undefined, 'seqQ', whose);

  let seqK;
  let seqTotal;
  let length = 0;
  if (cache) {
    if (given(key) || given(value)) throw new TypeError(`${FN}: with options.cache, key and value must be null (they are projected from the query)`);
    if (given(opts.seqK)) throw new TypeError(`${FN}: options.seqK is not used with options.cache (keys come from the cache)`);
    if (opts.causal === false) throw new RangeError(`${FN}: options.causal cannot be false with options.cache: cached decoding is always causal`);
    if (kdim !== e || vdim !== e) throw new RangeError(`${FN}: options.cache needs kdim == vdim == embedDim (this layer has kdim ${kdim}, vdim ${vdim})`);
    length = cacheCore.length();
    checkRoom(FN, cache, cacheCore, seqQ, { cache: 'options.cache', ring: 'options.cache (a ring)', seq: 'seqQ' });
    seqTotal = length + seqQ;
  } else if (cross) {  // the keys and values of another sequence, projected once
    if (given(key) || given(value)) {
      throw new TypeError(`${FN}: options.cache is a cross-attention cache (from createCrossCache()), so key and value must be ` +
        'null: it holds them, projected once');
    }
    if (given(opts.seqK)) throw new TypeError(`${FN}: options.seqK is not used with options.cache (keys come from the cache)`);
    seqK = seqTotal = cacheCore.length();
    if (seqK === 0) {
      throw new RangeError(`${FN}: options.cache, a cross-attention cache, holds no positions (it was reset() or truncated); ` +
        'make a new one with createCrossCache()');
    }
  } else {
    if (given(key)) {
      seqK = activationSeq('key', key, batch, kdim, given(opts.seqK) ? size('seqK') : undefined, 'seqK');
    } else {
      if (kdim !== e) throw new TypeError(`${FN}: key is required, since this layer's kdim (${kdim}) differs from embedDim (${e})`);
      seqK = size('seqK', seqQ);
      if (seqK !== seqQ) throw new RangeError(`${FN}: options.seqK (${seqK}) must equal seqQ (${seqQ}) when key is the query`);
    }
    const valueFeatures = given(key) ? kdim : e;
    if (given(value)) activationSeq('value', value, batch, vdim, seqK, 'seqK');
    else if (vdim !== valueFeatures) throw new TypeError(`${FN}: value is required, since this layer's vdim (${vdim}) differs from the key's features (${valueFeatures})`);
    seqTotal = seqK;
  }

  const { mask, keyPadding } = resolveMasks(FN, opts, { batch, heads: numHeads, seqQ, seqK: seqTotal });
  const { causal, align } = resolveCausal(FN, opts.causal);
  if (cache && align === 'upperLeft') {
    throw new RangeError(`${FN}: options.causal 'upper-left' does not apply to options.cache (the new queries are its last positions: 'lower-right')`);
  }
  const positions = checkPositions(config.rotary, opts.positions, batch, seqQ, seqK, cache, cross);
  if (!positions) checkDefaultPositions(config.rotary, { cache, length, seqQ, seqK, align });
  const train = bool(opts, 'train', false, 'options', FN);
  if (train && cacheCore) throw new TypeError(`${FN}: options.train does not work with options.cache (a cache has no gradients)`);
  const outCount = batch * seqQ * e;
  const out = given(opts.out) ? opts.out : undefined;
  if (out) checkFloat32('options.out', out, outCount, `batch ${batch} × seqQ ${seqQ} × embedDim ${e}`, FN);
  // PyTorch's need_weights=True with average_attn_weights=True (its default) is weightsOut with
  // averageAttnWeights: true; without it the weights are per head.
  const average = bool(opts, 'averageAttnWeights', false, 'options', FN);
  const weightsOut = given(opts.weightsOut) ? opts.weightsOut : undefined;
  if (average && !weightsOut) {
    throw new TypeError(`${FN}: options.averageAttnWeights says how to fill options.weightsOut, which was not given`);
  }
  const weightsCount = batch * (average ? 1 : numHeads) * seqQ * seqTotal;
  if (weightsOut) {
    const heads = average ? '' : ` × numHeads ${numHeads}`;
    checkFloat32('options.weightsOut', weightsOut, weightsCount, `batch ${batch}${heads} × seqQ ${seqQ} × seqK ${seqTotal}`, FN,
      average ? ', the heads\' mean (averageAttnWeights: true)' : ', per head (averageAttnWeights: true for their mean)');
  }

  const outputs = { out: out ?? outCount };  // (the caller's arrays: staged alike, HeapArena)
  if (weightsOut) outputs.weights = weightsOut;
  const inputs = {
    query, key: cache ? undefined : key ?? undefined, value: cache ? undefined : value ?? undefined,
    mask: mask?.array, keyPadding, positions,
  };
  return {
    inputs, outputs, cacheCore, cross, batch, seqQ, seqK, seqTotal, mask, causal, align, positions, train, key, value, out, outCount,
    weightsOut, average,
  };
}

// The MhaCall (src/bindings_layers.cpp) of module M for a plan staged as `call`. Its budget is what
// wasm32 has left after the staging: the C++ entry checks what the forward will allocate for
// itself (MultiHeadAttention::forward_workspace_bytes; a training forward's tape too) against it.
export function forwardArgs(M, call, { mask, batch, seqQ, seqTotal, causal, align, positions, average }) {
  return {
    query: call.address('query'), key: call.address('key'), value: call.address('value'),
    out: call.address('out'), weights: call.address('weights'), averageWeights: average, mask: call.address('mask'),
    keyPadding: call.address('keyPadding'), maskType: M.MaskType[mask ? mask.type : 'none'],
    maskShape: mask ? mask.shape : NO_MASK_SHAPE, batch, seqQ, seqK: seqTotal, causal, align: M.Align[align],
    positions: call.address('positions'), positionsBatchStride: positions && positions.length !== seqQ ? seqQ : 0,
    budget: call.budget,
  };
}
