// MultiHeadAttention: a JS handle over a C++ layer that owns wasm memory (the packed weights).
// This file is the handle's life (create, dispose, the checks every method starts with) and its
// methods, each handing over to the module that does the job: the config (mha-config.mjs), the
// weights (mha-weights.mjs), forward's arguments (mha-forward.mjs), the training tape and
// backward (mha-training.mjs), the optimizer steps and state (mha-optimizer.mjs). Its KV caches
// are the library's KVCache (kvcache.mjs): a self-attention cache (createCache) or a
// cross-attention cache (createCrossCache). Tensors are staged through the library's heap arena.
import { conflictName, layerCacheError, staleCacheError } from './cache-rule.mjs';
import { coreConfig, refusedValueError, resolveStorage } from './kvcache.mjs';
import { configureCore, resolveConfig } from './mha-config.mjs';
import { forwardArgs, planForward } from './mha-forward.mjs';
import { Optimizer } from './mha-optimizer.mjs';
import { TrainingTape } from './mha-training.mjs';
import { readWeights, writeWeights } from './mha-weights.mjs';
import { checkFloat32, checkKnownKeys, describe, dim, given, kindOf } from './shapes.mjs';

const CACHE_OPTIONS = ['batch', 'maxSeq', 'dtype', 'window'];
const CROSS_CACHE_OPTIONS = ['batch', 'seqK', 'dtype'];

// `block`: the module's call blocks (call-block.mjs), through which the layer's cache check answers;
// `registry` frees the wasm memory of layers dropped without dispose(); KVCache and newCache come
// from makeKVCacheClass (kvcache.mjs), shared with lib.createKVCache().
export function makeMultiHeadAttention(M, arena, { block, registry, KVCache, newCache }) {
  class MultiHeadAttention {
    #core;
    #ready = false;      // setWeights() was called
    #tape = new TrainingTape(M, arena);
    #optimizer;
    // The weights' version (every change counts) and, for each cache this layer made, the version
    // its keys and values were projected with (a cache whose positions came from other weights is
    // refused).
    #weightsVersion = 0;
    #lastChange = '';
    #cacheVersions = new WeakMap();

    constructor(config) {
      const { config: c, windowSides } = resolveConfig(config);
      Object.defineProperty(this, 'config', { value: c, enumerable: true });
      this.#optimizer = new Optimizer(M, arena, c);
      this.#core = new M.MultiHeadAttentionCore();
      registry.register(this, this.#core, this);
      try {
        configureCore(M, arena, this.#core, c, windowSides);
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
      writeWeights(M, arena, this.#live('setWeights'), this.config, weights);
      this.#ready = true;
      this.#weightsChanged('setWeights');
    }

    /**
     * The weights in setWeights layout (wq, wk, wv, wo and, with bias, bq, bk, bv, bo), as
     * fresh Float32Arrays the caller owns.
     */
    getWeights() {
      return readWeights(M, arena, this.#withWeights('getWeights'), this.config);
    }

    /**
     * Adam's state: `{ step, m, v }`, the steps taken and the first and second moments in
     * setWeights layout (fresh arrays; zeros before the first adamStep).
     */
    getOptimizerState() {
      return this.#optimizer.getState(this.#live('getOptimizerState'));
    }

    /**
     * Restores a state from getOptimizerState() (of this layer or one with the same config),
     * so training resumes exactly where it stopped. Invalidates the training tape.
     */
    setOptimizerState(state) {
      this.#optimizer.setState(this.#withWeights('setOptimizerState'), state);
      this.#weightsChanged('setOptimizerState');
    }

    /**
     * y = MultiHeadAttention(query, key, value): query [batch, seqQ, embedDim], key
     * [batch, seqK, kdim] (default: query), value [batch, seqK, vdim] (default: key).
     */
    forward(query, key = null, value = null, options = {}) {
      const fn = 'MultiHeadAttention.forward';
      const core = this.#withWeights('forward');
      const plan = planForward(this.config, (cache) => this.#cacheOf(cache, fn), query, key, value, options);
      const { cacheCore, cross, train, weightsOut, out, outCount } = plan;
      const result = arena.call(fn, plan.inputs, plan.outputs, (call) => {
        const args = forwardArgs(M, call, plan);
        let error;
        if (train) error = this.#tape.forward(core, args, plan);
        else if (cross) error = core.forwardCross(args, cacheCore);
        else error = cacheCore ? core.forwardCached(args, cacheCore) : core.forward(args);
        if (error) {
          throw refusedValueError(M, fn, error, plan.seqTotal - plan.seqQ, (o) => `the projected ${o.key ? 'key' : 'value'}`) ??
            call.error(error);
        }
        if (weightsOut) call.copyOut('weights', weightsOut);
        return call.copyOut('out', out ?? new Float32Array(outCount));
      });
      if (cacheCore && !cross) this.#cacheVersions.set(options.cache, this.#weightsVersion);
      return result;
    }

    /**
     * Gradients for the last forward(..., { train: true }), given dL/d(out) `[batch, seqQ,
     * embedDim]`: { dQuery, dKey?, dValue?, weights: { wq, wk, wv, wo, bq?, bk?, bv?, bo? } }.
     * dKey/dValue are returned only when key/value were given (otherwise their share is in
     * dQuery / dKey).
     */
    backward(dOut) {
      return this.#tape.backward(this.#live('backward'), this.config, dOut);
    }

    /** Plain gradient descent on the weights in wasm memory: w −= lr · grad. */
    sgdStep(grads, options) {
      this.#optimizer.sgdStep(this.#live('sgdStep'), grads, options);
      this.#weightsChanged('sgdStep');
    }

    /** One Adam step on the weights in wasm memory (moments kept in the layer). */
    adamStep(grads, options) {
      this.#optimizer.adamStep(this.#live('adamStep'), grads, options);
      this.#weightsChanged('adamStep');
    }

    /**
     * A KV cache for incremental decoding with this layer: `batch` and `maxSeq` are fixed; `dtype`
     * ('float32', 'float16', 'bfloat16', 'int8', 'int4') and `window` (a sliding-window ring) as for lib.createKVCache.
     * A ring must keep every key the layer's window sees (window ≥ config.window's left side + 1).
     * It depends only on the config, so it may be made before setWeights().
     */
    createCache(options) {
      const core = this.#live('createCache');
      const fn = 'MultiHeadAttention.createCache';
      checkKnownKeys(fn, options, CACHE_OPTIONS, 'options', ' with maxSeq');
      const size = (name, fallback) => dim(options, name, fallback, 'options', fn);
      const batch = size('batch', 1);
      const { dtype, window, maxSeq } = resolveStorage(fn, options, given(options.maxSeq) ? size('maxSeq') : undefined);
      const { numKvHeads: kvHeads, headDim } = this.config;
      const sizes = { batch, kvHeads, headDim, valueDim: headDim, maxSeq, dtype, window };
      const check = block.checkLayerCache(core, coreConfig(M, sizes));
      const conflict = conflictName(M, check.conflict);
      if (conflict !== 'none') throw layerCacheError(fn, conflict, check, this.config, window);
      return newCache(fn, sizes, this);
    }

    /**
     * A cross-attention cache (the decoders of Whisper, T5, BART; Hugging Face's
     * EncoderDecoderCache.cross_attention_cache): key `[batch, seqK, kdim]` (the encoder's
     * output) and value `[batch, seqK, vdim]` (default: the key) projected once by the layer's
     * wk and wv (rotary: keys at 0 … seqK − 1) into a cache of exactly seqK positions, stored as
     * `dtype`. `forward(query, null, null, { cache })` then attends to them — not causal unless
     * asked, no positions appended — and equals `forward(query, key, value)` with the same options.
     */
    createCrossCache(key, value = null, options = {}) {
      const fn = 'MultiHeadAttention.createCrossCache';
      const core = this.#withWeights('createCrossCache');
      checkKnownKeys(fn, options ?? {}, CROSS_CACHE_OPTIONS);
      const opts = options ?? {};
      const size = (name, fallback) => dim(opts, name, fallback, 'options', fn);
      const batch = size('batch', 1);
      const { kdim, vdim, numKvHeads: kvHeads, headDim, rotary } = this.config;
      if (kindOf(key) !== 'Float32Array') {
        throw new TypeError(`${fn}: key must be a Float32Array [batch, seqK, kdim] (the encoder's output), got ${describe(key)}`);
      }
      let seqK;
      if (given(opts.seqK)) seqK = size('seqK');
      else {
        seqK = key.length / (batch * kdim);
        if (!Number.isInteger(seqK) || seqK < 1) {
          throw new RangeError(`${fn}: key has length ${key.length}, not a positive multiple of batch ${batch} × kdim ${kdim}`);
        }
      }
      checkFloat32('key', key, batch * seqK * kdim, `batch ${batch} × seqK ${seqK} × kdim ${kdim}`, fn);
      if (given(value)) checkFloat32('value', value, batch * seqK * vdim, `batch ${batch} × seqK ${seqK} × vdim ${vdim}`, fn);
      else if (vdim !== kdim) throw new TypeError(`${fn}: value is required, since this layer's vdim (${vdim}) differs from its kdim (${kdim})`);
      if (rotary?.maxPosition && seqK > rotary.maxPosition) {
        throw new RangeError(`${fn}: rotary positions 0 … ${seqK - 1} (the keys) are outside the rotary tables [0, ${rotary.maxPosition}) ` +
          '(config.rotary.cos and sin [maxPosition, rotaryDim/2]); give longer tables');
      }
      const { dtype } = resolveStorage(fn, { dtype: opts.dtype }, seqK);
      const cache = newCache(fn, { batch, kvHeads, headDim, valueDim: headDim, maxSeq: seqK, dtype, window: 0 }, this, true);
      try {
        const cacheCore = KVCache.coreFor(cache, fn, { owner: this });
        arena.call(fn, { key, value: value ?? undefined }, {}, (call) => {
          const error = core.fillCrossCache(cacheCore, call.address('key'), call.address('value'), batch, seqK, call.budget);
          if (error) {
            throw refusedValueError(M, fn, error, 0, (o) => `the projected ${o.key ? 'key' : 'value'}`) ?? call.error(error);
          }
        });
      } catch (error) {
        cache.dispose();
        throw error;
      }
      this.#cacheVersions.set(cache, this.#weightsVersion);
      return cache;
    }

    /** Frees the layer's wasm memory (its packed weights). Harmless to call twice. */
    dispose() {
      if (!this.#core) return;
      registry.unregister(this);
      this.#core.delete();
      this.#tape.dispose();
      this.#core = null;
      this.#ready = false;
    }

    get disposed() { return this.#core === null; }

    // `{ core, cross }` of a cache this layer made (`fn` names the method in errors), unless its
    // keys and values were projected with weights the layer no longer has.
    #cacheOf(cache, fn) {
      const core = KVCache.coreFor(cache, fn, { owner: this, name: 'options.cache' });
      const cross = KVCache.isCross(cache);
      const version = this.#cacheVersions.get(cache);
      if (version !== undefined && version !== this.#weightsVersion && core.length() > 0) throw staleCacheError(fn, cross, this.#lastChange);
      return { core, cross };
    }

    // Called by everything that changes the weights (`by` names it).
    #weightsChanged(by) {
      this.#weightsVersion++;
      this.#lastChange = by;
      this.#tape.weightsChanged(by);
    }

    // The C++ core of a layer not yet disposed.
    #live(what) {
      if (!this.#core) throw new Error(`MultiHeadAttention.${what}: this layer was disposed`);
      return this.#core;
    }

    // The same, for a method that needs the weights set.
    #withWeights(what) {
      const core = this.#live(what);
      if (!this.#ready) throw new Error(`MultiHeadAttention.${what}: call setWeights() first`);
      return core;
    }
  }

  return { MultiHeadAttention };
}
