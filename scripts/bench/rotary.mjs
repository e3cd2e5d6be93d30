// Times lib.rotary() on [1, 32, 2048, 128] (32 MiB of float32 input, Llama-7B's query heads at
// 2048 positions) in the single-threaded and the threaded (2 threads: Node's default here)
// builds, and prints GB/s of input processed: medians (and the fastest run) of rounds that
// interleave every variant of both, after a warm-up. Never asserted anywhere; the machine's load
// (printed) moves these numbers a lot.
//   node scripts/bench/rotary.mjs   (needs dist/: bash scripts/build.sh --wasm-only)
import { loadavg } from 'node:os';
import { createAttention } from '../../dist/node.mjs';

const libs = await Promise.all([createAttention({ threads: 1 }), createAttention({ threads: 2 })]);
const [batch, heads, seq, headDim] = [1, 32, 2048, 128];
const n = batch * heads * seq * headDim;
let state = 1;
const x = Float32Array.from({ length: n }, () => { state = (state * 1664525 + 1013904223) >>> 0; return state / 2 ** 32 - 0.5; });
const out = new Float32Array(n);
const inPlace = x.slice();
const shape = { batch, heads, seq, headDim };
const angles = Float32Array.from({ length: seq * headDim / 2 }, (_, i) => (i >> 6) / 10000 ** ((i % 64) / 64));
const cos = angles.map(Math.cos), sin = angles.map(Math.sin);

const variants = {};
for (const lib of libs) {
  const t = `${lib.info.threads} thread${lib.info.threads > 1 ? 's' : ''}`;
  Object.assign(variants, {
    [`${t}, out: a caller-owned array`]: () => lib.rotary(x, { ...shape, out }),
    [`${t}, out: x (in place)`]: () => lib.rotary(inPlace, { ...shape, out: inPlace }),
    [`${t}, layout bshd, out`]: () => lib.rotary(x, { ...shape, layout: 'bshd', out }),
    [`${t}, interleaved, out`]: () => lib.rotary(x, { ...shape, interleaved: true, out }),
    [`${t}, cos/sin tables, out`]: () => lib.rotary(x, { ...shape, cos, sin, out }),
    [`${t}, rotaryDim 64 (partial), out`]: () => lib.rotary(x, { ...shape, rotaryDim: 64, out }),
    [`${t}, no out: returns a new array`]: () => lib.rotary(x, shape),
  });
}

const warmEnd = performance.now() + 1500;
while (performance.now() < warmEnd) for (const run of Object.values(variants)) run();
const times = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
const load = loadavg()[0];
for (let round = 0; round < 40; round++) {
  for (const [name, run] of Object.entries(variants)) {
    const t0 = performance.now();
    run();
    times[name].push(performance.now() - t0);
  }
}

const gbps = (ms) => (n * 4 / (ms * 1e6)).toFixed(2);
console.log(`lib.rotary on [${batch}, ${heads}, ${seq}, ${headDim}] (${n * 4 / 2 ** 20} MiB), ` +
  `load average ${load.toFixed(2)} → ${loadavg()[0].toFixed(2)}, 40 rounds`);
for (const [name, t] of Object.entries(times)) {
  t.sort((a, b) => a - b);
  const median = t[t.length >> 1];
  console.log(`  ${name.padEnd(41)} median ${median.toFixed(2).padStart(6)} ms = ${gbps(median).padStart(5)} GB/s` +
    `   fastest ${t[0].toFixed(2).padStart(6)} ms = ${gbps(t[0]).padStart(5)} GB/s`);
}
for (const lib of libs) lib.dispose();
