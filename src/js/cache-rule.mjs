// The cache rule's messages: the JS twin of src/cache/cache_rule.h, which decides what a call over
// a KV cache may ask (C++ returns a CacheConflict and the two values; the words are here, with the
// caller's own options), and of the positions a cache must keep (appending, truncating).
import { describe, plural } from './shapes.mjs';

// The name (as the module's CacheConflict names it) of the conflict a cache's check answered (its
// number: call-block.mjs, checkCache and checkLayerCache).
export const conflictName = (M, conflict) => Object.keys(M.CacheConflict).find((name) => M.CacheConflict[name].value === conflict);

const shownWindow = (w) => (Array.isArray(w) ? `[${w.map(String).join(', ')}]` : 'none');

// The RangeError for attention(query, cache, null, options) refused by the cache rule: `check`
// is { conflict, call, cache } (the call's value and the cache's), `conflict` named as the
// module's CacheConflict names it, `length` the cache's.
export function cacheCallError(fn, conflict, { call, cache: have }, cache, options, length) {
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

// Why a ring cannot serve a layer (MultiHeadAttention.createCache): the ring keeps the window − 1
// positions before each query, and the layer's config.window may look back no further.
// `conflict` is named as the module's CacheConflict names it.
export function layerCacheError(fn, conflict, { call }, config, window) {
  const hf = `Hugging Face's sliding_window W is config.window [W − 1, 0] and a ring of window W`;
  if (conflict === 'windowUnbounded') {
    const has = config.window ? `config.window [${config.window.join(', ')}] has no left limit` : 'it has no config.window';
    return new RangeError(`${fn}: this layer attends to every earlier position (${has}), but a ring (options.window ${window}) keeps only ` +
      `the ${plural(window - 1, 'position')} before each query; use a linear cache ({ maxSeq }), or a layer with config.window [${window - 1}, 0] (${hf})`);
  }
  if (conflict === 'windowWider') {
    return new RangeError(`${fn}: config.window [${config.window.join(', ')}] looks back ${call} positions, more than a ring with ` +
      `options.window ${window} keeps (the ${window - 1} before each query); use options.window ≥ ${call + 1} (${hf})`);
  }
  return new RangeError(`${fn}: this layer cannot decode with such a cache (conflict ${conflict})`);
}

// The Error for a layer's cache whose positions were projected with weights the layer no longer
// has (`change` names the call that changed them): attention over it would mix the two.
export function staleCacheError(fn, cross, change) {
  const remedy = cross ? 'make a new one with createCrossCache()' : 'reset() it and run the sequence again';
  return new Error(`${fn}: options.cache holds keys and values projected with this layer's earlier weights (the weights ` +
    `changed since: ${change}()), so attention over it would match neither the old nor the new weights; ${remedy}`);
}

// Throws a RangeError naming `fn` unless `seq` more positions fit in `cache` (its sizes) with C++
// core `core` (its room(): a ring must keep, besides them, the positions before them that their
// window reaches, the last min(length, window − 1)). `names` says how the message calls the
// cache, the ring and the count (for append: the cache, this ring, seq).
export function checkRoom(fn, { maxSeq, window }, core, seq, names = { cache: 'the cache', ring: 'this ring', seq: 'seq' }) {
  const room = core.room(), length = core.length();
  if (seq <= room) return;
  if (window) {
    const before = maxSeq - room, always = maxSeq - (window - 1);
    throw new RangeError(`${fn}: appending ${seq} positions at length ${length} to ${names.ring} (window ${window}, maxSeq ${maxSeq}) ` +
      `needs ${before + seq} slots, more than maxSeq: ${seq} for them and ${before} for the positions before them that their window ` +
      `reaches (the last min(length, window − 1) = ${before}); append at most ${room} now` +
      (room !== always ? ` (${always} once the ring holds ${plural(window - 1, 'position')})` : '') +
      `, or make maxSeq ≥ ${window - 1 + seq} (window − 1 + ${seq}) to append ${seq} at any length`);
  }
  throw new RangeError(`${fn}: ${names.cache} has room for ${room} more positions (maxSeq ${maxSeq}, length ${length}), got ${names.seq} ${seq}`);
}

// The RangeError for KVCache.truncate(n) on a ring that no longer holds the window − 1 positions
// before n (`core`: its C++ core).
export function truncateError({ window, maxSeq }, core, n) {
  const earliest = core.length() - core.held() + window - 1;
  return new RangeError(`KVCache.truncate: this ring (window ${window}, maxSeq ${maxSeq}) no longer holds the ` +
    `${window - 1} positions before ${n}; it can go back to ${earliest} at the earliest (or to 0, a reset)`);
}
