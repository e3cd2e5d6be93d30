// The benchmark's shapes (B, H, Sq, Sk, D): a short sequence, BERT-sized, a long one (each also
// causal), a decode step against a 2048-token cache, and a ViT-B/16 image batch.
const square = (batch, heads, s, headDim, causal = false) => ({ batch, heads, seqQ: s, seqK: s, headDim, causal });

export const FULL_SHAPES = [
  square(1, 8, 128, 64), square(1, 8, 128, 64, true),
  square(1, 12, 512, 64), square(1, 12, 512, 64, true),
  square(1, 8, 2048, 64), square(1, 8, 2048, 64, true),
  { batch: 1, heads: 32, seqQ: 1, seqK: 2048, headDim: 128, causal: false },
  square(4, 12, 197, 64),
];
export const QUICK_SHAPES = [square(1, 12, 512, 64)];

// '--shape B,H,Sq,Sk,D[,1]' (1 = causal)
export function parseShape(text) {
  const [batch, heads, seqQ, seqK, headDim, causal] = text.split(',').map(Number);
  if (![batch, heads, seqQ, seqK, headDim].every((n) => Number.isInteger(n) && n > 0)) {
    throw new Error(`--shape wants B,H,Sq,Sk,D[,1] with positive integers, got '${text}'`);
  }
  return { batch, heads, seqQ, seqK, headDim, causal: causal === 1 };
}

export const label = (s) => `(${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim})${s.causal ? ' causal' : ''}`;
export const flops = (s) => 4 * s.batch * s.heads * s.seqQ * s.seqK * s.headDim * (s.causal && s.seqQ === s.seqK ? 0.5 : 1);
