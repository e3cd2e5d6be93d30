// Entry point for browsers and bundlers. Every build's files are named with
// new URL('…', import.meta.url) and import('…') literals, which bundlers (Vite, webpack, Rollup)
// follow: each .wasm becomes an asset, each Emscripten glue a chunk loaded only when chosen. A
// threaded build's workers import their own copy of its glue, by URL (see browser.mjs).
// The threaded builds are used only in cross-origin-isolated pages; a layers build
// (loadAttention({ layers: true })) is started by the glue of its inference twin (builds.mjs).
import { browserPlatform } from './browser.mjs';
import { makeLoaders } from './loader.mjs';

export const { loadAttention, createAttention } = makeLoaders(browserPlatform({
  'attn.wasm': { url: () => new URL('./attn.wasm', import.meta.url), glue: () => import('./attn.mjs') },
  'attn-layers.wasm': { url: () => new URL('./attn-layers.wasm', import.meta.url), glue: () => import('./attn.mjs') },
  'attn-relaxed.wasm': { url: () => new URL('./attn-relaxed.wasm', import.meta.url), glue: () => import('./attn-relaxed.mjs') },
  'attn-layers-relaxed.wasm': {
    url: () => new URL('./attn-layers-relaxed.wasm', import.meta.url), glue: () => import('./attn-relaxed.mjs'),
  },
  'attn-mt.wasm': {
    url: () => new URL('./attn-mt.wasm', import.meta.url), glue: () => import('./attn-mt.mjs'),
    workerGlue: () => new URL('./attn-mt.mjs', import.meta.url),
  },
  'attn-layers-mt.wasm': {
    url: () => new URL('./attn-layers-mt.wasm', import.meta.url), glue: () => import('./attn-mt.mjs'),
    workerGlue: () => new URL('./attn-mt.mjs', import.meta.url),
  },
  'attn-relaxed-mt.wasm': {
    url: () => new URL('./attn-relaxed-mt.wasm', import.meta.url), glue: () => import('./attn-relaxed-mt.mjs'),
    workerGlue: () => new URL('./attn-relaxed-mt.mjs', import.meta.url),
  },
  'attn-layers-relaxed-mt.wasm': {
    url: () => new URL('./attn-layers-relaxed-mt.wasm', import.meta.url), glue: () => import('./attn-relaxed-mt.mjs'),
    workerGlue: () => new URL('./attn-relaxed-mt.mjs', import.meta.url),
  },
}, 'attention-wasm'));
