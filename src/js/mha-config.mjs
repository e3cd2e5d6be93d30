// A MultiHeadAttention's config: sizes (a head size of its own: Qwen3, Gemma), the scale (T5: 1),
// biases (per projection: Qwen2, Whisper), and the options of current models — rotary
// embeddings (Llama: rotate_half; GPT-J: interleaved; partial dims; Llama 3 / YaRN tables), a
// sliding window (Mistral), softcap (Gemma 2), ALiBi (BLOOM's slopes or your own) and learned
// sinks (gpt-oss). Checked here; the C++ layer gets the sizes and flags, then the tables and
// slopes (configureCore).
import { coreError } from './heap.mjs';
import { bool, checkKnownKeys, describe, dim, given, kindOf } from './shapes.mjs';
import { checkSlopes, resolveSoftcap, resolveWindow } from './variants.mjs';

const FN = 'MultiHeadAttention';
const CONFIG_KEYS = ['embedDim', 'numHeads', 'numKvHeads', 'headDim', 'kdim', 'vdim', 'bias', 'scale', 'rotary', 'window', 'softcap',
  'alibi', 'sinks'];
const ROTARY_KEYS = ['rotaryDim', 'base', 'interleaved', 'cos', 'sin'];
const BIAS_KEYS = ['q', 'k', 'v', 'o'];  // the projections, as setWeights names them: bq, bk, bv, bo

// config.bias: true or false for all four projections, or { q, k, v, o } (each default true, as
// nn.Linear's bias=). Resolved to a boolean when all four agree, else a frozen { q, k, v, o }.
function resolveBias(value) {
  if (!given(value) || typeof value === 'boolean') return value ?? true;
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${FN}: config.bias must be a boolean or { q, k, v, o } (booleans, default true), got ${describe(value)}`);
  }
  checkKnownKeys(FN, value, BIAS_KEYS, 'config.bias');
  const each = Object.fromEntries(BIAS_KEYS.map((p) => [p, bool(value, p, true, 'config.bias', FN)]));
  const all = new Set(Object.values(each));
  return all.size === 1 ? each.q : Object.freeze(each);
}

// Whether projection `p` ('q', 'k', 'v' or 'o') of a resolved config has a bias.
export const hasBias = (config, p) => (typeof config.bias === 'boolean' ? config.bias : config.bias[p]);

// How a setWeights message names a projection's bias rule: 'bias: true' or 'config.bias.k false'.
export const biasRule = (config, p) => (typeof config.bias === 'boolean' ? `bias: ${config.bias}` : `config.bias.${p} ${config.bias[p]}`);

// BLOOM's ALiBi slopes (transformers' build_alibi_tensor): 2^(−8(h+1)/H) for a power-of-two H;
// otherwise those of the closest power of two below H, then every other slope of twice as many.
export function bloomAlibiSlopes(heads) {
  const closest = 2 ** Math.floor(Math.log2(heads));
  const slopes = [];
  for (let h = 1; h <= closest; h++) slopes.push(2 ** (-8 * h / closest));
  for (let h = 1; slopes.length < heads; h += 2) slopes.push(2 ** (-4 * h / closest));
  return Float32Array.from(slopes);
}

function resolveRotary(value, headDim) {
  if (!given(value)) return undefined;
  checkKnownKeys(FN, value, ROTARY_KEYS, 'config.rotary', ' such as { rotaryDim, base }');
  const rotaryDim = dim(value, 'rotaryDim', headDim, 'config.rotary', FN);
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) {
    throw new RangeError(`${FN}: config.rotary.rotaryDim ${rotaryDim} must be even and ≤ headDim ${headDim}`);
  }
  const interleaved = bool(value, 'interleaved', false, 'config.rotary', FN);
  const tables = given(value.cos) || given(value.sin);
  let base = 10000;
  if (given(value.base)) {
    if (tables) throw new TypeError(`${FN}: config.rotary.base and config.rotary.cos/sin exclude each other (the tables replace base)`);
    if (typeof value.base !== 'number' || !(value.base > 0) || value.base === Infinity) {
      throw new RangeError(`${FN}: config.rotary.base must be a finite number > 0, got ${describe(value.base)}`);
    }
    base = value.base;
  }
  let cos, sin, maxPosition = 0;
  if (tables) {
    if (!given(value.cos) || !given(value.sin)) throw new TypeError(`${FN}: config.rotary.cos and config.rotary.sin go together (tables [maxPosition, rotaryDim/2])`);
    for (const name of ['cos', 'sin']) {
      if (kindOf(value[name]) !== 'Float32Array') {
        throw new TypeError(`${FN}: config.rotary.${name} must be a Float32Array [maxPosition, rotaryDim/2], got ${describe(value[name])}`);
      }
    }
    maxPosition = value.cos.length / (rotaryDim / 2);
    if (!Number.isInteger(maxPosition) || maxPosition < 1 || value.sin.length !== value.cos.length) {
      throw new RangeError(`${FN}: config.rotary.cos and sin must both have a positive multiple of rotaryDim/2 (${rotaryDim / 2}) values, got ${value.cos.length} and ${value.sin.length}`);
    }
    cos = value.cos;
    sin = value.sin;
  }
  return Object.freeze({ rotaryDim, base, interleaved, cos, sin, maxPosition });
}

function resolveAlibi(value, numHeads) {
  if (!given(value) || value === false) return undefined;
  if (value === true) return bloomAlibiSlopes(numHeads);
  checkSlopes(FN, 'config.alibi', value, [[numHeads, `numHeads ${numHeads}`]], "true (BLOOM's slopes), false or a Float32Array [numHeads]");
  return Float32Array.from(value);
}

// The layer's public config (frozen) and the kernel's window sides (−1 = no limit) for configureCore.
export function resolveConfig(config) {
  checkKnownKeys(FN, config, CONFIG_KEYS, 'config', ' with at least embedDim and numHeads');
  const size = (name, fallback) => dim(config, name, fallback, 'config', FN);
  const embedDim = size('embedDim');
  const numHeads = size('numHeads');
  const numKvHeads = size('numKvHeads', numHeads);
  const kdim = size('kdim', embedDim);
  const vdim = size('vdim', embedDim);
  const bias = resolveBias(config.bias);
  if (!given(config.headDim) && embedDim % numHeads !== 0) {
    throw new RangeError(`${FN}: config.embedDim (${embedDim}) must be a multiple of config.numHeads (${numHeads}), ` +
      'or config.headDim given (Qwen3, Gemma: numHeads × headDim need not be embedDim)');
  }
  if (numHeads % numKvHeads !== 0) {
    throw new RangeError(`${FN}: config.numHeads (${numHeads}) must be a multiple of config.numKvHeads (${numKvHeads})`);
  }
  const headDim = size('headDim', embedDim / numHeads);
  if (numHeads * headDim > 2 ** 31 - 1) {
    throw new RangeError(`${FN}: config.numHeads × config.headDim (${numHeads} × ${headDim}) must be at most 2^31 − 1`);
  }
  let scale = Math.fround(1 / Math.fround(Math.sqrt(headDim)));  // 1.0f / sqrtf(headDim), bit for bit
  if (given(config.scale)) {
    if (typeof config.scale !== 'number') throw new TypeError(`${FN}: config.scale must be a number, got ${describe(config.scale)}`);
    if (!(config.scale > 0) || config.scale === Infinity) {
      throw new RangeError(`${FN}: config.scale must be a finite number > 0 (it multiplies Q·Kᵀ; default 1/√headDim), got ${config.scale}`);
    }
    scale = config.scale;
  }
  const rotary = resolveRotary(config.rotary, headDim);
  const windowSides = resolveWindow(FN, config.window, 'config.window');
  const softcap = resolveSoftcap(FN, config.softcap, 'config.softcap');
  const alibi = resolveAlibi(config.alibi, numHeads);
  const sinks = bool(config, 'sinks', false, 'config', FN);
  const resolved = Object.freeze({
    embedDim, numHeads, numKvHeads, kdim, vdim, bias, headDim, scale,
    rotary: rotary ?? null, window: given(config.window) ? Object.freeze([...config.window]) : null, softcap,
    alibi: alibi ?? null, sinks,
  });
  return { config: resolved, windowSides };
}

// Configures a new C++ core from a resolved config and window sides (the tables and slopes are
// staged through the arena; the C++ entries check their copies against the call's budget).
// Throws the core's error.
export function configureCore(M, arena, core, c, [windowLeft, windowRight]) {
  const error = core.configure({
    embedDim: c.embedDim, numHeads: c.numHeads, numKvHeads: c.numKvHeads, kdim: c.kdim, vdim: c.vdim,
    biasQ: hasBias(c, 'q'), biasK: hasBias(c, 'k'), biasV: hasBias(c, 'v'), biasO: hasBias(c, 'o'),
    headDim: c.headDim, scale: c.scale,
    rotaryDim: c.rotary?.rotaryDim ?? 0, rotaryBase: c.rotary?.base ?? 10000, rotaryInterleaved: c.rotary?.interleaved ?? false,
    windowLeft, windowRight, softcap: c.softcap, sinks: c.sinks,
  });
  if (error) throw coreError(M, error);
  if (c.rotary?.cos) {
    arena.call(FN, { cos: c.rotary.cos, sin: c.rotary.sin }, {}, (call) => {
      const e = core.setRotaryTables(call.address('cos'), call.address('sin'), c.rotary.maxPosition, call.budget);
      if (e) throw call.error(e);
    });
  }
  if (c.alibi) {
    arena.call(FN, { alibi: c.alibi }, {}, (call) => {
      const e = core.setAlibi(call.address('alibi'), call.budget);
      if (e) throw call.error(e);
    });
  }
}
