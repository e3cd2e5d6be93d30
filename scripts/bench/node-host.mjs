// One Node process of the benchmark: loads the engines of one spec (argv[2], JSON, see
// web/bench/engines.mjs; with spec.section 'prefill', 'decode', 'variants' or 'model' those of
// prefill-engines.mjs, decode-engines.mjs, variant-engines.mjs or model-engines.mjs) and answers
// the coordinator over the IPC channel:
//   → { id, method, args }   ← { id, result } or { id, error }
// It first sends { ready: engines } (or { failed: message }). Each ORT thread count gets its own
// process because onnxruntime-web's env.wasm.numThreads is global to a process.
import { fileURLToPath } from 'node:url';
import { createEngines } from '../../web/bench/engines.mjs';
import { createBenchHost } from '../../web/bench/host.mjs';
import { createDecodeEngines } from './decode-engines.mjs';
import { createModelEngines } from './model-engines.mjs';
import { createPrefillEngines } from './prefill-engines.mjs';
import { createVariantEngines } from './variant-engines.mjs';

const ENGINES = { main: createEngines, prefill: createPrefillEngines, decode: createDecodeEngines, variants: createVariantEngines, model: createModelEngines };

const here = (p) => fileURLToPath(new URL(p, import.meta.url));

async function depsFor(kind) {
  if (kind === 'ours') return { createAttention: (await import('../../dist/node.mjs')).createAttention, dist: new URL('../../dist/', import.meta.url) };
  if (kind === 'ort') return { ort: await import('onnxruntime-web') };
  if (kind === 'tfjs') {
    const tf = await import('@tensorflow/tfjs-core');
    const tfWasm = await import('@tensorflow/tfjs-backend-wasm');
    tfWasm.setWasmPaths(here('../../node_modules/@tensorflow/tfjs-backend-wasm/dist/'));
    return { tf, tfWasm };
  }
  return {};
}

const spec = JSON.parse(process.argv[2]);
let host;
try {
  host = createBenchHost(await ENGINES[spec.section ?? 'main'](spec, await depsFor(spec.kind)));
  process.send({ ready: host.engines() });
} catch (error) {
  process.send({ failed: String(error?.message ?? error) });
  process.exit(0);
}
process.on('message', async ({ id, method, args }) => {
  if (method === 'exit') process.exit(0);  // onnxruntime-web's pool threads would keep it alive
  try {
    process.send({ id, result: await host[method](...args) });
  } catch (error) {
    process.send({ id, error: String(error?.stack ?? error) });
  }
});
