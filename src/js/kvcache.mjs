// KVCache: a JS handle over a C++ attn::KvCache (src/kv_cache.h) holding keys and values in wasm
// memory as float32, float16, bfloat16 or int8, linear or a sliding-window ring. lib.createKVCache() makes
// a standalone one (append your own projected, rotated K and V; attend with
// lib.attention(query, cache, null, options)); MultiHeadAttention.createCache() makes the same
// kind for a layer.
import { checkMemory, coreError } from './heap.mjs';
import { checkFloat32, checkKnownKeys, describe, dim, given } from './shapes.mjs';

export const DTYPES = ['float32', 'float16', 'bfloat16', 'int8'];
const DTYPE_CODE = { float32: 0, float16: 1, int8: 2, bfloat16: 3 };  // attn::KvType
const DTYPE_BYTES = { float32: 4, float16: 2, bfloat16: 2, int8: 1 };
const CACHE_OPTIONS = ['batch', 'kvHeads', 'headDim', 'valueDim', 'maxSeq', 'dtype', 'window'];
const APPEND_OPTIONS = ['seq', 'layout'];

// Bytes of K, V (and int8 scales) for a cache of these sizes, and of its largest buffer (K or V).
export function cacheBytes({ batch, kvHeads, headDim, valueDim, maxSeq, dtype }) {
  const rows = batch * maxSeq * kvHeads;
  return rows * (headDim + valueDim) * DTYPE_BYTES[dtype] + (dtype === 'int8' ? 8 * rows : 0);
}
const largestBuffer = ({ batch, kvHeads, headDim, valueDim, maxSeq, dtype }) =>
  batch * maxSeq * kvHeads * Math.max(headDim, valueDim) * DTYPE_BYTES[dtype];
const SMALLER = "store it smaller: dtype 'float16' or 'bfloat16' halves it, 'int8' quarters it, fewer positions (maxSeq) shrink it";

// dtype and window options (shared by createKVCache and MultiHeadAttention.createCache).
export function resolveStorage(fn, options, maxSeqGiven) {
  const dtype = given(options.dtype) ? options.dtype : 'float32';
  if (!DTYPES.includes(dtype)) {
    throw new TypeError(`${fn}: options.dtype must be 'float32', 'float16', 'bfloat16' or 'int8', got ${describe(dtype)}`);
  }
  const window = given(options.window) ? dim(options, 'window', undefined, 'options', fn) : 0;
  const maxSeq = maxSeqGiven ?? (window || undefined);
  if (maxSeq === undefined) throw new TypeError(`${fn}: options.maxSeq is required (a positive integer), or a window`);
  if (window && maxSeq < window) {
    throw new RangeError(`${fn}: options.maxSeq (${maxSeq}) must be at least options.window (${window}): the ring holds the window`);
  }
  return { dtype, window, maxSeq };
}

// Throws a RangeError naming `fn` unless `seq` more positions fit in `cache` (holding `length`):
// a ring must keep the window − 1 positions before them. `names` says how the message calls the
// cache, the ring and the count (for append: the cache, this ring, seq).
export function checkRoom(fn, { maxSeq, window }, length, seq, names = { cache: 'the cache', ring: 'this ring', seq: 'seq' }) {
  if (window) {
    const needed = Math.min(length + seq, window - 1 + seq);
    if (needed > maxSeq) {
      throw new RangeError(`${fn}: appending ${seq} positions to ${names.ring} needs ${needed} slots (the window − 1 = ${window - 1} ` +
        `positions before them, and them), more than maxSeq ${maxSeq}; append at most ${maxSeq - window + 1} at a time or make maxSeq ≥ window − 1 + ${seq}`);
    }
  } else if (length + seq > maxSeq) {
    throw new RangeError(`${fn}: ${names.cache} has room for ${maxSeq - length} more positions (maxSeq ${maxSeq}, length ${length}), got ${names.seq} ${seq}`);
  }
}

export function makeKVCacheClass(M, arena, registry) {
  class KVCache {
    #core;
    #owner;  // the MultiHeadAttention that made it, or null for a standalone cache

    // (internal) use lib.createKVCache() or MultiHeadAttention.createCache().
    constructor(core, sizes, owner = null) {
      this.#core = core;
      this.#owner = owner;
      registry.register(this, core, this);
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
      checkKnownKeys(fn, options ?? {}, APPEND_OPTIONS);
      const opts = options ?? {};
      const { batch, kvHeads, headDim, valueDim } = this;
      const layout = given(opts.layout) ? opts.layout : 'bhsd';
      if (layout !== 'bhsd' && layout !== 'bshd') throw new RangeError(`${fn}: options.layout must be 'bhsd' or 'bshd', got ${describe(layout)}`);
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
      const order = layout === 'bshd' ? `batch ${batch} × seq ${seq} × kvHeads ${kvHeads}` : `batch ${batch} × kvHeads ${kvHeads} × seq ${seq}`;
      checkFloat32('key', key, seq * perPosition, `${order} × headDim ${headDim}`, fn);
      checkFloat32('value', value, batch * kvHeads * seq * valueDim, `${order} × valueDim ${valueDim}`, fn);
      checkRoom(fn, this, core.length(), seq);
      arena.call(fn, { key, value }, {}, 0, (call) => {
        const error = core.append(call.address('key'), call.address('value'), seq, layout === 'bshd');
        if (error) throw coreError(M, error);
      });
    }

    /** Forgets every position (a new sequence starts). */
    reset() { this.#live('reset').reset(); }

    /**
     * Drops positions ≥ n (speculative decoding, beam search, editing a chat). A ring can go back
     * only as far as it still holds the window − 1 positions before n.
     */
    truncate(n) {
      const core = this.#live('truncate');
      const length = core.length();
      if (!Number.isInteger(n) || n < 0 || n > length) {
        throw new RangeError(`KVCache.truncate: n must be an integer from 0 to length ${length}, got ${describe(n)}`);
      }
      const error = core.truncate(n);
      if (error) {
        const earliest = core.length() - core.held() + this.window - 1;
        throw new RangeError(`KVCache.truncate: this ring (window ${this.window}, maxSeq ${this.maxSeq}) no longer holds the ` +
          `${this.window - 1} positions before ${n}; it can go back to ${earliest} at the earliest (or to 0, a reset)`);
      }
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

    // (internal) The C++ core for lib.attention() or the layer that owns it (null: any caller).
    static coreFor(cache, fn, owner = null) {
      if (!(cache instanceof KVCache)) throw new TypeError(`${fn}: expected a KVCache, got ${describe(cache)}`);
      if (owner && cache.#owner !== owner) throw new Error(`${fn}: options.cache belongs to another MultiHeadAttention layer`);
      if (!cache.#core) throw new Error(`${fn}: the KV cache was disposed`);
      return cache.#core;
    }
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

  // A cache of `sizes` ({ batch, kvHeads, headDim, valueDim, maxSeq, dtype, window }).
  function newCache(fn, sizes, owner) {
    checkMemory(M, fn, cacheBytes(sizes), { block: largestBuffer(sizes), what: 'this cache', hint: SMALLER });
    const core = new M.KvCacheCore();
    const error = core.allocate({ ...sizes, dtype: DTYPE_CODE[sizes.dtype] });
    if (error) {
      core.delete();
      const e = coreError(M, error, cacheBytes(sizes));
      if (/out of memory/.test(error)) e.message += `; or ${SMALLER}`;
      throw e;
    }
    return new KVCache(core, Object.freeze({ ...sizes }), owner);
  }

  return { KVCache, createKVCache, newCache };
}
