// The worker recipe of docs/api.md: one build (attention-wasm/simd128) in a Web Worker.
import { loadAttention } from 'attention-wasm/simd128';

const loading = loadAttention();  // starts at once; messages wait for it
self.onmessage = async ({ data }) => {
  const lib = await loading;
  const out = lib.attention(data.q, data.k, data.v, data.options);
  self.postMessage({ info: lib.info, out: [...out] });
};
