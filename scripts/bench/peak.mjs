// The host's WebAssembly multiply-add peak, from a tiny module written here byte by byte (so
// the Chromium page and Node measure the same code with no build step):
//   'simd128': 7 chains of f32x4.mul and 7 of f32x4.add by one constant (SIMD128 has no fused
//              multiply-add),
//   'relaxed': 13 chains of f32x4.relaxed_madd by two constants (FMA where the CPU has it).
// All chains are independent, so instruction throughput limits it rather than latency, as in a well-fed
// matmul micro-kernel. 15 of x64's 16 vector registers: V8 keeps one as scratch, and one local
// more makes it spill (the SIMD128 figure then drops to a third).
import { get, section, set, SIMD, uleb } from './wasm-bytes.mjs';

const f32 = (x) => [0x43, ...new Uint8Array(new Float32Array([x]).buffer)];
const OP = { splat: [SIMD, 0x13], extract0: [SIMD, 0x1f, 0], mul: [SIMD, 0xe6, 0x01], add: [SIMD, 0xe4, 0x01], madd: [SIMD, 0x85, 0x02] };

// (func (export "peak") (param $n i32) (result f32)): $n iterations of every chain.
export function peakModule(kind) {
  const chains = kind === 'relaxed' ? 13 : 14;
  // locals: 0 = $n, 1..chains = accumulators, then the constants (c; and d for a·c + d)
  const c = chains + 1, d = chains + 2;
  const body = [];
  for (let i = 1; i <= chains; i++) body.push(...f32(1 + i / 64), ...OP.splat, ...set(i));
  body.push(...f32(0.999999), ...OP.splat, ...set(c));
  if (kind === 'relaxed') body.push(...f32(1e-6), ...OP.splat, ...set(d));
  body.push(0x03, 0x40);  // loop
  for (let i = 1; i <= chains; i++) {
    if (kind === 'relaxed') body.push(...get(i), ...get(c), ...get(d), ...OP.madd, ...set(i));
    else body.push(...get(i), ...get(c), ...(i <= chains / 2 ? OP.mul : OP.add), ...set(i));
  }
  body.push(...get(0), 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0, 0x0b);  // $n -= 1; br_if $n; end
  body.push(...get(1), ...OP.extract0);
  for (let i = 2; i <= chains; i++) body.push(...get(i), ...OP.extract0, 0x92);
  body.push(0x0b);
  const locals = [1, ...uleb(kind === 'relaxed' ? chains + 2 : chains + 1), 0x7b];
  const func = [...locals, ...body];
  return {
    flopsPerIteration: chains * 4 * (kind === 'relaxed' ? 2 : 1),
    bytes: new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
      ...section(1, [1, 0x60, 1, 0x7f, 1, 0x7d]),
      ...section(3, [1, 0]),
      ...section(7, [1, 4, ...new TextEncoder().encode('peak'), 0, 0]),
      ...section(10, [1, ...uleb(func.length), ...func])]),
  };
}

// GFLOP/s (median of `reps` timed samples after a time-based warm-up, so the engine has tiered
// the loop up), or null where the engine rejects the module (relaxed SIMD in Node without its
// flag, or in WebKit). A sample is as many calls as take about SAMPLE_MS, so that a coarse clock
// (Firefox rounds performance.now() to 1 ms in pages that are not cross-origin isolated) still
// times it to a few per cent.
const SAMPLE_MS = 20;
export async function measurePeak(kind, { warmMs = 1500, reps = 15 } = {}) {
  const { bytes, flopsPerIteration } = peakModule(kind);
  if (!WebAssembly.validate(bytes)) return null;
  const { instance } = await WebAssembly.instantiate(bytes, {});
  const { peak } = instance.exports;
  const iterations = 200000;
  const warmStart = performance.now();
  let warmCalls = 0;
  while (performance.now() < warmStart + warmMs) peak(iterations), warmCalls++;
  const calls = Math.max(1, Math.round(SAMPLE_MS / ((performance.now() - warmStart) / warmCalls)));
  const times = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    for (let c = 0; c < calls; c++) peak(iterations);
    times.push((performance.now() - t0) / calls);
  }
  times.sort((a, b) => a - b);
  return (iterations * flopsPerIteration) / (times[reps >> 1] * 1e6);
}

// The probe as an engine of web/bench/host.mjs, timed in a benchmark's rounds beside the engines
// whose limit it is, under the same load: config.flopsPerCall ÷ its time is GFLOP/s.
export function peakEngine(kind, name, config = {}, iterations = 20000) {
  const { bytes, flopsPerIteration } = peakModule(kind);
  let instance = null;
  return {
    name,
    config: { ...config, how: `scripts/bench/peak.mjs, ${kind}: ${iterations} iterations of its independent chains per call`, threads: 1, flopsPerCall: iterations * flopsPerIteration },
    async prepare() {
      instance ??= (await WebAssembly.instantiate(bytes, {})).instance;
      return { run: () => instance.exports.peak(iterations) };
    },
  };
}
