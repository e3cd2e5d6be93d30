// Entry point for Node.js (ESM). Node's fetch() cannot read file paths, so the .wasm bytes are
// read from disk here. Threads use the CommonJS build in node-mt/ (Node's worker_threads need
// Emscripten's node branch); its workers are unref'd so they never keep the process alive.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import createAttnModule from './attn.mjs';
import { makeLoaders } from './loader.mjs';

async function readWasm(where) {
  const url = String(where);
  if (/^https?:/.test(url)) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`attention-wasm: could not fetch ${url}: HTTP ${response.status}`);
    return new Uint8Array(await response.arrayBuffer());
  }
  return readFile(url.startsWith('file:') ? fileURLToPath(url) : url);
}

export const { loadAttention, createAttention } = makeLoaders({
  env: () => ({ isNode: true, isolated: true, cores: availableParallelism() }),
  async startModule(threads, { wasmUrl, wasmBinary }, moduleOptions) {
    if (threads > 1) {
      const factory = createRequire(import.meta.url)('./node-mt/attn-mt-node.cjs');
      moduleOptions.wasmBinary = await readWasm(new URL('./node-mt/attn-mt-node.wasm', import.meta.url));
      return factory(moduleOptions);
    }
    moduleOptions.wasmBinary = wasmBinary ?? await readWasm(wasmUrl ?? new URL('./attn.wasm', import.meta.url));
    return createAttnModule(moduleOptions);
  },
  afterThreadsStarted(module) {
    for (const worker of [...module.PThread.runningWorkers, ...module.PThread.unusedWorkers]) worker.unref();
  },
});
