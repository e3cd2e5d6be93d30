// Entry point for Node.js (ESM). Node's fetch() cannot read file paths, so the bytes of
// attn.wasm are read from disk here and handed to the Emscripten loader.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { makeLoaders } from './loader.mjs';

async function readWasm({ wasmUrl }) {
  const where = wasmUrl ?? new URL('./attn.wasm', import.meta.url);
  const url = String(where);
  if (/^https?:/.test(url)) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`attention-wasm: could not fetch ${url}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  }
  return readFile(url.startsWith('file:') ? fileURLToPath(url) : url);
}

export const { loadAttention, createAttention } = makeLoaders(readWasm);
