// A Node ESM app using the installed package.
import { loadAttention } from 'attention-wasm';

const lib = await loadAttention();
const q = new Float32Array([1, 0, 0, 1]);
const out = lib.attention(q, q, new Float32Array([1, 2, 3, 4]), { heads: 1, seqQ: 2, headDim: 2 });
console.log(JSON.stringify({ info: lib.info, out: [...out] }));
