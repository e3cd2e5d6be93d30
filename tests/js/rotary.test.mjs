// lib.rotary() against the JS reference (reference.mjs) and against literal transcriptions of
// Hugging Face's rotate_half and GPT-J's rotate_every_two; chunking, in place and overlapping
// outputs; every error path; fast-check properties (rotating by p then by −p is the identity; a
// common position shift keeps every q·k); and the precision statement against transformers'
// float32 formula.
//
// Tolerance: the kernel rounds cos and sin of the double-precision angle to float and rotates in
// float, so each output of a pair (x1, x2) is within 2⁻²²·(|x1| + |x2|) of the exact rotation
// (≤ 4.8e-7 for inputs in [-1, 1]), plus |position|·2⁻⁴⁹ for the double angle's own rounding.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { after, before, describe, test } from 'node:test';
import { createAttention } from '../../dist/node.mjs';
import { referenceRotary } from './reference.mjs';
import { loadAttention, randomTensor, rng } from './helpers.mjs';

// The default library (threaded in Node: the whole tensor is staged at once) and a
// single-threaded one (large tensors are staged in chunks of rows): both staging paths.
let lib, single;
before(async () => { [lib, single] = await Promise.all([loadAttention(), createAttention({ threads: 1 })]); });
after(() => single.dispose());
const both = () => [['default', lib], ['single-threaded', single]];

const TOLERANCE = 2 ** -21;  // 2⁻²²·(|x1| + |x2|) with |x| ≤ 1

function assertCloseRotary(got, want, what, maxPosition = 0) {
  assert.equal(got.length, want.length, `${what}: length`);
  const tol = TOLERANCE + Math.abs(maxPosition) * 2 ** -49;
  for (let i = 0; i < got.length; i++) {
    if (!(Math.abs(got[i] - want[i]) <= tol)) assert.fail(`${what}[${i}] = ${got[i]}, want ${want[i]} (tolerance ${tol})`);
  }
}

const maxAbs = (a) => (a ? a.reduce((m, v) => Math.max(m, Math.abs(v)), 0) : 0);
const count = (o) => (o.batch ?? 1) * o.heads * o.seq * o.headDim;
const randomPositions = (n, random, lo, hi) => Int32Array.from({ length: n }, () => lo + Math.floor(random() * (hi - lo)));
function randomTables(maxPosition, rotaryDim, random) {
  const n = maxPosition * rotaryDim / 2;
  return { cos: randomTensor(n, random), sin: randomTensor(n, random) };  // any values: used as given
}

describe('rotary() against the reference', () => {
  test('pairings × layouts × partial dims × positions (offset, 1-D, per batch) × tables', () => {
    const random = rng(12);
    const dims = [[8, 8], [9, 6], [64, 64], [20, 10], [34, 34], [5, 2], [130, 128]];
    const modes = ['default', 'offset', 'shared', 'perBatch', 'tables', 'tablesPerBatch'];
    for (const layout of ['bhsd', 'bshd']) {
      for (const interleaved of [false, true]) {
        for (const [headDim, rotaryDim] of dims) {
          for (const mode of modes) {
            const o = { batch: 2, heads: 3, seq: 37, headDim, layout, interleaved };
            if (rotaryDim !== headDim) o.rotaryDim = rotaryDim;
            if (mode === 'offset') o.positionOffset = -1000;
            if (mode === 'shared') o.positions = randomPositions(o.seq, random, -50000, 50000);
            if (mode === 'perBatch') o.positions = randomPositions(2 * o.seq, random, 0, 2 ** 31 - 1);
            if (mode.startsWith('tables')) {
              Object.assign(o, randomTables(40, rotaryDim, random));
              o.positions = randomPositions(mode === 'tables' ? o.seq : 2 * o.seq, random, 0, 40);
            }
            const x = randomTensor(count(o), random);
            const what = `${layout} ${interleaved ? 'interleaved' : 'half'} ${headDim}/${rotaryDim} ${mode}`;
            assertCloseRotary(lib.rotary(x, o), referenceRotary(x, o), what, o.cos ? 0 : maxAbs(o.positions) + 1000);
          }
        }
      }
    }
  });

  test('defaults: batch 1, bhsd, rotaryDim = headDim, base 10000, rotate_half, positions 0, 1, 2, …', () => {
    const x = randomTensor(2 * 5 * 16, rng(3));
    const full = { batch: 1, heads: 2, seq: 5, headDim: 16, layout: 'bhsd', rotaryDim: 16, base: 10000, interleaved: false, positionOffset: 0 };
    assert.deepEqual(lib.rotary(x, { heads: 2, seq: 5, headDim: 16 }), lib.rotary(x, full));
    assert.deepEqual(lib.rotary(x, { heads: 2, seq: 5, headDim: 16, positions: Int32Array.from([0, 1, 2, 3, 4]) }), lib.rotary(x, full));
    // null means the same as undefined.
    assert.deepEqual(lib.rotary(x, { heads: 2, seq: 5, headDim: 16, batch: null, positions: null, cos: null, sin: null, out: null }), lib.rotary(x, full));
    // Position 0 is the identity.
    assert.deepEqual(lib.rotary(x, { heads: 2, seq: 1, headDim: 16 * 5 }), x);
  });
});

// transformers' LlamaRotaryEmbedding.forward + apply_rotary_pos_emb for one row, transcribed in
// float64: emb = cat(freqs, freqs), q·cos(emb) + rotate_half(q)·sin(emb) with rotate_half(q) =
// cat(−q2, q1), on the first rotaryDim dimensions; the rest concatenated back (GPT-NeoX, Phi).
function hfRow(q, pos, rotaryDim, base) {
  const invFreq = Array.from({ length: rotaryDim / 2 }, (_, i) => 1 / base ** ((2 * i) / rotaryDim));
  const freqs = invFreq.map((f) => pos * f);
  const emb = [...freqs, ...freqs];
  const qRot = Array.from(q.slice(0, rotaryDim)), half = rotaryDim / 2;
  const rotated = [...qRot.slice(half).map((v) => -v), ...qRot.slice(0, half)];
  return [...qRot.map((v, i) => v * Math.cos(emb[i]) + rotated[i] * Math.sin(emb[i])), ...q.slice(rotaryDim)];
}

// GPT-J's fixed_pos_embedding + apply_rotary_pos_emb for one row: sin and cos duplicated per pair
// (duplicate_interleave), rotate_every_two(q) = stack(−q[1::2], q[::2]) flattened.
function gptjRow(q, pos, rotaryDim, base) {
  const invFreq = Array.from({ length: rotaryDim / 2 }, (_, i) => 1 / base ** ((2 * i) / rotaryDim));
  const cos = invFreq.flatMap((f) => [Math.cos(pos * f), Math.cos(pos * f)]);
  const sin = invFreq.flatMap((f) => [Math.sin(pos * f), Math.sin(pos * f)]);
  const qRot = Array.from(q.slice(0, rotaryDim));
  const rotated = qRot.map((v, i) => (i % 2 === 0 ? -qRot[i + 1] : qRot[i - 1]));
  return [...qRot.map((v, i) => v * cos[i] + rotated[i] * sin[i]), ...q.slice(rotaryDim)];
}

test('the conventions of transformers (rotate_half) and GPT-J (interleaved), partial rotary included', () => {
  const random = rng(5);
  for (const [headDim, rotaryDim, base] of [[64, 64, 10000], [80, 32, 10000], [128, 128, 500000], [256, 64, 10000]]) {
    const positions = Int32Array.from([0, 1, 7, 31, 32, 511, 2047, 4096, 100000]);
    const seq = positions.length;
    const x = randomTensor(seq * headDim, random);
    const o = { heads: 1, seq, headDim, rotaryDim, base, positions };
    const half = lib.rotary(x, o), interleaved = lib.rotary(x, { ...o, interleaved: true });
    for (let t = 0; t < seq; t++) {
      const row = x.subarray(t * headDim, (t + 1) * headDim), what = `${headDim}/${rotaryDim} position ${positions[t]}`;
      assertCloseRotary(half.subarray(t * headDim, (t + 1) * headDim), hfRow(row, positions[t], rotaryDim, base), `HF ${what}`, positions[t]);
      assertCloseRotary(interleaved.subarray(t * headDim, (t + 1) * headDim), gptjRow(row, positions[t], rotaryDim, base), `GPT-J ${what}`, positions[t]);
    }
  }
});

// transformers computes inv_freq, the angles and their cos/sin in float32 ("Force float32" in
// LlamaRotaryEmbedding.forward), and rotates in the model's dtype; transcribed here for float32
// models with Math.fround after every operation.
function hfFloat32Row(q, pos, rotaryDim, base) {
  const f = Math.fround, half = rotaryDim / 2;
  const out = Array.from(q);
  for (let c = 0; c < half; c++) {
    const invFreq = f(1 / f(base ** f((2 * c) / rotaryDim)));
    const angle = f(f(pos) * invFreq);
    const cos = f(Math.cos(angle)), sin = f(Math.sin(angle));
    out[c] = f(f(q[c] * cos) - f(q[c + half] * sin));
    out[c + half] = f(f(q[c + half] * cos) + f(q[c] * sin));
  }
  return out;
}

test('precision: angles in double; the difference from transformers\' float32 formula is that formula\'s rounding', (t) => {
  // For pair c at position p, HF's float32 angle carries a relative error up to
  // (ln(base)·2c/rotaryDim + 3)·2⁻²⁴ (the exponent, pow, 1/x and p·inv_freq roundings), so its
  // outputs sit within (|x1| + |x2|)·(|angle|·that + 2⁻²²) of the exact rotation; ours within
  // (|x1| + |x2|)·2⁻²². The test checks both bounds and reports the largest differences seen.
  const random = rng(9), headDim = 128, half = 64;
  const positions = Int32Array.from([1, 17, 100, 2047, 4095, 8191, 32767, 65535, 131071]);
  const seq = positions.length;
  for (const base of [10000, 500000]) {
    const x = randomTensor(seq * headDim, random);
    const ours = lib.rotary(x, { heads: 1, seq, headDim, base, positions });
    const exact = referenceRotary(x, { heads: 1, seq, headDim, base, positions });
    const worst = new Map();
    for (let r = 0; r < seq; r++) {
      const p = positions[r], row = x.subarray(r * headDim, (r + 1) * headDim);
      const hf = hfFloat32Row(row, p, headDim, base);
      for (let d = 0; d < headDim; d++) {
        const c = d % half, size = Math.abs(row[c]) + Math.abs(row[c + half]), i = r * headDim + d;
        const angle = p * base ** (-2 * c / headDim);
        const ourBound = size * 2 ** -22, hfBound = size * (angle * (Math.log(base) * 2 * c / headDim + 3) * 2 ** -24 + 2 ** -22);
        assert.ok(Math.abs(ours[i] - exact[i]) <= ourBound, `ours, position ${p} dim ${d}`);
        assert.ok(Math.abs(hf[d] - exact[i]) <= hfBound, `HF float32 formula, position ${p} dim ${d}`);
        worst.set(p, Math.max(worst.get(p) ?? 0, Math.abs(ours[i] - hf[d])));
      }
    }
    t.diagnostic(`base ${base}: max |ours − HF float32| by position: ${[...worst].map(([p, e]) => `${p}: ${e.toExponential(1)}`).join(', ')}`);
  }
});

describe('memory: chunks, in place, overlapping outputs', () => {
  // 64 heads × 64 dims = 4096 floats per row: chunks of 32 rows, so seq 100 takes four chunks.
  test('tensors larger than one chunk, both layouts, per-batch positions and tables', () => {
    const random = rng(21);
    for (const [name, library] of both()) for (const layout of ['bhsd', 'bshd']) {
      for (const extra of [{}, { interleaved: true, rotaryDim: 48 }, { positions: randomPositions(200, random, -9999, 9999) },
        { ...randomTables(128, 64, random), positionOffset: 28 }]) {
        const o = { batch: 2, heads: 32, seq: 100, headDim: 64, layout, ...extra };
        const x = randomTensor(count(o), random);
        assertCloseRotary(library.rotary(x, o), referenceRotary(x, o), `${name} ${layout} ${Object.keys(extra)}`, 10000);
      }
    }
  });

  test('results do not depend on where rows are split (at multiples of 32) nor on the staging', () => {
    const o = { heads: 64, headDim: 64, layout: 'bshd', positionOffset: 5 };
    const x = randomTensor(100 * 64 * 64, rng(2));
    const whole = lib.rotary(x, { ...o, seq: 100 });
    assert.deepEqual(single.rotary(x, { ...o, seq: 100 }), whole);
    const split = 64 * 64 * 64;
    const first = lib.rotary(x.subarray(0, split), { ...o, seq: 64 });
    const rest = lib.rotary(x.subarray(split), { ...o, seq: 36, positionOffset: 5 + 64 });
    assert.deepEqual(whole, Float32Array.from([...first, ...rest]));
  });

  test('out: returned as given; out: x rotates in place; an overlapping out still sees the original x', () => {
    for (const [name, library] of both()) checkOutputs(name, library);
  });

  function checkOutputs(name, library) {
    const o = { batch: 2, heads: 32, seq: 50, headDim: 64, positionOffset: 3 };
    const n = count(o), x = randomTensor(n, rng(8)), want = referenceRotary(x, o), original = x.slice();
    const out = new Float32Array(n);
    assert.equal(library.rotary(x, { ...o, out }), out);
    assertCloseRotary(out, want, `${name}: out`);
    const copy = x.slice();
    assert.equal(library.rotary(copy, { ...o, out: copy }), copy);
    assertCloseRotary(copy, want, `${name}: in place`);
    const same = new Float32Array(copy.buffer);  // another view of the same elements: in place too
    copy.set(x);
    library.rotary(copy, { ...o, out: same });
    assertCloseRotary(same, want, `${name}: in place through another view`);
    for (const shift of [n / 2, -n / 2 + 3]) {  // out starts inside x, or x inside out
      const buffer = new Float32Array(2 * n);
      const xAt = shift > 0 ? 0 : -shift, outAt = shift > 0 ? shift : 0;
      const xs = buffer.subarray(xAt, xAt + n), outs = buffer.subarray(outAt, outAt + n);
      xs.set(x);
      library.rotary(xs, { ...o, out: outs });
      assertCloseRotary(outs, want, `${name}: overlap ${shift}`);
    }
    assert.deepEqual(x, original, `${name}: x untouched when out is another array`);
  }

  test('the kernel frees what it allocates', () => {
    const o = { batch: 2, heads: 4, seq: 70, headDim: 24, positions: randomPositions(140, rng(1), 0, 100) };
    const x = randomTensor(count(o), rng(4));
    lib.rotary(x, o);
    const before = lib.memoryUsage().heapInUse;
    for (let i = 0; i < 200; i++) lib.rotary(x, { ...o, interleaved: i % 2 === 0 });
    assert.equal(lib.memoryUsage().heapInUse, before);
  });
});

describe('rotary() argument errors', () => {
  const base = { batch: 2, heads: 2, seq: 4, headDim: 64 };
  const x = randomTensor(count(base), rng(1));
  const call = (changes = {}, array = x) => () => lib.rotary(array, { ...base, ...changes });
  function throwsFrom(fn, type, message) {
    assert.throws(fn, (e) => {
      assert.equal(e.constructor, type, `error type for ${message}: got ${e.constructor.name}: ${e.message}`);
      assert.match(e.message, message);
      return true;
    });
  }
  const table = (positions, half = 32) => ({ cos: new Float32Array(positions * half), sin: new Float32Array(positions * half) });

  test('options object, unknown options, dims, layout', () => {
    throwsFrom(() => lib.rotary(x), TypeError, /^rotary: options must be an object with at least heads, seq and headDim, got undefined$/);
    throwsFrom(call({ seqQ: 4 }), TypeError, /^rotary: unknown option 'seqQ' \(known options: batch, heads, seq, headDim, layout, rotaryDim, base, interleaved, positionOffset, positions, cos, sin, out\)$/);
    for (const name of ['heads', 'seq', 'headDim']) {
      throwsFrom(call({ [name]: undefined }), TypeError, new RegExp(`^rotary: options\\.${name} is required \\(a positive integer\\)$`));
    }
    for (const name of ['batch', 'heads', 'seq', 'headDim']) {
      throwsFrom(call({ [name]: '2' }), TypeError, new RegExp(`^rotary: options\\.${name} must be a number, got string "2"$`));
      for (const bad of [0, -1, 1.5, NaN, Infinity]) {
        throwsFrom(call({ [name]: bad }), RangeError, new RegExp(`^rotary: options\\.${name} must be a positive integer, got ${bad}$`));
      }
      throwsFrom(call({ [name]: 2 ** 31 }), RangeError, new RegExp(`^rotary: options\\.${name} must be at most 2147483647 \\(2\\^31 − 1`));
    }
    throwsFrom(call({ layout: 'bsdh' }), RangeError, /^rotary: options\.layout must be 'bhsd' or 'bshd', got string "bsdh"$/);
  });

  test('x and out', () => {
    throwsFrom(call({}, [1, 2, 3]), TypeError, /^rotary: x must be a Float32Array, got Array\(3\)$/);
    throwsFrom(call({}, new Float64Array(1024)), TypeError, /^rotary: x must be a Float32Array, got Float64Array\(1024\)$/);
    throwsFrom(() => lib.rotary(undefined, base), TypeError, /^rotary: x must be a Float32Array, got undefined$/);
    throwsFrom(call({}, new Float32Array(5)), RangeError, /^rotary: x has length 5, expected 1024 \(batch 2 × heads 2 × seq 4 × headDim 64\)$/);
    throwsFrom(call({ layout: 'bshd' }, new Float32Array(5)), RangeError, /^rotary: x has length 5, expected 1024 \(batch 2 × seq 4 × heads 2 × headDim 64\)$/);
    throwsFrom(call({ out: new Float64Array(1024) }), TypeError, /^rotary: options\.out must be a Float32Array, got Float64Array\(1024\)$/);
    throwsFrom(call({ out: new Float32Array(3) }), RangeError, /^rotary: options\.out has length 3, expected 1024 \(batch 2 × heads 2 × seq 4 × headDim 64\)$/);
  });

  test('rotaryDim, base, interleaved', () => {
    for (const bad of [7, 66, 63]) throwsFrom(call({ rotaryDim: bad }), RangeError, new RegExp(`^rotary: options\\.rotaryDim ${bad} must be even and ≤ headDim 64$`));
    throwsFrom(call({ rotaryDim: 0 }), RangeError, /^rotary: options\.rotaryDim must be a positive integer, got 0$/);
    throwsFrom(call({ rotaryDim: 2.5 }), RangeError, /^rotary: options\.rotaryDim must be a positive integer, got 2\.5$/);
    throwsFrom(call({ rotaryDim: '8' }), TypeError, /^rotary: options\.rotaryDim must be a number, got string "8"$/);
    throwsFrom(call({ headDim: 1 }, new Float32Array(16)), RangeError, /^rotary: options\.rotaryDim 1 must be even and ≤ headDim 1$/);
    throwsFrom(call({ base: '1e4' }), TypeError, /^rotary: options\.base must be a number, got string "1e4"$/);
    for (const bad of [0, -2, NaN, Infinity]) throwsFrom(call({ base: bad }), RangeError, new RegExp(`^rotary: options\\.base must be finite and > 0, got ${bad}$`));
    throwsFrom(call({ interleaved: 1 }), TypeError, /^rotary: options\.interleaved must be a boolean, got number 1$/);
  });

  test('positions and positionOffset', () => {
    throwsFrom(call({ positions: new Int32Array(4), positionOffset: 0 }), TypeError,
      /^rotary: options\.positions and options\.positionOffset exclude each other \(row t is at positions\[t\], or at positionOffset \+ t\)$/);
    throwsFrom(call({ positions: new Float32Array(4) }), TypeError, /^rotary: options\.positions must be an Int32Array \(\[seq\] or \[batch, seq\]\), got Float32Array\(4\)$/);
    throwsFrom(call({ positions: [0, 1, 2, 3] }), TypeError, /^rotary: options\.positions must be an Int32Array .*, got Array\(4\)$/);
    throwsFrom(call({ positions: new Int32Array(5) }), RangeError, /^rotary: options\.positions has length 5, expected 4 \(\[seq 4\]\) or 8 \(\[batch 2, seq 4\]\)$/);
    throwsFrom(call({ batch: 1, positions: new Int32Array(8) }, x.subarray(512)), RangeError, /^rotary: options\.positions has length 8, expected 4 \(\[seq 4\]\)$/);
    throwsFrom(call({ positionOffset: '1' }), TypeError, /^rotary: options\.positionOffset must be a number, got string "1"$/);
    for (const bad of [1.5, NaN, 2 ** 31 - 3, -(2 ** 31) - 1]) {
      throwsFrom(call({ positionOffset: bad }), RangeError,
        new RegExp(`^rotary: options\\.positionOffset must be an integer with positionOffset \\+ seq - 1 within int32 \\(-2147483648 … 2147483647\\), got ${bad}$`));
    }
    lib.rotary(x, { ...base, positionOffset: 2 ** 31 - 4 });  // the last row at 2³¹ − 1: fine
    lib.rotary(x, { ...base, positionOffset: -(2 ** 31) });
  });

  test('cos/sin tables', () => {
    throwsFrom(call({ cos: new Float32Array(64) }), TypeError, /^rotary: options\.cos and options\.sin go together \(tables \[maxPosition, rotaryDim\/2\]\)$/);
    throwsFrom(call({ sin: new Float32Array(64) }), TypeError, /^rotary: options\.cos and options\.sin go together/);
    throwsFrom(call({ ...table(4), base: 10000 }), TypeError, /^rotary: options\.base and options\.cos\/sin exclude each other \(the tables replace base\)$/);
    throwsFrom(call({ ...table(4), cos: new Float64Array(128) }), TypeError, /^rotary: options\.cos must be a Float32Array \[maxPosition, rotaryDim\/2\], got Float64Array\(128\)$/);
    throwsFrom(call({ ...table(4), sin: [0] }), TypeError, /^rotary: options\.sin must be a Float32Array \[maxPosition, rotaryDim\/2\], got Array\(1\)$/);
    throwsFrom(call({ ...table(4), cos: new Float32Array(100) }), RangeError,
      /^rotary: options\.cos has length 100, not a positive multiple of rotaryDim\/2 \(32\): the tables are \[maxPosition, rotaryDim\/2\]$/);
    throwsFrom(call({ ...table(4), cos: new Float32Array(0) }), RangeError, /^rotary: options\.cos has length 0, not a positive multiple/);
    throwsFrom(call({ ...table(4), sin: new Float32Array(96) }), RangeError,
      /^rotary: options\.sin has length 96, expected 128 \(like options\.cos: maxPosition 4 × rotaryDim\/2 32\)$/);
    throwsFrom(call({ ...table(3) }), RangeError,
      /^rotary: positions 0 … 3 \(positionOffset \+ row\) are outside the tables: the cos\/sin tables hold positions 0 … 2$/);
    throwsFrom(call({ ...table(8), positionOffset: 5 }), RangeError, /^rotary: positions 5 … 8 \(positionOffset \+ row\) are outside the tables/);
    throwsFrom(call({ ...table(8), positionOffset: -1 }), RangeError, /^rotary: positions -1 … 2 \(positionOffset \+ row\) are outside the tables/);
    throwsFrom(call({ ...table(8), positions: Int32Array.from([0, 7, 8, 1]) }), RangeError,
      /^rotary: options\.positions\[2\] = 8 is outside the tables: the cos\/sin tables hold positions 0 … 7$/);
    throwsFrom(call({ ...table(8), positions: Int32Array.from([0, 1, 2, 3, 4, 5, 6, -1]) }), RangeError, /^rotary: options\.positions\[7\] = -1 is outside/);
    lib.rotary(x, { ...base, ...table(8), positionOffset: 4 });  // rows at 4 … 7: fine
  });

  test('nothing is touched by a failing call, and the library keeps working', () => {
    const before = lib.memoryUsage();
    const copy = x.slice();
    throwsFrom(() => lib.rotary(copy, { ...base, out: copy, ...table(3) }), RangeError, /outside the tables/);
    throwsFrom(() => lib.rotary(copy, { ...base, out: copy, rotaryDim: 5 }), RangeError, /rotaryDim 5/);
    assert.deepEqual(copy, x);
    assert.deepEqual(lib.memoryUsage(), before);
    assertCloseRotary(lib.rotary(x, base), referenceRotary(x, base), 'after errors');
  });
});

// Random shapes and settings for the properties: positions shared or per batch entry.
const shapes = fc.record({
  batch: fc.integer({ min: 1, max: 2 }),
  heads: fc.integer({ min: 1, max: 3 }),
  seq: fc.integer({ min: 1, max: 40 }),
  pairs: fc.integer({ min: 1, max: 20 }),
  pass: fc.integer({ min: 0, max: 3 }),
  layout: fc.constantFrom('bhsd', 'bshd'),
  interleaved: fc.boolean(),
  base: fc.constantFrom(10000, 500000, 100, 1.5),
  perBatch: fc.boolean(),
  seed: fc.integer({ min: 1, max: 2 ** 30 }),
}).map((c) => ({
  ...c,
  options: { batch: c.batch, heads: c.heads, seq: c.seq, headDim: 2 * c.pairs + c.pass, rotaryDim: 2 * c.pairs,
    layout: c.layout, interleaved: c.interleaved, base: c.base },
  positions: (lo, hi) => randomPositions(c.perBatch ? c.batch * c.seq : c.seq, rng(c.seed), lo, hi),
}));

describe('properties (fast-check)', () => {
  test('random calls match the reference', () => {
    fc.assert(fc.property(shapes, fc.boolean(), (s, tables) => {
      const random = rng(s.seed + 1), o = { ...s.options };
      if (tables) {
        delete o.base;
        Object.assign(o, randomTables(50, o.rotaryDim, random), { positions: s.positions(0, 50) });
      } else {
        o.positions = s.positions(-(2 ** 31), 2 ** 31 - 1);
      }
      const x = randomTensor(count(o), random);
      assertCloseRotary(lib.rotary(x, o), referenceRotary(x, o), JSON.stringify(s.options), tables ? 0 : 2 ** 31);
    }), { numRuns: 150, seed: 20261201 });
  });

  // Two rotations, each within 2⁻²²·(|x1| + |x2|) of exact and norm-preserving: within 2e-6.
  test('rotating by p then by −p is the identity (to 2e-6)', () => {
    fc.assert(fc.property(shapes, (s) => {
      const positions = s.positions(-(2 ** 20), 2 ** 20);
      const x = randomTensor(count(s.options), rng(s.seed));
      const y = lib.rotary(x, { ...s.options, positions });
      const back = lib.rotary(y, { ...s.options, positions: positions.map((p) => -p) });
      for (let i = 0; i < x.length; i++) if (!(Math.abs(back[i] - x[i]) <= 2e-6)) return false;
      return true;
    }), { numRuns: 150, seed: 11 });
  });

  // q·k depends only on the difference of their positions. Each rotated element is within 5e-7 of
  // exact, so a dot product over headDim terms of [-1, 1] inputs moves by at most 2e-6·headDim.
  test('shifting the positions of q and k by the same amount keeps every q·k (to 2e-6·headDim)', () => {
    fc.assert(fc.property(shapes, fc.integer({ min: -100000, max: 100000 }), (s, shift) => {
      const o = { ...s.options, batch: 1, layout: 'bhsd' };
      const random = rng(s.seed);
      const q = randomTensor(count(o), random), k = randomTensor(count(o), random);
      const pq = randomPositions(o.seq, random, 0, 5000), pk = randomPositions(o.seq, random, 0, 5000);
      const rotate = (x, p, by) => lib.rotary(x, { ...o, positions: p.map((v) => v + by) });
      const [q0, k0, q1, k1] = [rotate(q, pq, 0), rotate(k, pk, 0), rotate(q, pq, shift), rotate(k, pk, shift)];
      const d = o.headDim;
      for (let h = 0; h < o.heads; h++) {
        for (let i = 0; i < o.seq; i++) {
          for (let j = 0; j < o.seq; j++) {
            let before = 0, after = 0;
            for (let c = 0; c < d; c++) {
              const a = ((h * o.seq) + i) * d + c, b = ((h * o.seq) + j) * d + c;
              before += q0[a] * k0[b];
              after += q1[a] * k1[b];
            }
            if (!(Math.abs(before - after) <= 2e-6 * d)) return false;
          }
        }
      }
      return true;
    }), { numRuns: 100, seed: 5 });
  });
});
