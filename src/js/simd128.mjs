// Entry point 'attention-wasm/simd128' for browsers and bundlers: only the single-threaded
// SIMD128 build, which runs everywhere, so a bundle (a Web Worker's, say) holds one build's glue
// and .wasm instead of all four.
import { browserPlatform } from './browser.mjs';
import { makeLoaders } from './loader.mjs';

export const { loadAttention, createAttention } = makeLoaders(browserPlatform({
  'attn.wasm': { url: () => new URL('./attn.wasm', import.meta.url), glue: () => import('./attn.mjs') },
}, 'attention-wasm/simd128'));
