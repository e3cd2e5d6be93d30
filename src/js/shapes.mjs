// Argument checking for the public functions: every check runs before the wasm heap is touched,
// and every message names the function and the argument and gives what was expected and what
// came. `fn` (the function's name) is the last, optional parameter of the shared helpers.

const MAX_DIM = 2 ** 31 - 1;  // dims are C++ ints

export function describe(value) {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `Array(${value.length})`;
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${value.length ?? value.byteLength})`;
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return `${typeof value} ${String(value)}`;
  if (typeof value === 'function') return 'function';
  return value.constructor?.name ?? 'object';
}

// The typed-array kind by its tag, so arrays from another realm (an iframe, a vm context) pass.
// (A Float32Array of this realm, every call's case, is answered without making the tag's string.)
export const kindOf = (value) => (value instanceof Float32Array ? 'Float32Array' : Object.prototype.toString.call(value).slice(8, -1));

// '1 position', '3 positions'.
export const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

// `null` and `undefined` both mean "not given".
export const given = (value) => value !== undefined && value !== null;

// 'attention: ' for fn 'attention'; nothing without a name.
const from = (fn) => (fn ? `${fn}: ` : '');

// Checks that `object` is a plain object whose keys are all in `known`. `label` names it in
// messages ('options', 'config', 'weights'); `needs` says what it must hold when it is missing.
export function checkKnownKeys(fn, object, known, label = 'options', needs = '') {
  if (typeof object !== 'object' || object === null || Array.isArray(object)) {
    throw new TypeError(`${fn}: ${label} must be an object${needs}, got ${describe(object)}`);
  }
  for (const name of Object.keys(object)) {
    if (!known.includes(name)) {
      const what = label === 'options' ? ['option', 'options'] : [`${label} key`, 'keys'];
      throw new TypeError(`${fn}: unknown ${what[0]} '${name}' (known ${what[1]}: ${known.join(', ')})`);
    }
  }
}

// A positive integer `object[name]`, or `fallback` when not given (required when undefined).
export function dim(object, name, fallback, label = 'options', fn = '') {
  const value = object[name];
  if (!given(value)) {
    if (fallback === undefined) throw new TypeError(`${from(fn)}${label}.${name} is required (a positive integer)`);
    return fallback;
  }
  if (typeof value !== 'number') throw new TypeError(`${from(fn)}${label}.${name} must be a number, got ${describe(value)}`);
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`${from(fn)}${label}.${name} must be a positive integer, got ${value}`);
  }
  if (value > MAX_DIM) {
    throw new RangeError(`${from(fn)}${label}.${name} must be at most ${MAX_DIM} (2^31 − 1: sizes are 32-bit integers), got ${value}`);
  }
  return value;
}

export function bool(object, name, fallback = false, label = 'options', fn = '') {
  const value = object[name];
  if (!given(value)) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${from(fn)}${label}.${name} must be a boolean, got ${describe(value)}`);
  return value;
}

// formula: how `expected` is made; hint: appended to a length error (e.g. which default applied).
export function checkFloat32(name, array, expected, formula, fn = '', hint = '') {
  if (kindOf(array) !== 'Float32Array') {
    throw new TypeError(`${from(fn)}${name} must be a Float32Array, got ${describe(array)}`);
  }
  checkLength(name, array, expected, formula, fn, hint);
}

export function checkLength(name, array, expected, formula, fn = '', hint = '') {
  if (array.length !== expected) {
    throw new RangeError(`${from(fn)}${name} has length ${array.length}, expected ${expected} (${formula})${hint}`);
  }
}

export const elementCount = (parts) => parts.reduce((n, [, v]) => n * v, 1);
export const formula = (parts) => parts.map(([k, v]) => `${k} ${v}`).join(' × ');

// options.layout: 'bhsd' (the default) or 'bshd'.
export function resolveLayout(fn, options) {
  const layout = given(options.layout) ? options.layout : 'bhsd';
  if (layout !== 'bhsd' && layout !== 'bshd') {
    throw new RangeError(`${fn}: options.layout must be 'bhsd' or 'bshd', got ${describe(layout)}`);
  }
  return layout;
}

// Resolves and checks the options shared by attention() and attentionWeights().
// `known` lists the option names the calling function accepts; `fixed` (name → size) holds the
// sizes a KV cache decides, which the cache's check has already held the options to.
export function resolveShape(fn, options, known, fixed) {
  checkKnownKeys(fn, options, known, 'options', ' with at least heads, seqQ and headDim');
  const size = (name, fallback) => fixed?.[name] ?? dim(options, name, fallback, 'options', fn);
  const heads = size('heads');
  const seqQ = size('seqQ');
  const headDim = size('headDim');
  const batch = size('batch', 1);
  const kvHeads = size('kvHeads', heads);
  const seqK = size('seqK', seqQ);
  const valueDim = known.includes('valueDim') ? size('valueDim', headDim) : 0;
  if (heads % kvHeads !== 0) {
    throw new RangeError(`${fn}: options.heads (${heads}) must be a multiple of options.kvHeads (${kvHeads})`);
  }
  const layout = resolveLayout(fn, options);

  let scale = 1 / Math.sqrt(headDim);
  if (given(options.scale)) {
    if (typeof options.scale !== 'number') throw new TypeError(`${fn}: options.scale must be a number, got ${describe(options.scale)}`);
    if (!Number.isFinite(options.scale)) throw new RangeError(`${fn}: options.scale must be finite, got ${options.scale}`);
    scale = options.scale;
  }
  const defaulted = { kvHeads: !given(options.kvHeads) && !fixed, seqK: !given(options.seqK) && !fixed };
  return { fn, batch, heads, kvHeads, seqQ, seqK, defaulted, headDim, valueDim, layout, scale };
}

// Why a key or value of `length` (rows of `dim`) does not fit shape s, when a size that was left
// to its default explains it: a grouped-query call that forgot kvHeads, a cross-attention call
// that forgot seqK.
function defaultedSizeHint(s, length, dim) {
  const fits = [];
  const kvHeads = length / (s.batch * s.seqK * dim);
  if (s.defaulted.kvHeads && Number.isInteger(kvHeads) && kvHeads < s.heads && s.heads % kvHeads === 0) {
    fits.push(`kvHeads ${kvHeads} (grouped-query attention; options.kvHeads was not given, so it defaults to heads ${s.heads})`);
  }
  const seqK = length / (s.batch * s.kvHeads * dim);
  if (s.defaulted.seqK && Number.isInteger(seqK) && seqK > 0) {
    fits.push(`seqK ${seqK} (options.seqK was not given, so it defaults to seqQ ${s.seqQ})`);
  }
  if (fits.length > 0) return `; its length fits ${fits.join(', or ')}: pass it`;
  return s.defaulted.seqK ? `; options.seqK was not given, so it defaults to seqQ (${s.seqQ}): pass seqK when keys and values have another length` : '';
}

// The shape of each tensor as [name, size] pairs, in memory order for the layout. The last
// shape's are kept, since a decode loop asks for the same every step: frozen, as every call that
// shape shares them.
const PART_SIZES = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout'];
let lastParts = { shape: {}, parts: null };
export function tensorParts(s) {
  if (PART_SIZES.every((name) => lastParts.shape[name] === s[name])) return lastParts.parts;
  const parts = partsOf(s);
  lastParts = { shape: s, parts };
  return parts;
}

function partsOf(s) {
  const bshd = s.layout === 'bshd';
  const frozen = (pairs) => Object.freeze(pairs.map(Object.freeze));
  const t = (h, hn, seq, seqn, d, dn) => frozen(bshd ? [['batch', s.batch], [seqn, seq], [hn, h], [dn, d]]
    : [['batch', s.batch], [hn, h], [seqn, seq], [dn, d]]);
  return Object.freeze({
    query: t(s.heads, 'heads', s.seqQ, 'seqQ', s.headDim, 'headDim'),
    key: t(s.kvHeads, 'kvHeads', s.seqK, 'seqK', s.headDim, 'headDim'),
    value: t(s.kvHeads, 'kvHeads', s.seqK, 'seqK', s.valueDim, 'valueDim'),
    out: t(s.heads, 'heads', s.seqQ, 'seqQ', s.valueDim, 'valueDim'),
    weights: frozen([['batch', s.batch], ['heads', s.heads], ['seqQ', s.seqQ], ['seqK', s.seqK]]),
    lse: frozen([['batch', s.batch], ['heads', s.heads], ['seqQ', s.seqQ]]),
  });
}

// Checks a tensor of a call whose shape `s` came from resolveShape (which names the function).
// A wrong key or value length says which defaulted size (kvHeads, seqK) would explain it.
export function checkTensor(s, name, array, parts) {
  const expected = elementCount(parts);
  if (array instanceof Float32Array && array.length === expected) return array;  // (no message to word)
  const keyOrValue = (name === 'key' || name === 'value') && kindOf(array) === 'Float32Array' && array.length !== expected;
  const hint = keyOrValue ? defaultedSizeHint(s, array.length, name === 'key' ? s.headDim : s.valueDim) : '';
  checkFloat32(name, array, expected, formula(parts), s.fn, hint);
  return array;
}

// An optional array (a caller-owned output, or an optional input): checked like a tensor, or undefined.
export function checkOptionalTensor(s, name, array, parts) {
  return given(array) ? checkTensor(s, name, array, parts) : undefined;
}
