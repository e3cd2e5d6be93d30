// Masks, for attention(), attentionWeights(), attentionBackward() and the layer's forward. A mask's
// meaning is named by its option, never guessed: PyTorch gives a boolean mask opposite meanings
// (scaled_dot_product_attention: True = may attend; nn.MultiheadAttention: True = masked), and
// Hugging Face's attention_mask (1 = a real token) is the opposite of PyTorch's key_padding_mask
// (True = padding). Its shape is PyTorch's broadcast to [batch, heads, seqQ, seqK], stated as
// options.maskShape (mask.shape) or read from the length only where one shape has that length.
import { describe, given, kindOf } from './shapes.mjs';

export const MASK_OPTIONS = ['mask', 'attendMask', 'blockMask', 'maskShape', 'keyPaddingMask', 'attentionMask'];
// The MaskShape (src/bindings.cpp) a call without a mask passes.
export const NO_MASK_SHAPE = Object.freeze({ batch: false, heads: false, rows: true });

// The three mask options: the kind each is (the module's MaskType names) and what it holds.
const KINDS = {
  mask: { type: 'additive', array: 'Float32Array', holds: 'added to the scores; -Infinity masks' },
  attendMask: { type: 'boolean', array: 'Uint8Array', holds: "1 = may attend, 0 = masked: scaled_dot_product_attention's attn_mask" },
  blockMask: { type: 'block', array: 'Uint8Array', holds: "1 = masked, 0 = may attend: nn.MultiheadAttention's attn_mask" },
};
const BOOLEAN_HELP = 'a boolean mask means opposite things in PyTorch, so its option says which: options.attendMask ' +
  "(1 = may attend, as torch.nn.functional.scaled_dot_product_attention's boolean attn_mask and Hugging Face's 4-D boolean " +
  "masks) or options.blockMask (1 = masked, as torch.nn.MultiheadAttention's boolean attn_mask)";

// The dimensions a mask may have besides seqK, outermost first; `has` says which a shape has.
const AXES = [['batch', 'batch'], ['heads', 'heads'], ['rows', 'seqQ']];

// A shape as written in messages, 4-D: '[batch 2, 1, seqQ 5, seqK 7]'.
function written(has, s) {
  const dims = AXES.map(([axis, size]) => (has[axis] ? `${size} ${s[size]}` : '1'));
  return `[${dims.join(', ')}, seqK ${s.seqK}]`;
}

// The shape as PyTorch's mask.shape gives it (leading 1s dropped), the form options.maskShape takes:
// '[2, 1, 5, 7]', '[4, 5, 7]'.
function dimsOf(has, s) {
  const dims = AXES.map(([axis, size]) => (has[axis] ? s[size] : 1));
  while (dims.length > 0 && dims[0] === 1) dims.shift();
  return `[${[...dims, s.seqK].join(', ')}]`;
}

// Every shape a mask of [batch, heads, seqQ, seqK] may have (the broadcasts of PyTorch), each
// once: a dimension of size 1 is the same had or broadcast. { has, length }.
function shapes(s) {
  const found = new Map();
  for (let bits = 7; bits >= 0; bits--) {  // outer dimensions first
    const has = { batch: (bits & 4) !== 0 && s.batch > 1, heads: (bits & 2) !== 0 && s.heads > 1, rows: (bits & 1) !== 0 && s.seqQ > 1 };
    const key = `${has.batch}${has.heads}${has.rows}`;
    if (!found.has(key)) found.set(key, { has, length: s.seqK * (has.batch ? s.batch : 1) * (has.heads ? s.heads : 1) * (has.rows ? s.seqQ : 1) });
  }
  return [...found.values()];
}

// The shape of a mask of `length` without options.maskShape: the one shape of that length, or a
// RangeError that names every shape it could be (or the lengths there are).
function shapeFromLength(fn, name, length, s) {
  const all = shapes(s);
  const fit = all.filter((shape) => shape.length === length);
  if (fit.length === 1) return fit[0].has;
  if (fit.length > 1) {
    throw new RangeError(`${fn}: options.${name} has length ${length}, which fits ${fit.map((f) => written(f.has, s)).join(' and ')} ` +
      `alike: say which with options.maskShape, its shape as PyTorch gives it (mask.shape), e.g. ${fit.map((f) => dimsOf(f.has, s)).join(' or ')}`);
  }
  const lengths = all.sort((a, b) => a.length - b.length).map((f) => `${f.length} (${written(f.has, s)})`);
  throw new RangeError(`${fn}: options.${name} has length ${length}, expected the length of a mask that broadcasts to ` +
    `[batch, heads, seqQ, seqK] as PyTorch's do: ${lengths.join(', ')}`);
}

// The shape options.maskShape states (PyTorch's mask.shape): dims right-aligned against
// [batch, heads, seqQ, seqK], each 1 (broadcast) or the size there; also nn.MultiheadAttention's
// 3-D [batch·heads, seqQ, seqK]. The last must be seqK.
function shapeFromDims(fn, dims, name, length, s) {
  const full = [s.batch, s.heads, s.seqQ, s.seqK];
  const ok = Array.isArray(dims) && dims.length >= 1 && dims.length <= 4 && dims.every((d) => Number.isInteger(d) && d >= 1);
  if (!ok) {
    throw new TypeError(`${fn}: options.maskShape must be the mask's shape as an array of 1 to 4 positive integers (PyTorch's ` +
      `mask.shape, e.g. [${s.batch}, 1, 1, ${s.seqK}]), got ${Array.isArray(dims) ? `[${dims.map(describe).join(', ')}]` : describe(dims)}`);
  }
  const shown = `[${dims.join(', ')}]`;
  const product = dims.reduce((n, d) => n * d, 1);
  if (product !== length) {
    throw new RangeError(`${fn}: options.${name} has length ${length}, but options.maskShape ${shown} holds ${product}`);
  }
  const target = `[batch ${s.batch}, heads ${s.heads}, seqQ ${s.seqQ}, seqK ${s.seqK}]`;
  if (dims[dims.length - 1] !== s.seqK) {
    throw new RangeError(`${fn}: options.maskShape ${shown} must end with seqK (${s.seqK}): a mask has an entry for every key ` +
      `(one broadcast over the keys is not supported); the shape it broadcasts to is ${target}`);
  }
  if (dims.length === 3 && dims[0] === s.batch * s.heads && dims[0] !== 1) {  // nn.MultiheadAttention's (N·num_heads, L, S)
    if (dims[1] !== s.seqQ && dims[1] !== 1) {
      throw new RangeError(`${fn}: options.maskShape ${shown} (nn.MultiheadAttention's [batch·heads, seqQ, seqK]) has ${dims[1]} ` +
        `rows, expected seqQ ${s.seqQ} or 1`);
    }
    return { batch: s.batch > 1, heads: s.heads > 1, rows: dims[1] > 1 };
  }
  const aligned = [...Array(4 - dims.length).fill(1), ...dims];
  for (let i = 0; i < 3; i++) {
    if (aligned[i] !== 1 && aligned[i] !== full[i]) {
      throw new RangeError(`${fn}: options.maskShape ${shown} does not broadcast to ${target}: maskShape[${i - 4 + dims.length}] ` +
        `is ${aligned[i]}, expected ${AXES[i][1]} ${full[i]} or 1 (dimensions are aligned from the right, as in PyTorch)` +
        (dims.length === 2 && aligned[2] === s.batch ? `; a Hugging Face attention_mask [batch, seqK] goes in options.attentionMask` : ''));
    }
  }
  return { batch: aligned[0] > 1, heads: aligned[1] > 1, rows: aligned[2] > 1 };
}

// A [batch, seqK] Uint8Array of padding: keyPaddingMask as given, or attentionMask turned over.
function padding(fn, options, s) {
  const names = ['keyPaddingMask', 'attentionMask'].filter((n) => given(options[n]));
  if (names.length === 0) return undefined;
  if (names.length === 2) {
    throw new TypeError(`${fn}: options.keyPaddingMask and options.attentionMask both say which keys are padding; give one ` +
      "(keyPaddingMask: 1 = padding, PyTorch's key_padding_mask; attentionMask: 1 = a real token, Hugging Face's attention_mask)");
  }
  const [name] = names;
  const array = options[name];
  const meaning = name === 'keyPaddingMask' ? "1 = padding, ignored: PyTorch's key_padding_mask" : "1 = a real token, 0 = padding: Hugging Face's attention_mask";
  if (kindOf(array) !== 'Uint8Array') throw new TypeError(`${fn}: options.${name} must be a Uint8Array [batch, seqK] (${meaning}), got ${describe(array)}`);
  if (array.length !== s.batch * s.seqK) {
    throw new RangeError(`${fn}: options.${name} has length ${array.length}, expected ${s.batch * s.seqK} (batch ${s.batch} × seqK ${s.seqK})`);
  }
  return name === 'keyPaddingMask' ? array : array.map((v) => (v ? 0 : 1));
}

// Checks the mask options of a call of shape s ({ batch, heads, seqQ, seqK }). Returns { mask,
// keyPadding }: mask undefined or { array, type, shape } (type a MaskType name, shape the
// MaskShape { batch, heads, rows }: the dimensions it has), keyPadding undefined or a Uint8Array
// [batch, seqK] with 1 = padding.
export function resolveMasks(fn, options, s) {
  if (!MASK_OPTIONS.some((name) => given(options[name]))) return { mask: undefined, keyPadding: undefined };
  const names = Object.keys(KINDS).filter((n) => given(options[n]));
  if (names.length > 1) {
    throw new TypeError(`${fn}: ${names.map((n) => `options.${n}`).join(' and ')}: give one mask (an additive one can hold what a ` +
      'boolean one says: -Infinity where masked, 0 elsewhere); key padding goes in options.keyPaddingMask or options.attentionMask');
  }
  const keyPadding = padding(fn, options, s);
  if (names.length === 0) {
    if (given(options.maskShape)) throw new TypeError(`${fn}: options.maskShape is the shape of a mask, but no mask was given (options.mask, attendMask or blockMask)`);
    return { mask: undefined, keyPadding };
  }
  const [name] = names;
  const kind = KINDS[name];
  const array = options[name];
  if (kindOf(array) !== kind.array) {
    if (name === 'mask' && kindOf(array) === 'Uint8Array') throw new TypeError(`${fn}: options.mask is a Uint8Array, but ${BOOLEAN_HELP}; options.mask is an additive Float32Array`);
    const instead = name === 'mask' ? '' : kindOf(array) === 'Float32Array' ? '; an additive Float32Array goes in options.mask' : '';
    throw new TypeError(`${fn}: options.${name} must be a ${kind.array} (${kind.holds}), got ${describe(array)}${instead}`);
  }
  const shape = given(options.maskShape) ? shapeFromDims(fn, options.maskShape, name, array.length, s) : shapeFromLength(fn, name, array.length, s);
  return { mask: { array, type: kind.type, shape }, keyPadding };
}
