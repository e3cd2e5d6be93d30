// Attention in plain JavaScript ('bhsd', optional grouped K/V heads and causal masking): the
// baseline the benchmark and the demo's playground compare the library against. Written the way
// a careful JS programmer would: typed arrays, hoisted offsets, one pass per row.
export function plainAttention(q, k, v, { batch = 1, heads, kvHeads = heads, seqQ, seqK = seqQ, headDim, causal = false, out }) {
  const scale = 1 / Math.sqrt(headDim);
  const o = out ?? new Float32Array(batch * heads * seqQ * headDim);
  const scores = new Float32Array(seqK);
  const group = heads / kvHeads;
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      const qBase = (b * heads + h) * seqQ * headDim;
      const kBase = (b * kvHeads + Math.floor(h / group)) * seqK * headDim;
      for (let i = 0; i < seqQ; i++) {
        const qi = qBase + i * headDim;
        const visible = causal ? Math.min(seqK, i + 1 + seqK - seqQ) : seqK;
        const oi = qBase + i * headDim;
        o.fill(0, oi, oi + headDim);
        if (visible <= 0) continue;
        let max = -Infinity;
        for (let j = 0; j < visible; j++) {
          const kj = kBase + j * headDim;
          let dot = 0;
          for (let d = 0; d < headDim; d++) dot += q[qi + d] * k[kj + d];
          const s = dot * scale;
          scores[j] = s;
          if (s > max) max = s;
        }
        let sum = 0;
        for (let j = 0; j < visible; j++) {
          const e = Math.exp(scores[j] - max);
          scores[j] = e;
          sum += e;
        }
        for (let j = 0; j < visible; j++) {
          const w = scores[j] / sum;
          const vj = kBase + j * headDim;
          for (let d = 0; d < headDim; d++) o[oi + d] += w * v[vj + d];
        }
      }
    }
  }
  return o;
}
