// KVCache: a JS handle over a C++ attn::KvCache (src/cache/kv_cache.h) holding keys and values in wasm
// memory as float32, float16, bfloat16, int8 or int4, linear or a sliding-window ring. lib.createKVCache() makes
// a standalone one (append your own projected, rotated K and V; attend with
// lib.attention(query, cache, null, options)); MultiHeadAttention.createCache() makes the same
// kind for a layer, and createCrossCache() a cross-attention one (full, and never appended to).
import { checkRoom, truncateError } from './cache-rule.mjs';
import { checkMemory, coreError } from './heap.mjs';
import { checkFloat32, checkKnownKeys, describe, dim, given, kindOf, resolveLayout } from './shapes.mjs';

export const DTYPES = ['float32', 'float16', 'bfloat16', 'int8', 'int4'];  // the names of the module's KvType
const CACHE_OPTIONS = ['batch', 'kvHeads', 'headDim', 'valueDim', 'maxSeq', 'dtype', 'window'];
const APPEND_OPTIONS = ['seq', 'layout'];

// The KvCacheConfig (src/bindings.cpp) of a cache's sizes ({ batch, kvHeads, headDim, valueDim,
// maxSeq, dtype, window }).
export const coreConfig = (M, sizes) => ({ ...sizes, dtype: M.KvType[sizes.dtype] });

const SMALLER = "store it smaller: dtype 'float16' or 'bfloat16' halves it, 'int8' quarters it, 'int4' takes 0.14 of it, " +
  'fewer positions (maxSeq) shrink it';

// dtype and window options (shared by createKVCache and MultiHeadAttention.createCache).
export function resolveStorage(fn, options, maxSeqGiven) {
  const dtype = given(options.dtype) ? options.dtype : 'float32';
  if (!DTYPES.includes(dtype)) {
    throw new TypeError(`${fn}: options.dtype must be 'float32', 'float16', 'bfloat16', 'int8' or 'int4', got ${describe(dtype)}`);
  }
  const window = given(options.window) ? dim(options, 'window', undefined, 'options', fn) : 0;
  const maxSeq = maxSeqGiven ?? (window || undefined);
  if (maxSeq === undefined) throw new TypeError(`${fn}: options.maxSeq is required (a positive integer), or a window`);
  if (window && maxSeq < window) {
    throw new RangeError(`${fn}: options.maxSeq (${maxSeq}) must be at least options.window (${window}): the ring holds the window`);
  }
  return { dtype, window, maxSeq };
}

// Every KVCache of every instance of the library in this realm: a cache passed to another
// instance is told apart from an object that is no cache at all.
const EVERY_CACHE = new WeakSet();
export const isAnyKVCache = (value) => EVERY_CACHE.has(value);
export const FOREIGN_CACHE = 'a KVCache of another attention-wasm instance (another loadAttention() or createAttention() ' +
  'call); a cache lives in the wasm memory of the instance that made it';

// The RangeError for a value a cache refused, nothing appended, from a call's CallError
// (src/bindings.cpp), or null for any other answer: a float16 cache refuses a finite value it
// would store as ±Infinity (attention over it would then be NaN), an int4 cache ±Infinity and NaN
// (a block's scale is its largest |value| / 7). `error.refused` says where the value is in the
// rows appended at `length`, said as 'key[batch 0, kvHead 1, position 13, element 5] = 70000'
// (`rows`: what the appended rows are called, e.g. 'the projected key').
export function refusedValueError(M, fn, error, length, rows = (o) => (o.key ? 'key' : 'value')) {
  const float16 = error?.kind === M.Failure.float16Overflow;
  if (!float16 && error?.kind !== M.Failure.int4NotFinite) return null;
  const o = error.refused;
  const at = `${fn}: ${rows(o)}[batch ${o.batch}, kvHead ${o.head}, position ${length + o.row}, element ${o.element}] = ${o.value}`;
  if (!float16) {
    return new RangeError(`${at} is not finite, and dtype 'int4' stores finite values only (each block of 32 values is ` +
      "scaled by its largest), so nothing was appended; store this cache with dtype 'int8', 'bfloat16' or 'float32' to keep it");
  }
  return new RangeError(`${at} is beyond float16's range (±65504; it would be stored as ${o.value > 0 ? '' : '−'}Infinity and ` +
    "attention would return NaN), so nothing was appended; store this cache with dtype 'bfloat16' (float32's range in 2 bytes) or 'float32'");
}

export function makeKVCacheClass(M, arena, registry) {
  class KVCache {
    #core;
    #owner;  // the MultiHeadAttention that made it, or null for a standalone cache
    #cross;  // made by the owner's createCrossCache()

    // (internal) use lib.createKVCache(), MultiHeadAttention.createCache() or createCrossCache().
    constructor(core, sizes, owner = null, cross = false) {
      this.#core = core;
      this.#owner = owner;
      this.#cross = cross;
      registry.register(this, core, this);
      EVERY_CACHE.add(this);
      for (const [name, value] of Object.entries(sizes)) Object.defineProperty(this, name, { value, enumerable: true });
    }

    /** Positions appended so far (a ring counts all of them). */
    get length() { return this.#live('length').length(); }

    /** Bytes of wasm memory its keys, values and scales hold. */
    get bytes() { return this.#live('bytes').bytes(); }

    /**
     * Appends `seq` positions: key `[batch, kvHeads, seq, headDim]` (or `'bshd'`), value likewise
     * with `valueDim`, converted or quantised as stored. Appends nothing and throws a RangeError
     * when they do not fit.
     */
    append(key, value, options = {}) {
      const core = this.#live('append');
      const fn = 'KVCache.append';
      if (this.#cross) {
        throw new TypeError(`${fn}: this is a cross-attention cache (createCrossCache()): it holds the encoder's output, projected ` +
          'once by its layer, and takes no other positions; a decoder step appends to its self-attention cache (createCache())');
      }
      checkKnownKeys(fn, options ?? {}, APPEND_OPTIONS);
      const opts = options ?? {};
      const { batch, kvHeads, headDim, valueDim } = this;
      const layout = resolveLayout(fn, opts);
      const perPosition = batch * kvHeads * headDim;
      let seq;
      if (given(opts.seq)) seq = dim(opts, 'seq', undefined, 'options', fn);
      else {
        if (key?.length === undefined) checkFloat32('key', key, perPosition, '', fn);
        seq = key.length / perPosition;
        if (!Number.isInteger(seq) || seq < 1) {
          throw new RangeError(`${fn}: key has length ${key.length}, not a positive multiple of batch ${batch} × kvHeads ${kvHeads} × headDim ${headDim}`);
        }
      }
      const valueLength = batch * kvHeads * seq * valueDim;
      const fits = (array, length) => array instanceof Float32Array && array.length === length;
      if (!fits(key, seq * perPosition) || !fits(value, valueLength)) {  // (the messages' words only when they are needed)
        const order = layout === 'bshd' ? `batch ${batch} × seq ${seq} × kvHeads ${kvHeads}` : `batch ${batch} × kvHeads ${kvHeads} × seq ${seq}`;
        checkFloat32('key', key, seq * perPosition, `${order} × headDim ${headDim}`, fn);
        checkFloat32('value', value, valueLength, `${order} × valueDim ${valueDim}`, fn);
      }
      const length = core.length();
      checkRoom(fn, this, core, seq);
      arena.call(fn, { key, value }, {}, (call) => {
        const error = core.append(call.address('key'), call.address('value'), seq, layout === 'bshd');
        if (error) throw refusedValueError(M, fn, error, length) ?? coreError(M, error);
      });
    }

    /** Forgets every position (a new sequence starts). */
    reset() { this.#live('reset').reset(); }

    /**
     * Drops positions ≥ n (speculative decoding, beam search, editing a chat). A ring can go back
     * only as far as it still holds the window − 1 positions before n. A cross-attention cache
     * then holds the first n positions of the encoder's output, as if made from those alone.
     */
    truncate(n) {
      const core = this.#live('truncate');
      const length = core.length();
      if (!Number.isInteger(n) || n < 0 || n > length) {
        throw new RangeError(`KVCache.truncate: n must be an integer from 0 to length ${length}, got ${describe(n)}`);
      }
      if (core.truncate(n)) throw truncateError(this, core, n);
    }

    /**
     * Beam search, as Hugging Face's reorder_cache(beam_idx): batch entry b becomes what entry
     * indices[b] was (repeats allowed, entries not named dropped), in place in wasm memory.
     */
    reorder(indices) {
      const core = this.#live('reorder');
      const fn = 'KVCache.reorder';
      const { batch } = this;
      if (kindOf(indices) !== 'Int32Array' && !Array.isArray(indices)) {
        throw new TypeError(`${fn}: indices must be an Int32Array or an array of integers, one per batch entry, got ${describe(indices)}`);
      }
      if (indices.length !== batch) {
        throw new RangeError(`${fn}: indices has length ${indices.length}, expected the cache's batch ${batch} (row b of the result is row indices[b])`);
      }
      const bad = Array.prototype.findIndex.call(indices, (i) => !Number.isInteger(i) || i < 0 || i >= batch);
      if (bad >= 0) throw new RangeError(`${fn}: indices[${bad}] must be an integer from 0 to ${batch - 1} (a batch entry), got ${describe(indices[bad])}`);
      arena.call(fn, { indices: Int32Array.from(indices) }, {}, (call) => {
        const error = core.reorder(call.address('indices'));
        if (error) throw coreError(M, error);
      });
    }

    /** Frees the cache's wasm memory. Harmless to call twice. */
    dispose() {
      if (!this.#core) return;
      registry.unregister(this);
      this.#core.delete();
      this.#core = null;
    }

    get disposed() { return this.#core === null; }

    #live(what) {
      if (!this.#core) throw new Error(`KVCache.${what}: this cache was disposed`);
      return this.#core;
    }

    // (internal) The C++ core for lib.attention() (`name` 'key') or for the layer that owns it
    // (`owner`; `name` 'options.cache').
    static coreFor(cache, fn, { owner = null, name = 'key' } = {}) {
      if (!(cache instanceof KVCache)) {
        if (isAnyKVCache(cache)) {
          const instead = owner ? "it works only with the layer that made it: make one with this layer's createCache({ maxSeq })"
            : "use it with that instance's attention(), or make the cache with this instance's createKVCache()";
          throw new TypeError(`${fn}: ${name} is ${FOREIGN_CACHE}; ${instead}`);
        }
        throw new TypeError(`${fn}: ${name} must be a KVCache, got ${describe(cache)}`);
      }
      if (owner && cache.#owner !== owner) {
        const whose = cache.#owner === null
          ? 'was made by lib.createKVCache(), not by this layer: a layer stores its own projected (and rotated) keys and values in a cache it makes'
          : 'belongs to another MultiHeadAttention layer (it holds that layer\'s keys and values)';
        throw new Error(`${fn}: ${name} ${whose}; make one with this layer's createCache({ maxSeq })`);
      }
      if (!cache.#core) throw new Error(`${fn}: the KV cache was disposed`);
      return cache.#core;
    }

    // (internal) Whether createCrossCache() made this KVCache.
    static isCross(cache) { return cache.#cross; }
  }

  // lib.createKVCache(options)
  function createKVCache(options) {
    const fn = 'createKVCache';
    checkKnownKeys(fn, options, CACHE_OPTIONS, 'options', ' with kvHeads, headDim and maxSeq (or window)');
    const size = (name, fallback) => dim(options, name, fallback, 'options', fn);
    const batch = size('batch', 1);
    const kvHeads = size('kvHeads');
    const headDim = size('headDim');
    const valueDim = size('valueDim', headDim);
    const { dtype, window, maxSeq } = resolveStorage(fn, options, given(options.maxSeq) ? size('maxSeq') : undefined);
    const sizes = { batch, kvHeads, headDim, valueDim, maxSeq, dtype, window };
    return newCache(fn, sizes, null);
  }

  // A cache of `sizes` ({ batch, kvHeads, headDim, valueDim, maxSeq, dtype, window }); `cross`:
  // for owner's createCrossCache().
  function newCache(fn, sizes, owner, cross = false) {
    const config = coreConfig(M, sizes);
    const bytes = M.cacheBytes(config);
    checkMemory(M, fn, bytes.total, { block: bytes.largest, what: 'this cache', hint: SMALLER });
    const core = new M.KvCacheCore();
    const error = core.allocate(config);
    if (error) {
      core.delete();
      const e = coreError(M, error, bytes.total);
      if (error.kind === M.Failure.outOfMemory) e.message += `; or ${SMALLER}`;
      throw e;
    }
    return new KVCache(core, Object.freeze({ ...sizes }), owner, cross);
  }

  return { KVCache, createKVCache, newCache };
}
