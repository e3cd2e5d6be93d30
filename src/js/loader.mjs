// loadAttention(): one idempotent, guarded initialisation shared by every entry point. The entry
// points differ only in how they find and start a module (see index.mjs and node.mjs).
import { createLibrary } from './api.mjs';
import { describe } from './shapes.mjs';
import { chooseThreads } from './threads.mjs';

// The smallest module that uses a SIMD128 instruction (v128.const + i8x16.splat); engines
// without SIMD reject it, so we can say so before loading the real module.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8,
  0, 65, 0, 253, 15, 253, 98, 11]);

function hasWasmSimd() {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

function checkLoadOptions(options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw new TypeError(`loadAttention: options must be an object, got ${describe(options)}`);
  const known = ['wasmUrl', 'wasmBinary', 'threads', 'maxThreads', 'strict'];
  for (const name of Object.keys(options)) {
    if (!known.includes(name)) throw new TypeError(`loadAttention: unknown option '${name}' (known options: ${known.join(', ')})`);
  }
  const { wasmUrl, wasmBinary } = options;
  if (wasmUrl != null && typeof wasmUrl !== 'string' && !(wasmUrl instanceof URL)) {
    throw new TypeError(`loadAttention: options.wasmUrl must be a string or a URL, got ${describe(wasmUrl)}`);
  }
  if (wasmBinary != null && !(wasmBinary instanceof ArrayBuffer) && !ArrayBuffer.isView(wasmBinary)) {
    throw new TypeError(`loadAttention: options.wasmBinary must be an ArrayBuffer or a typed array, got ${describe(wasmBinary)}`);
  }
  const { threads = 'auto', maxThreads = 8, strict = false } = options;
  if (threads !== null && threads !== 'auto' && !(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
    throw new RangeError(`loadAttention: options.threads must be 'auto' or an integer from 1 to 64, got ${describe(threads)}`);
  }
  if (maxThreads !== null && !(Number.isInteger(maxThreads) && maxThreads >= 1 && maxThreads <= 64)) {
    throw new RangeError(`loadAttention: options.maxThreads must be an integer from 1 to 64, got ${describe(maxThreads)}`);
  }
  if (strict !== null && typeof strict !== 'boolean') {
    throw new TypeError(`loadAttention: options.strict must be a boolean, got ${describe(strict)}`);
  }
  return {
    wasmUrl: wasmUrl ?? undefined, wasmBinary: wasmBinary ?? undefined,
    threads: threads ?? 'auto', maxThreads: maxThreads ?? 8, strict: strict ?? false,
  };
}

// platform.env() → { isNode, isolated, cores }; platform.startModule(threads, opts, moduleOptions)
// → the Emscripten module: the single-threaded build for 1 thread (honouring wasmUrl and
// wasmBinary), else the threaded one with a pool of threads − 1 workers. Returns
// { loadAttention, createAttention }: the first shares one instance, the second makes a new one
// each call.
export function makeLoaders(platform) {
  async function createAttention(options) {
    const opts = checkLoadOptions(options);
    if (!hasWasmSimd()) {
      throw new Error('attention-wasm needs WebAssembly SIMD (simd128), which this JavaScript engine does not support ' +
        '(it is in Chrome/Edge 91+, Firefox 89+, Safari 16.4+ and Node.js 16.4+)');
    }
    const { threads, reason } = chooseThreads(opts, platform.env());
    let module;
    try {
      // Emscripten would print load failures to the console; they reach the caller as the
      // rejection instead.
      const moduleOptions = { print: () => {}, printErr: () => {} };
      if (threads > 1) moduleOptions.attnPoolSize = threads - 1;
      module = await platform.startModule(threads, opts, moduleOptions);
    } catch (error) {
      const from = opts.wasmUrl && threads === 1 ? ` from ${opts.wasmUrl}` : '';
      throw new Error(`attention-wasm: could not load the WebAssembly module${from}: ${error?.message ?? error}`, { cause: error });
    }
    if (threads > 1) {
      module.setNumThreads(threads);
      platform.afterThreadsStarted?.(module);
    }
    const lib = createLibrary(module, { threadsReason: reason, onDispose: () => forget(lib) });
    return lib;
  }

  let loading = null;
  let loaded = null;
  function forget(lib) {  // after dispose(), loadAttention() starts afresh
    if (lib === loaded) loading = loaded = null;
  }
  function loadAttention(options) {
    if (loading) return loading;
    loading = createAttention(options);
    loading.then((lib) => { loaded = lib; }, () => { loading = null; });  // a failed load may be retried
    return loading;
  }

  return { loadAttention, createAttention };
}
