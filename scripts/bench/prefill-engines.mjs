// The engines of the benchmark's prefill section: the main table's (ours: lib.attention() on q, k
// and v copied in; onnxruntime-web's two graphs; web/bench/engines.mjs) and, in the hosts that ask
// for them (spec.peaks ⊆ ['simd128', 'relaxed']), the multiply-add peak probes of
// scripts/bench/peak.mjs as engines of their own, timed in the same rounds: a shape's share of the
// peak divides two figures measured under the same load. A probe the engine cannot run (relaxed
// SIMD in WebKit, or in Node without its flag) is left out.
import { createEngines } from '../../web/bench/engines.mjs';
import { peakEngine, peakModule } from './peak.mjs';

export const PEAK_NAMES = { simd128: 'wasm mul+add peak (SIMD128)', relaxed: 'wasm FMA peak (relaxed SIMD)' };
// The build (lib.info.simd) whose limit each probe measures.
export const PEAK_BUILDS = { simd128: 'simd128', relaxed: 'relaxed-simd' };

export async function createPrefillEngines(spec, deps) {
  const peaks = (spec.peaks ?? []).filter((kind) => WebAssembly.validate(peakModule(kind).bytes));
  return [...(await createEngines(spec, deps)), ...peaks.map((kind) => peakEngine(kind, PEAK_NAMES[kind], { simd: PEAK_BUILDS[kind] }))];
}
