// Types for attention-wasm. Hand-written (Emscripten 3.1.6 cannot emit them) and type-checked
// in the tests with `tsc --noEmit --strict` from ESM and CommonJS consumers.

declare global {
  // WebAssembly's types come with TypeScript's DOM library; this empty declaration merges with
  // them there and keeps Node projects without "dom" compiling.
  namespace WebAssembly {
    interface Module {}
  }
}

/**
 * Options of {@link loadAttention}. The package has eight builds — SIMD128 or relaxed SIMD
 * (fused multiply-add), single-threaded or threaded, for inference or with the layers:
 * `attn.wasm`, `attn-relaxed.wasm`, `attn-mt.wasm`, `attn-relaxed-mt.wasm`, and the same with
 * `attn-layers` in place of `attn` — and picks one from `simd`, `threads` and `layers`.
 */
export interface LoadOptions {
  /**
   * The `.wasm` of one build, loaded from elsewhere (a CDN, an app's asset folder): a string or
   * `URL`; in Node also a path or `file:` URL. The loader recognises which build the file is and
   * uses it; options that contradict it (`threads: 1` with a threaded file, `simd: 'simd128'`
   * with a relaxed one), or an engine or page that cannot run it, are an error. Not with
   * `wasmBinary` or `baseUrl`.
   */
  wasmUrl?: string | URL | null;
  /** The same as `wasmUrl`, as bytes or an already compiled module. */
  wasmBinary?: ArrayBuffer | ArrayBufferView | WebAssembly.Module | null;
  /**
   * A folder that holds a copy of the package's `dist/` files (all builds): the build is chosen
   * as usual and its `.wasm` — in browsers, for a threaded build, also its worker script and the
   * glue the workers import — is taken from there. A worker script from another origin is started
   * through a `blob:` URL (a CSP then needs `worker-src blob:`). Not with `wasmUrl`/`wasmBinary`.
   */
  baseUrl?: string | URL | null;
  /**
   * `'auto'` (default): relaxed SIMD where the engine runs it (Chrome/Edge 114+, Firefox 146+; not
   * Safari as of this writing; Node with `--experimental-wasm-relaxed-simd`), else SIMD128. `'relaxed'` asks for it (where it cannot
   * run: one warning that says how to enable it, and SIMD128; or an Error with `strict`);
   * `'simd128'` forces the baseline. Relaxed results differ from SIMD128 ones in the last bits.
   */
  simd?: 'auto' | 'relaxed' | 'simd128' | null;
  /**
   * Threads for the kernel. `'auto'` (default): as many as cores (up to `maxThreads`) where
   * threads can run — Node, and browser pages that are cross-origin isolated and have
   * SharedArrayBuffer (WebKitGTK gives none even then) — else 1. In browsers the cores are
   * `navigator.hardwareConcurrency`, except that WebKit (Safari, iOS browsers) reports 4 for any
   * machine with fewer than 8 cores: 'auto' takes 2 there, never more threads than cores. A number
   * asks for exactly that many (where they cannot run: a warning, once, and 1 thread, or an
   * Error with `strict`). `1` forces a single-threaded build.
   */
  threads?: 'auto' | number | null;
  /** Cap for `threads: 'auto'`. Default 8. */
  maxThreads?: number | null;
  /**
   * `true` loads a layers build: the inference build's API and the layer and training API
   * ({@link AttentionLayersLibrary.MultiHeadAttention}, {@link AttentionLayersLibrary.attentionBackward}),
   * about 20 KB more to download (gzipped). Default `false`: the inference build — attention,
   * attention weights, KV caches, `linear` and `rotary` — whose `MultiHeadAttention` and
   * `attentionBackward` throw a TypeError that says to load with `layers: true`.
   * {@link loadAttention} shares one instance per feature set.
   */
  layers?: boolean | null;
  /** Reject instead of warning when the requested threads or relaxed SIMD cannot run. Default false. */
  strict?: boolean | null;
  /**
   * Warm the kernel up before resolving (default true): a few small calls, until V8 has compiled
   * the hot functions with its optimising compiler, so the first real call runs at full speed
   * (without it the first calls run several times slower). Takes at most ~100 ms.
   */
  warmUp?: boolean | null;
}

/** What was loaded. */
export interface LibraryInfo {
  /** The package version, e.g. `'0.2.0'`. */
  readonly version: string;
  /** The build's SIMD level: `'relaxed-simd'` (fused multiply-add) or `'simd128'`. */
  readonly simd: 'relaxed-simd' | 'simd128';
  /** Why that level, e.g. `'auto: relaxed SIMD runs here'` or `'auto: this engine has no relaxed SIMD'`. */
  readonly simdReason: string;
  /** Threads the kernel uses (the calling thread included). */
  readonly threads: number;
  /**
   * Why that many, e.g. `'auto: 2 of 2 cores'`, `'not cross-origin isolated (no SharedArrayBuffer)'` or
   * `'cross-origin isolated, but this browser gives pages no SharedArrayBuffer'`.
   */
  readonly threadsReason: string;
  /** Whether this is a layers build (`layers: true`): it has `MultiHeadAttention` and `attentionBackward`. */
  readonly layers: boolean;
}

/**
 * Memory order of query, key, value and output:
 * - `'bhsd'`: `[batch, heads, seq, dim]` (default)
 * - `'bshd'`: `[batch, seq, heads, dim]` (what a `[batch, seq, heads·dim]` projection gives)
 *
 * Masks and weights are always `[batch, heads, seqQ, seqK]`.
 */
export type Layout = 'bhsd' | 'bshd';

/**
 * The masks of a call: at most one of `mask`, `attendMask` and `blockMask`, and at most one of
 * `keyPaddingMask` and `attentionMask`; they combine with each other and with `causal` and
 * `window`. A boolean mask means opposite things in PyTorch, so its option says which meaning it
 * has; a `Uint8Array` given as `mask` is a TypeError. A query row whose every key is masked gives
 * zeros (never NaN).
 *
 * A mask has the shape of a PyTorch mask that broadcasts to `[batch, heads, seqQ, seqK]`
 * (dimensions aligned from the right, each 1 or the size there; the last is seqK): `[seqQ, seqK]`,
 * `[batch, 1, 1, seqK]` (padding), `[batch, 1, seqQ, seqK]`, `[heads, seqQ, seqK]` (a position
 * bias), `[batch, heads, seqQ, seqK]`, … and nn.MultiheadAttention's `[batch·heads, seqQ, seqK]`.
 * Without `maskShape` its length says which, and a length two shapes share (batch equal to heads
 * or to seqQ) is a RangeError that asks for `maskShape`. Broadcast masks are read in place, never
 * copied per batch entry or head.
 */
export interface MaskOptions {
  /** Added to the scaled scores (`-Infinity` masks a key): a float `attn_mask`, Hugging Face's 4-D float masks. */
  mask?: Float32Array | null;
  /**
   * Boolean, **1 = may attend**, 0 = masked: `torch.nn.functional.scaled_dot_product_attention`'s
   * boolean `attn_mask`, Hugging Face's 4-D boolean masks.
   */
  attendMask?: Uint8Array | null;
  /** Boolean, **1 = masked**, 0 = may attend: `torch.nn.MultiheadAttention`'s (and `nn.Transformer`'s) boolean `attn_mask`. */
  blockMask?: Uint8Array | null;
  /**
   * The shape of `mask`, `attendMask` or `blockMask`, as PyTorch gives it (`list(mask.shape)`),
   * e.g. `[batch, 1, 1, seqK]` or `[heads, seqQ, seqK]`. Required when the mask's length fits two
   * shapes.
   */
  maskShape?: readonly number[] | null;
  /** `[batch, seqK]`, **1 = padding: this key is ignored** — PyTorch's boolean `key_padding_mask`. */
  keyPaddingMask?: Uint8Array | null;
  /** `[batch, seqK]`, **1 = a real token**, 0 = padding — Hugging Face's `attention_mask`. */
  attentionMask?: Uint8Array | null;
}

/** Shape options shared by {@link AttentionLibrary.attention} and {@link AttentionLibrary.attentionWeights}. */
export interface AttentionShapeOptions extends MaskOptions {
  /** Batch size. Default 1. */
  batch?: number | null;
  /** Query heads. Required. */
  heads: number;
  /**
   * Key/value heads; `heads` must be a multiple. Query head `h` uses kv head
   * `Math.floor(h / (heads / kvHeads))` (grouped-query attention; 1 = multi-query). Default `heads`.
   */
  kvHeads?: number | null;
  /** Query sequence length. Required. */
  seqQ: number;
  /** Key/value sequence length. Default `seqQ`. */
  seqK?: number | null;
  /** Size of each query and key vector. Required. */
  headDim: number;
  /** Memory order of the tensors. Default `'bhsd'`. */
  layout?: Layout | null;
  /** Multiplies Q·Kᵀ before the mask is added. Default `1 / Math.sqrt(headDim)`; `0` means 0. */
  scale?: number | null;
  /**
   * Causal masking. `true` ≡ `'lower-right'`: query `i` attends key `j` iff `j <= i + (seqK - seqQ)`
   * (flash-attention's alignment, the one that fits a KV cache, whose queries are its last `seqQ`
   * positions). `'upper-left'`: `j <= i` (`torch.tril` of the `[seqQ, seqK]` matrix; PyTorch SDPA
   * `is_causal=True`, the ONNX `Attention` operator without a past). The two agree when
   * `seqQ == seqK`. Names follow `torch.nn.attention.bias.CausalVariant`. Default false, also over
   * a cache: only a layer's forward with its cache is causal by itself.
   */
  causal?: boolean | 'lower-right' | 'upper-left' | null;
  /**
   * Local (sliding-window) attention, flash-attention's `window_size`: query `i` sees key `j` iff
   * `i + off − left <= j <= i + off + right`, with `off = 0` for `causal: 'upper-left'` and
   * `seqK − seqQ` otherwise. Sides are integers ≥ 0 or `Infinity` (`[Infinity, Infinity]` = no
   * limit); intersects `causal`. Hugging Face's `sliding_window = W` is `[W − 1, 0]` (Mistral's
   * 4096: `{ causal: true, window: [4095, 0] }`); over a ring cache it is required, with a left
   * side at most the ring's `window − 1`.
   * Key blocks outside every row's window are skipped, so a window costs about its width.
   */
  window?: [number, number] | null;
  /**
   * Logit soft-capping (Gemma 2: 50): each scaled score `s` becomes `softcap · tanh(s / softcap)`
   * before ALiBi and masks. `> 0`; absent or 0 = off.
   */
  softcap?: number | null;
  /**
   * ALiBi slopes (BLOOM, MPT), one per query head `[heads]` or per batch entry and head
   * `[batch, heads]` (told apart by length): adds `−slope · |i + off − j|` to each score (after
   * softcap, before masks), `off` as for `window`.
   */
  alibiSlopes?: Float32Array | null;
  /**
   * Attention sinks (gpt-oss; onnxruntime's `head_sink`), one logit per query head `[heads]`, in
   * the units of the scaled scores: each joins its rows' softmax denominator without contributing
   * a value, `w_ij = exp(s_ij) / (exp(sink_h) + Σ_k exp(s_ik))`. Weight rows then sum to less
   * than 1; a fully masked row gives zeros and an lse of `sink_h`. `-Infinity` = no sink.
   */
  sinks?: Float32Array | null;
}

/** Options of {@link AttentionLibrary.attention}. */
export interface AttentionOptions extends AttentionShapeOptions {
  /** Size of each value vector (and output vector). Default `headDim`. */
  valueDim?: number | null;
  /** Caller-owned output `[batch, heads, seqQ, valueDim]` (layout order); filled completely and returned. */
  out?: Float32Array | null;
  /** Caller-owned array `[batch, heads, seqQ, seqK]` that receives the softmax weights. */
  weightsOut?: Float32Array | null;
  /**
   * Caller-owned array `[batch, heads, seqQ]` that receives each row's log-sum-exp of its scaled,
   * masked scores (natural log; `-Infinity` for a row with no visible key). Pass it, with the
   * output, to {@link AttentionLayersLibrary.attentionBackward} to skip recomputing them.
   */
  lseOut?: Float32Array | null;
}

/**
 * Options of {@link AttentionLibrary.attention} over a {@link KVCache}: as over arrays, but
 * `batch`, `kvHeads`, `headDim`, `valueDim` and `seqK` (= `cache.length`) come from the cache
 * (given, they must match it), and `causal` is `true` (≡ `'lower-right'`) or false: the queries
 * are the cache's last `seqQ` positions, so `'upper-left'` does not apply.
 */
export interface CachedAttentionOptions extends Omit<AttentionOptions, 'causal' | 'headDim'> {
  /** Causal masking, lower-right: query `i` (of the last `seqQ`) sees the keys up to its own position. Default false. */
  causal?: boolean | 'lower-right' | null;
  /** The cache's; given, it must match. */
  headDim?: number | null;
}

/** Options of {@link AttentionLayersLibrary.attentionBackward}. */
export interface AttentionBackwardOptions extends AttentionShapeOptions {
  /** Size of each value vector (and output vector). Default `headDim`. */
  valueDim?: number | null;
  /** The forward call's `lseOut`; with `out`, the backward skips a forward pass. */
  lse?: Float32Array | null;
  /** The forward call's output; goes with `lse`. */
  out?: Float32Array | null;
}

/** What {@link AttentionLayersLibrary.attentionBackward} returns: gradients in the layouts of their tensors. */
export interface AttentionGradients {
  dQuery: Float32Array;
  /** Summed over the query heads that share each kv head. */
  dKey: Float32Array;
  dValue: Float32Array;
  /** `[heads]`, summed over batch and rows; only when `options.sinks` was given. */
  dSinks?: Float32Array;
}

/** Options of {@link AttentionLibrary.attentionWeights}. */
export interface AttentionWeightsOptions extends AttentionShapeOptions {
  /** Caller-owned array `[batch, heads, seqQ, seqK]` to fill and return. */
  out?: Float32Array | null;
}

/**
 * The loaded library. Every function is synchronous, copies its inputs (which it never modifies)
 * and returns arrays owned by the caller: a later call never overwrites them. This is the
 * inference build's (`loadAttention()`); {@link AttentionLayersLibrary} (`loadAttention({ layers:
 * true })`) adds the layer and training API. An inference instance has `MultiHeadAttention` and
 * `attentionBackward` too, as functions that throw (so `'MultiHeadAttention' in lib` is true of
 * either): tell them apart by `lib.info.layers`, e.g. with a guard
 * `(lib): lib is AttentionLayersLibrary => lib.info.layers`.
 *
 * Bad arguments throw before any work: `TypeError` for a wrong type or a missing required
 * option, `RangeError` for a wrong value or length; the message names the argument and gives
 * the expected and the actual value. The library keeps working after an error.
 */
export interface AttentionLibrary {
  readonly info: LibraryInfo & { readonly layers: false };

  /**
   * Throws a `TypeError` on this inference instance, saying to load with `loadAttention({ layers:
   * true })`, whose {@link AttentionLayersLibrary.MultiHeadAttention} is the layer.
   */
  readonly MultiHeadAttention: new (...args: never[]) => never;

  /**
   * Throws a `TypeError` on this inference instance, saying to load with `loadAttention({ layers:
   * true })`, which has {@link AttentionLayersLibrary.attentionBackward}.
   */
  attentionBackward(...args: never[]): never;

  /**
   * `out = softmax(scale · Q·Kᵀ + mask) · V`, computed block by block with an online softmax
   * (memory stays linear in the sequence lengths unless `weightsOut` is asked for).
   *
   * Over a {@link KVCache} (`attention(query, cache, null, options)`): `kvHeads`, `headDim`,
   * `valueDim`, `batch` and `seqK` (= `cache.length`) come from the cache (they may be given,
   * and must then match); the queries `[batch, heads, seqQ, headDim]` are its last `seqQ`
   * positions, so `causal: true` is lower-right (`'upper-left'` does not apply). The cache never
   * changes what is computed: `causal` and `window` are this call's, exactly as with arrays — not
   * causal unless `causal: true`, no window unless `window` is given. A ring (`window: W`) keeps
   * only the `W − 1` positions before each query, so over a ring `window` is required, with a left
   * side ≤ `W − 1` (Hugging Face's `sliding_window = W` is `window: [W − 1, 0]`, causal by itself);
   * a wider or missing window is a RangeError naming both. Every option works, including the
   * score variants, `weightsOut` and `lseOut`.
   *
   * (One signature, not two overloads: a mistake in a call over a cache is then reported as that
   * mistake, not as the cache failing to be a Float32Array.)
   *
   * @param query `[batch, heads, seqQ, headDim]` (`'bhsd'`) or `[batch, seqQ, heads, headDim]` (`'bshd'`)
   * @param key `[batch, kvHeads, seqK, headDim]` or `[batch, seqK, kvHeads, headDim]`, or a {@link KVCache}
   * @param value `[batch, kvHeads, seqK, valueDim]` or `[batch, seqK, kvHeads, valueDim]`; `null` with a cache
   * @returns the output `[batch, heads, seqQ, valueDim]` or `[batch, seqQ, heads, valueDim]`
   *   (`options.out` when given)
   */
  attention<Key extends Float32Array | KVCache>(query: Float32Array, key: Key, value: Key extends KVCache ? null : Float32Array,
    options: Key extends KVCache ? CachedAttentionOptions : AttentionOptions): Float32Array;

  /** A standalone {@link KVCache} for your own projections (see {@link KVCacheOptions}). */
  createKVCache(options: KVCacheOptions & KVCacheLength): KVCache;

  /**
   * The softmax matrix `softmax(scale · Q·Kᵀ + mask)`, `[batch, heads, seqQ, seqK]`.
   * @param query as in {@link AttentionLibrary.attention}
   * @param key as in {@link AttentionLibrary.attention}
   */
  attentionWeights(query: Float32Array, key: Float32Array, options: AttentionWeightsOptions): Float32Array;

  /**
   * Bytes of wasm memory in use: `wasmMemory` is the module's whole linear memory (it grows for
   * large calls and never shrinks, as WebAssembly memory cannot); `arena` is the block the
   * library keeps for copying call arguments in and results out (reused by every call; between
   * calls at most 16 MiB: a call that needs more gets a block that is freed when it returns);
   * `heapInUse` is what is currently allocated inside the module (weights, caches, the arena),
   * which returns to its level when objects are disposed; `wasmMemoryLimit` is the most
   * `wasmMemory` can grow to (4 GiB less one 64 KiB page, all of wasm32, in every build; one
   * block — a cache's keys or values, a call's arguments and results — is at most 2 GiB − 1 MiB).
   * Throws once the instance has let go of its memory (see {@link AttentionLibrary.dispose}).
   */
  memoryUsage(): { wasmMemory: number; arena: number; heapInUse: number; wasmMemoryLimit: number };

  /**
   * Frees the arena's block (see {@link AttentionLibrary.memoryUsage}) so its memory can serve
   * a large cache or weights; the next call allocates a new one. Returns the bytes freed. Wasm
   * memory itself never shrinks: freed memory is reused inside the module, not returned to the
   * browser or the OS. Out-of-memory errors say the sizes (asked, in use, limit) and suggest this.
   * 0 once the instance has let go of its memory.
   */
  trim(): number;

  /**
   * A linear layer, `out = input·Wᵀ + bias` with `weight` `[outFeatures, inFeatures]` row-major
   * (`nn.Linear` layout), on `input` `[rows, inFeatures]` (rows inferred from the length unless
   * given). The same packed SIMD GEMM as the layer's projections; it packs the weight per call,
   * so a layer that is called repeatedly should use {@link MultiHeadAttention}.
   */
  linear(input: Float32Array, weight: Float32Array, options: LinearOptions): Float32Array;

  /**
   * Rotary position embeddings (RoPE) on queries or keys: each pair (x1, x2) of a row at position
   * p turns by the angle p·θ_c, `(x1, x2) → (x1·cos − x2·sin, x1·sin + x2·cos)`, so that q·k then
   * depends on the positions only through their difference. The angle is computed in double
   * precision and its cos/sin rounded to float once; each output is within 2⁻²²·(|x1| + |x2|) of
   * the exact rotation. Pairing, partial rotary, positions and tables: see {@link RotaryOptions}.
   * Rotating by −p undoes a rotation by p (that is also its gradient).
   *
   * @param x `[batch, heads, seq, headDim]` (`'bhsd'`) or `[batch, seq, heads, headDim]` (`'bshd'`)
   * @returns the rotated tensor, laid out like x (`options.out` when given)
   */
  rotary(x: Float32Array, options: RotaryOptions): Float32Array;

  /**
   * Ends the worker threads and retires this instance: later calls throw, and the next
   * {@link loadAttention} loads afresh. Layers and caches already made keep working, single-
   * threaded, until disposed; once they are, the instance lets go of its wasm memory, which the
   * engine frees when it collects garbage, even while the app still holds this object and the
   * disposed layers and caches. Not needed for a Node process to exit. Harmless to call twice.
   */
  dispose(): void;
}

/**
 * What `loadAttention({ layers: true })` resolves to: everything {@link AttentionLibrary} has,
 * and the layer and training API.
 */
export interface AttentionLayersLibrary extends Omit<AttentionLibrary, 'info' | 'MultiHeadAttention' | 'attentionBackward'> {
  readonly info: LibraryInfo & { readonly layers: true };

  /**
   * Gradients of a loss through {@link AttentionLibrary.attention}: given `dOut` = dL/d(out)
   * (shaped like the output), returns dL/d(query), dL/d(key) and dL/d(value), shaped like their
   * tensors; with grouped K/V heads the key and value gradients sum over the query heads that
   * share them. Same shape options as `attention`; `lse` and `out` from the forward call (its
   * `lseOut` and its output) let it skip a forward pass. The probabilities are recomputed block by
   * block (extra memory O(seqK · headDim)); masked keys and fully masked rows get zero gradient.
   */
  attentionBackward(query: Float32Array, key: Float32Array, value: Float32Array, dOut: Float32Array,
    options: AttentionBackwardOptions): AttentionGradients;

  /** A multi-head attention layer with learned projections (see {@link MultiHeadAttention}). */
  readonly MultiHeadAttention: MultiHeadAttentionConstructor;
}

/**
 * Options of {@link AttentionLibrary.rotary}. Row `t` of batch entry `b` is at position
 * `positionOffset + t`, or `positions[t]` / `positions[b, t]`.
 */
export interface RotaryOptions {
  /** Batch size. Default 1. */
  batch?: number | null;
  /** Heads. Required. */
  heads: number;
  /** Positions (rows) per head. Required. */
  seq: number;
  /** Size of each row. Required. */
  headDim: number;
  /** `'bhsd'`: x is `[batch, heads, seq, headDim]` (default); `'bshd'`: `[batch, seq, heads, headDim]`. */
  layout?: Layout | null;
  /**
   * Dimensions that rotate: even, at most `headDim`; the rest pass through unchanged (partial
   * rotary: GPT-NeoX, Phi). Default `headDim`.
   */
  rotaryDim?: number | null;
  /**
   * θ_c = base^(−2c / rotaryDim) for pair c; the angle is position·θ_c, formed in double precision.
   * Finite and > 0. Default 10000 (Llama 3: 500000). Not with `cos`/`sin`.
   */
  base?: number | null;
  /**
   * Pairing. `false` (default): dimension c with c + rotaryDim/2, as Hugging Face transformers'
   * `rotate_half` (Llama, Mistral, Qwen, Gemma, GPT-NeoX, Phi). `true`: 2c with 2c + 1 (GPT-J,
   * Meta's original Llama code and checkpoints).
   */
  interleaved?: boolean | null;
  /** Position of row 0: an integer, with positionOffset + seq − 1 within int32. Default 0. Not with `positions`. */
  positionOffset?: number | null;
  /** Position of every row: `[seq]` (shared by the batch) or `[batch, seq]`. Any int32 without tables. */
  positions?: Int32Array | null;
  /**
   * Precomputed tables `[maxPosition, rotaryDim / 2]`: row p holds cos and sin of position p's
   * angles (Llama 3 scaling, YaRN, dynamic NTK, or anything else), used exactly as given in place
   * of `base`. Both or neither; every position must be in [0, maxPosition) (else a RangeError).
   */
  cos?: Float32Array | null;
  /** See `cos`. */
  sin?: Float32Array | null;
  /** Caller-owned output shaped like x, filled and returned; may be x itself (in place). */
  out?: Float32Array | null;
}

/** Options of {@link AttentionLibrary.linear}. */
export interface LinearOptions {
  inFeatures: number;
  outFeatures: number;
  /** Rows of the input. Default: input.length / inFeatures. */
  rows?: number | null;
  /** `[outFeatures]`, added to every row. */
  bias?: Float32Array | null;
  /** Caller-owned output `[rows, outFeatures]`, filled and returned. */
  out?: Float32Array | null;
}

/** Which projections of a {@link MultiHeadAttention} have a bias (each default true, as `nn.Linear`'s `bias=`). */
export interface MultiHeadAttentionBiases {
  q?: boolean | null;
  k?: boolean | null;
  v?: boolean | null;
  o?: boolean | null;
}

/** Configuration of a {@link MultiHeadAttention} layer. */
export interface MultiHeadAttentionConfig {
  /** E: features of the query input and of the output. Required. */
  embedDim: number;
  /** Query heads. Required. */
  numHeads: number;
  /** Key/value heads (grouped-query attention); divides `numHeads`. Default `numHeads`. */
  numKvHeads?: number | null;
  /**
   * Features per head. Default `embedDim / numHeads` (then `embedDim` must be a multiple of
   * `numHeads`); any size when given: Q and the attention output have `numHeads × headDim`
   * features, which may differ from `embedDim` (Qwen3, Gemma: Hugging Face's `head_dim`).
   */
  headDim?: number | null;
  /** Features of the key input. Default `embedDim`. */
  kdim?: number | null;
  /** Features of the value input. Default `embedDim`. */
  vdim?: number | null;
  /**
   * Biases: `true`/`false` for all four projections, or per projection `{ q, k, v, o }` (each
   * default true; Qwen2: `{ o: false }`, Whisper: `{ k: false }`). Default true.
   */
  bias?: boolean | MultiHeadAttentionBiases | null;
  /** Multiplies Q·Kᵀ: a finite number > 0. Default `1 / √headDim` (T5: 1; Gemma: `query_pre_attn_scalar ** -0.5`). */
  scale?: number | null;
  /**
   * Rotary embeddings on the projected Q and K, before attention and before caching (Llama,
   * Qwen, Mistral: `{}` or `{ base: 500000 }`; GPT-J: `interleaved: true`; GPT-NeoX/Phi: a
   * partial `rotaryDim`), as {@link AttentionLibrary.rotary}. Positions: keys at 0…, queries at
   * `off + t`; with a cache they continue from its length; or `forward`'s `positions`. The
   * backward rotates the gradients back.
   */
  rotary?: MultiHeadAttentionRotary | null;
  /** A sliding window as in `attention()` (Mistral: `[4095, 0]` with causal). */
  window?: [number, number] | null;
  /** Logit soft-capping as in `attention()` (Gemma 2: 50). */
  softcap?: number | null;
  /**
   * ALiBi: `true` for BLOOM's slopes (transformers' `build_alibi_tensor`: `2^(−8(h+1)/H)` for a
   * power-of-two H), or your own `Float32Array [numHeads]`.
   */
  alibi?: boolean | Float32Array | null;
  /**
   * A learned sink logit per head (gpt-oss): a parameter like the weights — `sinks` in
   * setWeights/getWeights, in the gradients and the optimizer steps and state.
   */
  sinks?: boolean | null;
}

/** Rotary options of a {@link MultiHeadAttentionConfig}: as {@link RotaryOptions}. */
export interface MultiHeadAttentionRotary {
  /** Rotated dimensions: even, ≤ headDim. Default headDim. */
  rotaryDim?: number | null;
  /** θ_c = base^(−2c/rotaryDim). Default 10000; excludes cos/sin. */
  base?: number | null;
  /** GPT-J pairing (2c with 2c+1) instead of rotate_half (c with c + rotaryDim/2). Default false. */
  interleaved?: boolean | null;
  /** Tables `[maxPosition, rotaryDim/2]` used in place of base (Llama 3 scaling, YaRN); give both. */
  cos?: Float32Array | null;
  sin?: Float32Array | null;
}

/**
 * The layer's weights in `nn.Linear` layout: `W` is `[out, in]` row-major and `y = x·Wᵀ + b`.
 * With q = numHeads · headDim (E unless `headDim` was given) and kv = numKvHeads · headDim: wq
 * `[q, E]`, wk `[kv, kdim]`, wv `[kv, vdim]`, wo `[E, q]`; biases bq `[q]`, bk `[kv]`, bv `[kv]`,
 * bo `[E]`, each required where `bias` gives that projection one and rejected where not. From
 * `nn.MultiheadAttention`, split `in_proj_weight` (and `in_proj_bias`) into thirds for wq, wk, wv
 * (bq, bk, bv), or take `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when kdim/vdim differ;
 * `out_proj.weight`/`out_proj.bias` are wo/bo.
 */
export interface MultiHeadAttentionWeights {
  wq: Float32Array; wk: Float32Array; wv: Float32Array; wo: Float32Array;
  bq?: Float32Array | null; bk?: Float32Array | null; bv?: Float32Array | null; bo?: Float32Array | null;
  /** The sink logits `[numHeads]`: required with `sinks: true`, rejected otherwise. */
  sinks?: Float32Array | null;
}

/**
 * Options of {@link MultiHeadAttention.forward}. The masks are those of `attention()`
 * ({@link MaskOptions}) with heads = numHeads and seqK counting cached positions too:
 * nn.MultiheadAttention's boolean `attn_mask` is `blockMask`, its `key_padding_mask`
 * `keyPaddingMask`, a float one `mask`.
 */
export interface MultiHeadAttentionForwardOptions extends MaskOptions {
  /** Batch size. Default 1, or the cache's batch. */
  batch?: number | null;
  /** Query positions. Default: inferred from the query's length. */
  seqQ?: number | null;
  /** Key positions. Default: inferred from the key's length (not used with a cache). */
  seqK?: number | null;
  /**
   * Causal masking as in `attention()`: `true`/`'lower-right'` or `'upper-left'`. Always on
   * (lower-right) with a cache: false and 'upper-left' are rejected there.
   */
  causal?: boolean | 'lower-right' | 'upper-left' | null;
  /**
   * Rotary positions of the new rows, `Int32Array [seqQ]` or `[batch, seqQ]`, for the queries and
   * the keys alike (self-attention, or a cache); only for a layer with `rotary`.
   */
  positions?: Int32Array | null;
  /**
   * Caller-owned softmax weights: per head `[batch, numHeads, seqQ, seqK]`, or with
   * `averageAttnWeights` their mean over the heads `[batch, seqQ, seqK]`.
   */
  weightsOut?: Float32Array | null;
  /**
   * Fill `weightsOut` with the heads' mean, `[batch, seqQ, seqK]`: PyTorch's `need_weights=True`
   * with `average_attn_weights=True` (its default). Default false: per head. Needs `weightsOut`.
   */
  averageAttnWeights?: boolean | null;
  /** Caller-owned output `[batch, seqQ, embedDim]`, filled and returned. */
  out?: Float32Array | null;
  /**
   * A cache from this layer's {@link MultiHeadAttention.createCache}: the seqQ new positions are
   * projected from the query, appended, and attend causally (lower-right: decoding, with or without
   * `causal: true`) to everything cached, with the layer's window. key and value must be null.
   * Appending past `maxSeq` throws a RangeError and leaves the cache unchanged.
   *
   * Or a cross-attention cache from {@link MultiHeadAttention.createCrossCache}: the queries
   * attend to the keys and values it holds, with this call's `causal`, masks and options,
   * exactly as `forward(query, encoderOutput, …)` would; nothing is appended. key, value and
   * `positions` must be null.
   *
   * A cache whose positions were projected with weights this layer no longer has (after
   * `setWeights`, `sgdStep`, `adamStep`, `setOptimizerState`) is refused with an Error until it
   * is `reset()` (a self-attention cache) or made anew (a cross-attention cache).
   */
  cache?: KVCache | null;
  /**
   * Keep what {@link MultiHeadAttention.backward} needs (copies of the inputs and masks, the
   * projected Q, K, V and the attention output) in wasm memory. Not with a cache.
   */
  train?: boolean | null;
}

/** One array per weight, in the layout of {@link MultiHeadAttentionWeights} (biases only with bias). */
export interface MultiHeadAttentionArrays {
  wq: Float32Array; wk: Float32Array; wv: Float32Array; wo: Float32Array;
  bq?: Float32Array; bk?: Float32Array; bv?: Float32Array; bo?: Float32Array;
  /** Only with `sinks: true`. */
  sinks?: Float32Array;
}

/** Weight gradients, in the layout of {@link MultiHeadAttentionWeights} (biases only with bias). */
export interface MultiHeadAttentionGrads extends MultiHeadAttentionArrays {}

/**
 * What Adam keeps between steps ({@link MultiHeadAttention.getOptimizerState}): the number of
 * steps taken (bias correction) and the first and second moments of every weight. The learning
 * rate, betas and eps are not part of it: they are arguments of each `adamStep` call.
 */
export interface MultiHeadAttentionOptimizerState {
  /** Adam steps taken (0 before the first). */
  step: number;
  /** First moments (running mean of the gradients). */
  m: MultiHeadAttentionArrays;
  /** Second moments (running mean of the squared gradients); never negative. */
  v: MultiHeadAttentionArrays;
}

/** How a {@link KVCache} stores keys and values. */
export type KVCacheDtype = 'float32' | 'float16' | 'bfloat16' | 'int8' | 'int4';

/**
 * What a cache's options must give, one or both: `maxSeq`, or a ring's `window` (`maxSeq` then
 * defaults to it). (`maxSeq` last: a call with neither is told that `maxSeq` is missing.)
 */
export type KVCacheLength = { window: number } | { maxSeq: number };

/** Options of {@link MultiHeadAttention.createCache} (with `maxSeq` or `window`: {@link KVCacheLength}). */
export interface LayerCacheOptions {
  /** Batch size. Default 1. */
  batch?: number | null;
  /** Positions it can hold (a ring's slots, with `window`). Required unless `window` is given (then default `window`). */
  maxSeq?: number | null;
  /** Storage, as for {@link KVCacheOptions}. Default `'float32'`. */
  dtype?: KVCacheDtype | null;
  /** A sliding-window ring, as for {@link KVCacheOptions}. */
  window?: number | null;
}

/** Options of {@link AttentionLibrary.createKVCache} (with `maxSeq` or `window`: {@link KVCacheLength}). */
export interface KVCacheOptions {
  /** Batch size. Default 1. */
  batch?: number | null;
  /** Key/value heads. Required. */
  kvHeads: number;
  /** Size of each key vector. Required. */
  headDim: number;
  /** Size of each value vector. Default `headDim`. */
  valueDim?: number | null;
  /** Positions it can hold (a ring's slots, with `window`). Required unless `window` is given (then default `window`). */
  maxSeq?: number | null;
  /**
   * Storage: `'float32'` (default, exact); `'float16'` (IEEE binary16, round to nearest even:
   * half the memory, NMSE ≤ 1e-6 on normal data, magnitudes up to 65504: `append` refuses a
   * larger finite value); `'bfloat16'` (the top half of a float32,
   * rounded to nearest even as PyTorch does: half the memory with float32's range, NMSE ≤ 2e-5);
   * `'int8'` (symmetric per position and kv head, scale = max|x|/127: about a quarter, NMSE ≤
   * 1e-4; llama.cpp's q8_0 idea per vector); `'int4'` (symmetric per block of 32 values, scale =
   * max|x|/7 as bfloat16: 0.14 of float32, NMSE ≤ 3e-2; finite values only: `append` refuses
   * ±Infinity and NaN).
   */
  dtype?: KVCacheDtype | null;
  /**
   * A sliding-window layer's cache (Mistral, Gemma): a ring of `maxSeq` slots (≥ window) that
   * never overflows. It keeps the `window − 1` positions before each query (and every later one),
   * so it serves calls whose `window` looks back at most that far: Hugging Face's
   * `sliding_window = W` is a ring of `window: W` and attention's `window: [W − 1, 0]`. A call
   * that looks further back is refused, never answered with fewer keys.
   */
  window?: number | null;
}

/**
 * Keys and values of the positions seen so far, kept in wasm memory so a decode step reads them
 * in place instead of copying them in. From {@link AttentionLibrary.createKVCache} (append your own
 * projected, rotated K and V; attend with `lib.attention(query, cache, null, options)`) or a
 * layer's {@link MultiHeadAttention.createCache}. Owns wasm memory: call {@link KVCache.dispose}
 * when done (a FinalizationRegistry frees a forgotten one, but only when the event loop gets a
 * turn); any use after dispose throws.
 */
export interface KVCache {
  readonly batch: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly valueDim: number;
  /** Positions it can hold (a ring's slots). */
  readonly maxSeq: number;
  readonly dtype: KVCacheDtype;
  /** The sliding window (a ring), or 0 for a linear cache. */
  readonly window: number;
  /** Positions appended so far (a ring counts all of them). */
  readonly length: number;
  /** Bytes of wasm memory its keys, values and scales hold. */
  readonly bytes: number;
  readonly disposed: boolean;
  /**
   * Appends `seq` positions: key `[batch, kvHeads, seq, headDim]` (`'bhsd'`, default) or
   * `[batch, seq, kvHeads, headDim]` (`'bshd'`), value likewise with `valueDim`; converted or
   * quantised as stored. `seq` defaults to what the key's length gives. Appending past `maxSeq`
   * (for a ring: more than `maxSeq − min(length, window − 1)` at once), a finite value beyond
   * float16's range (|x| ≥ 65520) to a `'float16'` cache, or ±Infinity or NaN to an `'int4'` cache,
   * throws a RangeError and appends nothing. A cross-attention cache
   * ({@link MultiHeadAttention.createCrossCache}) takes no positions: a TypeError.
   */
  append(key: Float32Array, value: Float32Array, options?: { seq?: number | null; layout?: Layout | null } | null): void;
  /** Forgets every position, so a new sequence can start. */
  reset(): void;
  /**
   * Drops positions ≥ n (speculative decoding, beam search, editing a chat). A ring can go back
   * only as far as it still holds the `window − 1` positions before n. A cross-attention cache
   * then holds the first n positions of the encoder's output, as if made from those alone.
   */
  truncate(n: number): void;
  /**
   * Beam search, as Hugging Face's `reorder_cache(beam_idx)`: batch entry b becomes what entry
   * `indices[b]` was, at every position held (rings too). `batch` integers in `[0, batch)`;
   * repeats are allowed (a beam several continue) and entries not named are dropped. In place in
   * wasm memory, moving only the positions held; a bad index is a RangeError and changes nothing.
   */
  reorder(indices: Int32Array | readonly number[]): void;
  /**
   * Frees the cache's wasm memory; any later use throws. Harmless to call twice. As for layers,
   * the FinalizationRegistry frees a dropped cache only after the event loop gets a turn.
   */
  dispose(): void;
}

/**
 * torch.nn.MultiheadAttention (batch_first) with separate q/k/v projections and optional grouped
 * K/V heads: Q = xq·Wqᵀ + bq, K = xk·Wkᵀ + bk, V = xv·Wvᵀ + bv, attention per head with scale
 * 1/√headDim (or `config.scale`), then y = concat(heads)·Woᵀ + bo. A query row whose every key is
 * masked contributes zeros before the output projection, so its output row equals bo.
 *
 * Owns wasm memory (its packed weights): call {@link MultiHeadAttention.dispose} when done; any
 * use after dispose throws. Caches it created stay valid to dispose.
 */
export interface MultiHeadAttention {
  /**
   * The resolved config: sizes, `headDim`, `scale`, `bias`, `softcap` (0 = none), `sinks`, and `rotary`
   * (with `maxPosition` of its tables, 0 without), `window` and `alibi` (the slopes) or null.
   */
  readonly config: Readonly<{
    embedDim: number; numHeads: number; numKvHeads: number; kdim: number; vdim: number; headDim: number; scale: number;
    /** A boolean when all four projections agree, else which have a bias. */
    bias: boolean | Readonly<{ q: boolean; k: boolean; v: boolean; o: boolean }>;
    rotary: Readonly<{ rotaryDim: number; base: number; interleaved: boolean; cos?: Float32Array; sin?: Float32Array; maxPosition: number }> | null;
    window: readonly [number, number] | null; softcap: number; alibi: Float32Array | null; sinks: boolean;
  }>;
  readonly disposed: boolean;
  /**
   * Copies and packs the weights (checking every shape first). All or nothing: if it throws
   * (a bad argument, or out of memory), the layer keeps its old weights. Invalidates the
   * training tape (see {@link MultiHeadAttention.backward}).
   */
  setWeights(weights: MultiHeadAttentionWeights): void;
  /**
   * The weights, in {@link MultiHeadAttention.setWeights} layout, as fresh arrays the caller
   * owns (biases only with `bias: true`): `other.setWeights(mha.getWeights())` makes a layer
   * that computes exactly the same. Throws if the weights were never set.
   */
  getWeights(): MultiHeadAttentionArrays;
  /**
   * @param query `[batch, seqQ, embedDim]`
   * @param key `[batch, seqK, kdim]`; null = the query (self-attention)
   * @param value `[batch, seqK, vdim]`; null = the key input
   * @returns the output `[batch, seqQ, embedDim]` (`options.out` when given)
   */
  forward(query: Float32Array, key?: Float32Array | null, value?: Float32Array | null,
    options?: MultiHeadAttentionForwardOptions | null): Float32Array;
  /**
   * Gradients for the last `forward(..., { train: true })`, given dL/d(out) `[batch, seqQ,
   * embedDim]`. `dKey`/`dValue` are present only when key/value were passed (otherwise their
   * share is added to `dQuery` / `dKey`). May be called more than once for one forward.
   *
   * Throws an Error if the weights changed since that forward (`setWeights`, `sgdStep`,
   * `adamStep`, `setOptimizerState`): its gradients would match neither the old nor the new
   * weights. To accumulate gradients, run forward and backward per batch, sum, then step once.
   */
  backward(dOut: Float32Array): {
    dQuery: Float32Array; dKey?: Float32Array; dValue?: Float32Array; weights: MultiHeadAttentionGrads;
  };
  /** w −= lr · grad on the weights in wasm memory. Invalidates the training tape. */
  sgdStep(grads: MultiHeadAttentionGrads, options: { lr: number }): void;
  /**
   * One Adam step on the weights in wasm memory; the moments live in the layer. All or nothing:
   * if it throws (e.g. out of memory for the moments), no weight, moment or step count changed.
   * Invalidates the training tape.
   */
  adamStep(grads: MultiHeadAttentionGrads, options?: { lr?: number; beta1?: number; beta2?: number; eps?: number }): void;
  /** Adam's step count and moments as fresh arrays (zeros before the first step), to save with {@link MultiHeadAttention.getWeights}. */
  getOptimizerState(): MultiHeadAttentionOptimizerState;
  /**
   * Restores a state from {@link MultiHeadAttention.getOptimizerState} (of a layer with the same
   * config): with the weights restored too, training continues bit for bit as if it had never
   * stopped. Checks every array (type, length, finite, `v` >= 0) before changing anything; needs
   * the weights set. Invalidates the training tape.
   */
  setOptimizerState(state: MultiHeadAttentionOptimizerState): void;
  /**
   * A KV cache for this layer (kvHeads = numKvHeads, headDim = valueDim = headDim) with fixed
   * `batch` (default 1) and `maxSeq`, stored as `dtype` (default `'float32'`), optionally a
   * sliding-window ring (`window`). The same kind of object as {@link AttentionLibrary.createKVCache}.
   * A ring must keep every key the layer's window sees: `window` ≥ `config.window[0] + 1`
   * (Hugging Face's `sliding_window = W`: `config.window` `[W − 1, 0]`, ring `window: W`); a
   * layer without a window needs a linear cache. Otherwise a RangeError naming both windows.
   * Depends only on the config, so it may be made before `setWeights`.
   */
  createCache(options: LayerCacheOptions & KVCacheLength): KVCache;
  /**
   * A cross-attention cache, filled once (the decoders of Whisper, T5 and BART; Hugging Face's
   * `EncoderDecoderCache.cross_attention_cache`): `key` `[batch, seqK, kdim]` (the encoder's
   * output) and `value` `[batch, seqK, vdim]` (default: the key) are projected by the layer's wk
   * and wv (rotary: keys at positions 0 … seqK − 1) into a cache of exactly seqK positions stored
   * as `dtype` (default `'float32'`). Pass it as `forward`'s `cache`, with key and value null, at
   * every decoder step. Needs the weights; a cache filled with other weights is refused.
   */
  createCrossCache(key: Float32Array, value?: Float32Array | null,
    options?: { batch?: number | null; seqK?: number | null; dtype?: KVCacheDtype | null } | null): KVCache;
  /**
   * Frees the layer's wasm memory. Harmless to call twice. A layer dropped without dispose() is
   * freed by a FinalizationRegistry only after it is garbage collected, which happens only when
   * the event loop gets a turn: a synchronous loop that creates and drops layers keeps all of
   * their memory until it yields.
   */
  dispose(): void;
}

export interface MultiHeadAttentionConstructor {
  new (config: MultiHeadAttentionConfig): MultiHeadAttention;
}

/**
 * Loads the WebAssembly module once. Idempotent: every call returns the same promise and
 * instance (a later call with other options gets it too, with one console warning that points to
 * {@link createAttention}); after a failed load the next call tries again. One instance per
 * feature set: `loadAttention()` shares the inference build's ({@link AttentionLibrary}), and
 * `loadAttention({ layers: true })` the layers build's ({@link AttentionLayersLibrary}). Rejects
 * with an Error where WebAssembly SIMD is missing or the `.wasm` cannot be loaded (the message
 * names the file expected and what was found instead); bad or contradicting options are a
 * TypeError/RangeError.
 */
export function loadAttention(options: LoadOptions & { layers: true }): Promise<AttentionLayersLibrary>;
export function loadAttention(options?: LoadOptions & { layers?: false | null }): Promise<AttentionLibrary>;
export function loadAttention(options?: LoadOptions): Promise<AttentionLibrary | AttentionLayersLibrary>;

/**
 * Creates a new, independent instance (its own WebAssembly memory) on every call, for apps that
 * want isolation between users of the library. Most apps want {@link loadAttention}.
 */
export function createAttention(options: LoadOptions & { layers: true }): Promise<AttentionLayersLibrary>;
export function createAttention(options?: LoadOptions & { layers?: false | null }): Promise<AttentionLibrary>;
export function createAttention(options?: LoadOptions): Promise<AttentionLibrary | AttentionLayersLibrary>;
