// loadAttention(): idempotence, info, where the .wasm comes from (wasmUrl, wasmBinary, baseUrl,
// for every build), combinations that cannot work, and failed loads that say what was expected
// and what came instead.
import assert from 'node:assert/strict';
import { copyFile, cp, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import * as raw from '../../dist/node.mjs';
import * as simd128Entry from '../../dist/node-simd128.mjs';
import { createAttention, EXPECTED_SIMD, loadAttention, makeInputs } from './helpers.mjs';

const dist = (file) => new URL(`../../dist/${file}`, import.meta.url);
const relaxed = EXPECTED_SIMD === 'relaxed-simd';
const single = relaxed ? 'attn-relaxed.wasm' : 'attn.wasm';
const threaded = relaxed ? 'attn-relaxed-mt.wasm' : 'attn-mt.wasm';
const shape = { heads: 2, seqQ: 3, seqK: 5, headDim: 8 };
const inputs = makeInputs(shape);

let dir;
before(async () => { dir = await mkdtemp(join(tmpdir(), 'attention-wasm-')); });
after(() => rm(dir, { recursive: true, force: true }));

const pick = (info) => [info.simd, info.threads, info.layers];

// Runs a small call and disposes; returns the info.
async function works(lib) {
  try {
    assert.equal(lib.attention(inputs.query, inputs.key, inputs.value, shape).length, 2 * 3 * 8);
    return { ...lib.info };
  } finally {
    lib.dispose();
  }
}

test('a failed load rejects with an Error that names the file, and a later call can succeed', async () => {
  const missing = join(dir, 'missing', 'attn.wasm');
  await assert.rejects(loadAttention({ wasmUrl: missing }), (e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^attention-wasm: could not load options\.wasmUrl \(.*missing\/attn\.wasm\): .*ENOENT/);
    return true;
  });
  await assert.rejects(loadAttention({ wasmBinary: new Uint8Array([0, 97, 115, 109, 9, 9]) }),
    /^Error: attention-wasm: could not load options\.wasmBinary: CompileError: /);
  await assert.rejects(loadAttention({ baseUrl: join(dir, 'missing'), threads: 1, layers: false }),
    new RegExp(`^Error: attention-wasm: could not load ${single.replace('.', '\\.')} \\(the single-threaded .* build\\) from file://.*/missing/${single.replace('.', '\\.')}: .*ENOENT`));
  const lib = await loadAttention({ threads: 1 });
  assert.equal(lib.info.threads, 1);
  lib.dispose();
});

test('bad options are a TypeError or RangeError before anything loads', async () => {
  await assert.rejects(loadAttention({ wasmUrl: 42 }), /^TypeError: loadAttention: options\.wasmUrl must be a string or a URL, got number 42$/);
  await assert.rejects(loadAttention({ baseUrl: {} }), /^TypeError: loadAttention: options\.baseUrl must be a string or a URL, got Object$/);
  await assert.rejects(loadAttention({ wasmBinary: 'attn.wasm' }), /^TypeError: loadAttention: options\.wasmBinary must be an ArrayBuffer, a typed array or a WebAssembly\.Module/);
  await assert.rejects(loadAttention({ wasmPath: 'x' }), /^TypeError: loadAttention: unknown option 'wasmPath' \(known options: wasmUrl, wasmBinary, baseUrl, simd, threads, maxThreads, layers, strict, warmUp\)$/);
  await assert.rejects(loadAttention({ warmUp: 'no' }), /^TypeError: loadAttention: options\.warmUp must be a boolean, got string "no"$/);
  await assert.rejects(loadAttention({ simd: 'fma' }), /^RangeError: loadAttention: options\.simd must be 'auto', 'relaxed' or 'simd128', got string "fma"$/);
  await assert.rejects(raw.loadAttention(7), /^TypeError: loadAttention: options must be an object, got number 7$/);
  await assert.rejects(loadAttention({ wasmUrl: 'a.wasm', wasmBinary: new Uint8Array(8) }),
    /^TypeError: loadAttention: options\.wasmUrl and options\.wasmBinary cannot be combined/);
  await assert.rejects(loadAttention({ wasmUrl: 'a.wasm', baseUrl: dir }),
    /^TypeError: loadAttention: options\.wasmUrl and options\.baseUrl cannot be combined/);
});

test('wasmUrl and wasmBinary load any build; the file decides which', async () => {
  for (const file of [single, threaded]) {
    const copy = join(dir, `renamed-${file}`);
    await copyFile(dist(file), copy);
    const bytes = await readFile(dist(file));
    const compiled = await WebAssembly.compile(bytes);
    for (const options of [{ wasmUrl: pathToFileURL(copy) }, { wasmUrl: copy }, { wasmBinary: bytes },
      { wasmBinary: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) }, { wasmBinary: compiled }]) {
      const info = await works(await createAttention(options));
      assert.equal(info.simd, EXPECTED_SIMD, `${file} ${Object.keys(options)}`);
      assert.equal(info.threads > 1, file === threaded && availableParallelism() > 1, `${file}: ${info.threadsReason}`);
    }
  }
  // A threaded file with an explicit thread count.
  const info = await works(await createAttention({ wasmBinary: await readFile(dist(threaded)), threads: 3 }));
  assert.equal(info.threads, 3);
});

test('a file that contradicts the options, or is no build of this version, is named in the error', async () => {
  const singleBytes = await readFile(dist(single));
  const threadedBytes = await readFile(dist(threaded));
  await assert.rejects(createAttention({ wasmBinary: threadedBytes, threads: 1 }), (e) => {
    assert.ok(e instanceof TypeError);
    assert.equal(e.message, `createAttention: options.wasmBinary is ${threaded}, the threaded ${EXPECTED_SIMD} build, but options.threads is 1 (that needs ${single})`);
    return true;
  });
  await assert.rejects(createAttention({ wasmBinary: singleBytes, threads: 2 }),
    new RegExp(`^TypeError: createAttention: options\\.wasmBinary is ${single.replace('.', '\\.')}, the single-threaded ${EXPECTED_SIMD} build, but options\\.threads is 2 \\(that needs ${threaded.replace('.', '\\.')}\\)$`));
  const otherLevel = relaxed ? 'simd128' : 'relaxed';
  await assert.rejects(raw.createAttention({ wasmBinary: singleBytes, simd: otherLevel }),
    new RegExp(`^TypeError: createAttention: options\\.wasmBinary is ${single.replace('.', '\\.')}, .* but options\\.simd is '${otherLevel}'$`));
  // A valid module that is not one of ours (the smallest SIMD module), e.g. from another version.
  const foreign = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);
  await assert.rejects(createAttention({ wasmBinary: foreign }),
    /^Error: attention-wasm: options\.wasmBinary is not one of the builds of attention-wasm \d+\.\d+\.\d+ \(attn\.wasm, attn-layers\.wasm, attn-mt\.wasm, attn-layers-mt\.wasm, attn-relaxed\.wasm, attn-layers-relaxed\.wasm, attn-relaxed-mt\.wasm, attn-layers-relaxed-mt\.wasm\); is it from another version of the package\?$/);
  // Never Emscripten's internals (Aborted(LinkError ...), "Build with -s ASSERTIONS=1").
  for (const options of [{ wasmBinary: threadedBytes, threads: 1 }, { wasmBinary: foreign }]) {
    await assert.rejects(createAttention(options), (e) => !/Aborted|ASSERTIONS|LinkError/.test(e.message));
  }
});

test('baseUrl: every build is taken from that folder, and a wrong file there is named', async () => {
  const folder = join(dir, 'cdn');
  await mkdir(folder, { recursive: true });
  for (const base of ['attn', 'attn-mt', 'attn-relaxed', 'attn-relaxed-mt']) {
    for (const file of [`${base}.wasm`, `${base.replace(/^attn/, 'attn-layers')}.wasm`]) await copyFile(dist(file), join(folder, file));
  }
  for (const options of [{ baseUrl: folder }, { baseUrl: pathToFileURL(folder) }, { baseUrl: `${pathToFileURL(folder)}/` }]) {
    for (const layers of [false, true]) {
      assert.deepEqual(pick(await works(await createAttention({ ...options, threads: 1, layers }))), [EXPECTED_SIMD, 1, layers]);
      assert.deepEqual(pick(await works(await createAttention({ ...options, threads: 2, layers }))), [EXPECTED_SIMD, 2, layers]);
    }
  }
  await copyFile(dist(threaded), join(folder, single));  // a stale or misnamed file
  await assert.rejects(createAttention({ baseUrl: folder, threads: 1, layers: false }), (e) => {
    assert.equal(e.message, `attention-wasm: ${pathToFileURL(join(folder, single))} should be ${single} (the single-threaded ` +
      `${EXPECTED_SIMD} build) of attention-wasm ${e.message.match(/attention-wasm (\d+\.\d+\.\d+)/)[1]}, but it is ${threaded}, ` +
      `the threaded ${EXPECTED_SIMD} build`);
    return true;
  });
});

test('idempotent: later calls return the same instance, and differing options warn once', async () => {
  const warnings = [];
  const warn = console.warn;
  console.warn = (m) => warnings.push(m);
  try {
    const a = await loadAttention();
    const b = await loadAttention({});
    const c = await loadAttention({ threads: 1 });
    const d = await loadAttention({ threads: 1, maxThreads: 2 });
    assert.ok(a === b && b === c && c === d);
    assert.equal(loadAttention(), loadAttention());
    // The layers build's instance is another, with its own first options and its own warning.
    const e = await loadAttention({ layers: true });
    assert.ok(e !== a && e.info.layers && !a.info.layers);
    assert.equal(await loadAttention({ layers: true, threads: 1 }), e);
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings.length, 2, 'warns once for each instance');
  assert.match(warnings[1], /\(threads: 1 \(first call: not given\)\); it returns the instance the first call loaded \(with layers: true\)\. /);
  assert.match(warnings[0], /^attention-wasm: loadAttention\(\) was called again with other options than the first call \(threads: 1 \(first call: not given\)\); it returns the instance the first call loaded\. createAttention\(options\) makes a new instance with these options\.$/);
});

test('a later loadAttention() checks its options as the first does; createAttention() names itself', async () => {
  const lib = await loadAttention();
  try {
    for (const [options, error] of [
      [{ thread: 2 }, /^TypeError: loadAttention: unknown option 'thread' \(known options: wasmUrl, wasmBinary, baseUrl, simd, threads, maxThreads, layers, strict, warmUp\)$/],
      [{ threads: 'max' }, /^RangeError: loadAttention: options\.threads must be 'auto' or an integer from 1 to 64, got string "max"$/],
      [7, /^TypeError: loadAttention: options must be an object, got number 7$/],
    ]) {
      const later = raw.loadAttention(options);
      assert.ok(later instanceof Promise, 'a rejection, as the first call gives, not a synchronous throw');
      await assert.rejects(later, error);
    }
    assert.equal(await loadAttention(), lib, 'the instance is still the one loaded');
  } finally {
    lib.dispose();
  }
  await assert.rejects(createAttention({ threads: 'max' }), /^RangeError: createAttention: options\.threads must be 'auto' or an integer from 1 to 64, got string "max"$/);
  await assert.rejects(raw.createAttention({ thread: 2 }), /^TypeError: createAttention: unknown option 'thread'/);
});

test('info tells the version, the SIMD level and the threads chosen, and why', async () => {
  const lib = await createAttention();
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
  const cores = availableParallelism();
  const threads = Math.min(cores, 8);
  assert.deepEqual({ ...lib.info }, {
    version: pkg.version, simd: EXPECTED_SIMD,
    simdReason: relaxed ? 'requested relaxed' : 'auto: Node.js runs relaxed SIMD only under node --experimental-wasm-relaxed-simd',
    threads, threadsReason: threads === 1 ? 'one core' : `auto: ${threads} of ${cores} cores`, layers: false,
  });
  assert.ok(Object.isFrozen(lib.info) && Object.isFrozen(lib));
  lib.dispose();
});

test('warmUp: the loader warms the kernel up with small calls unless told not to', async () => {
  const cold = await createAttention({ warmUp: false });
  const warm = await createAttention();
  try {
    assert.equal(cold.memoryUsage().arena, 0, 'no call before the first one');
    assert.ok(warm.memoryUsage().arena > 0, 'the warm-up ran calls');
  } finally {
    cold.dispose();
    warm.dispose();
  }
});

test("'attention-wasm/simd128' has one build: single-threaded SIMD128", async () => {
  const lib = await simd128Entry.createAttention();
  assert.deepEqual([lib.info.simd, lib.info.threads, lib.info.threadsReason], ['simd128', 1, 'attention-wasm/simd128 is single-threaded']);
  lib.dispose();
  await assert.rejects(simd128Entry.createAttention({ threads: 2 }),
    /^TypeError: createAttention: options\.threads is 2, but attention-wasm\/simd128 has only attn\.wasm, attn-layers\.wasm; import 'attention-wasm' for threads$/);
  await assert.rejects(simd128Entry.createAttention({ simd: 'relaxed' }), /^TypeError: createAttention: options\.simd is 'relaxed', but attention-wasm\/simd128 has only attn\.wasm, attn-layers\.wasm/);
  await assert.rejects(simd128Entry.createAttention({ wasmBinary: await readFile(dist('attn-mt.wasm')) }),
    /^TypeError: createAttention: options\.wasmBinary is attn-mt\.wasm, the threaded simd128 build, which attention-wasm\/simd128 does not include \(it has attn\.wasm, attn-layers\.wasm\)$/);
});

// The loader imports the layer's JavaScript (mha.mjs) only for a layers build: a copy of the
// package without it loads the default build, and a layers load names the missing file.
test("the layer's JavaScript is imported only for a layers build, and a failed import says so", async () => {
  const copy = join(dir, 'no-layer-js');
  await cp(new URL('../../dist/', import.meta.url), copy, { recursive: true, filter: (from) => !from.endsWith('/mha.mjs') });
  const entry = await import(pathToFileURL(join(copy, 'node.mjs')).href);
  const lib = await entry.createAttention({ threads: 1, simd: 'simd128' });
  assert.equal(lib.info.layers, false);
  lib.dispose();
  await assert.rejects(entry.createAttention({ threads: 1, simd: 'simd128', layers: true }),
    /^Error: attention-wasm: could not load the layer's JavaScript \(mha\.mjs, which loadAttention\(\{ layers: true \}\) imports\): .*mha\.mjs/);
});
