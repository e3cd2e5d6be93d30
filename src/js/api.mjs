// The library object that loadAttention() resolves to: checks arguments, copies tensors into
// one reused heap block, runs the kernel, copies the results out into caller-owned arrays.
import { FIELD as F, makeCallBlock } from './call-block.mjs';
import { cacheCallError, conflictName } from './cache-rule.mjs';
import { HeapArena, heap, wasmMemoryLimit } from './heap.mjs';
import { isAnyKVCache, makeKVCacheClass } from './kvcache.mjs';
import { MASK_OPTIONS, NO_MASK_SHAPE, resolveMasks } from './masks.mjs';
import { makeRotary } from './rotary.mjs';
import { VARIANT_OPTIONS, resolveVariants, resolveVisibility } from './variants.mjs';
import {
  checkFloat32, checkKnownKeys, checkOptionalTensor, checkTensor, describe, dim, elementCount, given, kindOf,
  resolveShape, tensorParts,
} from './shapes.mjs';

const ATTENTION_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout',
  'scale', 'causal', ...MASK_OPTIONS, ...VARIANT_OPTIONS, 'out', 'weightsOut', 'lseOut'];
const BACKWARD_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout', 'scale',
  'causal', ...MASK_OPTIONS, ...VARIANT_OPTIONS, 'lse', 'out'];
const LINEAR_OPTIONS = ['inFeatures', 'outFeatures', 'rows', 'bias', 'out'];
const WEIGHTS_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'layout', 'scale', 'causal',
  ...MASK_OPTIONS, ...VARIANT_OPTIONS, 'out'];

// What attention(), attentionWeights() and attentionBackward() start with: the call's shape (from
// `options` and, over a cache, the cache's `sizes`), its score variants (`visibility`: already
// resolved) and its tensors' parts; then `tensors` (name → array; dOut has out's parts) and the
// masks (masks.mjs: `mask` and `keyPadding`), checked in that order.
function resolveCall(fn, options, known, tensors, { sizes, visibility } = {}) {
  const shape = resolveShape(fn, options, known, sizes);
  const variants = resolveVariants(shape, options, visibility);
  const parts = tensorParts(shape);
  for (const name in tensors) checkTensor(shape, name, tensors[name], parts[name === 'dOut' ? 'out' : name]);
  const { mask, keyPadding } = resolveMasks(fn, options, shape);
  return { shape, variants, parts, mask, keyPadding };
}

// `threads` is the thread count the loader starts (default: the module's now); `threadsReason` /
// `simdReason` say why this build and this many threads; `onDispose` runs once when dispose()
// is called. A layers build needs `makeMultiHeadAttention` (mha.mjs's): the loader imports it only
// for one, so that the layer's JavaScript is not part of the default download (bundlers make it a
// chunk of its own).
export function createLibrary(module, { threads = module.numThreads(), threadsReason = 'requested 1 thread', simdReason = '',
  onDispose = () => {}, makeMultiHeadAttention = null } = {}) {
  // Everything here (and every cache and layer) reaches the module through M, which lets go of it
  // once dispose() was called and no cache or layer of this instance is left: a disposed lib,
  // cache or layer that the app still holds then holds nothing of the module, so its wasm memory
  // is collected with it (and a threaded build's workers, which dispose() ends).
  const { view: M, release } = releasable(module);
  const arena = new HeapArena(M);
  const block = makeCallBlock(M);
  // The layers builds register the multi-head layer (and the attention backward); the inference
  // builds, which loadAttention() loads by default, do not (src/bindings_layers.cpp).
  const layers = typeof module.MultiHeadAttentionCore === 'function';
  if (layers !== (makeMultiHeadAttention !== null)) {
    throw new Error(`attention-wasm: the module ${layers ? 'has' : 'lacks'} the layer, but the library was made ` +
      `${layers ? 'without' : 'with'} its JavaScript (createLibrary's makeMultiHeadAttention)`);
  }
  const info = Object.freeze({ version: M.version(), simd: M.simdName(), simdReason, threads, threadsReason, layers });
  let disposed = false;

  // Stages the tensors of a call resolved by resolveCall and runs the forward kernel (with
  // `cacheCore`, over the keys and values of that KV cache) or, with `backward`, the backward;
  // returns copyOut(name, target) for the results. The call is written into the module's call
  // block (call-block.mjs); the C++ entry checks the kernel's workspace against the call's budget
  // (what wasm32 has left after the staging).
  function run(fn, { shape, variants, mask, keyPadding }, inputs, outputs, { cacheCore = null, backward = false } = {}) {
    // (Not a spread followed by more properties: in V8 that object alone took 2.3 µs.)
    const staged = Object.assign({ mask: mask?.array, keyPadding, alibi: variants.alibi, sinks: variants.sinks }, inputs);
    const call = arena.stage(fn, staged, outputs);
    const { address, views: { HEAP32: i32, HEAPF32: f32 } } = call;
    const i = block.clear(call.views);
    i32[i + F.query] = address('query');
    i32[i + F.key] = address('key');
    i32[i + F.value] = address('value');
    i32[i + F.out] = address('out');
    i32[i + F.weights] = address('weights');
    i32[i + F.mask] = address('mask');
    i32[i + F.keyPadding] = address('keyPadding');
    i32[i + F.maskType] = M.MaskType[mask ? mask.type : 'none'].value;
    const maskShape = mask ? mask.shape : NO_MASK_SHAPE;
    i32[i + F.maskBatch] = maskShape.batch;
    i32[i + F.maskHeads] = maskShape.heads;
    i32[i + F.maskRows] = maskShape.rows;
    i32[i + F.batch] = shape.batch;
    i32[i + F.heads] = shape.heads;
    i32[i + F.kvHeads] = shape.kvHeads;
    i32[i + F.seqQ] = shape.seqQ;
    i32[i + F.seqK] = shape.seqK;
    i32[i + F.headDim] = shape.headDim;
    i32[i + F.valueDim] = shape.valueDim || 1;
    i32[i + F.bshd] = shape.layout === 'bshd';
    f32[i + F.scale] = shape.scale;
    i32[i + F.causal] = variants.causal;
    i32[i + F.align] = M.Align[variants.align].value;
    i32[i + F.windowLeft] = variants.windowLeft;
    i32[i + F.windowRight] = variants.windowRight;
    f32[i + F.softcap] = variants.softcap;
    i32[i + F.alibi] = address('alibi');
    i32[i + F.alibiBatchStride] = variants.alibiBatchStride;
    i32[i + F.sinks] = address('sinks');
    let error;
    if (backward) {
      for (const name of ['dOut', 'dQuery', 'dKey', 'dValue', 'dSinks']) i32[i + F[name]] = address(name);
      i32[i + F.savedLse] = address('lse');
      i32[i + F.savedOut] = address('savedOut');
      error = M.attentionBackward(block.address(), call.budget);
    } else {
      i32[i + F.lse] = address('lse');
      error = cacheCore ? M.attentionCached(block.address(), cacheCore, call.budget) : M.attention(block.address(), call.budget);
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
    const tensors = { query, key, value };
    return attendAndCopy('attention', resolveCall('attention', options, ATTENTION_OPTIONS, tensors), tensors, options, null);
  }

  // The forward of attention() with or without a cache, once resolveCall has checked the call:
  // checks the caller's outputs, runs the kernel, copies out the output (and weightsOut / lseOut
  // when given).
  function attendAndCopy(fn, resolved, inputs, options, cacheCore) {
    const { shape, parts } = resolved;
    const out = checkOptionalTensor(shape, 'options.out', options.out, parts.out);
    const weightsOut = checkOptionalTensor(shape, 'options.weightsOut', options.weightsOut, parts.weights);
    const lseOut = checkOptionalTensor(shape, 'options.lseOut', options.lseOut, parts.lse);
    const outputs = { out: out ?? elementCount(parts.out) };  // (the caller's arrays: staged alike, HeapArena)
    if (weightsOut) outputs.weights = weightsOut;
    if (lseOut) outputs.lse = lseOut;
    const copyOut = run(fn, resolved, inputs, outputs, { cacheCore });
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
    const call = { heads: size('heads'), seqQ: size('seqQ'), causal, align: M.Align[align].value, windowLeft, windowRight,
      batch: size('batch', 0), kvHeads: size('kvHeads', 0), headDim: size('headDim', 0), valueDim: size('valueDim', 0),
      seqK: size('seqK', 0) };  // 0: the cache's
    const check = block.checkCache(core, call);
    const length = core.length();
    if (check.conflict !== M.CacheConflict.none.value) {
      throw cacheCallError(fn, conflictName(M, check.conflict), check, cache, options, length);
    }
    const sizes = { batch: cache.batch, kvHeads: cache.kvHeads, headDim: cache.headDim, valueDim: cache.valueDim, seqK: length };
    const resolved = resolveCall(fn, options, ATTENTION_OPTIONS, { query }, { sizes, visibility });
    return attendAndCopy(fn, resolved, { query }, options, core);
  }

  function attentionWeights(query, key, options) {
    refuseCaches('attentionWeights', { query, key }, `${TAKES_NO_CACHE('attentionWeights')}: pass the keys as a Float32Array, ` +
      'or use attention(query, cache, null, { heads, seqQ, weightsOut }) for the weights over a cache');
    const resolved = resolveCall('attentionWeights', options, WEIGHTS_OPTIONS, { query, key });
    const { shape, parts } = resolved;
    const out = checkOptionalTensor(shape, 'options.out', options.out, parts.weights);
    const count = elementCount(parts.weights);
    const copyOut = run('attentionWeights', resolved, { query, key }, { weights: out ?? count });
    return copyOut('weights', out ?? new Float32Array(count));
  }

  function attentionBackward(query, key, value, dOut, options) {
    refuseCaches('attentionBackward', { query, key, value, dOut }, `${TAKES_NO_CACHE('attentionBackward')}: the backward pass ` +
      'needs the keys and values as Float32Arrays (a cache holds them for decoding, which has no gradients)');
    const resolved = resolveCall('attentionBackward', options, BACKWARD_OPTIONS, { query, key, value, dOut });
    const { shape, parts, variants } = resolved;
    const lse = checkOptionalTensor(shape, 'options.lse', options.lse, parts.lse);
    const savedOut = checkOptionalTensor(shape, 'options.out', options.out, parts.out);
    if (!lse !== !savedOut) throw new TypeError('attentionBackward: options.lse and options.out go together (both from the forward call)');
    const sizes = { dQuery: query.length, dKey: key.length, dValue: value.length };
    if (variants.sinks) sizes.dSinks = shape.heads;
    const copyOut = run('attentionBackward', resolved, { query, key, value, dOut, lse, savedOut }, sizes, { backward: true });
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
    const call = arena.stage('linear', { input, weight, bias }, { out: out ?? rows * outFeatures });
    const error = M.linear(call.address('input'), call.address('weight'), call.address('bias'), call.address('out'),
      rows, inFeatures, outFeatures, call.budget);
    if (error) throw call.error(error);
    return call.copyOut('out', out ?? new Float32Array(rows * outFeatures));
  }

  function memoryUsage() {
    if (letGo) throw new Error('attention-wasm: memoryUsage() after lib.dispose() and the disposal of its every cache and layer: the instance holds no memory');
    return { wasmMemory: heap(M).HEAPU8.length, arena: arena.capacity, heapInUse: M.heapInUse(), wasmMemoryLimit: wasmMemoryLimit(M) };
  }

  // Gives the arena back to the module's allocator (for a cache or weights); returns its bytes.
  function trim() {
    return letGo ? 0 : arena.trim();
  }

  // Caches and layers register while they hold wasm memory (kvcache.mjs, mha.mjs), and unregister
  // as they are disposed. A safety net frees the memory of one collected without dispose()
  // (dispose() stays the rule: collection may come late or never). As one goes, the arena's block
  // goes too: made by a call after it, the block may lie just above its memory, and would keep the
  // allocator from joining that memory with all above it into one block (a 3 GiB cache after a
  // 1 GiB one that a call appended to: tests/js/memory4g.test.mjs).
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
    arena.trim();
    letGoIfDone();
  }
  function letGoIfDone() {
    if (!disposed || holders > 0 || letGo) return;
    letGo = true;
    release();
  }
  const { KVCache, createKVCache, newCache } = makeKVCacheClass(M, arena, registry);
  const { MultiHeadAttention } = layers ? makeMultiHeadAttention(M, arena, { block, registry, KVCache, newCache })
    : { MultiHeadAttention: needsLayers('MultiHeadAttention') };
  const rotary = makeRotary(M, arena, block);

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
    attentionBackward: live('attentionBackward', layers ? attentionBackward : needsLayers('attentionBackward')),
    linear: live('linear', linear), rotary: live('rotary', rotary), createKVCache: live('createKVCache', createKVCache),
    memoryUsage, trim, MultiHeadAttention, dispose,
  });
}

// What an inference instance has in place of `name`, which only the layers builds have: a function
// (a constructor too) that throws at once, saying how to load them.
function needsLayers(name) {
  return {
    [name]: function () {
      throw new TypeError(`${name}: this instance was loaded without the layer and training API (MultiHeadAttention, ` +
        'attentionBackward), which loadAttention() leaves out of its download; load with loadAttention({ layers: true }) ' +
        '(or createAttention({ layers: true })) to use it');
    },
  }[name];
}

// The module's members, read through getters from a variable that release() empties. (Not a
// revoked Proxy: WebKit's keeps its target.) The module has every member once it has started.
function releasable(module) {
  let held = module;
  const view = {};
  for (const key of Object.keys(module)) Object.defineProperty(view, key, { get: () => held[key], enumerable: true });
  return { view, release: () => { held = null; } };
}
