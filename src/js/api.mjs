// The library object that loadAttention() resolves to: checks arguments, copies tensors into
// one reused heap block, runs the kernel, copies the results out into caller-owned arrays.
import { HeapArena, wasmMemoryLimit } from './heap.mjs';
import { conflictName, isAnyKVCache, makeKVCacheClass } from './kvcache.mjs';
import { makeMultiHeadAttention } from './mha.mjs';
import { makeRotary } from './rotary.mjs';
import { VARIANT_OPTIONS, resolveVariants, resolveVisibility } from './variants.mjs';
import {
  checkFloat32, checkKnownKeys, checkMask, checkOptionalTensor, checkTensor, describe, dim, elementCount, given, kindOf,
  plural, resolveShape, tensorParts,
} from './shapes.mjs';

const ATTENTION_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout',
  'scale', 'causal', 'mask', ...VARIANT_OPTIONS, 'out', 'weightsOut', 'lseOut'];
const BACKWARD_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout', 'scale',
  'causal', 'mask', ...VARIANT_OPTIONS, 'lse', 'out'];
const LINEAR_OPTIONS = ['inFeatures', 'outFeatures', 'rows', 'bias', 'out'];
const WEIGHTS_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'layout', 'scale', 'causal',
  'mask', ...VARIANT_OPTIONS, 'out'];

// `threads` is the thread count the loader starts (default: the module's now); `threadsReason` /
// `simdReason` say why this build and this many threads; `onDispose` runs once when dispose()
// is called.
export function createLibrary(module, { threads = module.numThreads(), threadsReason = 'requested 1 thread', simdReason = '',
  onDispose = () => {} } = {}) {
  // Everything here (and every cache and layer) reaches the module through M, which lets go of it
  // once dispose() was called and no cache or layer of this instance is left: a disposed lib,
  // cache or layer that the app still holds then holds nothing of the module, so its wasm memory
  // is collected with it (and a threaded build's workers, which dispose() ends).
  const { view: M, release } = releasable(module);
  const arena = new HeapArena(M);
  const info = Object.freeze({ version: M.version(), simd: M.simdName(), simdReason, threads, threadsReason });
  let disposed = false;

  // Stages the tensors and runs the forward kernel (with `cacheCore`, over the keys and values of
  // that KV cache) or, with `backward`, the backward; returns copyOut(name, target) for the results.
  // The calls are the AttentionCall and AttentionGrads of src/bindings.cpp; the C++ entry checks
  // the kernel's workspace against the call's budget (what wasm32 has left after the staging).
  function run(fn, shape, variants, inputs, mask, outputs, { cacheCore = null, backward = false } = {}) {
    const call = arena.stage(fn, { ...inputs, mask: mask?.array, alibi: variants.alibi, sinks: variants.sinks }, outputs);
    const { address } = call;
    const forward = {
      query: address('query'), key: address('key'), value: address('value'),
      out: address('out'), weights: address('weights'), mask: address('mask'),
      lse: backward ? 0 : address('lse'),
      maskType: M.MaskType[mask ? mask.type : 'none'], maskShape: M.MaskShape[mask ? mask.shape : 'plane'],
      batch: shape.batch, heads: shape.heads, kvHeads: shape.kvHeads, seqQ: shape.seqQ, seqK: shape.seqK,
      headDim: shape.headDim, valueDim: shape.valueDim || 1, bshd: shape.layout === 'bshd',
      scale: shape.scale, causal: variants.causal, align: M.Align[variants.align],
      windowLeft: variants.windowLeft, windowRight: variants.windowRight, softcap: variants.softcap,
      alibi: address('alibi'), alibiBatchStride: variants.alibiBatchStride, sinks: address('sinks'),
      budget: call.budget,
    };
    let error;
    if (backward) {
      error = M.attentionBackward(forward, {
        dOut: call.address('dOut'), dQuery: call.address('dQuery'), dKey: call.address('dKey'), dValue: call.address('dValue'),
        dSinks: call.address('dSinks'), lse: call.address('lse'), savedOut: call.address('savedOut'),
      });
    } else {
      error = cacheCore ? M.attentionCached(forward, cacheCore) : M.attention(forward);
    }
    if (error) throw call.error(error);
    return call.copyOut;
  }

  // Only attention(query, cache, null, options) takes a cache: a KVCache anywhere else is refused,
  // saying `why`.
  function refuseCaches(fn, args, why) {
    for (const [name, arg] of Object.entries(args)) {
      if (isAnyKVCache(arg)) throw new TypeError(`${fn}: ${name} is a KVCache; ${why}`);
    }
  }
  const TAKES_NO_CACHE = (fn) => `${fn} does not take a cache (only attention(query, cache, null, options) does)`;

  function attention(query, key, value, options) {
    if (isAnyKVCache(key)) return attentionOverCache(query, key, value, options);
    refuseCaches('attention', { query, value }, 'a cache goes in the key argument, with value null: attention(query, cache, null, options)');
    const shape = resolveShape('attention', options, ATTENTION_OPTIONS);
    const variants = resolveVariants(shape, options);
    const parts = tensorParts(shape);
    checkTensor(shape, 'query', query, parts.query);
    checkTensor(shape, 'key', key, parts.key);
    checkTensor(shape, 'value', value, parts.value);
    return attendAndCopy('attention', shape, variants, parts, { query, key, value }, options, null);
  }

  // The forward of attention() with or without a cache: checks the mask and the caller's
  // outputs, runs the kernel, copies out the output (and weightsOut / lseOut when given).
  function attendAndCopy(fn, shape, variants, parts, inputs, options, cacheCore) {
    const mask = checkMask(options.mask, shape);
    const out = checkOptionalTensor(shape, 'options.out', options.out, parts.out);
    const weightsOut = checkOptionalTensor(shape, 'options.weightsOut', options.weightsOut, parts.weights);
    const lseOut = checkOptionalTensor(shape, 'options.lseOut', options.lseOut, parts.lse);
    const outputs = { out: elementCount(parts.out) };
    if (weightsOut) outputs.weights = weightsOut.length;
    if (lseOut) outputs.lse = lseOut.length;
    const copyOut = run(fn, shape, variants, inputs, mask, outputs, { cacheCore });
    if (weightsOut) copyOut('weights', weightsOut);
    if (lseOut) copyOut('lse', lseOut);
    return copyOut('out', out ?? new Float32Array(outputs.out));
  }

  // attention(query, cache, null, options): keys and values (and kvHeads, headDim, valueDim, seqK)
  // come from the cache; the queries are its last seqQ positions. Causal and the window are the
  // call's own, exactly as over arrays: the cache only refuses a call it cannot answer exactly
  // (src/cache/cache_rule.h decides, here and in C++).
  function attentionOverCache(query, cache, value, options) {
    const fn = 'attention';
    const core = KVCache.coreFor(cache, fn);
    if (given(value)) throw new TypeError(`${fn}: value must be null when key is a KVCache (the cache holds the values), got ${describe(value)}`);
    checkKnownKeys(fn, options, ATTENTION_OPTIONS, 'options', ' with at least heads and seqQ');
    const size = (name, fallback) => dim(options, name, fallback, 'options', fn);
    const visibility = resolveVisibility(fn, options);
    const { causal, align, windowLeft, windowRight } = visibility;
    const call = { heads: size('heads'), seqQ: size('seqQ'), causal, align: M.Align[align], windowLeft, windowRight };
    for (const name of ['batch', 'kvHeads', 'headDim', 'valueDim', 'seqK']) call[name] = size(name, 0);  // 0: the cache's
    const check = core.check(call);
    const conflict = conflictName(M, check.conflict);
    if (conflict !== 'none') throw cacheCallError(fn, conflict, check, cache, options, core.length());
    const fromCache = { batch: cache.batch, kvHeads: cache.kvHeads, headDim: cache.headDim, valueDim: cache.valueDim, seqK: core.length() };
    const shape = resolveShape(fn, { ...options, ...fromCache }, ATTENTION_OPTIONS);
    const variants = resolveVariants(shape, options, visibility);
    const parts = tensorParts(shape);
    checkTensor(shape, 'query', query, parts.query);
    return attendAndCopy(fn, shape, variants, parts, { query }, options, core);
  }

  function attentionWeights(query, key, options) {
    refuseCaches('attentionWeights', { query, key }, `${TAKES_NO_CACHE('attentionWeights')}: pass the keys as a Float32Array, ` +
      'or use attention(query, cache, null, { heads, seqQ, weightsOut }) for the weights over a cache');
    const shape = resolveShape('attentionWeights', options, WEIGHTS_OPTIONS);
    const variants = resolveVariants(shape, options);
    const parts = tensorParts(shape);
    checkTensor(shape, 'query', query, parts.query);
    checkTensor(shape, 'key', key, parts.key);
    const mask = checkMask(options.mask, shape);
    const out = checkOptionalTensor(shape, 'options.out', options.out, parts.weights);
    const count = elementCount(parts.weights);
    const copyOut = run('attentionWeights', shape, variants, { query, key }, mask, { weights: count });
    return copyOut('weights', out ?? new Float32Array(count));
  }

  function attentionBackward(query, key, value, dOut, options) {
    refuseCaches('attentionBackward', { query, key, value, dOut }, `${TAKES_NO_CACHE('attentionBackward')}: the backward pass ` +
      'needs the keys and values as Float32Arrays (a cache holds them for decoding, which has no gradients)');
    const shape = resolveShape('attentionBackward', options, BACKWARD_OPTIONS);
    const variants = resolveVariants(shape, options);
    const parts = tensorParts(shape);
    checkTensor(shape, 'query', query, parts.query);
    checkTensor(shape, 'key', key, parts.key);
    checkTensor(shape, 'value', value, parts.value);
    checkTensor(shape, 'dOut', dOut, parts.out);
    const mask = checkMask(options.mask, shape);
    const lse = checkOptionalTensor(shape, 'options.lse', options.lse, parts.lse);
    const savedOut = checkOptionalTensor(shape, 'options.out', options.out, parts.out);
    if (!lse !== !savedOut) throw new TypeError('attentionBackward: options.lse and options.out go together (both from the forward call)');
    const sizes = { dQuery: query.length, dKey: key.length, dValue: value.length };
    if (variants.sinks) sizes.dSinks = shape.heads;
    const copyOut = run('attentionBackward', shape, variants, { query, key, value, dOut, lse, savedOut }, mask, sizes, { backward: true });
    return Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, copyOut(name, new Float32Array(n))]));
  }

  function linear(input, weight, options) {
    const fn = 'linear';
    checkKnownKeys(fn, options, LINEAR_OPTIONS, 'options', ' with inFeatures and outFeatures');
    const inFeatures = dim(options, 'inFeatures', undefined, 'options', fn);
    const outFeatures = dim(options, 'outFeatures', undefined, 'options', fn);
    const rows = given(options.rows) ? dim(options, 'rows', undefined, 'options', fn) : input?.length / inFeatures;
    if (kindOf(input) !== 'Float32Array') throw new TypeError(`linear: input must be a Float32Array, got ${describe(input)}`);
    if (!Number.isInteger(rows) || rows < 1) {
      throw new RangeError(`linear: input has length ${input.length}, not a positive multiple of inFeatures ${inFeatures}`);
    }
    checkFloat32('input', input, rows * inFeatures, `rows ${rows} × inFeatures ${inFeatures}`, fn);
    checkFloat32('weight', weight, outFeatures * inFeatures, `outFeatures ${outFeatures} × inFeatures ${inFeatures}`, fn);
    const bias = given(options.bias) ? options.bias : undefined;
    if (bias) checkFloat32('options.bias', bias, outFeatures, `outFeatures ${outFeatures}`, fn);
    const out = given(options.out) ? options.out : undefined;
    if (out) checkFloat32('options.out', out, rows * outFeatures, `rows ${rows} × outFeatures ${outFeatures}`, fn);
    const call = arena.stage('linear', { input, weight, bias }, { out: rows * outFeatures });
    const error = M.linear(call.address('input'), call.address('weight'), call.address('bias'), call.address('out'),
      rows, inFeatures, outFeatures, call.budget);
    if (error) throw call.error(error);
    return call.copyOut('out', out ?? new Float32Array(rows * outFeatures));
  }

  function memoryUsage() {
    if (letGo) throw new Error('attention-wasm: memoryUsage() after lib.dispose() and the disposal of its every cache and layer: the instance holds no memory');
    return { wasmMemory: M.HEAPU8.length, arena: arena.capacity, heapInUse: M.heapInUse(), wasmMemoryLimit: wasmMemoryLimit(M) };
  }

  // Gives the arena back to the module's allocator (for a cache or weights); returns its bytes.
  function trim() {
    return letGo ? 0 : arena.trim();
  }

  // Caches and layers register while they hold wasm memory (kvcache.mjs, mha.mjs), and unregister
  // as they are disposed. A safety net frees the memory of one collected without dispose()
  // (dispose() stays the rule: collection may come late or never).
  let holders = 0;
  let letGo = false;
  const finalizer = new FinalizationRegistry((core) => {
    core.delete();
    released();
  });
  const registry = {
    register(object, core, token) {
      holders++;
      finalizer.register(object, core, token);
    },
    unregister(token) {
      if (finalizer.unregister(token)) released();
    },
  };
  function released() {
    holders--;
    letGoIfDone();
  }
  function letGoIfDone() {
    if (!disposed || holders > 0 || letGo) return;
    letGo = true;
    release();
  }
  const { KVCache, createKVCache, newCache } = makeKVCacheClass(M, arena, registry);
  const { MultiHeadAttention } = makeMultiHeadAttention(M, arena, { registry, KVCache, newCache });
  const rotary = makeRotary(M, arena);

  // Ends the worker threads (so nothing keeps a Node process alive) and retires this instance.
  // Layers and caches already made keep working, single-threaded, until disposed.
  function dispose() {
    if (disposed) return;
    disposed = true;
    M.setNumThreads(1);                     // joins the C++ pool's threads
    M.PThread?.terminateAllThreads();       // then ends their workers
    const then = onDispose;
    onDispose = null;                       // (the loader's closure holds the module itself)
    then();
    letGoIfDone();
  }

  const live = (name, fn) => (...args) => {
    if (disposed) throw new Error(`attention-wasm: ${name}() after lib.dispose(); load the library again`);
    try {
      return fn(...args);
    } finally {
      arena.endCall();  // a block far larger than usual is given back
    }
  };
  return Object.freeze({
    info, attention: live('attention', attention), attentionWeights: live('attentionWeights', attentionWeights),
    attentionBackward: live('attentionBackward', attentionBackward),
    linear: live('linear', linear), rotary: live('rotary', rotary), createKVCache: live('createKVCache', createKVCache),
    memoryUsage, trim, MultiHeadAttention, dispose,
  });
}

// The module's members, read through getters from a variable that release() empties. (Not a
// revoked Proxy: WebKit's keeps its target.) The module has every member once it has started.
function releasable(module) {
  let held = module;
  const view = {};
  for (const key of Object.keys(module)) Object.defineProperty(view, key, { get: () => held[key], enumerable: true });
  return { view, release: () => { held = null; } };
}

const shownWindow = (w) => (given(w) && Array.isArray(w) ? `[${w.map(String).join(', ')}]` : 'none');

// The RangeError for attention(query, cache, null, options) refused by the cache rule: `check`
// is { conflict, call, cache } (the call's value and the cache's), `conflict` named as the
// module's CacheConflict names it, `length` the cache's.
function cacheCallError(fn, conflict, { call, cache: have }, cache, options, length) {
  if (['batch', 'kvHeads', 'headDim', 'valueDim'].includes(conflict)) {
    return new RangeError(`${fn}: options.${conflict} (${describe(options[conflict])}) differs from the KV cache's ${conflict} ${have}`);
  }
  const W = cache.window;
  const ring = `this ring (window ${W}, maxSeq ${cache.maxSeq})`;
  const hf = `[${W - 1}, 0] (Hugging Face's sliding_window ${W})`;
  switch (conflict) {
    case 'heads': return new RangeError(`${fn}: options.heads (${call}) must be a multiple of the KV cache's kvHeads (${have})`);
    case 'seqK': return new RangeError(`${fn}: options.seqK (${describe(options.seqK)}) differs from the KV cache's length ${have}`);
    case 'empty': return new RangeError(`${fn}: the KV cache is empty; append keys and values before attending over it`);
    case 'seqQ':
      return new RangeError(`${fn}: options.seqQ (${call}) is more than the KV cache's length ${have}: the queries are the last seqQ positions appended`);
    case 'upperLeft':
      return new RangeError(`${fn}: options.causal 'upper-left' does not apply to a KV cache, whose queries are its last seqQ positions ('lower-right')`);
    case 'windowUnbounded':
      return new RangeError(`${fn}: ${ring} keeps only the ${plural(W - 1, 'position')} before each query, so options.window must limit how far ` +
        `back a query looks: window ${hf} or narrower, got ${shownWindow(options.window)}; for attention over every position use a linear cache (maxSeq)`);
    case 'windowWider':
      return new RangeError(`${fn}: options.window ${shownWindow(options.window)} looks back ${call} positions, more than ${ring} keeps ` +
        `(the ${W - 1} before each query); use window ${hf} or narrower, or a ring with window ≥ ${call + 1}`);
    case 'overwritten': {
      const seqQ = call, left = options.window[0];
      return new RangeError(`${fn}: ${ring} no longer holds every key the last ${seqQ} positions see: the first of them looks back to ` +
        `position ${length - seqQ - left}, and the ring holds positions ${have} … ${length - 1}; attend with at most ` +
        `${length - left - have} queries at a time, or use maxSeq ≥ ${left + seqQ} (the window's left side + seqQ)`);
    }
    default: return new RangeError(`${fn}: the KV cache cannot serve this call (conflict ${conflict})`);
  }
}
