// One measurement of loading in a fresh process or page: import of the package, load
// (createAttention resolved), the first call on (1, 8, 128, 128, 64), the second, and the median
// of ten more. Used by scripts/load-timing.mjs, in Node and in a Chromium page.
export async function measure(entryUrl, options) {
  const t0 = performance.now();
  const { createAttention } = await import(entryUrl);
  const t1 = performance.now();
  const lib = await createAttention(options);
  const t2 = performance.now();
  const shape = { batch: 1, heads: 8, seqQ: 128, seqK: 128, headDim: 64 };
  const q = Float32Array.from({ length: 8 * 128 * 64 }, (_, i) => Math.sin(i) * 0.5);
  const calls = [];
  for (let i = 0; i < 12; i++) {
    const a = performance.now();
    lib.attention(q, q, q, shape);
    calls.push(performance.now() - a);
  }
  const info = { ...lib.info };
  lib.dispose();
  const later = calls.slice(2).sort((a, b) => a - b);
  return { import: t1 - t0, load: t2 - t1, first: calls[0], second: calls[1], steady: (later[4] + later[5]) / 2, info };
}
