// "Multi-head attention": the sentence of words.mjs through a two-head MultiHeadAttention layer
// with the same W_q, W_k = W_v = I, and W_o = I. Head 1 sees the first two dims (animal, action),
// head 2 the last two (place, relation); each takes its own softmax. The layer computes the
// weights and the output; the heads' outputs (before W_o) come from lib.attention on the
// projections, and lib.linear(concat, W_o) must give the layer's output again.
import { format } from './i18n.mjs';
import { renderMatrix } from './matrix-view.mjs';
import { formatNumber, formatScientific } from './numbers.mjs';
import { E, IDENTITY, WQ, sentence } from './sentences.mjs';
import { $ } from './dom.mjs';

const HEADS = 2;
const HEAD_DIM = E / HEADS;

export function startMultiHead(lib, strings, language) {
  const layer = new lib.MultiHeadAttention({ embedDim: E, numHeads: HEADS, bias: false });
  const layerWeights = { wq: WQ, wk: IDENTITY, wv: IDENTITY, wo: IDENTITY };
  layer.setWeights(layerWeights);

  return function render() {
    const t = strings();
    const { tokens, embedding, n, action, animal } = sentence(language());
    const headWeights = new Float32Array(HEADS * n * n);
    const out = layer.forward(embedding, null, null, { weightsOut: headWeights });
    // [n, E] rows are [n, heads, headDim]: the 'bshd' layout, so the heads need no copying.
    const lin = (w) => lib.linear(embedding, w, { inFeatures: E, outFeatures: E });
    const concat = lib.attention(lin(WQ), lin(IDENTITY), lin(IDENTITY), { heads: HEADS, seqQ: n, headDim: HEAD_DIM, layout: 'bshd' });
    const recombined = lib.linear(concat, IDENTITY, { inFeatures: E, outFeatures: E });
    const diff = out.reduce((m, y, i) => Math.max(m, Math.abs(y - recombined[i])), 0);

    const features = t.features;
    for (let h = 0; h < HEADS; h++) {
      renderMatrix($(`head${h + 1}-weights`), headWeights.subarray(h * n * n, (h + 1) * n * n), n, n, {
        rowLabel: tokens, colLabel: tokens, corner: t.cornerLooksAt, heat: true, digits: 2,
      });
      const own = Float32Array.from({ length: n * HEAD_DIM }, (_, e) => concat[Math.floor(e / HEAD_DIM) * E + h * HEAD_DIM + (e % HEAD_DIM)]);
      renderMatrix($(`head${h + 1}-output`), own, n, HEAD_DIM, {
        rowLabel: tokens, colLabel: features.slice(h * HEAD_DIM, (h + 1) * HEAD_DIM), corner: t.cornerWord, digits: 2,
      });
    }
    const concatLabels = features.map((f, c) => `${Math.floor(c / HEAD_DIM) + 1}: ${f}`);
    renderMatrix($('heads-concat'), concat, n, E, { rowLabel: tokens, colLabel: concatLabels, corner: t.cornerWord, digits: 2,
      columnClass: (c) => `head-${Math.floor(c / HEAD_DIM) + 1}` });
    renderMatrix($('heads-wo'), IDENTITY, E, E, { rowLabel: features, colLabel: concatLabels, corner: t.cornerOutIn, digits: 0 });
    renderMatrix($('heads-output'), out, n, E, { rowLabel: tokens, colLabel: features, corner: t.cornerWord, digits: 2 });
    // What a single head gave the action word (words.mjs), and what head 1 gives it here.
    const single = lib.attentionWeights(lin(WQ), lin(IDENTITY), { heads: 1, seqQ: n, headDim: E })[action * n + animal];
    $('concat-text').innerHTML = format(t.concatText, { split: formatNumber(single, 2), full: formatNumber(headWeights[action * n + animal], 2) });
    $('heads-check').innerHTML = format(t.headsCheck, { diff: formatScientific(diff, 1) });
    const badge = $('heads-badge');
    badge.textContent = diff <= 1e-6 ? t.badgeChecked : t.badgeFailed;
    badge.title = t.headsBadgeTitle;
    badge.classList.toggle('failed', diff > 1e-6);
    window.attentionDemo.heads = {
      tokens, config: { ...layer.config }, embedding: [...embedding],
      weights: Object.fromEntries(Object.entries(layerWeights).map(([k, v]) => [k, [...v]])),
      headWeights: [...headWeights], concat: [...concat], out: [...out], diff,
    };
  };
}
