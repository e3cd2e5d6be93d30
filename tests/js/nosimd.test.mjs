// An engine without WebAssembly SIMD: loadAttention() must reject with an Error that says so.
// (node --test runs each file in its own process, so stubbing the global here is contained.)
import assert from 'node:assert/strict';
import { test } from 'node:test';

test('rejects with a clear Error where WebAssembly SIMD is missing', async () => {
  const realValidate = WebAssembly.validate;
  // Engines without SIMD reject any module that uses a v128 instruction.
  WebAssembly.validate = (bytes) => !new Uint8Array(bytes).includes(253) && realValidate(bytes);
  try {
    const { loadAttention } = await import('../../dist/node.mjs');
    await assert.rejects(loadAttention(), (e) => {
      assert.ok(e instanceof Error);
      assert.match(e.message, /^attention-wasm needs WebAssembly SIMD \(simd128\), which this JavaScript engine does not support/);
      return true;
    });
  } finally {
    WebAssembly.validate = realValidate;
  }
});
