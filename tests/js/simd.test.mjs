// Which SIMD level loads in Node (each case in a child process, with and without
// --experimental-wasm-relaxed-simd), and how far relaxed-SIMD results may be from SIMD128 ones.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import * as raw from '../../dist/node.mjs';
import { makeInputs, randomTensor, rng } from './helpers.mjs';

const FLAG = '--experimental-wasm-relaxed-simd';
const entry = new URL('../../dist/node.mjs', import.meta.url).href;

// Loads twice with `options` in a fresh node; returns { infos, warnings } or { error }.
function load(flags, options) {
  const script = `
    const warnings = [];
    console.warn = (m) => warnings.push(m);
    const { createAttention } = await import(${JSON.stringify(entry)});
    try {
      const infos = [];
      for (let i = 0; i < 2; i++) {
        const lib = await createAttention(${JSON.stringify(options)});
        infos.push({ ...lib.info });
        lib.dispose();
      }
      console.log(JSON.stringify({ infos, warnings }));
    } catch (e) {
      console.log(JSON.stringify({ error: e.constructor.name + ': ' + e.message }));
    }`;
  const args = [...flags, '--input-type=module', '-e', script];
  return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 20000 }));
}

const HOW = 'Chrome/Edge 114+ and Firefox 146+ run relaxed SIMD without flags (Safari does not, as of this writing); ' +
  'Node.js 20 needs `node --experimental-wasm-relaxed-simd` (attention-wasm never sets V8 flags itself).';

test('Node without the flag: auto gets simd128; relaxed warns once and falls back, or rejects with strict', () => {
  const auto = load([], {});
  assert.deepEqual(auto.infos.map((i) => [i.simd, i.simdReason]), Array(2).fill(['simd128', 'auto: Node.js runs relaxed SIMD only under node --experimental-wasm-relaxed-simd']));
  assert.deepEqual(auto.warnings, []);

  const asked = load([], { simd: 'relaxed', threads: 2 });
  assert.deepEqual(asked.infos.map((i) => [i.simd, i.threads]), [['simd128', 2], ['simd128', 2]]);
  assert.deepEqual(asked.infos.map((i) => i.simdReason),
    Array(2).fill('requested relaxed, but Node.js runs relaxed SIMD only under node --experimental-wasm-relaxed-simd'));
  assert.deepEqual(asked.warnings, [`attention-wasm: relaxed SIMD was requested, but this JavaScript engine does not run it; using simd128. ${HOW}`]);

  assert.deepEqual(load([], { simd: 'relaxed', strict: true }),
    { error: `Error: attention-wasm: relaxed SIMD was requested, but this JavaScript engine does not run it. ${HOW}` });

  // A relaxed .wasm given as bytes cannot fall back: the Error says why.
  const file = new URL('../../dist/attn-relaxed.wasm', import.meta.url);
  const script = `const { createAttention } = await import(${JSON.stringify(entry)});
    const { readFileSync } = await import('node:fs');
    const wasmBinary = readFileSync(new URL(${JSON.stringify(file.href)}));
    await createAttention({ wasmBinary }).catch((e) => console.log(e.message));`;
  const message = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20000 });
  assert.match(message, /^attention-wasm: could not load options\.wasmBinary: CompileError: .* \(if it is a relaxed-SIMD build: this engine does not run relaxed SIMD; Chrome\/Edge 114\+ and Firefox 146\+/);
});

test('Node with the flag: auto gets relaxed-simd (1 and 2 threads); simd128 forces the baseline', () => {
  for (const threads of [1, 2]) {
    const auto = load([FLAG], { threads });
    assert.deepEqual(auto.infos.map((i) => [i.simd, i.simdReason, i.threads]), Array(2).fill(['relaxed-simd', 'auto: relaxed SIMD runs here', threads]));
    const forced = load([FLAG], { simd: 'simd128', threads });
    assert.deepEqual(forced.infos.map((i) => [i.simd, i.simdReason, i.threads]), Array(2).fill(['simd128', 'requested simd128', threads]));
    assert.deepEqual([...auto.warnings, ...forced.warnings], []);
  }
});

// Fused multiply-add rounds once where a multiply and an add round twice, so relaxed-SIMD
// results differ from SIMD128 ones in the last bits. On inputs in [-1, 1): outputs and weights
// within 1e-6 + 1e-5·|x| of each other, gradients and projections within 1e-5 + 1e-4·|x|.
const canRelax = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1,
  123, 3, 2, 1, 0, 10, 19, 1, 17, 0, 65, 0, 253, 15, 65, 0, 253, 15, 65, 0, 253, 15, 253, 133, 2, 11]));

function near(got, want, what, atol, rtol) {
  assert.equal(got.length, want.length, what);
  let differ = 0;
  for (let i = 0; i < got.length; i++) {
    if (!Object.is(got[i], want[i])) differ++;
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= atol + rtol * Math.abs(want[i]))) assert.fail(`${what}[${i}]: relaxed ${got[i]} vs simd128 ${want[i]} (error ${err})`);
  }
  return differ / got.length;
}

test('relaxed-SIMD results match SIMD128 ones within the stated tolerance', { skip: !canRelax && `needs node ${FLAG} (the second tests/js pass of npm test)` }, async (t) => {
  const [relaxed, baseline] = await Promise.all([
    raw.createAttention({ simd: 'relaxed', strict: true, threads: 1, layers: true }),
    raw.createAttention({ simd: 'simd128', threads: 1, layers: true })]);
  try {
    assert.deepEqual([relaxed.info.simd, baseline.info.simd], ['relaxed-simd', 'simd128']);
    const fractions = [];
    for (const shape of [{ heads: 8, seqQ: 128, headDim: 64 }, { batch: 2, heads: 4, kvHeads: 2, seqQ: 33, seqK: 70, headDim: 40, causal: true },
      { heads: 32, kvHeads: 8, seqQ: 1, seqK: 300, headDim: 128 }]) {
      const { query, key, value } = makeInputs(shape, 3);
      const w = () => new Float32Array((shape.batch ?? 1) * shape.heads * shape.seqQ * (shape.seqK ?? shape.seqQ));
      const [wr, wb] = [w(), w()];
      const or = relaxed.attention(query, key, value, { ...shape, weightsOut: wr });
      const ob = baseline.attention(query, key, value, { ...shape, weightsOut: wb });
      fractions.push(near(or, ob, 'out', 1e-6, 1e-5));
      near(wr, wb, 'weights', 1e-6, 1e-5);
      const dOut = randomTensor(or.length, rng(9));
      const gr = relaxed.attentionBackward(query, key, value, dOut, shape);
      const gb = baseline.attentionBackward(query, key, value, dOut, shape);
      for (const name of ['dQuery', 'dKey', 'dValue']) near(gr[name], gb[name], name, 1e-5, 1e-4);
    }
    const x = randomTensor(50 * 96, rng(4)), weight = randomTensor(80 * 96, rng(5));
    const lin = { inFeatures: 96, outFeatures: 80 };
    near(relaxed.linear(x, weight, lin), baseline.linear(x, weight, lin), 'linear', 1e-5, 1e-4);
    t.diagnostic(`outputs that differ in any bit: ${fractions.map((f) => `${(100 * f).toFixed(0)} %`).join(', ')}`);
  } finally {
    relaxed.dispose();
    baseline.dispose();
  }
});
