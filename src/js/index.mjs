// Entry point for browsers and bundlers: the Emscripten loader fetches attn.wasm from
// new URL('attn.wasm', import.meta.url), which bundlers (Vite, webpack, Rollup) understand.
import { makeLoaders } from './loader.mjs';

export const { loadAttention, createAttention } = makeLoaders(async () => undefined);
