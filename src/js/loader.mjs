// loadAttention(): one idempotent, guarded initialisation shared by every entry point. The entry
// points differ only in how they obtain the .wasm bytes (see index.mjs and node.mjs).
import createAttnModule from './attn.mjs';
import { createLibrary } from './api.mjs';
import { describe } from './shapes.mjs';

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
  const known = ['wasmUrl', 'wasmBinary'];
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
  return { wasmUrl: wasmUrl ?? undefined, wasmBinary: wasmBinary ?? undefined };
}

// fetchBinary(options) returns the module's bytes, or undefined to let the Emscripten loader
// fetch `wasmUrl` (or attn.wasm next to attn.mjs) itself. Returns { loadAttention,
// createAttention }: the first shares one instance, the second makes a new one each call.
export function makeLoaders(fetchBinary) {
  async function createAttention(options) {
    const opts = checkLoadOptions(options);
    if (!hasWasmSimd()) {
      throw new Error('attention-wasm needs WebAssembly SIMD (simd128), which this JavaScript engine does not support ' +
        '(it is in Chrome/Edge 91+, Firefox 89+, Safari 16.4+ and Node.js 16.4+)');
    }
    let module;
    try {
      // Emscripten would print load failures to the console; they reach the caller as the
      // rejection instead.
      const moduleOptions = { print: () => {}, printErr: () => {} };
      const bytes = opts.wasmBinary ?? await fetchBinary(opts);
      if (bytes) moduleOptions.wasmBinary = bytes;
      else if (opts.wasmUrl) moduleOptions.locateFile = (file) => (file.endsWith('.wasm') ? String(opts.wasmUrl) : file);
      module = await createAttnModule(moduleOptions);
    } catch (error) {
      const from = opts.wasmUrl ? ` from ${opts.wasmUrl}` : '';
      throw new Error(`attention-wasm: could not load the WebAssembly module${from}: ${error?.message ?? error}`, { cause: error });
    }
    return createLibrary(module);
  }

  let loading = null;
  function loadAttention(options) {
    if (loading) return loading;
    loading = createAttention(options);
    // A failed load may be retried (with other options): forget it.
    loading.catch(() => { loading = null; });
    return loading;
  }

  return { loadAttention, createAttention };
}
