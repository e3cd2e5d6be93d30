// Entry point 'attention-wasm/simd128' for Node.js: the single-threaded SIMD128 builds only, as
// in browsers (see simd128.mjs).
import { makeLoaders } from './loader.mjs';
import { nodePlatform } from './node.mjs';

export const { loadAttention, createAttention } = makeLoaders({
  ...nodePlatform, entry: 'attention-wasm/simd128', builds: ['attn.wasm', 'attn-layers.wasm'],
});
