// A web app that imports the package by name, bundled by Vite and by webpack.
import { loadAttention } from 'attention-wasm';

loadAttention().then((lib) => {
  const q = new Float32Array([1, 0, 0, 1]);
  const out = lib.attention(q, q, new Float32Array([1, 2, 3, 4]), { heads: 1, seqQ: 2, headDim: 2 });
  document.getElementById('result').textContent = JSON.stringify({ info: lib.info, out: [...out] });
}, (error) => {
  document.getElementById('result').textContent = `error: ${error.message}`;
});
