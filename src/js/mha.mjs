// MultiHeadAttention: a JS handle over a C++ layer that owns wasm memory (the packed weights).
// Arguments are checked here, before the heap is touched; tensors are staged through the
// library's shared heap arena. Its KV caches are the library's KVCache (kvcache.mjs).
import { coreError, kernelWorkspaceBytes } from './heap.mjs';
import { resolveStorage } from './kvcache.mjs';
import { configureCore, resolveConfig } from './mha-config.mjs';
import {
  bool, checkFloat32, checkKnownKeys, checkMask, describe, dim, given, kindOf,
} from './shapes.mjs';
import { resolveCausal } from './variants.mjs';

const FORWARD_OPTIONS = ['batch', 'seqQ', 'seqK', 'mask', 'keyPaddingMask', 'causal', 'positions', 'weightsOut', 'out', 'cache', 'train'];
const CACHE_OPTIONS = ['batch', 'maxSeq', 'dtype', 'window'];
const PROJECTIONS = [['wq', 'bq'], ['wk', 'bk'], ['wv', 'bv'], ['wo', 'bo']];
const STATE_KEYS = ['step', 'm', 'v'];
const MAX_STEP = 2 ** 31 - 1;  // a C++ int

// Length of an activation [batch, seq, features]: returns seq, inferred from the length when
// `seq` is not given.
function activationSeq(name, array, batch, features, seq, seqName) {
  if (kindOf(array) !== 'Float32Array') throw new TypeError(`${name} must be a Float32Array, got ${describe(array)}`);
  if (seq === undefined) {
    const inferred = array.length / (batch * features);
    if (!Number.isInteger(inferred) || inferred < 1) {
      throw new RangeError(`${name} has length ${array.length}, not a positive multiple of batch ${batch} × ${features} features`);
    }
    return inferred;
  }
  checkFloat32(name, array, batch * seq * features, `batch ${batch} × ${seqName} ${seq} × ${features} features`);
  return seq;
}

function learningRate(lr) {
  if (!(typeof lr === 'number' && Number.isFinite(lr) && lr > 0)) {
    throw new RangeError(`options.lr must be a positive number, got ${describe(lr)}`);
  }
  return lr;
}

// The addresses of four staged projections' arrays and the sinks (names `${prefix}wq` …
// `${prefix}bo`, `${prefix}sinks`, plus `extra`) for the C++ MhaGrads, which also carries
// weights and Adam moments.
function gradAddresses(call, extra = {}, prefix = 'g_') {
  const all = { dOut: 0, dQuery: 0, dKey: 0, dValue: 0, dSinks: call.address(`${prefix}sinks`) };
  for (const [w, b] of PROJECTIONS) {
    all[`dW${w[1]}`] = call.address(prefix + w);
    all[`dB${w[1]}`] = call.address(prefix + b);
  }
  for (const [field, name] of Object.entries(extra)) all[field] = call.address(name);
  return all;
}

// `object` holds exactly the arrays `sizes` names (name → float count), each a Float32Array.
function checkArrays(fn, label, object, sizes, needs) {
  checkKnownKeys(fn, object, Object.keys(sizes), label, needs);
  for (const [name, n] of Object.entries(sizes)) {
    if (!given(object[name])) throw new TypeError(`${fn}: ${label}.${name} is required (a Float32Array of ${n})`);
    checkFloat32(`${label}.${name}`, object[name], n, `${n} values`, fn);
  }
}

// `registry` frees the wasm memory of layers dropped without dispose(); KVCache and newCache come
// from makeKVCacheClass (kvcache.mjs), shared with lib.createKVCache().
export function makeMultiHeadAttention(M, arena, { registry, KVCache, newCache }) {
  class MultiHeadAttention {
    #core;
    #ready = false;
    #tape = null;        // the C++ training tape, made on the first forward({ train: true })
    #trained = null;     // shapes of that forward: { batch, seqQ, seqK, keyGiven, valueGiven }
    #staleBecause = null;  // the call that changed the weights after that forward, if any
    #adamSteps = 0;

    constructor(config) {
      const c = resolveConfig(config);
      Object.defineProperty(this, 'config', { value: c, enumerable: true });
      this.#core = new M.MultiHeadAttentionCore();
      registry.register(this, this.#core, this);
      try {
        configureCore(M, arena, this.#core, c);
      } catch (error) {
        this.dispose();
        throw error;
      }
    }

    /**
     * Loads wq, wk, wv, wo (nn.Linear layout [out, in]) and, with bias, bq, bk, bv, bo. Every
     * shape is checked before any is copied.
     */
    setWeights(weights) {
      const core = this.#live('setWeights');
      const { embedDim: e, kdim, vdim, numKvHeads, headDim, bias } = this.config;
      const kv = numKvHeads * headDim;
      checkKnownKeys('setWeights', weights, [...PROJECTIONS.flat(), 'sinks'], 'weights', ' with wq, wk, wv and wo');
      const shapes = {
        wq: [e, e, 'embedDim', 'embedDim'], wk: [kv, kdim, 'numKvHeads·headDim', 'kdim'],
        wv: [kv, vdim, 'numKvHeads·headDim', 'vdim'], wo: [e, e, 'embedDim', 'embedDim'],
      };
      for (const [w, b] of PROJECTIONS) {
        const [rows, cols, rowName, colName] = shapes[w];
        if (!given(weights[w])) throw new TypeError(`weights.${w} is required (a Float32Array [${rowName} ${rows} × ${colName} ${cols}])`);
        checkFloat32(`weights.${w}`, weights[w], rows * cols, `${rowName} ${rows} × ${colName} ${cols}`);
        if (bias) {
          if (!given(weights[b])) throw new TypeError(`weights.${b} is required (a Float32Array [${rows}]), since the layer has bias: true`);
          checkFloat32(`weights.${b}`, weights[b], rows, `${rowName} ${rows}`);
        } else if (given(weights[b])) {
          throw new TypeError(`weights.${b} was given, but the layer was created with bias: false`);
        }
      }
      const { sinks: hasSinks, numHeads } = this.config;
      if (hasSinks) {
        if (!given(weights.sinks)) throw new TypeError(`weights.sinks is required (a Float32Array [numHeads ${numHeads}]), since the layer has sinks: true`);
        checkFloat32('weights.sinks', weights.sinks, numHeads, `numHeads ${numHeads}`, 'setWeights');
        const bad = weights.sinks.findIndex((x) => !(Number.isFinite(x) || x === -Infinity));
        if (bad >= 0) throw new RangeError(`setWeights: weights.sinks[${bad}] is ${weights.sinks[bad]}; sinks must be finite or -Infinity`);
      } else if (given(weights.sinks)) {
        throw new TypeError('weights.sinks was given, but the layer was created without sinks: true');
      }
      // All at once (C++ packs them into new buffers): on failure the old weights stay.
      const inputs = Object.fromEntries([...PROJECTIONS.flat(), 'sinks'].map((name) => [`w_${name}`, given(weights[name]) ? weights[name] : undefined]));
      const bytes = Object.values(inputs).reduce((n, a) => n + (a ? a.byteLength : 0), 0);
      arena.call('setWeights', inputs, {}, bytes + 4 * 16 * 4 * e, (call) => {
        const error = core.setWeights(gradAddresses(call, {}, 'w_'));
        if (error) throw coreError(M, error);
      });
      this.#ready = true;
      this.#weightsChanged('setWeights');
    }

    /**
     * The weights in setWeights layout (wq, wk, wv, wo and, with bias, bq, bk, bv, bo), as
     * fresh Float32Arrays the caller owns.
     */
    getWeights() {
      const core = this.#live('getWeights');
      if (!this.#ready) throw new Error('MultiHeadAttention.getWeights: call setWeights() first');
      const sizes = this.#weightSizes();
      return arena.call('getWeights', {}, sizes, 0, (call) => {
        PROJECTIONS.forEach(([w, b], which) => {
          const error = core.getWeight(which, call.address(w), call.address(b));
          if (error) throw coreError(M, error);
        });
        if (sizes.sinks) {
          const error = core.getSinks(call.address('sinks'));
          if (error) throw coreError(M, error);
        }
        return Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, call.copyOut(name, new Float32Array(n))]));
      });
    }

    /**
     * Adam's state: `{ step, m, v }`, the steps taken and the first and second moments in
     * setWeights layout (fresh arrays; zeros before the first adamStep).
     */
    getOptimizerState() {
      const core = this.#live('getOptimizerState');
      const sizes = this.#weightSizes();
      const moments = (fill) => Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, fill(name, n)]));
      if (!core.hasAdamState()) {
        return { step: this.#adamSteps, m: moments((_, n) => new Float32Array(n)), v: moments((_, n) => new Float32Array(n)) };
      }
      const outputs = {};
      for (const [name, n] of Object.entries(sizes)) outputs[`m_${name}`] = outputs[`v_${name}`] = n;
      return arena.call('getOptimizerState', {}, outputs, 0, (call) => {
        PROJECTIONS.forEach(([w, b], which) => {
          const error = core.getAdamState(which, call.address(`m_${w}`), call.address(`m_${b}`), call.address(`v_${w}`), call.address(`v_${b}`));
          if (error) throw coreError(M, error);
        });
        if (sizes.sinks) {
          const error = core.getAdamSinks(call.address('m_sinks'), call.address('v_sinks'));
          if (error) throw coreError(M, error);
        }
        const copy = (prefix) => moments((name, n) => call.copyOut(`${prefix}${name}`, new Float32Array(n)));
        return { step: this.#adamSteps, m: copy('m_'), v: copy('v_') };
      });
    }

    /**
     * Restores a state from getOptimizerState() (of this layer or one with the same config),
     * so training resumes exactly where it stopped. Invalidates the training tape.
     */
    setOptimizerState(state) {
      const core = this.#live('setOptimizerState');
      if (!this.#ready) throw new Error('MultiHeadAttention.setOptimizerState: call setWeights() first');
      checkKnownKeys('setOptimizerState', state, STATE_KEYS, 'state', ' { step, m, v } from getOptimizerState()');
      const { step, m, v } = state;
      if (!(Number.isInteger(step) && step >= 0 && step <= MAX_STEP)) {
        throw new RangeError(`setOptimizerState: state.step must be an integer from 0 to ${MAX_STEP}, got ${describe(step)}`);
      }
      const sizes = this.#weightSizes();
      const needs = ' in setWeights layout, from getOptimizerState()';
      checkArrays('setOptimizerState', 'state.m', m, sizes, needs);
      checkArrays('setOptimizerState', 'state.v', v, sizes, needs);
      for (const name of Object.keys(sizes)) {
        const bad = m[name].findIndex((x) => !Number.isFinite(x));
        if (bad >= 0) throw new RangeError(`setOptimizerState: state.m.${name}[${bad}] must be finite, got ${m[name][bad]}`);
        const badV = v[name].findIndex((x) => !(x >= 0 && x < Infinity));
        if (badV >= 0) throw new RangeError(`setOptimizerState: state.v.${name}[${badV}] must be finite and >= 0 (a second moment), got ${v[name][badV]}`);
      }
      const inputs = {};
      for (const name of Object.keys(sizes)) {
        inputs[`m_${name}`] = m[name];
        inputs[`v_${name}`] = v[name];
      }
      const bytes = 2 * 4 * Object.values(sizes).reduce((a, b) => a + b, 0);
      arena.call('setOptimizerState', inputs, {}, bytes, (call) => {
        const error = core.setAdamState(gradAddresses(call, {}, 'm_'), gradAddresses(call, {}, 'v_'));
        if (error) throw coreError(M, error);
      });
      this.#adamSteps = step;
      this.#weightsChanged('setOptimizerState');
    }

    /**
     * y = MultiHeadAttention(query, key, value): query [batch, seqQ, embedDim], key
     * [batch, seqK, kdim] (default: query), value [batch, seqK, vdim] (default: key).
     */
    forward(query, key = null, value = null, options = {}) {
      const core = this.#live('forward');
      if (!this.#ready) throw new Error('MultiHeadAttention.forward: call setWeights() first');
      checkKnownKeys('forward', options ?? {}, FORWARD_OPTIONS);
      const opts = options ?? {};
      const { embedDim: e, kdim, vdim, numHeads, numKvHeads, headDim } = this.config;
      if (given(opts.cache) && !(opts.cache instanceof KVCache)) {
        throw new TypeError(`options.cache must be a KVCache from createCache(), got ${describe(opts.cache)}`);
      }
      const cacheCore = given(opts.cache) ? KVCache.coreFor(opts.cache, 'MultiHeadAttention.forward', this) : null;
      const cache = cacheCore ? opts.cache : null;

      const batch = dim(opts, 'batch', cache ? cache.batch : 1);
      if (cache && batch !== cache.batch) {
        throw new RangeError(`options.batch (${batch}) differs from options.cache.batch (${cache.batch})`);
      }
      const seqQ = activationSeq('query', query, batch, e, given(opts.seqQ) ? dim(opts, 'seqQ') : undefined, 'seqQ');

      let seqK;
      let seqTotal;
      if (cache) {
        if (given(key) || given(value)) throw new TypeError('forward: with options.cache, key and value must be null (they are projected from the query)');
        if (given(opts.seqK)) throw new TypeError('forward: options.seqK is not used with options.cache (keys come from the cache)');
        if (opts.causal === false) throw new RangeError('options.causal cannot be false with options.cache: cached decoding is always causal');
        if (kdim !== e || vdim !== e) throw new RangeError(`options.cache needs kdim == vdim == embedDim (this layer has kdim ${kdim}, vdim ${vdim})`);
        const length = cacheCore.length();
        if (cache.window) {
          const needed = Math.min(length + seqQ, cache.window - 1 + seqQ);
          if (needed > cache.maxSeq) {
            throw new RangeError(`options.cache is a ring (window ${cache.window}, maxSeq ${cache.maxSeq}): ${seqQ} new positions need ${needed} slots; feed at most ${cache.maxSeq - cache.window + 1} at a time`);
          }
        } else if (length + seqQ > cache.maxSeq) {
          throw new RangeError(`options.cache has room for ${cache.maxSeq - length} more positions (maxSeq ${cache.maxSeq}, length ${length}), got seqQ ${seqQ}`);
        }
        seqTotal = length + seqQ;
      } else {
        if (given(key)) {
          seqK = activationSeq('key', key, batch, kdim, given(opts.seqK) ? dim(opts, 'seqK') : undefined, 'seqK');
        } else {
          if (kdim !== e) throw new TypeError(`forward: key is required, since this layer's kdim (${kdim}) differs from embedDim (${e})`);
          seqK = given(opts.seqK) ? dim(opts, 'seqK') : seqQ;
          if (seqK !== seqQ) throw new RangeError(`options.seqK (${seqK}) must equal seqQ (${seqQ}) when key is the query`);
        }
        const valueFeatures = given(key) ? kdim : e;
        if (given(value)) activationSeq('value', value, batch, vdim, seqK, 'seqK');
        else if (vdim !== valueFeatures) throw new TypeError(`forward: value is required, since this layer's vdim (${vdim}) differs from the key's features (${valueFeatures})`);
        seqTotal = seqK;
      }

      const shape = { batch, heads: numHeads, seqQ, seqK: seqTotal };
      const mask = checkMask(opts.mask, shape);
      let keyPadding;
      if (given(opts.keyPaddingMask)) {
        keyPadding = opts.keyPaddingMask;
        if (kindOf(keyPadding) !== 'Uint8Array') {
          throw new TypeError(`options.keyPaddingMask must be a Uint8Array (1 = padding, ignored), got ${describe(keyPadding)}`);
        }
        if (keyPadding.length !== batch * seqTotal) {
          throw new RangeError(`options.keyPaddingMask has length ${keyPadding.length}, expected ${batch * seqTotal} (batch ${batch} × seqK ${seqTotal})`);
        }
      }
      const { causal, align } = resolveCausal('forward', opts.causal);
      if (cache && align === 1) {
        throw new RangeError("forward: options.causal 'upper-left' does not apply to options.cache (the new queries are its last positions: 'lower-right')");
      }
      const positions = this.#positions(opts.positions, batch, seqQ, seqK, cache);
      const train = bool(opts, 'train');
      if (train && cache) throw new TypeError('forward: options.train does not work with options.cache (a cache has no gradients)');
      const outCount = batch * seqQ * e;
      const weightsCount = batch * numHeads * seqQ * seqTotal;
      const out = given(opts.out) ? opts.out : undefined;
      if (out) checkFloat32('options.out', out, outCount, `batch ${batch} × seqQ ${seqQ} × embedDim ${e}`);
      const weightsOut = given(opts.weightsOut) ? opts.weightsOut : undefined;
      if (weightsOut) {
        checkFloat32('options.weightsOut', weightsOut, weightsCount, `batch ${batch} × numHeads ${numHeads} × seqQ ${seqQ} × seqK ${seqTotal}`);
      }

      // What the C++ side allocates: Q and the attention output, K and V (unless cached), the
      // projections' scratch and the kernel's workspace.
      const kv = numKvHeads * headDim;
      const rowsK = cache ? batch * seqQ : batch * seqK;
      const workspace = 4 * (2 * batch * seqQ * e + 2 * rowsK * kv +
        (Math.ceil(Math.max(batch * seqQ, rowsK) / 4) * 4 + 4) * Math.max(e, kdim, vdim)) +
        kernelWorkspaceBytes(seqTotal, headDim);
      const outputs = { out: outCount };
      if (weightsOut) outputs.weights = weightsCount;
      const inputs = {
        query, key: cache ? undefined : key ?? undefined, value: cache ? undefined : value ?? undefined,
        mask: mask?.array, keyPadding, positions,
      };
      return arena.call('forward', inputs, outputs, workspace, (call) => this.#runForward(call, core, cacheCore, {
        batch, seqQ, seqK, seqTotal, mask, causal, align, positions, train, key, value, out, outCount, weightsOut,
      }));
    }

    // options.positions: an Int32Array [seqQ] or [batch, seqQ] of rotary positions, for the
    // queries and (self-attention or a cache) the keys alike; only for a layer with rotary.
    #positions(positions, batch, seqQ, seqK, cache) {
      if (!given(positions)) return undefined;
      const { rotary } = this.config;
      if (!rotary) throw new TypeError('forward: options.positions are rotary positions, but this layer has no config.rotary');
      if (kindOf(positions) !== 'Int32Array') {
        throw new TypeError(`forward: options.positions must be an Int32Array ([seqQ] or [batch, seqQ]), got ${describe(positions)}`);
      }
      if (positions.length !== seqQ && positions.length !== batch * seqQ) {
        throw new RangeError(`forward: options.positions has length ${positions.length}, expected ${seqQ} ([seqQ ${seqQ}])` +
          (batch > 1 ? ` or ${batch * seqQ} ([batch ${batch}, seqQ ${seqQ}])` : ''));
      }
      if (!cache && seqK !== seqQ) {
        throw new RangeError(`forward: options.positions are used for queries and keys alike, so seqK (${seqK}) must equal seqQ (${seqQ})`);
      }
      if (rotary.maxPosition) {
        const bad = positions.findIndex((p) => p < 0 || p >= rotary.maxPosition);
        if (bad >= 0) throw new RangeError(`forward: options.positions[${bad}] is ${positions[bad]}, outside the rotary tables [0, ${rotary.maxPosition})`);
      }
      return positions;
    }

    #runForward(call, core, cacheCore, { batch, seqQ, seqK, seqTotal, mask, causal, align, positions, train, key, value, out, outCount, weightsOut }) {
      const args = {
        query: call.address('query'), key: call.address('key'), value: call.address('value'),
        out: call.address('out'), weights: call.address('weights'), mask: call.address('mask'),
        keyPadding: call.address('keyPadding'), maskType: mask ? mask.type : 0,
        maskBroadcast: mask ? mask.broadcast : 0, batch, seqQ, seqK: seqTotal, causal, align,
        positions: call.address('positions'), positionsBatchStride: positions && positions.length !== seqQ ? seqQ : 0,
      };
      let error;
      if (train) {
        this.#tape ??= new M.MhaTapeCore();
        error = core.forwardTrain(args, this.#tape);
        if (!error) {  // a failed training forward leaves the tape (and what it was for) as it was
          this.#trained = { batch, seqQ, seqK, keyGiven: given(key), valueGiven: given(value) };
          this.#staleBecause = null;
        }
      } else {
        error = cacheCore ? core.forwardCached(args, cacheCore) : core.forward(args);
      }
      if (error) throw coreError(M, error);
      if (weightsOut) call.copyOut('weights', weightsOut);
      return call.copyOut('out', out ?? new Float32Array(outCount));
    }

    /**
     * Gradients for the last forward(..., { train: true }), given dL/d(out) `[batch, seqQ,
     * embedDim]`: { dQuery, dKey?, dValue?, weights: { wq, wk, wv, wo, bq?, bk?, bv?, bo? } }.
     * dKey/dValue are returned only when key/value were given (otherwise their share is in
     * dQuery / dKey).
     */
    backward(dOut) {
      const core = this.#live('backward');
      if (!this.#trained) throw new Error('MultiHeadAttention.backward: call forward(..., { train: true }) first');
      if (this.#staleBecause) {
        throw new Error(`MultiHeadAttention.backward: the weights changed (${this.#staleBecause}()) after the forward(..., { train: true }) ` +
          'this backward would be for, so its gradients would match neither the old nor the new weights; run the training forward ' +
          'again. To accumulate gradients over several batches, run forward and backward for each batch, then step once.');
      }
      const { batch, seqQ, seqK, keyGiven, valueGiven } = this.#trained;
      const { embedDim: e, kdim, vdim } = this.config;
      checkFloat32('dOut', dOut, batch * seqQ * e, `batch ${batch} × seqQ ${seqQ} × embedDim ${e}`);
      const sizes = { dQuery: batch * seqQ * e };
      if (keyGiven) sizes.dKey = batch * seqK * kdim;
      if (valueGiven) sizes.dValue = batch * seqK * vdim;
      const weightSizes = this.#weightSizes();
      const outputs = { ...sizes };
      for (const [name, n] of Object.entries(weightSizes)) outputs[`g_${name}`] = n;
      return arena.call('backward', { dOut }, outputs, 4 * (3 * Object.values(outputs).reduce((a, b) => a + b, 0)), (call) => {
        const error = core.backward(this.#tape, gradAddresses(call, { dOut: 'dOut', dQuery: 'dQuery', dKey: 'dKey', dValue: 'dValue' }));
        if (error) throw coreError(M, error);
        const result = Object.fromEntries(Object.entries(sizes).map(([name, n]) => [name, call.copyOut(name, new Float32Array(n))]));
        result.weights = Object.fromEntries(Object.entries(weightSizes).map(([name, n]) => [name, call.copyOut(`g_${name}`, new Float32Array(n))]));
        return result;
      });
    }

    /** Plain gradient descent on the weights in wasm memory: w −= lr · grad. */
    sgdStep(grads, { lr } = {}) {
      const core = this.#live('sgdStep');
      const rate = learningRate(lr);
      this.#withGrads('sgdStep', grads, (call) => {
        const error = core.sgdStep(gradAddresses(call), rate);
        if (error) throw coreError(M, error);
      });
      this.#weightsChanged('sgdStep');
    }

    /** One Adam step on the weights in wasm memory (moments kept in the layer). */
    adamStep(grads, { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8 } = {}) {
      const core = this.#live('adamStep');
      const rate = learningRate(lr);
      for (const [name, x] of Object.entries({ beta1, beta2 })) {
        if (!(typeof x === 'number' && x >= 0 && x < 1)) throw new RangeError(`options.${name} must be in [0, 1), got ${describe(x)}`);
      }
      if (!(typeof eps === 'number' && eps > 0)) throw new RangeError(`options.eps must be a positive number, got ${describe(eps)}`);
      if (this.#adamSteps >= MAX_STEP) throw new RangeError(`adamStep: ${MAX_STEP} steps taken, the most Adam's step counter holds`);
      const step = this.#adamSteps + 1;
      this.#withGrads('adamStep', grads, (call) => {
        const error = core.adamStep(gradAddresses(call), rate, beta1, beta2, eps, step);
        if (error) throw coreError(M, error);  // nothing changed, the step is not counted
      });
      this.#adamSteps = step;
      this.#weightsChanged('adamStep');
    }

    #weightsChanged(by) {
      if (this.#trained) this.#staleBecause = by;
    }

    #weightSizes() {
      const { embedDim: e, kdim, vdim, numKvHeads, headDim, bias } = this.config;
      const kv = numKvHeads * headDim;
      const sizes = { wq: e * e, wk: kv * kdim, wv: kv * vdim, wo: e * e };
      if (bias) Object.assign(sizes, { bq: e, bk: kv, bv: kv, bo: e });
      if (this.config.sinks) sizes.sinks = this.config.numHeads;
      return sizes;
    }

    #withGrads(fn, grads, work) {
      const sizes = this.#weightSizes();
      checkKnownKeys(fn, grads, Object.keys(sizes), 'grads', ' (the weights of a backward() result)');
      for (const [name, n] of Object.entries(sizes)) {
        if (!given(grads[name])) throw new TypeError(`grads.${name} is required (a Float32Array of ${n})`);
        checkFloat32(`grads.${name}`, grads[name], n, `${n} gradients`);
      }
      const inputs = Object.fromEntries(Object.keys(sizes).map((name) => [`g_${name}`, grads[name]]));
      return arena.call(fn, inputs, {}, 4 * 3 * Object.values(sizes).reduce((a, b) => a + b, 0), work);
    }

    /**
     * A KV cache for incremental decoding with this layer: `batch` and `maxSeq` are fixed; `dtype`
     * ('float32', 'float16', 'int8') and `window` (a sliding-window ring) as for lib.createKVCache.
     */
    createCache(options) {
      this.#live('createCache');
      const fn = 'createCache';
      if (!this.#ready) throw new Error('MultiHeadAttention.createCache: call setWeights() first');
      checkKnownKeys(fn, options, CACHE_OPTIONS, 'options', ' with maxSeq');
      const batch = dim(options, 'batch', 1);
      const { dtype, window, maxSeq } = resolveStorage(fn, options, given(options.maxSeq) ? dim(options, 'maxSeq') : undefined);
      const { numKvHeads: kvHeads, headDim } = this.config;
      return newCache(fn, { batch, kvHeads, headDim, valueDim: headDim, maxSeq, dtype, window }, this);
    }

    /** Frees the layer's wasm memory (its packed weights). Harmless to call twice. */
    dispose() {
      if (!this.#core) return;
      registry.unregister(this);
      this.#core.delete();
      this.#tape?.delete();
      this.#core = this.#tape = this.#trained = null;
      this.#ready = false;
    }

    get disposed() { return this.#core === null; }

    #live(what) {
      if (!this.#core) throw new Error(`MultiHeadAttention.${what}: this layer was disposed`);
      return this.#core;
    }
  }

  return { MultiHeadAttention };
}
