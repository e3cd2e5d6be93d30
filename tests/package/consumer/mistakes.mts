// Deliberate mistakes, each checked by tests/package/package.test.mjs for the message every
// TypeScript it runs (7, and 5.9) gives on the line after its `// error:` comment: the message
// must name the mistake. Not part of the consumers that must compile (typed.mts).
import { loadAttention } from 'attention-wasm';

const lib = await loadAttention({ layers: true });
const q = new Float32Array(8);
const cache = lib.createKVCache({ kvHeads: 2, headDim: 4, maxSeq: 8 });
const layer = new lib.MultiHeadAttention({ embedDim: 8, numHeads: 2 });

// error: 'casual' does not exist in type 'CachedAttentionOptions'. Did you mean to write 'causal'?
lib.attention(q, cache, null, { heads: 2, seqQ: 1, casual: true });
// error: Argument of type 'Float32Array<ArrayBuffer>' is not assignable to parameter of type 'null'.
lib.attention(q, cache, q, { heads: 2, seqQ: 1 });
// error: Property 'heads' is missing in type '{ seqQ: number; }' but required in type 'CachedAttentionOptions'.
lib.attention(q, cache, null, { seqQ: 1 });
// error: Type '"upper-left"' is not assignable to type
lib.attention(q, cache, null, { heads: 2, seqQ: 1, causal: 'upper-left' });
// error: 'casual' does not exist in type 'AttentionOptions'. Did you mean to write 'causal'?
lib.attention(q, q, q, { heads: 2, seqQ: 1, headDim: 4, casual: true });
// error: Property 'headDim' is missing in type '{ heads: number; seqQ: number; }' but required in type 'AttentionOptions'.
lib.attention(q, q, q, { heads: 2, seqQ: 1 });
// error: Argument of type 'null' is not assignable to parameter of type 'Float32Array<ArrayBufferLike>'.
lib.attention(q, q, null, { heads: 2, seqQ: 1, headDim: 4 });
// error: Property 'maxSeq' is missing in type '{ kvHeads: number; headDim: number; }'
lib.createKVCache({ kvHeads: 2, headDim: 4 });
// error: Property 'maxSeq' is missing in type '{ batch: number; }'
layer.createCache({ batch: 1 });
