// Types for attention-wasm. Hand-written (Emscripten 3.1.6 cannot emit them) and type-checked
// in the tests with `tsc --noEmit --strict` from ESM and CommonJS consumers.

/** Options of {@link loadAttention}. */
export interface LoadOptions {
  /**
   * Where to load `attn.wasm` from (a CDN, an app's asset pipeline). Default: the file next to
   * the package's JavaScript (`new URL('attn.wasm', import.meta.url)`). In Node a `file:` URL,
   * a path or an `http(s):` URL.
   */
  wasmUrl?: string | URL | null;
  /** The bytes of `attn.wasm`, if the app already has them. Takes precedence over `wasmUrl`. */
  wasmBinary?: ArrayBuffer | ArrayBufferView | null;
}

/** What was loaded. */
export interface LibraryInfo {
  /** The package version, e.g. `'0.1.0'`. */
  readonly version: string;
  /** The instruction set the kernel was compiled for: always `'simd128'` for the shipped build. */
  readonly simd: string;
  /** Threads used by the kernel: 1 in this release. */
  readonly threads: number;
}

/**
 * Memory order of query, key, value and output:
 * - `'bhsd'`: `[batch, heads, seq, dim]` (default)
 * - `'bshd'`: `[batch, seq, heads, dim]` (what a `[batch, seq, heads·dim]` projection gives)
 *
 * Masks and weights are always `[batch, heads, seqQ, seqK]`.
 */
export type Layout = 'bhsd' | 'bshd';

/** Shape options shared by {@link AttentionLibrary.attention} and {@link AttentionLibrary.attentionWeights}. */
export interface AttentionShapeOptions {
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
   * Causal masking, bottom-right aligned: query `i` attends key `j` iff `j <= i + (seqK - seqQ)`
   * (equals `torch.tril` when `seqQ == seqK`; what incremental decoding needs). Default false.
   */
  causal?: boolean | null;
  /**
   * Optional mask, combined with `causal`:
   * - `Float32Array`: added to the scaled scores (`-Infinity` masks a key);
   * - `Uint8Array`: 1 = may attend, 0 = masked (PyTorch SDPA polarity).
   *
   * Shape `[seqQ, seqK]`, `[batch, 1, seqQ, seqK]` or `[batch, heads, seqQ, seqK]`, told apart by
   * length. A query row whose every key is masked gives zeros (never NaN).
   */
  mask?: Float32Array | Uint8Array | null;
}

/** Options of {@link AttentionLibrary.attention}. */
export interface AttentionOptions extends AttentionShapeOptions {
  /** Size of each value vector (and output vector). Default `headDim`. */
  valueDim?: number | null;
  /** Caller-owned output `[batch, heads, seqQ, valueDim]` (layout order); filled completely and returned. */
  out?: Float32Array | null;
  /** Caller-owned array `[batch, heads, seqQ, seqK]` that receives the softmax weights. */
  weightsOut?: Float32Array | null;
}

/** Options of {@link AttentionLibrary.attentionWeights}. */
export interface AttentionWeightsOptions extends AttentionShapeOptions {
  /** Caller-owned array `[batch, heads, seqQ, seqK]` to fill and return. */
  out?: Float32Array | null;
}

/**
 * The loaded library. Every function is synchronous, copies its inputs (which it never modifies)
 * and returns arrays owned by the caller: a later call never overwrites them.
 *
 * Bad arguments throw before any work: `TypeError` for a wrong type or a missing required
 * option, `RangeError` for a wrong value or length; the message names the argument and gives
 * the expected and the actual value. The library keeps working after an error.
 */
export interface AttentionLibrary {
  readonly info: LibraryInfo;

  /**
   * `out = softmax(scale · Q·Kᵀ + mask) · V`, computed block by block with an online softmax
   * (memory stays linear in the sequence lengths unless `weightsOut` is asked for).
   *
   * @param query `[batch, heads, seqQ, headDim]` (`'bhsd'`) or `[batch, seqQ, heads, headDim]` (`'bshd'`)
   * @param key `[batch, kvHeads, seqK, headDim]` or `[batch, seqK, kvHeads, headDim]`
   * @param value `[batch, kvHeads, seqK, valueDim]` or `[batch, seqK, kvHeads, valueDim]`
   * @returns the output `[batch, heads, seqQ, valueDim]` or `[batch, seqQ, heads, valueDim]`
   *   (`options.out` when given)
   */
  attention(query: Float32Array, key: Float32Array, value: Float32Array, options: AttentionOptions): Float32Array;

  /**
   * The softmax matrix `softmax(scale · Q·Kᵀ + mask)`, `[batch, heads, seqQ, seqK]`.
   * @param query as in {@link AttentionLibrary.attention}
   * @param key as in {@link AttentionLibrary.attention}
   */
  attentionWeights(query: Float32Array, key: Float32Array, options: AttentionWeightsOptions): Float32Array;

  /**
   * Bytes of wasm memory in use: `wasmMemory` is the module's whole linear memory (it grows for
   * large calls and never shrinks, as WebAssembly memory cannot); `arena` is the block the
   * library keeps for copying call arguments in and results out (reused by every call, grown
   * when a call needs more).
   */
  memoryUsage(): { wasmMemory: number; arena: number };
}

/**
 * Loads the WebAssembly module once. Idempotent: every call returns the same promise and
 * instance (options of later calls are ignored); after a failed load the next call tries again.
 * Rejects with an Error where WebAssembly SIMD is missing or the `.wasm` cannot be loaded.
 */
export function loadAttention(options?: LoadOptions): Promise<AttentionLibrary>;
