// Moving arrays in and out of wasm memory. One malloc'd block is reused by every call (calls are
// synchronous, so it is never shared) and grown when a call needs more. Heap views are taken
// fresh after anything that may grow memory, since growth replaces them.
import { kindOf } from './shapes.mjs';

// wasm32 with ALLOW_MEMORY_GROWTH stops at 2 GiB; leave room for the module's own data.
export const MAX_HEAP_BYTES = 2 ** 31 - 32 * 2 ** 20;
const ALIGN = 16;
const KEYS_PER_BLOCK = 64;  // kKeysPerBlock in src/attention.cpp

// Bytes the attention kernel allocates for itself: Kᵀ and V of one kv head, packed (V's columns
// padded to 16), plus a few small blocks.
export const kernelWorkspaceBytes = (seqK, headDim, valueDim = headDim) =>
  Math.ceil(seqK / KEYS_PER_BLOCK) * KEYS_PER_BLOCK * (headDim + Math.ceil(valueDim / 16) * 16) * 4 + 2 ** 16;
const alignUp = (n) => Math.ceil(n / ALIGN) * ALIGN;
const mib = (n) => `${Math.ceil(n / 2 ** 20)} MiB`;

// Throws a RangeError naming `fn` if `bytes` cannot fit in wasm32 memory.
export function checkMemory(fn, bytes) {
  if (bytes > MAX_HEAP_BYTES) {
    throw new RangeError(`${fn}: this call needs ${mib(bytes)} of wasm memory, more than the ${mib(MAX_HEAP_BYTES)} a wasm32 module can use; split the batch or the heads`);
  }
}

export class HeapArena {
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

  // Places `inputs` (name → Float32Array/Uint8Array, or undefined) and `outputs` (name → float
  // count) in the arena, after checking that they plus `extraBytes` (what the C++ side will
  // allocate) fit in wasm memory; copies the inputs in. Returns address(name) (0 when absent)
  // and copyOut(name, target).
  stage(fn, inputs, outputs = {}, extraBytes = 0) {
    const offsets = {};
    let bytes = 0;
    const place = (name, byteLength) => {
      offsets[name] = bytes;
      bytes += alignUp(byteLength);
    };
    for (const [name, array] of Object.entries(inputs)) if (array) place(name, array.byteLength);
    for (const [name, count] of Object.entries(outputs)) place(name, count * 4);
    checkMemory(fn, bytes + extraBytes);

    const M = this.module;
    const base = this.reserve(bytes);
    for (const [name, array] of Object.entries(inputs)) {
      if (!array) continue;
      const at = base + offsets[name];
      if (kindOf(array) === 'Uint8Array') M.HEAPU8.set(array, at);
      else M.HEAPF32.set(array, at >> 2);
    }
    return {
      address: (name) => (name in offsets ? base + offsets[name] : 0),
      copyOut: (name, target) => {
        const start = (base + offsets[name]) >> 2;
        target.set(M.HEAPF32.subarray(start, start + target.length));  // fresh view
        return target;
      },
    };
  }
}
