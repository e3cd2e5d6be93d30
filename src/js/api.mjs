// The library object that loadAttention() resolves to: checks arguments, copies tensors into
// one reused heap block, runs the kernel, copies the results out into caller-owned arrays.
import {
  MASK_BOOLEAN, checkMask, checkOutput, checkTensor, elementCount, resolveShape, tensorParts,
} from './shapes.mjs';

const ATTENTION_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'valueDim', 'layout',
  'scale', 'causal', 'mask', 'out', 'weightsOut'];
const WEIGHTS_OPTIONS = ['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim', 'layout', 'scale', 'causal',
  'mask', 'out'];

// wasm32 with ALLOW_MEMORY_GROWTH stops at 2 GiB; leave room for the module's own data.
const MAX_HEAP_BYTES = 2 ** 31 - 32 * 2 ** 20;
const ALIGN = 16;
const KEYS_PER_BLOCK = 64;  // kKeysPerBlock in src/attention.cpp: sizes the kernel's workspace

const alignUp = (n) => Math.ceil(n / ALIGN) * ALIGN;

// One malloc'd block reused by every call (calls are synchronous, so never shared), grown when
// a call needs more. Addresses are recomputed per call; heap views are re-read after any malloc
// because memory growth replaces them.
class HeapArena {
  constructor(module) {
    this.module = module;
    this.ptr = 0;
    this.capacity = 0;
  }

  reserve(bytes) {
    if (bytes <= this.capacity) return this.ptr;
    const M = this.module;
    if (this.ptr) M._free(this.ptr);
    const size = Math.ceil(bytes / 65536) * 65536;
    this.ptr = M._malloc(size);
    this.capacity = this.ptr ? size : 0;
    if (!this.ptr) {
      throw new Error(`attention-wasm: out of wasm memory (could not allocate ${bytes} bytes); the library stays usable for smaller calls`);
    }
    return this.ptr;
  }
}

function checkMemory(fn, bytes) {
  if (bytes > MAX_HEAP_BYTES) {
    const mib = (n) => `${Math.ceil(n / 2 ** 20)} MiB`;
    throw new RangeError(`${fn}: this call needs ${mib(bytes)} of wasm memory, more than the ${mib(MAX_HEAP_BYTES)} a wasm32 module can use; split the batch or the heads`);
  }
}

export function createLibrary(M) {
  const arena = new HeapArena(M);
  const info = Object.freeze({ version: M.version(), simd: M.simdName(), threads: 1 });

  // Places the inputs, the mask and the outputs (name -> element count) in the arena and checks
  // that the call fits in wasm memory, before anything is allocated.
  function plan(fn, shape, inputs, mask, outputs) {
    const offsets = {};
    let bytes = 0;
    const place = (name, byteLength) => {
      offsets[name] = bytes;
      bytes += alignUp(byteLength);
    };
    for (const [name, array] of Object.entries(inputs)) place(name, array.byteLength);
    if (mask) place('mask', mask.array.byteLength);
    for (const [name, count] of Object.entries(outputs)) place(name, count * 4);
    // The kernel's own workspace: Kᵀ of one kv head plus a few small blocks.
    const workspace = Math.ceil(shape.seqK / KEYS_PER_BLOCK) * KEYS_PER_BLOCK * shape.headDim * 4 + 2 ** 16;
    checkMemory(fn, bytes + workspace);
    return { fn, shape, inputs, mask, offsets, bytes };
  }

  // Copies the inputs in and runs the kernel; returns copyOut(name, target) for the results.
  function execute({ shape, inputs, mask, offsets, bytes }) {
    const base = arena.reserve(bytes);
    const heapF32 = M.HEAPF32;  // after reserve(): malloc may have grown memory
    for (const [name, array] of Object.entries(inputs)) heapF32.set(array, (base + offsets[name]) >> 2);
    if (mask) {
      if (mask.type === MASK_BOOLEAN) M.HEAPU8.set(mask.array, base + offsets.mask);
      else heapF32.set(mask.array, (base + offsets.mask) >> 2);
    }
    const address = (name) => (name in offsets ? base + offsets[name] : 0);
    const error = M.attention({
      query: address('query'), key: address('key'), value: address('value'),
      out: address('out'), weights: address('weights'), mask: address('mask'),
      maskType: mask ? mask.type : 0, maskBroadcast: mask ? mask.broadcast : 0,
      batch: shape.batch, heads: shape.heads, kvHeads: shape.kvHeads, seqQ: shape.seqQ, seqK: shape.seqK,
      headDim: shape.headDim, valueDim: shape.valueDim || 1, bshd: shape.layout === 'bshd',
      scale: shape.scale, causal: shape.causal,
    });
    if (error) throw new Error(`attention-wasm: ${error}`);
    return (name, target) => {
      const start = (base + offsets[name]) >> 2;
      target.set(M.HEAPF32.subarray(start, start + target.length));  // fresh view: memory may have grown
      return target;
    };
  }

  function attention(query, key, value, options) {
    const shape = resolveShape('attention', options, ATTENTION_OPTIONS);
    const parts = tensorParts(shape);
    checkTensor('query', query, parts.query);
    checkTensor('key', key, parts.key);
    checkTensor('value', value, parts.value);
    const mask = checkMask(options.mask, shape);
    const out = checkOutput('options.out', options.out, parts.out);
    const weightsOut = checkOutput('options.weightsOut', options.weightsOut, parts.weights);
    const outputs = { out: elementCount(parts.out) };
    if (weightsOut) outputs.weights = weightsOut.length;

    const call = plan('attention', shape, { query, key, value }, mask, outputs);
    const copyOut = execute(call);
    if (weightsOut) copyOut('weights', weightsOut);
    return copyOut('out', out ?? new Float32Array(outputs.out));
  }

  function attentionWeights(query, key, options) {
    const shape = resolveShape('attentionWeights', options, WEIGHTS_OPTIONS);
    const parts = tensorParts(shape);
    checkTensor('query', query, parts.query);
    checkTensor('key', key, parts.key);
    const mask = checkMask(options.mask, shape);
    const out = checkOutput('options.out', options.out, parts.weights);
    const count = elementCount(parts.weights);
    const copyOut = execute(plan('attentionWeights', shape, { query, key }, mask, { weights: count }));
    return copyOut('weights', out ?? new Float32Array(count));
  }

  function memoryUsage() {
    return { wasmMemory: M.HEAPU8.length, arena: arena.capacity };
  }

  return Object.freeze({ info, attention, attentionWeights, memoryUsage });
}
