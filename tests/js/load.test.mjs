// loadAttention(): idempotence, info, where the .wasm comes from, and failed loads.
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { createAttention } from '../../dist/node.mjs';
import { loadAttention } from './helpers.mjs';

const wasmPath = new URL('../../dist/attn.wasm', import.meta.url);

test('a failed load rejects with a clear Error, and a later call can succeed', async () => {
  const missing = join(tmpdir(), 'attention-wasm-missing', 'attn.wasm');
  await assert.rejects(loadAttention({ wasmUrl: missing }), (e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^attention-wasm: could not load the WebAssembly module from .*attn\.wasm: .*ENOENT/);
    return true;
  });
  await assert.rejects(loadAttention({ wasmBinary: new Uint8Array([0, 97, 115, 109, 9, 9]) }),
    /^Error: attention-wasm: could not load the WebAssembly module: /);
  await assert.rejects(loadAttention({ wasmUrl: 42 }), /^TypeError: loadAttention: options\.wasmUrl must be a string or a URL, got number 42$/);
  await assert.rejects(loadAttention({ wasmPath: 'x' }), /^TypeError: loadAttention: unknown option 'wasmPath'/);
});

test('wasmUrl loads the module from another place (file URL)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'attention-wasm-'));
  try {
    const copy = join(dir, 'renamed.wasm');
    await copyFile(wasmPath, copy);
    const lib = await loadAttention({ wasmUrl: pathToFileURL(copy) });
    assert.equal(lib.info.simd, 'simd128');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('idempotent: later calls return the same instance, whatever their options', async () => {
  const a = await loadAttention();
  const b = await loadAttention({ wasmBinary: await readFile(wasmPath) });
  assert.equal(a, b);
  assert.equal(loadAttention(), loadAttention());
});

test('info tells the version, the SIMD level and the threads chosen, and why', async () => {
  const lib = await createAttention();  // (this file's shared instance was loaded with a wasmUrl)
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
  const cores = availableParallelism();
  const threads = Math.min(cores, 8);
  assert.deepEqual({ ...lib.info }, {
    version: pkg.version, simd: 'simd128', threads,
    threadsReason: threads === 1 ? 'one core' : `auto: ${threads} of ${cores} cores`,
  });
  assert.ok(Object.isFrozen(lib.info) && Object.isFrozen(lib));
  lib.dispose();
});
