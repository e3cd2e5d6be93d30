// A MultiHeadAttention's optimizer: SGD and Adam steps on the weights in wasm memory (the Adam
// moments live in the C++ layer, the step count here), and saving and restoring Adam's state.
import { coreError } from './heap.mjs';
import { checkKnownKeys, describe } from './shapes.mjs';
import { checkArrays, copyAllOut, PROJECTIONS, projectionAddresses, weightSizes } from './mha-weights.mjs';

const SGD_OPTIONS = ['lr'];
const ADAM_OPTIONS = ['lr', 'beta1', 'beta2', 'eps'];
const STATE_KEYS = ['step', 'm', 'v'];
const MAX_STEP = 2 ** 31 - 1;  // a C++ int

function learningRate(fn, lr) {
  if (!(typeof lr === 'number' && Number.isFinite(lr) && lr > 0)) {
    throw new RangeError(`${fn}: options.lr must be a positive number, got ${describe(lr)}`);
  }
  return lr;
}

const zeros = (sizes) => Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, new Float32Array(n)]));

export class Optimizer {
  #M;
  #arena;
  #config;
  #adamSteps = 0;

  constructor(M, arena, config) {
    this.#M = M;
    this.#arena = arena;
    this.#config = config;
  }

  sgdStep(core, grads, options = {}) {
    const fn = 'MultiHeadAttention.sgdStep';
    checkKnownKeys(fn, options, SGD_OPTIONS, 'options', ' with lr');
    const rate = learningRate(fn, options.lr);
    this.#withGrads(fn, grads, (call) => {
      const error = core.sgdStep(projectionAddresses(call, 'g_'), rate);
      if (error) throw coreError(this.#M, error);
    });
  }

  adamStep(core, grads, options = {}) {
    const fn = 'MultiHeadAttention.adamStep';
    checkKnownKeys(fn, options, ADAM_OPTIONS);
    const { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8 } = options;
    const rate = learningRate(fn, lr);
    for (const [name, x] of Object.entries({ beta1, beta2 })) {
      if (!(typeof x === 'number' && x >= 0 && x < 1)) throw new RangeError(`${fn}: options.${name} must be in [0, 1), got ${describe(x)}`);
    }
    if (!(typeof eps === 'number' && eps > 0)) throw new RangeError(`${fn}: options.eps must be a positive number, got ${describe(eps)}`);
    if (this.#adamSteps >= MAX_STEP) throw new RangeError(`${fn}: ${MAX_STEP} steps taken, the most Adam's step counter holds`);
    const step = this.#adamSteps + 1;
    this.#withGrads(fn, grads, (call) => {
      const error = core.adamStep(projectionAddresses(call, 'g_'), rate, beta1, beta2, eps, step, call.budget);
      if (error) throw call.error(error);  // nothing changed, the step is not counted
    });
    this.#adamSteps = step;
  }

  // { step, m, v }: fresh arrays in setWeights layout, zeros before the first adamStep.
  getState(core) {
    const sizes = weightSizes(this.#config);
    if (!core.hasAdamState()) return { step: this.#adamSteps, m: zeros(sizes), v: zeros(sizes) };
    const outputs = {};
    for (const [name, n] of Object.entries(sizes)) outputs[`m_${name}`] = outputs[`v_${name}`] = n;
    return this.#arena.call('MultiHeadAttention.getOptimizerState', {}, outputs, (call) => {
      for (const [w, b] of PROJECTIONS) {
        const error = core.getAdamState(this.#M.Projection[w], call.address(`m_${w}`), call.address(`m_${b}`), call.address(`v_${w}`), call.address(`v_${b}`));
        if (error) throw coreError(this.#M, error);
      }
      if (sizes.sinks) {
        const error = core.getAdamSinks(call.address('m_sinks'), call.address('v_sinks'));
        if (error) throw coreError(this.#M, error);
      }
      return { step: this.#adamSteps, m: copyAllOut(call, sizes, 'm_'), v: copyAllOut(call, sizes, 'v_') };
    });
  }

  // Every array checked (type, length, finite, v >= 0) before anything changes.
  setState(core, state) {
    const fn = 'MultiHeadAttention.setOptimizerState';
    checkKnownKeys(fn, state, STATE_KEYS, 'state', ' { step, m, v } from getOptimizerState()');
    const { step, m, v } = state;
    if (!(Number.isInteger(step) && step >= 0 && step <= MAX_STEP)) {
      throw new RangeError(`${fn}: state.step must be an integer from 0 to ${MAX_STEP}, got ${describe(step)}`);
    }
    const sizes = weightSizes(this.#config);
    const needs = ' in setWeights layout, from getOptimizerState()';
    checkArrays(fn, 'state.m', m, sizes, needs);
    checkArrays(fn, 'state.v', v, sizes, needs);
    for (const name of Object.keys(sizes)) {
      const bad = m[name].findIndex((x) => !Number.isFinite(x));
      if (bad >= 0) throw new RangeError(`${fn}: state.m.${name}[${bad}] must be finite, got ${m[name][bad]}`);
      const badV = v[name].findIndex((x) => !(x >= 0 && x < Infinity));
      if (badV >= 0) throw new RangeError(`${fn}: state.v.${name}[${badV}] must be finite and >= 0 (a second moment), got ${v[name][badV]}`);
    }
    const inputs = {};
    for (const name of Object.keys(sizes)) {
      inputs[`m_${name}`] = m[name];
      inputs[`v_${name}`] = v[name];
    }
    this.#arena.call(fn, inputs, {}, (call) => {
      const error = core.setAdamState(projectionAddresses(call, 'm_'), projectionAddresses(call, 'v_'), call.budget);
      if (error) throw call.error(error);
    });
    this.#adamSteps = step;
  }

  // Checks `grads` (the weights of a backward() result) and stages them as g_<name> for `work`.
  // The steps allocate nothing beyond that but Adam's moments and update, which its C++ entry
  // checks against the call's budget (SGD allocates nothing).
  #withGrads(fn, grads, work) {
    const sizes = weightSizes(this.#config);
    checkArrays(fn, 'grads', grads, sizes, ' (the weights of a backward() result)', 'gradients');
    const inputs = Object.fromEntries(Object.keys(sizes).map((name) => [`g_${name}`, grads[name]]));
    return this.#arena.call(fn, inputs, {}, work);
  }
}
