// A disposed instance lets go of its wasm memory and ends its workers. Loads the package with the
// options of ?options= (JSON), writes 256 MiB of cache and makes a layer, disposes them and the
// instance while the page keeps every one of them in top-level constants (as an app does), then
// makes garbage until the engine collects the instance's memory (a WeakRef to it, taken as the
// module made it, is cleared) or gives up. Leaves { info, collected, rounds, seconds, workers, ended } or
// { error } in window.__result for tests/browser/engines.test.mjs.
const memories = [];  // WeakRefs to every WebAssembly.Memory made from here on
const NativeMemory = WebAssembly.Memory;
WebAssembly.Memory = function Memory(descriptor) {  // a threaded build's shared memory
  const memory = new NativeMemory(descriptor);
  memories.push(new WeakRef(memory));
  return memory;
};
WebAssembly.Memory.prototype = NativeMemory.prototype;
const nativeInstantiate = WebAssembly.instantiate;
WebAssembly.instantiate = async function instantiate(...args) {  // a single-threaded build's own memory
  const result = await nativeInstantiate.apply(this, args);
  for (const value of Object.values((result.instance ?? result).exports)) {
    if (value instanceof NativeMemory) memories.push(new WeakRef(value));
  }
  return result;
};
let workers = 0, ended = 0;  // counts only: holding a worker would hold the module its handlers reach
const NativeWorker = globalThis.Worker;
globalThis.Worker = class Worker extends NativeWorker {
  constructor(...args) {
    super(...args);
    workers++;
  }

  terminate() {
    ended++;
    super.terminate();
  }
};

// Garbage of both kinds (objects, and large buffers that count against the engine's limits),
// until the memory is collected: engines collect when they see fit, and pages cannot ask. Gives up
// after `seconds`, not a count of rounds: a round's time varies by engine and load, and a threaded
// instance's memory is shared with its workers, which an engine tears down in its own time (60
// rounds, about 20 s, once fell short in Firefox on a loaded machine).
async function collect(done, seconds = 60) {
  const until = performance.now() + seconds * 1000;
  for (let round = 1; performance.now() < until; round++) {
    for (let n = 0; n < 50; n++) {
      const objects = [];
      for (let k = 0; k < 1e5; k++) objects.push({ k });
      new ArrayBuffer(2 ** 25);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (done()) return round;
  }
  return 0;
}

try {
  const { createAttention } = await import('/dist/index.mjs');
  const lib = await createAttention(JSON.parse(new URLSearchParams(location.search).get('options') ?? '{}'));
  const info = { ...lib.info };
  const cache = lib.createKVCache({ kvHeads: 8, headDim: 128, maxSeq: 32768 });
  const block = new Float32Array(4096 * 8 * 128).fill(0.5);
  while (cache.length < cache.maxSeq) cache.append(block, block);
  const layer = new lib.MultiHeadAttention({ embedDim: 64, numHeads: 4 });
  cache.dispose();
  layer.dispose();
  lib.dispose();
  const made = memories.length;
  const started = performance.now();
  const rounds = await collect(() => memories.every((memory) => memory.deref() === undefined));
  const seconds = (performance.now() - started) / 1000;
  window.__result = {
    info, made, collected: rounds > 0, rounds, seconds, workers, ended,
    held: [lib.info.threads, cache.disposed, layer.disposed],
  };
} catch (error) {
  window.__result = { error: `${error.name}: ${error.message}` };
}
