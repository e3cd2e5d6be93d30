// lib.rotary(): rotary position embeddings (RoPE) on a [batch, heads, seq, headDim] or
// [batch, seq, heads, headDim] tensor, by the C++ kernel in src/layer/rotary.cpp. Every argument is
// checked here before the heap is touched.
import { heap } from './heap.mjs';
import { bool, checkFloat32, checkKnownKeys, describe, dim, elementCount, formula, given, kindOf, resolveLayout } from './shapes.mjs';

const FN = 'rotary';
const OPTIONS = ['batch', 'heads', 'seq', 'headDim', 'layout', 'rotaryDim', 'base', 'interleaved', 'positionOffset',
  'positions', 'cos', 'sin', 'out'];
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function number(options, name) {
  const value = options[name];
  if (typeof value !== 'number') throw new TypeError(`${FN}: options.${name} must be a number, got ${describe(value)}`);
  return value;
}

// Where row t sits: { offset } (positionOffset + t) or { positions, perBatch } (positions[t] or
// positions[b, t]); `range` is [lowest, highest] position, for the table check.
function resolvePositions(options, batch, seq) {
  if (given(options.positions) && given(options.positionOffset)) {
    throw new TypeError(`${FN}: options.positions and options.positionOffset exclude each other (row t is at positions[t], or at positionOffset + t)`);
  }
  if (given(options.positions)) {
    const positions = options.positions;
    if (kindOf(positions) !== 'Int32Array') {
      throw new TypeError(`${FN}: options.positions must be an Int32Array ([seq] or [batch, seq]), got ${describe(positions)}`);
    }
    if (positions.length !== seq && positions.length !== batch * seq) {
      throw new RangeError(`${FN}: options.positions has length ${positions.length}, expected ${seq} ([seq ${seq}])` +
        (batch > 1 ? ` or ${batch * seq} ([batch ${batch}, seq ${seq}])` : ''));
    }
    return { positions, perBatch: positions.length !== seq, offset: 0 };
  }
  const offset = given(options.positionOffset) ? number(options, 'positionOffset') : 0;
  if (!Number.isInteger(offset) || offset < INT32_MIN || offset + seq - 1 > INT32_MAX) {
    throw new RangeError(`${FN}: options.positionOffset must be an integer with positionOffset + seq - 1 within int32 (${INT32_MIN} … ${INT32_MAX}), got ${offset}`);
  }
  return { positions: undefined, perBatch: false, offset };
}

// The optional tables: { cos, sin, maxPosition } or undefined; checks every position (of `seq`
// rows placed as `where` says) is inside.
function resolveTables(options, rotaryDim, where, seq) {
  if (!given(options.cos) && !given(options.sin)) return undefined;
  if (!given(options.cos) || !given(options.sin)) {
    throw new TypeError(`${FN}: options.cos and options.sin go together (tables [maxPosition, rotaryDim/2])`);
  }
  if (given(options.base)) {
    throw new TypeError(`${FN}: options.base and options.cos/sin exclude each other (the tables replace base)`);
  }
  const half = rotaryDim / 2;
  for (const name of ['cos', 'sin']) {
    if (kindOf(options[name]) !== 'Float32Array') {
      throw new TypeError(`${FN}: options.${name} must be a Float32Array [maxPosition, rotaryDim/2], got ${describe(options[name])}`);
    }
  }
  const maxPosition = options.cos.length / half;
  if (!Number.isInteger(maxPosition) || maxPosition < 1) {
    throw new RangeError(`${FN}: options.cos has length ${options.cos.length}, not a positive multiple of rotaryDim/2 (${half}): the tables are [maxPosition, rotaryDim/2]`);
  }
  checkFloat32('options.sin', options.sin, options.cos.length, `like options.cos: maxPosition ${maxPosition} × rotaryDim/2 ${half}`, FN);
  const tableRange = `the cos/sin tables hold positions 0 … ${maxPosition - 1}`;
  if (where.positions) {
    const i = where.positions.findIndex((p) => p < 0 || p >= maxPosition);
    if (i >= 0) throw new RangeError(`${FN}: options.positions[${i}] = ${where.positions[i]} is outside the tables: ${tableRange}`);
  } else if (where.offset < 0 || where.offset + seq - 1 >= maxPosition) {
    throw new RangeError(`${FN}: positions ${where.offset} … ${where.offset + seq - 1} (positionOffset + row) are outside the tables: ${tableRange}`);
  }
  return { cos: options.cos, sin: options.sin, maxPosition };
}

// Checks the options of rotary(); returns everything the kernel call needs.
function resolveRotary(x, options) {
  checkKnownKeys(FN, options, OPTIONS, 'options', ' with at least heads, seq and headDim');
  const size = (name, fallback) => dim(options, name, fallback, 'options', FN);
  const heads = size('heads');
  const seq = size('seq');
  const headDim = size('headDim');
  const batch = size('batch', 1);
  const layout = resolveLayout(FN, options);
  const parts = layout === 'bshd'
    ? [['batch', batch], ['seq', seq], ['heads', heads], ['headDim', headDim]]
    : [['batch', batch], ['heads', heads], ['seq', seq], ['headDim', headDim]];
  const count = elementCount(parts);
  checkFloat32('x', x, count, formula(parts), FN);

  const rotaryDim = size('rotaryDim', headDim);
  if (rotaryDim % 2 !== 0 || rotaryDim > headDim) {
    throw new RangeError(`${FN}: options.rotaryDim ${rotaryDim} must be even and ≤ headDim ${headDim}`);
  }
  let base = 10000;
  if (given(options.base)) {
    base = number(options, 'base');
    if (!(Number.isFinite(base) && base > 0)) throw new RangeError(`${FN}: options.base must be finite and > 0, got ${base}`);
  }
  const interleaved = bool(options, 'interleaved', false, 'options', FN);
  const where = resolvePositions(options, batch, seq);
  const tables = resolveTables(options, rotaryDim, where, seq);
  const out = given(options.out) ? options.out : undefined;
  if (out) checkFloat32('options.out', out, count, formula(parts), FN);
  // (No spreads: in V8 a spread followed by more properties takes microseconds a call.)
  const { positions, perBatch, offset } = where;
  return { batch, heads, seq, headDim, layout, rotaryDim, base, interleaved, positions, perBatch, offset, tables, out, count };
}

// Large tensors go through wasm memory in chunks of whole rows (every batch entry and head, in
// multiples of the kernel's 32-row blocks, so results equal one whole call's): each chunk is
// still in cache when it is rotated and copied out, which takes about half the time of copying
// everything in, rotating, and copying everything out. Not in the threaded build: V8 copies into
// and out of a SharedArrayBuffer 2.5-3x slower in pieces below a few MiB than in one piece
// (measured on this project's machine), so there the tensor goes in and out whole.
const CHUNK_BYTES = 2 ** 19;
const BLOCK_ROWS = 32;  // kRowsPerBlock in src/layer/rotary.cpp

// Rows per chunk, and how a chunk lies in x: `pieces` contiguous runs of `pieceRow` floats per
// row (per (batch, head) in bhsd, per batch entry in bshd; one run when a chunk is all of x).
function chunking(r, sharedHeap) {
  const rowFloats = r.batch * r.heads * r.headDim;  // one row of every batch entry and head
  const rows = sharedHeap ? r.seq
    : Math.min(r.seq, Math.max(1, Math.floor(CHUNK_BYTES / (4 * rowFloats * BLOCK_ROWS))) * BLOCK_ROWS);
  if (rows === r.seq) return { rows, rowFloats, pieces: 1, pieceRow: rowFloats };
  const bshd = r.layout === 'bshd';
  return { rows, rowFloats, pieces: bshd ? r.batch : r.batch * r.heads, pieceRow: bshd ? r.heads * r.headDim : r.headDim };
}

// True when `out` shares memory with `x` without being the very same elements (in place).
function overlapsPartially(x, out) {
  if (!out || out.buffer !== x.buffer || out.byteOffset === x.byteOffset) return false;
  return x.byteOffset < out.byteOffset + out.byteLength && out.byteOffset < x.byteOffset + x.byteLength;
}

// `block`: the module's call blocks (call-block.mjs), where each chunk's call is written.
export function makeRotary(M, arena, block) {
  return function rotary(x, options) {
    const r = resolveRotary(x, options);
    const { rows, rowFloats, pieces, pieceRow } = chunking(r, kindOf(M.HEAPF32.buffer) === 'SharedArrayBuffer');
    const src = overlapsPartially(x, r.out) ? x.slice() : x;
    const out = r.out ?? new Float32Array(r.count);
    // (A chunk of all of x is given as `src`: in a shared heap it is placed at src's address modulo
    // 8, where V8 copies into shared memory 6-8 times faster than across remainders; heap.mjs.)
    const call = arena.stage(FN, { positions: r.positions, cos: r.tables?.cos, sin: r.tables?.sin }, { chunk: rows === r.seq ? src : rows * rowFloats });
    const chunk = call.address('chunk');
    for (let t0 = 0; t0 < r.seq; t0 += rows) {
      const n = Math.min(rows, r.seq - t0), piece = n * pieceRow;
      const end = chunk + 4 * pieces * piece;  // what the chunk's copies touch
      let heapF32 = heap(M, end).HEAPF32;
      for (let i = 0; i < pieces; i++) {
        const from = (i * r.seq + t0) * pieceRow;
        heapF32.set(src.subarray(from, from + piece), (chunk >>> 2) + i * piece);
      }
      const error = M.rotary(block.writeRotary({
        x: chunk, positions: r.positions ? call.address('positions') + 4 * t0 : 0,
        positionsBatchStride: r.perBatch ? r.seq : 0, positionOffset: r.offset + t0,
        cos: call.address('cos'), sin: call.address('sin'), tablePositions: r.tables ? r.tables.maxPosition : 0,
        batch: r.batch, heads: r.heads, seq: n, headDim: r.headDim, rotaryDim: r.rotaryDim, bshd: r.layout === 'bshd',
        interleaved: r.interleaved, base: r.base,
      }), call.budget);
      if (error) throw call.error(error);
      heapF32 = heap(M, end).HEAPF32;  // fresh: the kernel's allocations may have grown memory
      for (let i = 0; i < pieces; i++) {
        const from = (i * r.seq + t0) * pieceRow;
        out.set(heapF32.subarray((chunk >>> 2) + i * piece, (chunk >>> 2) + (i + 1) * piece), from);
      }
    }
    return out;
  };
}
