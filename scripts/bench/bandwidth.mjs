// This machine's read bandwidth as WebAssembly sees it, from a tiny module written here byte by
// byte (like peak.mjs, so the browser page and Node measure the same code with no build step):
// a SIMD streaming read of a buffer — 8 v128.loads (128 bytes) per iteration into 4 i32x4.add
// chains — the least work a pass over K and V can do. The decode section measures it on a buffer
// of the size a decode step reads, so it is the bandwidth of the cache level (or memory) that
// step streams from, and a step's bytes ÷ time is shown as a share of it.
import { get, section, set, SIMD, uleb } from './wasm-bytes.mjs';

const name = (s) => { const b = new TextEncoder().encode(s); return [b.length, ...b]; };
const OP = { load: [SIMD, 0x00], add: [SIMD, 0xae, 0x01], extract0: [SIMD, 0x1b, 0] };
const LOADS = 8, CHAINS = 4;
export const STEP = 16 * LOADS;  // bytes per iteration: buffers are multiples of it
const PAGE = 65536;

// (func (export "read") (param $at i32) (param $end i32) (result i32)): reads [$at, $end), a
// multiple of STEP bytes long and at least STEP, and returns a checksum (so nothing is skipped);
// (memory (export "mem") 1).
export function readModule() {
  // locals: 0 = $at, 1 = $end, 2 .. 2 + CHAINS = accumulators
  const acc = (c) => 2 + c;
  const body = [0x03, 0x40];  // loop
  for (let l = 0; l < LOADS; l++) {
    // v128.load offset=16·l (align 2^4); i32x4.add into chain l % CHAINS
    body.push(...get(acc(l % CHAINS)), ...get(0), ...OP.load, 4, ...uleb(16 * l), ...OP.add, ...set(acc(l % CHAINS)));
  }
  // $at = $at + STEP (local.tee); br_if 0 ($at <_u $end); end
  body.push(...get(0), 0x41, ...uleb(STEP), 0x6a, 0x22, 0, ...get(1), 0x49, 0x0d, 0, 0x0b);
  body.push(...get(acc(0)));
  for (let c = 1; c < CHAINS; c++) body.push(...get(acc(c)), ...OP.add);
  body.push(...OP.extract0, 0x0b);  // i32x4.extract_lane 0; end
  const func = [1, CHAINS, 0x7b, ...body];
  return new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 1, 0x7f]),  // type (i32, i32) → i32
    ...section(3, [1, 0]),
    ...section(5, [1, 0, 1]),  // memory: 1 page to start, grown to the buffer
    ...section(7, [2, ...name('read'), 0, 0, ...name('mem'), 2, 0]),
    ...section(10, [1, ...uleb(func.length), ...func])]);
}

// A reader: resize(bytes) sets the buffer to `bytes` (rounded up to STEP; memory grows as needed
// and is never given back, so one reader serves every size in turn), run() streams the whole
// buffer once and returns its checksum. The buffer is written first, so its pages are real
// memory, not the zero page.
export async function createReader(bytes) {
  const { instance } = await WebAssembly.instantiate(readModule(), {});
  const { read, mem } = instance.exports;
  const base = PAGE;  // the first page stays unused: address 0 is not part of a buffer
  let size = 0;
  const reader = {
    get bytes() { return size; },
    resize(n) {
      if (!(n > 0)) throw new RangeError(`createReader: bytes must be positive, got ${n}`);
      size = Math.ceil(n / STEP) * STEP;
      const pages = Math.ceil((base + size) / PAGE);
      const have = mem.buffer.byteLength / PAGE;
      if (pages > have) mem.grow(pages - have);
      new Uint8Array(mem.buffer, base, size).fill(1);
      return reader;
    },
    run: () => read(base, base + size),
  };
  return reader.resize(bytes);
}

// GB/s of one streaming read over `bytes` (median of `reps` timed samples after a time-based
// warm-up, so that V8 has tiered the loop up; a sample is as many passes as take about
// SAMPLE_MS, for coarse browser clocks), for a figure outside the benchmark's scheduler.
const SAMPLE_MS = 20;
export async function measureBandwidth(bytes, { warmMs = 500, reps = 11 } = {}) {
  const reader = await createReader(bytes);
  const warmStart = performance.now();
  let passes = 0;
  while (performance.now() < warmStart + warmMs || passes < 2) reader.run(), passes++;
  const calls = Math.max(1, Math.round(SAMPLE_MS / ((performance.now() - warmStart) / passes)));
  const times = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    for (let c = 0; c < calls; c++) reader.run();
    times.push((performance.now() - t0) / calls);
  }
  times.sort((a, b) => a - b);
  return reader.bytes / (times[reps >> 1] * 1e6);
}
