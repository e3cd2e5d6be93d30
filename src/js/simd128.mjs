// Entry point 'attention-wasm/simd128' for browsers and bundlers: only the single-threaded
// SIMD128 build, which runs everywhere (inference, or with { layers: true } the layers build), so
// a bundle (a Web Worker's, say) holds one glue instead of four.
import { browserPlatform } from './browser.mjs';
import { makeLoaders } from './loader.mjs';

export const { loadAttention, createAttention } = makeLoaders(browserPlatform({
  'attn.wasm': { url: () => new URL('./attn.wasm', import.meta.url), glue: () => import('./attn.mjs') },
  'attn-layers.wasm': { url: () => new URL('./attn-layers.wasm', import.meta.url), glue: () => import('./attn.mjs') },
}, 'attention-wasm/simd128'));
