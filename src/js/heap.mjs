// Moving arrays in and out of wasm memory, and what a call's answer means. One malloc'd block is
// reused by every call (calls are synchronous, so it is never shared) and grown when a call needs
// more; a block far larger than usual is given back when its call ends. Heap views are taken
// through heap(M) after anything that may grow memory, since growth replaces them.
//
// Every build may grow to all of wasm32's 4 GiB (-sMAXIMUM_MEMORY=4GB; Emscripten's allocator
// stops one 64 KiB page short, M.heapMax()). Addresses from 2 GiB up do not fit a signed int32,
// and wasm returns an i32 to JS signed: every address read here is made unsigned (>>> 0, >>> 2).
import { kindOf } from './shapes.mjs';

// Room left for the module's own data (stack, static data, the C++ objects of layers and caches).
const RESERVED_BYTES = 32 * 2 ** 20;
// The largest single block: dlmalloc asks for less than 2 GiB at a time, and the kernel indexes
// within a block with signed 32-bit offsets (ptrdiff_t in wasm32); HeapBuffer refuses more too.
export const MAX_BLOCK_BYTES = 2 ** 31 - 2 ** 20;
// The most wasm memory can grow to (fixed when the module is linked: asked once), and how much of
// it a call, cache or layer may ask for.
const limits = new WeakMap();
export function wasmMemoryLimit(M) {
  let limit = limits.get(M);
  if (limit === undefined) limits.set(M, (limit = M.heapMax()));
  return limit;
}
const usableBytes = (M) => wasmMemoryLimit(M) - RESERVED_BYTES;
// Between calls the arena keeps at most this much; a call that needs more gets a block that is
// freed when the call returns (so one huge call does not hold memory a cache may need later).
export const ARENA_KEEP_BYTES = 16 * 2 ** 20;
// Views of wasm memory as it is now: { HEAPU8, HEAP32, HEAPF32, HEAPF64 }, or with `end`, views
// that reach at least byte `end` (what a call reads or writes lies below it). Growth replaces the
// memory's buffer, and the glue then makes Module.HEAP* anew — but in a threaded build a worker may
// grow it, and the glue notices only when it next reads memory itself (a call's answer, undefined
// or a CallError, need not make it). The glue's views are used while they reach `end`: a shared
// memory's older views stay valid, only shorter, and a single-threaded build's growth (on the
// calling thread) always replaces them. Past them, fresh views of the memory the threaded builds
// export (Module.wasmMemory), made once per buffer and kept with M (a disposed instance lets go of
// them with its memory). Reading a shared memory's buffer is what this avoids: 60 ns a read in
// Node 20, against 25 ns unshared.
const fresh = new WeakMap();
export function heap(M, end = Infinity) {
  if (end <= M.HEAPU8.length) return M;
  const buffer = M.wasmMemory?.buffer;
  if (!buffer || buffer === M.HEAPU8.buffer) return M;
  let views = fresh.get(M);
  if (views?.HEAPU8.buffer !== buffer) {
    views = { HEAPU8: new Uint8Array(buffer), HEAP32: new Int32Array(buffer), HEAPF32: new Float32Array(buffer), HEAPF64: new Float64Array(buffer) };
    fresh.set(M, views);
  }
  return views;
}

const ALIGN = 16;
const alignUp = (n) => Math.ceil(n / ALIGN) * ALIGN;
const mib = (n) => `${Math.ceil(n / 2 ** 20)} MiB`;

// Sizes in messages: "512 KiB", "6.0 MiB", "1.50 GiB".
export function formatBytes(n) {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${Math.ceil(n / 2 ** 10)} KiB`;
}

const OOM_HINT = 'dispose() layers and caches that are no longer needed, call lib.trim(), or split the work into smaller calls';

// "(asked for …; … in use, wasm memory … of at most 4.00 GiB); <hint>": what every out-of-memory
// message ends with.
function memoryReport(M, askedBytes) {
  const asked = askedBytes > 0 && askedBytes < 2 ** 53 ? `asked for ${formatBytes(askedBytes)}; ` : '';
  return `(${asked}${formatBytes(M.heapInUse())} in use, wasm memory ${formatBytes(heap(M).HEAPU8.length)} ` +
    `of at most ${formatBytes(wasmMemoryLimit(M))}); ${OOM_HINT}`;
}

// The Error for a call's CallError (src/bindings.cpp) when the caller words no message of its own:
// the core's message, and for out of memory the sizes (`askedBytes`, default: the allocation that
// failed) and a hint.
export function coreError(M, failure, askedBytes = failure.bytes) {
  if (failure.kind === M.Failure.outOfMemory) return new Error(`attention-wasm: ${failure.message} ${memoryReport(M, askedBytes)}`);
  return new Error(`attention-wasm: ${failure.message}`);
}

const CALL_HINT = 'split the batch or the heads';

// The RangeError for `bytes` that wasm32 memory cannot hold.
function tooLarge(M, fn, bytes, what = 'this call', hint = CALL_HINT) {
  return new RangeError(`${fn}: ${what} needs ${mib(bytes)} of wasm memory, more than the ${mib(usableBytes(M))} a wasm32 module can use; ${hint}`);
}

// Throws a RangeError naming `fn` if `bytes` cannot fit in wasm32 memory, or its largest single
// block (`block`: the call's arguments and results, one buffer of a cache) cannot be allocated.
// `what` and `hint` word the message ('this call', 'split the batch or the heads').
export function checkMemory(M, fn, bytes, { block = 0, what = 'this call', hint = CALL_HINT } = {}) {
  if (bytes > usableBytes(M)) throw tooLarge(M, fn, bytes, what, hint);
  if (block > MAX_BLOCK_BYTES) {
    throw new RangeError(`${fn}: ${what} needs ${mib(block)} in one block of wasm memory, more than the ${mib(MAX_BLOCK_BYTES)} ` +
      `one wasm32 allocation can hold; ${hint}`);
  }
}

// Places `name`'s byteLength bytes at `bytes` plus `skew` (its remainder modulo 8 in a shared
// heap; the block starts 8-byte aligned) in `offsets`; returns where the next one goes.
function place(offsets, bytes, name, byteLength, skew) {
  offsets[name] = bytes + skew;
  return bytes + alignUp(byteLength + skew);
}

export class HeapArena {
  constructor(module) {
    this.module = module;
    this.ptr = 0;
    this.capacity = 0;
    // A threaded build's memory is shared, and V8 copies between ordinary and shared memory 6-8
    // times slower when the two addresses differ modulo 8 (32 KB: 20 against 2.7 µs in Node 20,
    // Chromium 6.8 against 1.1; Firefox is not affected), as a view into the middle of a larger
    // array often does. So stage() places each input at an address with its array's remainder
    // modulo 8, and each output given as the array it will be copied into with that array's. The
    // kernel reads any alignment.
    this.shared = typeof SharedArrayBuffer === 'function' && module.HEAPU8.buffer instanceof SharedArrayBuffer;
  }

  reserve(bytes) {
    if (bytes <= this.capacity) return this.ptr;
    const M = this.module;
    this.trim();
    const size = Math.ceil(bytes / 65536) * 65536;
    this.ptr = M._malloc(size) >>> 0;
    this.capacity = this.ptr ? size : 0;
    if (!this.ptr) {
      throw new Error(`attention-wasm: out of memory for the call's arguments and results ${memoryReport(M, size)}`);
    }
    return this.ptr;
  }

  // Frees the block; returns the bytes given back.
  trim() {
    const freed = this.capacity;
    if (this.ptr) this.module._free(this.ptr);
    this.ptr = 0;
    this.capacity = 0;
    return freed;
  }

  // After every public call: a block larger than ARENA_KEEP_BYTES is not kept.
  endCall() {
    if (this.capacity > ARENA_KEEP_BYTES) this.trim();
  }

  // stage(...) then work(call), then endCall(): for one public call.
  call(fn, inputs, outputs, work) {
    try {
      return work(this.stage(fn, inputs, outputs));
    } finally {
      this.endCall();
    }
  }

  // Places `inputs` (name → Float32Array/Int32Array/Uint8Array, or undefined) and `outputs` (name → float
  // count, or the Float32Array copyOut will fill) in the arena, after checking that they fit in wasm memory; copies the inputs in.
  // Returns address(name) (0 when absent), copyOut(name, target), `budget` (the bytes left for
  // what the C++ side allocates; the call passes it, and the C++ entry checks its workspace
  // against it before allocating: within_budget in src/bindings.h) and error(failure): the Error
  // for the call's CallError — over budget, the RangeError of this memory check for the staged
  // and the needed bytes; anything else, coreError's.
  stage(fn, inputs, outputs = {}) {
    const offsets = {};
    let bytes = 0;
    for (const name in inputs) {
      const array = inputs[name];
      if (array) bytes = place(offsets, bytes, name, array.byteLength, this.shared ? array.byteOffset & 7 : 0);
    }
    for (const name in outputs) {
      const output = outputs[name];
      if (typeof output === 'number') bytes = place(offsets, bytes, name, output * 4, 0);
      else bytes = place(offsets, bytes, name, output.byteLength, this.shared ? output.byteOffset & 7 : 0);
    }
    const M = this.module;
    checkMemory(M, fn, bytes, { block: bytes });

    const base = this.reserve(bytes);
    const views = heap(M, base + bytes);
    const { HEAPU8, HEAP32, HEAPF32 } = views;
    for (const name in inputs) {
      const array = inputs[name];
      if (!array) continue;
      const at = base + offsets[name];
      const kind = kindOf(array);
      if (kind === 'Uint8Array') HEAPU8.set(array, at);
      else if (kind === 'Int32Array') HEAP32.set(array, at >>> 2);
      else HEAPF32.set(array, at >>> 2);
    }
    return {
      views,  // heap(M)'s, for writing the call; in a single-threaded build, stale once the call may have grown memory
      budget: usableBytes(M) - bytes,
      error: (failure) => (failure.kind === M.Failure.overBudget ? tooLarge(M, fn, bytes + failure.bytes) : coreError(M, failure)),
      address: (name) => (name in offsets ? base + offsets[name] : 0),
      copyOut: (name, target) => {
        const start = (base + offsets[name]) >>> 2;
        // (through heap(): a single-threaded build's growth during the call replaced the views)
        target.set(heap(M, base + bytes).HEAPF32.subarray(start, start + target.length));
        return target;
      },
    };
  }
}
