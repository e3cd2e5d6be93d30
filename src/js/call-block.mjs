// The call blocks: where an attention or rotary call is written for the module (JsCallBlock and
// JsRotaryCall in src/bindings.cpp), one field after another, in the order of the C++ structs. An Embind
// value object crosses field by field, and in a threaded build every field's read of the heap
// reads shared memory's buffer again: microseconds a call, more than a small call's kernel. One
// block of each per module, its address asked once; calls are synchronous, and the entries copy what they
// read before anything else can run.
import { heap } from './heap.mjs';

// JsAttentionCall: the forward call's fields, then the backward's (0 in a forward call).
const CALL_FIELDS = ['query', 'key', 'value', 'out', 'weights', 'mask', 'lse', 'keyPadding', 'maskType',
  'maskBatch', 'maskHeads', 'maskRows', 'batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'bshd',
  'scale', 'causal', 'align', 'windowLeft', 'windowRight', 'softcap', 'alibi', 'sinks', 'alibiBatchStride',
  'dOut', 'dQuery', 'dKey', 'dValue', 'dSinks', 'savedLse', 'savedOut'];
// Each field's index (in 32-bit words from the block's start); scale and softcap are float32, the
// rest int32 (addresses too: from 2 GiB up an int32 store wraps, and C++ reads it unsigned).
export const FIELD = Object.freeze(Object.fromEntries(CALL_FIELDS.map((name, i) => [name, i])));
// JsCacheCall, at byte 144 of the block: two doubles the check writes back (the call's value and
// the cache's in a conflict), then these 32-bit fields.
const CACHE_CALL_OFFSET = 144;
const CACHE_FIELDS = ['batch', 'heads', 'kvHeads', 'headDim', 'valueDim', 'seqK', 'seqQ', 'causal', 'align',
  'windowLeft', 'windowRight'];
const CACHE_CALL_BYTES = 16 + 4 * CACHE_FIELDS.length;
// JsRotaryCall, in the module's rotary block: two doubles (positionOffset, base), then these 32-bit
// fields.
const ROTARY_FIELDS = ['x', 'positions', 'cos', 'sin', 'batch', 'heads', 'seq', 'headDim', 'rotaryDim', 'tablePositions',
  'positionsBatchStride', 'bshd', 'interleaved'];
const ROTARY_BYTES = 16 + 4 * ROTARY_FIELDS.length;

export function makeCallBlock(M) {
  // A cache check's answer: the conflict, and its two values, which the entry wrote at `base`.
  const checked = (conflict, base) => {
    if (conflict === M.CacheConflict.none.value) return { conflict };
    const { HEAPF64 } = heap(M, base + CACHE_CALL_BYTES);
    return { conflict, call: HEAPF64[base >>> 3], cache: HEAPF64[(base >>> 3) + 1] };
  };
  let address = 0;  // asked on first use: a module that never attends never asks
  const at = () => address || (address = M.callBlock() >>> 0);
  let rotaryAddress = 0;  // the same, for rotary
  return {
    // Clears the attention call with `views` (heap(M)'s, reaching the block) and returns the index of its
    // first word, for views.HEAP32[i + FIELD.x] = … (views.HEAPF32 for scale and softcap). The
    // entries take at() as the call's address.
    clear(views) {
      const i = at() >>> 2;
      views.HEAP32.fill(0, i, i + CALL_FIELDS.length);
      return i;
    },
    address: at,
    // Asks `core` (a KvCacheCore) whether it can answer `call` (name → number: JsCacheCall's
    // fields, sizes 0 = the cache's, align the module's Align value); returns { conflict, call,
    // cache } (conflict the module's CacheConflict value, call and cache its two values).
    checkCache(core, call) {
      const base = at() + CACHE_CALL_OFFSET;
      const { HEAP32 } = heap(M, base + CACHE_CALL_BYTES);
      for (let i = 0; i < CACHE_FIELDS.length; i++) HEAP32[(base >>> 2) + 4 + i] = call[CACHE_FIELDS[i]];
      return checked(core.check(base), base);
    },
    // Asks `core` (a layer's MhaCore) whether a cache of `config` (a KvCacheConfig) suits it; the
    // same answer as checkCache's.
    checkLayerCache(core, config) {
      const base = at() + CACHE_CALL_OFFSET;
      return checked(core.checkCache(config, base), base);
    },
    // Writes a rotary call (name → number: JsRotaryCall's fields) and returns its address.
    writeRotary(call) {
      const base = rotaryAddress || (rotaryAddress = M.rotaryBlock() >>> 0);
      const { HEAP32, HEAPF64 } = heap(M, base + ROTARY_BYTES);
      HEAPF64[base >>> 3] = call.positionOffset;
      HEAPF64[(base >>> 3) + 1] = call.base;
      for (let i = 0; i < ROTARY_FIELDS.length; i++) HEAP32[(base >>> 2) + 4 + i] = call[ROTARY_FIELDS[i]];
      return base;
    },
  };
}
