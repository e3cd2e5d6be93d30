// The page side of scripts/bench/browser-hosts.mjs: the engines of ?specs= (JSON list, see
// web/bench/engines.mjs; spec.section 'prefill', 'decode', 'variants' or 'model': prefill-engines.mjs,
// decode-engines.mjs, variant-engines.mjs or model-engines.mjs) as one bench host on
// window.benchHost; window.benchReady when loaded.
import { createEngines } from '/web/bench/engines.mjs';
import { createBenchHost } from '/web/bench/host.mjs';
import { createDecodeEngines } from '/bench/decode-engines.mjs';
import { createModelEngines } from '/bench/model-engines.mjs';
import { measurePeak } from '/bench/peak.mjs';
import { createPrefillEngines } from '/bench/prefill-engines.mjs';
import { createVariantEngines } from '/bench/variant-engines.mjs';

const ENGINES = { main: createEngines, prefill: createPrefillEngines, decode: createDecodeEngines, variants: createVariantEngines, model: createModelEngines };

async function depsFor(kind) {
  if (kind === 'ours') return { createAttention: (await import('/dist/index.mjs')).createAttention, dist: new URL('/dist/', location.href) };
  if (kind === 'ort') return { ort: await import('/vendor/onnxruntime-web/ort.wasm.min.mjs'), ortWasmPaths: '/vendor/onnxruntime-web/' };
  if (kind === 'tfjs') {
    globalThis.tf.wasm.setWasmPaths('/vendor/tfjs-backend-wasm/');
    return { tf: globalThis.tf, tfWasm: globalThis.tf.wasm };
  }
  return {};
}

const specs = JSON.parse(new URLSearchParams(location.search).get('specs'));
const engines = [];
const failed = [];
for (const spec of specs) {
  try {
    for (const engine of await ENGINES[spec.section ?? 'main'](spec, await depsFor(spec.kind))) {
      // An explicit simd128 request where 'auto' already chose simd128 measures nothing new.
      const twin = engines.find((e) => e.lib && engine.lib && e.config.threads === engine.config.threads && e.config.simd === engine.config.simd);
      if (twin) failed.push({ label: engine.name, reason: `same build as ${twin.name} (${engine.config.simd})` });
      else engines.push(engine);
    }
  } catch (error) {
    failed.push({ label: JSON.stringify(spec), reason: String(error?.message ?? error) });
  }
}
const host = createBenchHost(engines);
window.benchHost = {
  ...host,
  failed: () => failed,
  peak: (kind, options) => measurePeak(kind, options),
  about: () => ({
    crossOriginIsolated: globalThis.crossOriginIsolated, sharedMemory: typeof SharedArrayBuffer === 'function',
    cores: navigator.hardwareConcurrency, userAgent: navigator.userAgent,
  }),
};
window.benchReady = true;
