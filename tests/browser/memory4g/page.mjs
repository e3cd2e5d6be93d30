// Loads the package with the options of ?options= (JSON), fills wasm memory with caches adding up
// to about 3 GiB, attends over the last one (its keys past 2 GiB) and compares with the JS
// reference, then fills memory until it runs out; leaves the figures, or { error }, in
// window.__result for tests/browser/engines.test.mjs.
import { referenceAttention } from '/tests/js/reference.mjs';

const FILLER = { kvHeads: 8, headDim: 128, maxSeq: 65536 };  // 512 MiB
const LAST = { batch: 3, kvHeads: 2, headDim: 64, valueDim: 48, maxSeq: 200000 };  // ~0.5 GiB
const random = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i * 0.7));

try {
  const { createAttention } = await import('/dist/index.mjs');
  const lib = await createAttention(JSON.parse(new URLSearchParams(location.search).get('options') ?? '{}'));
  lib.trim();
  const fillers = [];
  while (fillers.length < 5) fillers.push(lib.createKVCache(FILLER));
  const last = lib.createKVCache(LAST);
  const filled = lib.memoryUsage();
  const { batch, kvHeads, headDim, valueDim } = LAST;
  const seq = 37, heads = 4, seqQ = 5;
  const key = random(batch * kvHeads * seq * headDim, 1), value = random(batch * kvHeads * seq * valueDim, 2);
  last.append(key, value);
  const query = random(batch * heads * seqQ * headDim, 3);
  const got = lib.attention(query, last, null, { heads, seqQ, causal: true });
  const want = referenceAttention(query, key, value, { heads, seqQ, causal: true, batch, kvHeads, seqK: seq, headDim, valueDim }).out;
  let maxError = 0;
  for (let i = 0; i < got.length; i++) maxError = Math.max(maxError, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
  let oom = '';
  try {
    for (;;) fillers.push(lib.createKVCache(FILLER));
  } catch (error) {
    oom = error.message;
  }
  const full = lib.memoryUsage();
  fillers.pop().dispose();
  const again = lib.attention(query, last, null, { heads, seqQ, causal: true });
  window.__result = {
    info: { ...lib.info }, address: last.constructor.coreFor(last, 'page').address(), filled, full, maxError, oom,
    same: again.every((x, i) => x === got[i]),
  };
  for (const c of [...fillers, last]) c.dispose();
  lib.dispose();
} catch (error) {
  window.__result = { error: `${error.name}: ${error.message}` };
}
