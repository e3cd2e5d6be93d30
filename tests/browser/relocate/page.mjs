// Loads the package from ?entry= with the options of ?options= (JSON; "wasmBinaryFrom": a URL
// whose bytes become options.wasmBinary), runs one call, and leaves { info, out } or { error }
// in window.__result for tests/browser/relocate.test.mjs.
const params = new URLSearchParams(location.search);
try {
  const { createAttention } = await import(params.get('entry'));
  const { wasmBinaryFrom, ...options } = JSON.parse(params.get('options') ?? '{}');
  if (wasmBinaryFrom) options.wasmBinary = new Uint8Array(await (await fetch(wasmBinaryFrom)).arrayBuffer());
  const lib = await createAttention(options);
  const q = new Float32Array([1, 0, 0, 1]);
  const out = lib.attention(q, q, new Float32Array([1, 2, 3, 4]), { heads: 1, seqQ: 2, headDim: 2 });
  // A call big enough to be split over the threads.
  const x = new Float32Array(4 * 96 * 32).map((_, i) => Math.sin(i));
  const big = lib.attention(x, x, x, { heads: 4, seqQ: 96, headDim: 32 });
  window.__result = { info: { ...lib.info }, out: [...out], finite: big.every(Number.isFinite) };
  lib.dispose();
} catch (error) {
  window.__result = { error: `${error.name}: ${error.message}` };
}
