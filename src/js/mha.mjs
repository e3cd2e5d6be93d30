// MultiHeadAttention: a JS handle over a C++ layer that owns wasm memory (the packed weights).
// This file is the handle's life (create, dispose, the checks every method starts with) and its
// methods, each handing over to the module that does the job: the config (mha-config.mjs), the
// weights (mha-weights.mjs), forward's arguments (mha-forward.mjs), the training tape and
// backward (mha-training.mjs), the optimizer steps and state (mha-optimizer.mjs). Its KV caches
// are the library's KVCache (kvcache.mjs). Tensors are staged through the library's heap arena.
import { conflictName, layerCacheError } from './cache-rule.mjs';
import { coreConfig, float16OverflowError, resolveStorage } from './kvcache.mjs';
import { configureCore, resolveConfig } from './mha-config.mjs';
import { forwardArgs, planForward } from './mha-forward.mjs';
import { Optimizer } from './mha-optimizer.mjs';
import { TrainingTape } from './mha-training.mjs';
import { readWeights, writeWeights } from './mha-weights.mjs';
import { checkKnownKeys, dim, given } from './shapes.mjs';

const CACHE_OPTIONS = ['batch', 'maxSeq', 'dtype', 'window'];

// `registry` frees the wasm memory of layers dropped without dispose(); KVCache and newCache come
// from makeKVCacheClass (kvcache.mjs), shared with lib.createKVCache().
export function makeMultiHeadAttention(M, arena, { registry, KVCache, newCache }) {
  class MultiHeadAttention {
    #core;
    #ready = false;      // setWeights() was called
    #tape = new TrainingTape(M, arena);
    #optimizer;

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
      this.#tape.weightsChanged('setWeights');
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
      this.#tape.weightsChanged('setOptimizerState');
    }

    /**
     * y = MultiHeadAttention(query, key, value): query [batch, seqQ, embedDim], key
     * [batch, seqK, kdim] (default: query), value [batch, seqK, vdim] (default: key).
     */
    forward(query, key = null, value = null, options = {}) {
      const fn = 'MultiHeadAttention.forward';
      const core = this.#withWeights('forward');
      const plan = planForward(this.config, (cache) => KVCache.coreFor(cache, fn, { owner: this, name: 'options.cache' }),
        query, key, value, options);
      const { cacheCore, train, weightsOut, out, outCount } = plan;
      return arena.call(fn, plan.inputs, plan.outputs, (call) => {
        const args = forwardArgs(M, call, plan);
        let error;
        if (train) error = this.#tape.forward(core, args, plan);
        else error = cacheCore ? core.forwardCached(args, cacheCore) : core.forward(args);
        if (error && cacheCore && /beyond float16's range/.test(error)) {
          throw float16OverflowError(fn, cacheCore, plan.seqTotal - plan.seqQ, (o) => `the projected ${o.key ? 'key' : 'value'}`);
        }
        if (error) throw call.error(error);
        if (weightsOut) call.copyOut('weights', weightsOut);
        return call.copyOut('out', out ?? new Float32Array(outCount));
      });
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
      this.#tape.weightsChanged('sgdStep');
    }

    /** One Adam step on the weights in wasm memory (moments kept in the layer). */
    adamStep(grads, options) {
      this.#optimizer.adamStep(this.#live('adamStep'), grads, options);
      this.#tape.weightsChanged('adamStep');
    }

    /**
     * A KV cache for incremental decoding with this layer: `batch` and `maxSeq` are fixed; `dtype`
     * ('float32', 'float16', 'bfloat16', 'int8') and `window` (a sliding-window ring) as for lib.createKVCache.
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
      const check = core.checkCache(coreConfig(M, sizes));
      const conflict = conflictName(M, check.conflict);
      if (conflict !== 'none') throw layerCacheError(fn, conflict, check, this.config, window);
      return newCache(fn, sizes, this);
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
