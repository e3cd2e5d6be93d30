// "Which keys a query may see": the masks and score variants of current models as small
// pictures, each computed by lib.attentionWeights with the option it shows. Every score is 0
// (queries and keys of zeros), so a picture shows the rule alone: the visible keys share the
// weight evenly, hidden ones are greyed — except where the variant itself changes the weights
// (sinks take a share, ALiBi favours near keys). Softcap gets its own picture: one query whose
// scores are given, with and without the cap.
import { format } from './i18n.mjs';
import { renderMatrix, sup } from './matrix-view.mjs';
import { formatNumber } from './numbers.mjs';
import { $, el } from './dom.mjs';

// Each picture: its shape, the attention options (from the control's value, if it has one).
export const PICTURES = [
  { key: 'lowerRight', seqQ: 3, seqK: 6, options: () => ({ causal: true }) },
  { key: 'upperLeft', seqQ: 3, seqK: 6, options: () => ({ causal: 'upper-left' }) },
  { key: 'window', seqQ: 6, seqK: 6, control: { min: 0, max: 5, step: 1, value: 2 }, options: (v) => ({ causal: true, window: [v, 0] }) },
  { key: 'sinks', seqQ: 6, seqK: 6, control: { min: -2, max: 4, step: 0.5, value: 1 }, options: (v) => ({ causal: true, sinks: Float32Array.of(v) }) },
  { key: 'alibi', seqQ: 6, seqK: 6, control: { min: 0, max: 2, step: 0.1, value: 0.7 }, options: (v) => ({ causal: true, alibiSlopes: Float32Array.of(v) }) },
];
export const SOFTCAP = { scores: [-2, 0, 2, 4, 8, 16], control: { min: 1, max: 20, step: 1, value: 5 } };

function slider(id, { min, max, step, value }, onInput) {
  const input = el('input', { id, type: 'range', min, max, step, value });
  const shown = el('output', { htmlFor: id, textContent: formatNumber(value) });
  input.addEventListener('input', () => { shown.textContent = formatNumber(Number(input.value)); onInput(); });
  return { input, shown };
}

export function startMaskPictures(lib, strings) {
  const container = $('mask-pictures');
  const parts = PICTURES.map((p) => {
    const caption = el('figcaption');
    const table = el('table', { id: `mask-${p.key}`, className: 'heat mask' });
    const figure = el('figure', { className: 'mask-picture' }, caption);
    let control = null;
    if (p.control) {
      control = slider(`mask-${p.key}-value`, p.control, () => render());
      control.label = el('span');
      figure.append(el('label', { className: 'mask-control' }, control.label, ' ', control.input, ' ', control.shown));
    }
    figure.append(table);
    container.append(figure);
    return { p, caption, table, control };
  });
  const softcapControl = slider('mask-softcap-value', SOFTCAP.control, () => render());
  const softcapLabel = el('span');
  $('softcap-control').replaceChildren(el('label', { className: 'mask-control' }, softcapLabel, ' ', softcapControl.input, ' ', softcapControl.shown));

  function render() {
    const t = strings();
    const state = {};
    for (const { p, caption, table, control } of parts) {
      const value = control ? Number(control.input.value) : undefined;
      const { seqQ, seqK } = p;
      const options = { heads: 1, seqQ, seqK, headDim: 1, ...p.options(value) };
      const weights = lib.attentionWeights(new Float32Array(seqQ), new Float32Array(seqK), options);
      // Where query row i sits among the keys: i + off (the rule each option follows).
      const off = options.causal === 'upper-left' ? 0 : seqK - seqQ;
      const hidden = (i, j) => (j > i + off ? 'causal' : options.window && j < i + off - options.window[0] ? 'window' : null);
      const sums = Array.from({ length: seqQ }, (_, i) => weights.subarray(i * seqK, (i + 1) * seqK).reduce((a, b) => a + b, 0));
      caption.innerHTML = format(t[`mask_${p.key}`], { v: value });
      if (control) control.label.innerHTML = t[`mask_${p.key}Control`];
      renderMatrix(table, weights, seqQ, seqK, {
        rowLabel: (i) => `q${sup(i + off + 1)}`, colLabel: (j) => `k${sup(j + 1)}`, corner: t.cornerLooksAt, heat: true, digits: 2,
        special: (i, j) => {
          const by = hidden(i, j);
          return by && { text: '', className: `masked ${by === 'causal' ? 'masked-causal' : 'masked-key'}`,
            title: format(by === 'causal' ? t.maskCausalTitle : t.maskWindowTitle, { i: sup(i + off + 1), j: sup(j + 1) }) };
        },
        extraColumn: p.key === 'sinks' ? { title: t.maskSink, value: (i) => formatNumber(1 - sums[i], 2) } : null,
      });
      state[p.key] = { seqQ, seqK, options: { ...options, sinks: options.sinks && [...options.sinks], alibiSlopes: options.alibiSlopes && [...options.alibiSlopes] },
        weights: [...weights], sums };
    }
    // Softcap: one query (q = 1) and keys equal to the scores (headDim 1, scale 1).
    const c = Number(softcapControl.input.value);
    const key = Float32Array.from(SOFTCAP.scores);
    const options = { heads: 1, seqQ: 1, seqK: key.length, headDim: 1, scale: 1 };
    const plain = lib.attentionWeights(Float32Array.of(1), key, options);
    const capped = lib.attentionWeights(Float32Array.of(1), key, { ...options, softcap: c });
    const scores = Float32Array.from([...SOFTCAP.scores, ...SOFTCAP.scores.map((s) => c * Math.tanh(s / c))]);
    const cols = { colLabel: (j) => `k${sup(j + 1)}`, corner: '' };
    softcapLabel.innerHTML = t.mask_softcapControl;
    renderMatrix($('softcap-scores'), scores, 2, key.length, { ...cols, rowLabel: ['z', `${c}·tanh(z/${c})`], digits: 2 });
    renderMatrix($('softcap-weights'), Float32Array.from([...plain, ...capped]), 2, key.length,
      { ...cols, rowLabel: [t.softcapWithout, t.softcapWith], heat: true, digits: 2 });
    $('softcap-text').innerHTML = format(t.softcapText, { c, top: formatNumber(plain[key.length - 1], 2), capped: formatNumber(capped[key.length - 1], 2) });
    state.softcap = { c, scores: SOFTCAP.scores, capped: [...scores.subarray(key.length)], plain: [...plain], weights: [...capped] };
    window.attentionDemo.masks = state;
  }

  return render;
}
