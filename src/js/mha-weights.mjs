// A MultiHeadAttention's parameters in setWeights layout — the projections wq, wk, wv, wo
// (nn.Linear [out, in]), their biases bq, bk, bv, bo (those config.bias gives them), with sinks
// the sink logits: their sizes, the checks of setWeights, and moving them in and out of the C++
// layer.
import { coreError } from './heap.mjs';
import { biasRule, hasBias } from './mha-config.mjs';
import { checkFloat32, checkKnownKeys, given } from './shapes.mjs';

export const PROJECTIONS = [['wq', 'bq'], ['wk', 'bk'], ['wv', 'bv'], ['wo', 'bo']];

// Each projection's [out, in] with the names of the two sizes, in PROJECTIONS order: with
// q = numHeads·headDim (embedDim unless headDim was given) and kv = numKvHeads·headDim, wq
// [q, embedDim], wk [kv, kdim], wv [kv, vdim], wo [embedDim, q].
function projectionShapes({ embedDim: e, kdim, vdim, numHeads, numKvHeads, headDim }) {
  const q = numHeads * headDim, kv = numKvHeads * headDim;
  const qName = q === e ? 'embedDim' : 'numHeads·headDim';
  return [[q, e, qName, 'embedDim'], [kv, kdim, 'numKvHeads·headDim', 'kdim'], [kv, vdim, 'numKvHeads·headDim', 'vdim'],
    [e, q, 'embedDim', qName]];
}

// name → float count of every parameter the layer has.
export function weightSizes(config) {
  const sizes = {};
  projectionShapes(config).forEach(([rows, cols], i) => { sizes[PROJECTIONS[i][0]] = rows * cols; });
  projectionShapes(config).forEach(([rows], i) => {
    const [w, b] = PROJECTIONS[i];
    if (hasBias(config, w[1])) sizes[b] = rows;
  });
  if (config.sinks) sizes.sinks = config.numHeads;
  return sizes;
}

// The ProjectionArrays (src/bindings_layers.cpp) of four staged projections' arrays and the sinks, named
// `${prefix}wq` … `${prefix}bo`, `${prefix}sinks`: weights, Adam moments or the weights' gradients.
export const projectionAddresses = (call, prefix) =>
  Object.fromEntries([...PROJECTIONS.flat(), 'sinks'].map((name) => [name, call.address(prefix + name)]));

// Fresh arrays, name → copy of the staged `${prefix}${name}`, for every name of `sizes`.
export const copyAllOut = (call, sizes, prefix = '') =>
  Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, call.copyOut(`${prefix}${name}`, new Float32Array(n))]));

// `object` holds exactly the arrays `sizes` names (name → float count), each a Float32Array.
// `unit` names the values in a length error ('values', 'gradients').
export function checkArrays(fn, label, object, sizes, needs, unit = 'values') {
  checkKnownKeys(fn, object, Object.keys(sizes), label, needs);
  for (const [name, n] of Object.entries(sizes)) {
    if (!given(object[name])) throw new TypeError(`${fn}: ${label}.${name} is required (a Float32Array of ${n})`);
    checkFloat32(`${label}.${name}`, object[name], n, `${n} ${unit}`, fn);
  }
}

// setWeights(weights): every shape checked before any is copied; all at once (C++ packs them
// into new buffers), so on failure the old weights stay.
export function writeWeights(M, arena, core, config, weights) {
  const fn = 'MultiHeadAttention.setWeights';
  checkKnownKeys(fn, weights, [...PROJECTIONS.flat(), 'sinks'], 'weights', ' with wq, wk, wv and wo');
  const shapes = projectionShapes(config);
  for (const [i, [w, b]] of PROJECTIONS.entries()) {
    const [rows, cols, rowName, colName] = shapes[i];
    if (!given(weights[w])) throw new TypeError(`${fn}: weights.${w} is required (a Float32Array [${rowName} ${rows} × ${colName} ${cols}])`);
    checkFloat32(`weights.${w}`, weights[w], rows * cols, `${rowName} ${rows} × ${colName} ${cols}`, fn);
    if (hasBias(config, w[1])) {
      if (!given(weights[b])) throw new TypeError(`${fn}: weights.${b} is required (a Float32Array [${rows}]), since the layer has ${biasRule(config, w[1])}`);
      checkFloat32(`weights.${b}`, weights[b], rows, `${rowName} ${rows}`, fn);
    } else if (given(weights[b])) {
      throw new TypeError(`${fn}: weights.${b} was given, but the layer was created with ${biasRule(config, w[1])}`);
    }
  }
  const { sinks: hasSinks, numHeads } = config;
  if (hasSinks) {
    if (!given(weights.sinks)) throw new TypeError(`${fn}: weights.sinks is required (a Float32Array [numHeads ${numHeads}]), since the layer has sinks: true`);
    checkFloat32('weights.sinks', weights.sinks, numHeads, `numHeads ${numHeads}`, fn);
    const bad = weights.sinks.findIndex((x) => !(Number.isFinite(x) || x === -Infinity));
    if (bad >= 0) throw new RangeError(`${fn}: weights.sinks[${bad}] is ${weights.sinks[bad]}; sinks must be finite or -Infinity`);
  } else if (given(weights.sinks)) {
    throw new TypeError(`${fn}: weights.sinks was given, but the layer was created without sinks: true`);
  }
  const inputs = Object.fromEntries([...PROJECTIONS.flat(), 'sinks'].map((name) => [`w_${name}`, given(weights[name]) ? weights[name] : undefined]));
  // The C++ entry checks what it packs against the call's budget.
  arena.call(fn, inputs, {}, (call) => {
    const error = core.setWeights(projectionAddresses(call, 'w_'), call.budget);
    if (error) throw call.error(error);
  });
}

// getWeights(): fresh arrays the caller owns.
export function readWeights(M, arena, core, config) {
  const sizes = weightSizes(config);
  return arena.call('MultiHeadAttention.getWeights', {}, sizes, (call) => {
    for (const [w, b] of PROJECTIONS) {
      const error = core.getWeight(M.Projection[w], call.address(w), call.address(b));
      if (error) throw coreError(M, error);
    }
    if (sizes.sinks) {
      const error = core.getSinks(call.address('sinks'));
      if (error) throw coreError(M, error);
    }
    return copyAllOut(call, sizes);
  });
}
