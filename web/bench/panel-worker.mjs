// One engine of the benchmark panel (panel.mjs) in its own Web Worker: the page stays
// responsive, and onnxruntime-web's thread count (global to a worker) stays this engine's own.
//   → { id, method: 'load', args: [spec, { ortUrl }] }          ← { id, result: [{ name, config }] }
//   → { id, method: 'prepare' | 'turn' | 'release', args }      ← { id, result } or { id, error }
// (spec: see engines.mjs; the other methods: host.mjs)
import { createEngines } from './engines.mjs';
import { createBenchHost } from './host.mjs';

let host = null;

async function load(spec, { ortUrl }) {
  const deps = {};
  if (spec.kind === 'ours') deps.createAttention = (await import('../../dist/index.mjs')).createAttention;
  if (spec.kind === 'ort') {
    deps.ort = await import(new URL('ort.wasm.min.mjs', ortUrl).href);
    deps.ortWasmPaths = String(ortUrl);
  }
  host = createBenchHost(await createEngines(spec, deps));
  return host.engines();
}

self.addEventListener('message', async ({ data: { id, method, args } }) => {
  try {
    const result = method === 'load' ? await load(...args) : await host[method](...args);
    self.postMessage({ id, result });
  } catch (error) {
    self.postMessage({ id, error: String(error?.message ?? error) });
  }
});
