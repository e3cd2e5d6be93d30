// The score variants of attention(), attentionWeights() and attentionBackward() — causal
// alignment, sliding windows, softcap, ALiBi slopes and sinks — checked in one place and turned
// into the kernel's fields (src/kernel/attention.h). Conventions: PyTorch's CausalVariant names,
// flash-attention's window_size / softcap / alibi_slopes, gpt-oss's sinks.
import { describe, given, kindOf } from './shapes.mjs';

export const VARIANT_OPTIONS = ['window', 'softcap', 'alibiSlopes', 'sinks'];

const NO_LIMIT = -1;           // attn::kNoLimit
const MAX_SIDE = 2 ** 31 - 2;  // sides at or beyond every possible distance mean "no limit"

// causal: false | true | 'lower-right' | 'upper-left' → { causal, align }, align the name of the
// module's Align (src/bindings.cpp): 'lowerRight' or 'upperLeft'.
export function resolveCausal(fn, value, label = 'options.causal') {
  if (!given(value) || value === false) return { causal: false, align: 'lowerRight' };
  if (value === true || value === 'lower-right') return { causal: true, align: 'lowerRight' };
  if (value === 'upper-left') return { causal: true, align: 'upperLeft' };
  throw new TypeError(`${fn}: ${label} must be false, true, 'lower-right' or 'upper-left', got ${describe(value)}`);
}

// window: [left, right] with sides integers ≥ 0 or Infinity → kernel sides (−1 = no limit).
const NO_WINDOW = Object.freeze([NO_LIMIT, NO_LIMIT]);
export function resolveWindow(fn, value, label = 'options.window') {
  if (!given(value)) return NO_WINDOW;
  const shown = Array.isArray(value) ? `[${value.map((x) => typeof x === 'number' ? String(x) : describe(x)).join(', ')}]` : describe(value);
  if (!Array.isArray(value) || value.length !== 2) {
    throw new TypeError(`${fn}: ${label} must be a two-element array [left, right], got ${shown}`);
  }
  return value.map((side) => {
    if (side === Infinity) return NO_LIMIT;
    if (typeof side !== 'number' || !Number.isInteger(side) || side < 0) {
      throw new RangeError(`${fn}: ${label} ${shown}: each side must be an integer ≥ 0 or Infinity`);
    }
    return side > MAX_SIDE ? NO_LIMIT : side;
  });
}

export function resolveSoftcap(fn, value, label = 'options.softcap') {
  if (!given(value)) return 0;
  if (typeof value !== 'number') throw new TypeError(`${fn}: ${label} must be a number, got ${describe(value)}`);
  if (!(value >= 0) || value === Infinity) {
    throw new RangeError(`${fn}: ${label} must be a finite number > 0 (or 0 for none), got ${value}`);
  }
  return value;
}

function checkValues(fn, label, array, ok, what) {
  for (let i = 0; i < array.length; i++) {
    if (!ok(array[i])) throw new RangeError(`${fn}: ${label}[${i}] is ${array[i]}; ${what}`);
  }
}

// ALiBi slopes, for attention() and the layer's config alike: a Float32Array (else a TypeError
// that says it must be `typeHint`) of finite slopes, whose length is one of `shapes`'
// ([length, how the message names it]).
export function checkSlopes(fn, label, value, shapes, typeHint = 'a Float32Array') {
  if (kindOf(value) !== 'Float32Array') throw new TypeError(`${fn}: ${label} must be ${typeHint}, got ${describe(value)}`);
  if (!shapes.some(([length]) => length === value.length)) {
    throw new RangeError(`${fn}: ${label} has length ${value.length}, expected ${shapes.map(([, name]) => name).join(' or ')}`);
  }
  checkValues(fn, label, value, Number.isFinite, 'slopes must be finite');
}

// alibiSlopes: Float32Array [heads] or [batch, heads] → { array, batchStride }.
export function resolveAlibi(fn, value, batch, heads, label = 'options.alibiSlopes') {
  if (!given(value)) return undefined;
  checkSlopes(fn, label, value, [[heads, `${heads} ([heads])`], [batch * heads, `${batch * heads} ([batch ${batch}, heads ${heads}])`]]);
  return { array: value, batchStride: value.length === heads ? 0 : heads };
}

// sinks: Float32Array [heads] of logits (finite, or −Infinity for none).
export function resolveSinks(fn, value, heads, label = 'options.sinks') {
  if (!given(value)) return undefined;
  if (kindOf(value) !== 'Float32Array') throw new TypeError(`${fn}: ${label} must be a Float32Array, got ${describe(value)}`);
  if (value.length !== heads) throw new RangeError(`${fn}: ${label} has length ${value.length}, expected heads ${heads}`);
  checkValues(fn, label, value, (x) => Number.isFinite(x) || x === -Infinity, 'sinks must be finite or -Infinity');
  return value;
}

// causal and window: which keys each row sees (what a KV cache checks a call against).
export function resolveVisibility(fn, options) {
  const { causal, align } = resolveCausal(fn, options.causal);
  const [windowLeft, windowRight] = resolveWindow(fn, options.window);
  return { causal, align, windowLeft, windowRight };
}

// All of them for a call whose shape came from resolveShape: the kernel fields plus the arrays
// to stage (alibi, sinks). `visibility`: resolveVisibility's, when the caller has it already.
export function resolveVariants(shape, options, visibility = resolveVisibility(shape.fn, options)) {
  const { fn, batch, heads } = shape;
  const alibi = resolveAlibi(fn, options.alibiSlopes, batch, heads);
  const { causal, align, windowLeft, windowRight } = visibility;  // not a spread: in V8 that made tiny calls 1.7× slower
  return {
    causal, align, windowLeft, windowRight, softcap: resolveSoftcap(fn, options.softcap),
    alibi: alibi?.array, alibiBatchStride: alibi?.batchStride ?? 0, sinks: resolveSinks(fn, options.sinks, heads),
  };
}
