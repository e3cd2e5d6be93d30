// The worker recipe of docs/api.md: the library in a module worker, threads where the page is
// cross-origin isolated.
import { loadAttention } from 'attention-wasm';

const loading = loadAttention();  // starts at once; messages wait for it
self.onmessage = async ({ data }) => {
  try {
    const lib = await loading;
    const out = lib.attention(data.q, data.k, data.v, data.options);
    self.postMessage({ info: lib.info, out: [...out] });
  } catch (error) {
    self.postMessage({ error: `${error.name}: ${error.message}` });
  }
};
