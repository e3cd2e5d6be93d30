// Entry point for Node.js (ESM). Node's fetch() cannot read file paths, so the .wasm bytes are
// read from disk here (or fetched, for an http(s) URL). Threads use the CommonJS glue in
// node-mt/ (Node's worker_threads need Emscripten's node branch) with the same .wasm as the
// browsers' threaded build; its workers are unref'd so they never keep the process alive.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { makeLoaders } from './loader.mjs';

const require = createRequire(import.meta.url);
// By the glue's base name (builds.mjs: a build and its layers twin share one).
const GLUE = {
  attn: async () => (await import('./attn.mjs')).default,
  'attn-relaxed': async () => (await import('./attn-relaxed.mjs')).default,
  'attn-mt': async () => require('./node-mt/attn-mt-node.cjs'),
  'attn-relaxed-mt': async () => require('./node-mt/attn-relaxed-mt-node.cjs'),
};

// A URL, a file: URL or a path (string or URL object) → bytes.
async function read(where) {
  const url = String(where);
  if (/^https?:/.test(url)) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
    return new Uint8Array(await response.arrayBuffer());
  }
  return readFile(url.startsWith('file:') ? fileURLToPath(url) : url);
}

// baseUrl: a folder as a path, a file: URL or an http(s) URL.
function locate(file, baseUrl) {
  if (baseUrl === undefined) return new URL(`./${file}`, import.meta.url).href;
  const base = String(baseUrl);
  const folder = /^(https?|file):/.test(base) ? base : pathToFileURL(base).href;
  return new URL(file, folder.endsWith('/') ? folder : `${folder}/`).href;
}

// Shared with node-simd128.mjs, which offers one build.
export const nodePlatform = {
  entry: 'attention-wasm',
  env: () => ({ isNode: true, cores: availableParallelism() }),
  locate,
  read,
  compile: async (where) => WebAssembly.compile(await read(where)),
  start: async (build, moduleOptions) => (await GLUE[build.glue]())(moduleOptions),
  afterThreadsStarted(module) {
    for (const worker of [...module.PThread.runningWorkers, ...module.PThread.unusedWorkers]) worker.unref();
  },
};

export const { loadAttention, createAttention } = makeLoaders(nodePlatform);
