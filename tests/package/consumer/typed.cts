// The CommonJS view of the same types.
import attention = require('attention-wasm');

attention.loadAttention().then((lib: attention.AttentionLibrary) => {
  const q = new Float32Array(4);
  const out: Float32Array = lib.attention(q, q, q, { heads: 1, seqQ: 1, headDim: 4 });
  console.log(out);
  // @ts-expect-error scale must be a number
  lib.attention(q, q, q, { heads: 1, seqQ: 1, headDim: 4, scale: '1' });
});
