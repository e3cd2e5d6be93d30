// Plain JavaScript attention in double precision, written from the definition for the tests.
// It shares no code with the library.

// Index of element (b, h, s, d) in a [batch, heads, seq, dim] ('bhsd') or [batch, seq, heads, dim]
// ('bshd') tensor.
export function indexOf(layout, heads, seq, dim, b, h, s, d) {
  return layout === 'bshd'
    ? ((b * seq + s) * heads + h) * dim + d
    : ((b * heads + h) * seq + s) * dim + d;
}

// The library's defaults, applied to attention() options.
function withDefaults(opts) {
  const heads = opts.heads;
  const headDim = opts.headDim;
  return {
    batch: opts.batch ?? 1, heads, kvHeads: opts.kvHeads ?? heads, seqQ: opts.seqQ, seqK: opts.seqK ?? opts.seqQ,
    headDim, valueDim: opts.valueDim ?? headDim, layout: opts.layout ?? 'bhsd', scale: opts.scale ?? 1 / Math.sqrt(headDim),
  };
}

// Whether query row i (of seqQ) may see key j (of seqK) under opts.causal and opts.window, from
// their definitions: query i sits at key position i + off, off = 0 for 'upper-left', else
// seqK − seqQ; causal: j ≤ i + off; window [left, right]: i + off − left ≤ j ≤ i + off + right.
export function visibleByPosition(opts, seqQ, seqK, i, j) {
  const off = opts.causal === 'upper-left' ? 0 : seqK - seqQ;
  const pos = i + off;
  if (opts.causal && j > pos) return false;
  if (opts.window && (j < pos - opts.window[0] || j > pos + opts.window[1])) return false;
  return true;
}

// The index into a mask of element (b, h, i, j) of [batch, heads, seqQ, seqK]: the mask's shape is
// `dims` (PyTorch's mask.shape, broadcast as PyTorch does: aligned from the right, a dimension of 1
// repeated; or nn.MultiheadAttention's 3-D [batch·heads, seqQ, seqK]) or, without dims, one of
// [seqQ, seqK], [batch, 1, seqQ, seqK], [batch, heads, seqQ, seqK] by its length.
export function maskIndexer(dims, length, batch, heads, seqQ, seqK) {
  if (!dims) {
    const plane = seqQ * seqK;
    if (length === plane) return (b, h, i, j) => i * seqK + j;
    if (length === batch * plane) return (b, h, i, j) => b * plane + i * seqK + j;
    return (b, h, i, j) => ((b * heads + h) * seqQ + i) * seqK + j;
  }
  if (dims.length === 3 && dims[0] === batch * heads && dims[0] > 1) {
    return (b, h, i, j) => ((b * heads + h) * dims[1] + (dims[1] === 1 ? 0 : i)) * seqK + j;
  }
  const d = [...Array(4 - dims.length).fill(1), ...dims];
  return (b, h, i, j) => {
    const at = [d[0] === 1 ? 0 : b, d[1] === 1 ? 0 : h, d[2] === 1 ? 0 : i, d[3] === 1 ? 0 : j];
    return ((at[0] * d[1] + at[1]) * d[2] + at[2]) * d[3] + at[3];
  };
}

// The masks of attention() options, as a function (b, h, i, j) → { add, visible }: `mask` added,
// `attendMask` (nonzero = may attend), `blockMask` (nonzero = masked), with `maskShape`; and
// `keyPaddingMask` [batch, seqK] (nonzero = padding) or `attentionMask` (nonzero = a real token).
export function maskRule(opts, batch, heads, seqQ, seqK) {
  if (opts.mask instanceof Uint8Array) throw new TypeError('reference: a boolean mask is attendMask or blockMask');
  const mask = opts.mask ?? opts.attendMask ?? opts.blockMask ?? null;
  const index = mask ? maskIndexer(opts.maskShape, mask.length, batch, heads, seqQ, seqK) : null;
  return (b, h, i, j) => {
    let add = 0, visible = true;
    if (opts.mask) add = opts.mask[index(b, h, i, j)];
    if (opts.attendMask && !opts.attendMask[index(b, h, i, j)]) visible = false;
    if (opts.blockMask && opts.blockMask[index(b, h, i, j)]) visible = false;
    if (opts.keyPaddingMask?.[b * seqK + j]) visible = false;
    if (opts.attentionMask && !opts.attentionMask[b * seqK + j]) visible = false;
    return { add, visible };
  };
}

// Returns { out, weights, lse, slopes, sinkWeights } (Float64Arrays; out in the same layout as
// the query; weights [batch, heads, seqQ, seqK]; lse [batch, heads, seqQ], −∞ for a row with no
// visible key and no sink; slopes: d(capped)/d(uncapped) per score, 1 without softcap;
// sinkWeights: each row's exp(sink)/denominator). Each score, in this order: scale·q·k →
// softcap·tanh(s/softcap) → − slope·|i + off − j| (ALiBi) → masks → softmax with the sink
// exp(sink_h) in the denominator.
export function referenceAttention(query, key, value, opts) {
  const { batch, heads, kvHeads, seqQ, seqK, headDim, valueDim, layout, scale } = withDefaults(opts);
  const masks = maskRule(opts, batch, heads, seqQ, seqK);
  const softcap = opts.softcap || 0;
  const group = heads / kvHeads;
  const out = new Float64Array(batch * heads * seqQ * valueDim);
  const weights = new Float64Array(batch * heads * seqQ * seqK);
  const lse = new Float64Array(batch * heads * seqQ).fill(-Infinity);
  const slopes = new Float64Array(batch * heads * seqQ * seqK).fill(1);
  const sinkWeights = new Float64Array(batch * heads * seqQ);
  const off = opts.causal === 'upper-left' ? 0 : seqK - seqQ;

  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      const kvh = Math.floor(h / group);
      const slope = opts.alibiSlopes ? opts.alibiSlopes[opts.alibiSlopes.length === heads ? h : b * heads + h] : 0;
      const sink = opts.sinks ? opts.sinks[h] : -Infinity;
      for (let i = 0; i < seqQ; i++) {
        const row = (b * heads + h) * seqQ + i;
        const scores = new Float64Array(seqK);
        const visible = new Array(seqK).fill(true);
        for (let j = 0; j < seqK; j++) {
          let dot = 0;
          for (let d = 0; d < headDim; d++) {
            dot += query[indexOf(layout, heads, seqQ, headDim, b, h, i, d)] *
              key[indexOf(layout, kvHeads, seqK, headDim, b, kvh, j, d)];
          }
          let s = scale * dot;
          if (softcap) {
            const t = Math.tanh(s / softcap);
            s = softcap * t;
            slopes[row * seqK + j] = 1 - t * t;
          }
          s -= slope * Math.abs(i + off - j);
          if (!visibleByPosition(opts, seqQ, seqK, i, j)) visible[j] = false;
          const { add, visible: seen } = masks(b, h, i, j);
          s += add;
          if (!seen) visible[j] = false;
          if (s === -Infinity) visible[j] = false;
          scores[j] = s;
        }
        let max = sink;
        for (let j = 0; j < seqK; j++) if (visible[j] && scores[j] > max) max = scores[j];
        let sum = sink === -Infinity ? 0 : Math.exp(sink - max);
        for (let j = 0; j < seqK; j++) {
          scores[j] = visible[j] ? Math.exp(scores[j] - max) : 0;
          sum += scores[j];
        }
        if (sum === 0) continue;  // every key masked: zeros
        lse[row] = max + Math.log(sum);
        if (sink !== -Infinity) sinkWeights[row] = Math.exp(sink - max) / sum;
        for (let j = 0; j < seqK; j++) {
          const w = scores[j] / sum;
          weights[row * seqK + j] = w;
          if (!value) continue;
          for (let c = 0; c < valueDim; c++) {
            out[indexOf(layout, heads, seqQ, valueDim, b, h, i, c)] +=
              w * value[indexOf(layout, kvHeads, seqK, valueDim, b, kvh, j, c)];
          }
        }
      }
    }
  }
  return { out, weights, lse, slopes, sinkWeights };
}

// y[rows × outF] = x[rows × inF] · Wᵀ + b, W [outF × inF] (nn.Linear), in double precision.
export function referenceLinear(x, rows, inF, w, b, outF) {
  const y = new Float64Array(rows * outF);
  for (let i = 0; i < rows; i++) {
    for (let o = 0; o < outF; o++) {
      let s = b ? b[o] : 0;
      for (let k = 0; k < inF; k++) s += x[i * inF + k] * w[o * inF + k];
      y[i * outF + o] = s;
    }
  }
  return y;
}

// torch.nn.MultiheadAttention (batch_first) with separate q/k/v weights and optional grouped
// K/V heads, as wide as current models (config.headDim: Q and the attention output have numHeads ·
// headDim features; config.scale; a projection's bias when `weights` has it), plus the layer's
// variants (config.rotary, window, softcap, alibi as slopes, and weights.sinks). `weights` holds
// wq, wk, wv, wo and (optionally) bq, bk, bv, bo, sinks. Masks are the options of attention()
// (maskRule), with heads = numHeads. Returns { out, weights }: weights per head [batch, heads,
// seqQ, seqK], or with opts.averageAttnWeights their mean over the heads [batch, seqQ, seqK].
export function referenceMha(config, weights, query, key, value, opts = {}) {
  const { embedDim: e, numHeads: h } = config;
  const numKvHeads = config.numKvHeads ?? h;
  const kdim = config.kdim ?? e;
  const vdim = config.vdim ?? e;
  const hd = config.headDim ?? e / h;
  const qf = h * hd;
  const kv = numKvHeads * hd;
  const batch = opts.batch ?? 1;
  const seqQ = query.length / (batch * e);
  const k = key ?? query;
  const v = value ?? k;
  const seqK = k.length / (batch * (key ? kdim : e));
  let q = referenceLinear(query, batch * seqQ, e, weights.wq, weights.bq, qf);
  let kp = referenceLinear(k, batch * seqK, key ? kdim : e, weights.wk, weights.bk, kv);
  const vp = referenceLinear(v, batch * seqK, value ? vdim : key ? kdim : e, weights.wv, weights.bv, kv);
  // config.rotary: Q and K rotated after projection; keys at positions 0… (or opts.keyOffset, a
  // cache's length), queries at off + t (off as for causal), or both at opts.positions.
  if (config.rotary) {
    const r = { rotaryDim: config.rotary.rotaryDim ?? hd, base: config.rotary.base, interleaved: config.rotary.interleaved,
      cos: config.rotary.cos, sin: config.rotary.sin, batch, headDim: hd, layout: 'bshd' };
    const keyOffset = opts.keyOffset ?? 0;
    const queryOffset = opts.keyOffset !== undefined ? keyOffset : opts.causal === 'upper-left' ? 0 : seqK - seqQ;
    const at = (offset) => (opts.positions ? { positions: opts.positions } : { positionOffset: offset });
    q = referenceRotary(q, { ...r, heads: h, seq: seqQ, ...at(queryOffset) });
    kp = referenceRotary(kp, { ...r, heads: numKvHeads, seq: seqK, ...at(keyOffset) });
  }
  // One additive mask [batch, heads, seqQ, seqK] holding the masks given.
  let mask;
  if (['mask', 'attendMask', 'blockMask', 'keyPaddingMask', 'attentionMask'].some((name) => opts[name])) {
    const rule = maskRule(opts, batch, h, seqQ, seqK);
    mask = new Float64Array(batch * h * seqQ * seqK);
    for (let b = 0; b < batch; b++) {
      for (let hh = 0; hh < h; hh++) {
        for (let i = 0; i < seqQ; i++) {
          for (let j = 0; j < seqK; j++) {
            const { add, visible } = rule(b, hh, i, j);
            mask[((b * h + hh) * seqQ + i) * seqK + j] = visible ? add : -Infinity;
          }
        }
      }
    }
  }
  const a = referenceAttention(q, kp, vp, {
    batch, heads: h, kvHeads: numKvHeads, seqQ, seqK, headDim: hd, layout: 'bshd', causal: opts.causal, mask,
    window: config.window, softcap: config.softcap, alibiSlopes: config.alibi, sinks: weights.sinks, scale: config.scale,
  });
  let attnWeights = a.weights;
  if (opts.averageAttnWeights) {
    const plane = seqQ * seqK;
    attnWeights = new Float64Array(batch * plane);
    for (let b = 0; b < batch; b++) {
      for (let hh = 0; hh < h; hh++) {
        for (let j = 0; j < plane; j++) attnWeights[b * plane + j] += a.weights[(b * h + hh) * plane + j] / h;
      }
    }
  }
  return { out: referenceLinear(a.out, batch * seqQ, qf, weights.wo, weights.bo, e), weights: attnWeights };
}

// Gradients of L = Σ out ⊙ dOut with respect to query, key, value (and sinks), in double
// precision, from the probabilities of referenceAttention: dV = Pᵀ·dO, dP = dO·Vᵀ,
// D = rowsum(P ⊙ dP), dS = P ⊙ (dP − D) ⊙ softcap slope, dQ = scale·dS·K, dK = scale·dSᵀ·Q
// (summed over the query heads of each kv head), dSinks_h = −Σ_rows P(sink)·D.
export function referenceAttentionBackward(query, key, value, dOut, opts) {
  const { batch, heads, kvHeads, seqQ, seqK, headDim, valueDim, layout, scale } = withDefaults(opts);
  const group = heads / kvHeads;
  const { weights, slopes, sinkWeights } = referenceAttention(query, key, value, opts);
  const dSinks = opts.sinks ? new Float64Array(heads) : undefined;
  const dQuery = new Float64Array(query.length);
  const dKey = new Float64Array(key.length);
  const dValue = new Float64Array(value.length);
  const at = indexOf;
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      const kvh = Math.floor(h / group);
      for (let i = 0; i < seqQ; i++) {
        const p = weights.subarray(((b * heads + h) * seqQ + i) * seqK, ((b * heads + h) * seqQ + i + 1) * seqK);
        const dp = new Float64Array(seqK);
        let dsum = 0;
        for (let j = 0; j < seqK; j++) {
          for (let c = 0; c < valueDim; c++) {
            const g = dOut[at(layout, heads, seqQ, valueDim, b, h, i, c)];
            dp[j] += g * value[at(layout, kvHeads, seqK, valueDim, b, kvh, j, c)];
            dValue[at(layout, kvHeads, seqK, valueDim, b, kvh, j, c)] += p[j] * g;
          }
          dsum += p[j] * dp[j];
        }
        if (dSinks) dSinks[h] -= sinkWeights[(b * heads + h) * seqQ + i] * dsum;
        for (let j = 0; j < seqK; j++) {
          const ds = p[j] * (dp[j] - dsum) * scale * slopes[((b * heads + h) * seqQ + i) * seqK + j];
          for (let d = 0; d < headDim; d++) {
            dQuery[at(layout, heads, seqQ, headDim, b, h, i, d)] += ds * key[at(layout, kvHeads, seqK, headDim, b, kvh, j, d)];
            dKey[at(layout, kvHeads, seqK, headDim, b, kvh, j, d)] += ds * query[at(layout, heads, seqQ, headDim, b, h, i, d)];
          }
        }
      }
    }
  }
  return dSinks ? { dQuery, dKey, dValue, dSinks } : { dQuery, dKey, dValue };
}

// Rotary position embeddings in double precision, from the definition: pair c of a row at
// position p (dimensions c and c + rotaryDim/2, or 2c and 2c + 1 when interleaved) is rotated by
// p·base^(−2c/rotaryDim), or by the angle whose cos and sin are row p of the given tables;
// dimensions from rotaryDim on are copied. Takes rotary() options; returns a Float64Array laid
// out like x.
export function referenceRotary(x, opts) {
  const batch = opts.batch ?? 1, { heads, seq, headDim } = opts;
  const layout = opts.layout ?? 'bhsd', rotaryDim = opts.rotaryDim ?? headDim, base = opts.base ?? 10000;
  const half = rotaryDim / 2;
  const y = Float64Array.from(x);
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      for (let t = 0; t < seq; t++) {
        const p = opts.positions ? opts.positions[opts.positions.length === seq ? t : b * seq + t] : (opts.positionOffset ?? 0) + t;
        for (let c = 0; c < half; c++) {
          const angle = p * base ** (-2 * c / rotaryDim);
          const cos = opts.cos ? opts.cos[p * half + c] : Math.cos(angle);
          const sin = opts.sin ? opts.sin[p * half + c] : Math.sin(angle);
          const i1 = indexOf(layout, heads, seq, headDim, b, h, t, opts.interleaved ? 2 * c : c);
          const i2 = indexOf(layout, heads, seq, headDim, b, h, t, opts.interleaved ? 2 * c + 1 : c + half);
          y[i1] = x[i1] * cos - x[i2] * sin;
          y[i2] = x[i1] * sin + x[i2] * cos;
        }
      }
    }
  }
  return y;
}
