// A Node CommonJS app using the installed package.
const { loadAttention } = require('attention-wasm');

loadAttention().then((lib) => {
  const q = new Float32Array([1, 0, 0, 1]);
  const out = lib.attention(q, q, new Float32Array([1, 2, 3, 4]), { heads: 1, seqQ: 2, headDim: 2 });
  console.log(JSON.stringify({ info: lib.info, out: [...out] }));
});
