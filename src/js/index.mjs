// Entry point for browsers and bundlers. The Emscripten loaders find their files with
// new URL('attn.wasm' / 'attn-mt.worker.js', import.meta.url), which bundlers (Vite, webpack,
// Rollup) understand. The threaded module is used only in cross-origin-isolated pages.
import createAttnModule from './attn.mjs';
import { makeLoaders } from './loader.mjs';

export const { loadAttention, createAttention } = makeLoaders({
  env: () => ({
    isNode: false,
    isolated: globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function',
    cores: globalThis.navigator?.hardwareConcurrency ?? 1,
  }),
  async startModule(threads, { wasmUrl, wasmBinary }, moduleOptions) {
    if (threads > 1) return (await import('./attn-mt.mjs')).default(moduleOptions);
    if (wasmBinary) moduleOptions.wasmBinary = wasmBinary;
    else if (wasmUrl) moduleOptions.locateFile = (file) => (file.endsWith('.wasm') ? String(wasmUrl) : file);
    return createAttnModule(moduleOptions);
  },
});
