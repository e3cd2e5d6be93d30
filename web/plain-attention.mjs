// Attention in plain JavaScript ('bhsd', no mask): the baseline the benchmark compares against.
// Written the way a careful JS programmer would: typed arrays, hoisted offsets, one pass per row.
export function plainAttention(q, k, v, { batch = 1, heads, seqQ, seqK = seqQ, headDim, out }) {
  const scale = 1 / Math.sqrt(headDim);
  const o = out ?? new Float32Array(batch * heads * seqQ * headDim);
  const scores = new Float32Array(seqK);
  for (let bh = 0; bh < batch * heads; bh++) {
    const qBase = bh * seqQ * headDim;
    const kBase = bh * seqK * headDim;
    for (let i = 0; i < seqQ; i++) {
      const qi = qBase + i * headDim;
      let max = -Infinity;
      for (let j = 0; j < seqK; j++) {
        const kj = kBase + j * headDim;
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += q[qi + d] * k[kj + d];
        const s = dot * scale;
        scores[j] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let j = 0; j < seqK; j++) {
        const e = Math.exp(scores[j] - max);
        scores[j] = e;
        sum += e;
      }
      const oi = qBase + i * headDim;
      o.fill(0, oi, oi + headDim);
      for (let j = 0; j < seqK; j++) {
        const w = scores[j] / sum;
        const vj = kBase + j * headDim;
        for (let d = 0; d < headDim; d++) o[oi + d] += w * v[vj + d];
      }
    }
  }
  return o;
}
