// "Self-attention, step by step": four tokens a¹…a⁴ of four numbers each, every matrix computed
// live by the library — projections and Q·Kᵀ by lib.linear, weights by lib.attentionWeights,
// outputs by lib.attention — with the scale and the masks next to the tables they change. One
// query is followed through every step (the picker, or a click on a row): its input, its query,
// every key it is compared with (drawn as alignment), its row of scores and of weights, and the
// products α̂(i, j)·vʲ that add up to its output bⁱ.
import { $, el } from './dom.mjs';
import { drawAlignment } from './alignment-view.mjs';
import { format } from './i18n.mjs';
import { markRows, renderMatrix, shade, sup } from './matrix-view.mjs';
import { formatNumber, formatScientific } from './numbers.mjs';

const N = 4;  // tokens
const D = 4;  // size of each input, query, key and value (d_model = d_k)

// Chosen so that each query clearly picks one key (weights 0.7–0.8 at the 1/√d_k scale): q¹
// looks for k³, q² for k¹, q³ for k², q⁴ for k⁴. With the causal mask q¹ may not look ahead.
export const DEFAULTS = {
  inputs: [1.0, 0.2, -0.1, 0.1, 0.1, 0.9, 0.1, -0.2, -0.2, 0.1, 1.1, 0.2, 0.1, -0.1, 0.2, 1.0],
  wq: [0.2, 3.2, 0, 0.1, 0.1, 0.2, 3.3, 0, 3.4, 0, 0.3, -0.2, 0, 0.1, -0.1, 3.7],
  wk: [1.8, 0.2, 0, -0.3, 0, 1.7, 0.3, 0.2, 0.2, -0.2, 1.5, 0, -0.3, 0, 0.2, 1.8],
  wv: [0.8, -0.4, 0.2, 0.5, 0.1, 0.9, -0.6, 0.3, -0.5, 0.3, 0.7, -0.2, 0.4, 0.2, -0.3, 0.9],
};
const IDENTITY = Float32Array.from({ length: D * D }, (_, e) => (e % (D + 1) === 0 ? 1 : 0));
export const LAYER_TOLERANCE = 1e-5;  // the ✓: the layer's outputs within this of lib.attention's

// A small seeded generator for the Randomise buttons (two decimals, in [-1, 1)).
function generator(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return Math.round((x / 2 ** 32 * 2 - 1) * 100) / 100;
  };
}

// Tokens are numbered by superscripts (a², the second input), components by plain numbers in the
// column headers (the corner says which is which).
const tokenLabel = (name) => (i) => `${name}${sup(i + 1)}`;
const componentLabel = (c) => String(c + 1);
const vector = (v) => `(${[...v].map((x) => formatNumber(x, 2)).join(', ')})`;

// The products α̂(i, j)·vʲ, one row per key j, and their sum bⁱ under them: each row shaded by
// its weight, so the row bⁱ takes most from is the darkest. Shared with the search section.
export function renderProducts(table, { weights, values, n, d, sum, rowLabel, weightTitle, sumLabel, hidden, corner = '' }) {
  const rows = [];
  for (let j = 0; j < n; j++) rows.push(weights[j], ...values.subarray(j * d, (j + 1) * d).map((x) => weights[j] * x));
  rows.push(NaN, ...sum);
  renderMatrix(table, rows, n + 1, d + 1, {
    rowLabel: (r) => (r < n ? rowLabel(r) : sumLabel), corner,
    colLabel: (c) => (c === 0 ? weightTitle : componentLabel(c - 1)),
    special: (r, c) => (r === n ? (c === 0 ? { text: 'Σ =', className: 'sum' } : null)
      : hidden?.(r) ? { text: '0', className: 'masked masked-key' } : null),
    rowClass: (r) => (r === n ? 'total' : ''),
  });
  [...table.tBodies[0].rows].slice(0, n).forEach((tr, j) => {
    for (const cell of [...tr.cells].slice(1)) if (!cell.classList.contains('masked')) shade(cell, weights[j]);
  });
}

// Returns { render(), state }: render() redraws everything in the current language.
export function startWalkthrough(lib, strings) {
  const state = {
    ...Object.fromEntries(Object.entries(DEFAULTS).map(([k, v]) => [k, Float32Array.from(v)])),
    scaleMode: 'sqrt', customScale: 0.5, causal: false, maskedKeys: new Set(), selected: 1,
  };
  let random = generator(7);
  const layer = new lib.MultiHeadAttention({ embedDim: D, numHeads: 1, bias: false });
  let computed;

  const scale = () => (state.scaleMode === 'sqrt' ? 1 / Math.sqrt(D) : state.scaleMode === 'one' ? 1 : state.customScale);

  // Why key j is hidden from query i: 'causal', 'key' (masked key), or null when visible.
  const hiddenBy = (i, j) => (state.causal && j > i ? 'causal' : state.maskedKeys.has(j) ? 'key' : null);

  function compute() {
    const lin = (x, w) => lib.linear(x, w, { inFeatures: D, outFeatures: D });
    const query = lin(state.inputs, state.wq);
    const key = lin(state.inputs, state.wk);
    const value = lin(state.inputs, state.wv);
    const scores = lib.linear(query, key, { inFeatures: D, outFeatures: N });  // row i, column j: qⁱ·kʲ
    const s = scale();
    const mask = new Uint8Array(N * N).map((_, e) => (state.maskedKeys.has(e % N) ? 0 : 1));
    const options = { heads: 1, seqQ: N, headDim: D, causal: state.causal, mask, scale: s };
    const scaled = scores.map((x, e) => (hiddenBy(Math.floor(e / N), e % N) ? -Infinity : x * s));
    const weights = lib.attentionWeights(query, key, options);
    const outputs = lib.attention(query, key, value, options);
    // The layer always divides by √d_k; W_q·s·√d_k makes it use the scale s.
    layer.setWeights({ wq: state.wq.map((w) => w * s * Math.sqrt(D)), wk: state.wk, wv: state.wv, wo: IDENTITY });
    const fromLayer = layer.forward(state.inputs, null, null, { causal: state.causal, mask });
    const layerDiff = outputs.reduce((m, o, i) => Math.max(m, Math.abs(o - fromLayer[i])), 0);
    return { query, key, value, scores, scaled, weights, outputs, fromLayer, layerDiff, options };
  }

  const maskedCell = (t, text) => (i, j) => {
    const by = hiddenBy(i, j);
    if (!by) return null;
    const title = format(by === 'causal' ? t.maskedCausalTitle : t.maskedKeyTitle, { i: sup(i + 1), j: sup(j + 1) });
    return { text, className: `masked masked-${by}`, title };
  };
  const emptyRows = () => [...Array(N).keys()].filter((i) => [...Array(N).keys()].every((j) => hiddenBy(i, j)));

  function renderEditable() {
    const t = strings();
    const edit = (name) => (index, v) => { state[name][index] = v; renderDerived(); };
    renderMatrix($('inputs'), state.inputs, N, D, {
      rowLabel: tokenLabel('a'), colLabel: componentLabel, corner: t.cornerTokenDim, editable: true, onEdit: edit('inputs'), name: 'A',
    });
    for (const [w, out] of [['wq', 'q'], ['wk', 'k'], ['wv', 'v']]) {
      renderMatrix($(w), state[w], D, D, {
        rowLabel: componentLabel, colLabel: componentLabel, corner: `${out} ╲ a`, editable: true, onEdit: edit(w), name: `W${out}`,
      });
    }
  }

  function renderDerived() {
    computed = compute();
    const t = strings();
    const s = computed.options.scale;
    const tokens = { rowLabel: tokenLabel('q'), colLabel: tokenLabel('k'), corner: 'q ╲ k' };
    renderMatrix($('query'), computed.query, N, D, { rowLabel: tokenLabel('q'), colLabel: componentLabel, corner: t.cornerTokenDim });
    renderMatrix($('key'), computed.key, N, D, { rowLabel: tokenLabel('k'), colLabel: componentLabel, corner: t.cornerTokenDim });
    renderMatrix($('value'), computed.value, N, D, { rowLabel: tokenLabel('v'), colLabel: componentLabel, corner: t.cornerTokenDim });
    renderMatrix($('scores'), computed.scores, N, N, tokens);
    renderMatrix($('scaled'), computed.scaled, N, N, { ...tokens, special: maskedCell(t, '−∞') });
    $('scale-shown').textContent = formatNumber(s, 2);
    $('scale-value').textContent = formatNumber(state.customScale, 2);
    const empty = emptyRows();
    const rowSum = (i) => computed.weights.subarray(i * N, i * N + N).reduce((a, b) => a + b, 0);
    renderMatrix($('weights'), computed.weights, N, N, {
      ...tokens, heat: true, special: maskedCell(t, '0'), extraColumn: { title: t.rowSums, value: (i) => formatNumber(rowSum(i), 3) },
    });
    const note = $('empty-row-note');
    note.hidden = empty.length === 0;
    note.textContent = empty.map((i) => format(t.emptyRow, { i: sup(i + 1) })).join(' ');
    renderMatrix($('outputs'), computed.outputs, N, D, { rowLabel: tokenLabel('b'), colLabel: componentLabel, corner: t.cornerTokenDim });
    const checked = computed.layerDiff <= LAYER_TOLERANCE;
    const badge = $('layer-badge');
    badge.textContent = checked ? t.badgeChecked : t.badgeFailed;
    badge.title = t.layerBadgeTitle;
    badge.classList.toggle('failed', !checked);
    $('layer-check').innerHTML = format(t.layerCheck, { diff: formatScientific(computed.layerDiff, 1) });
    wireRows();
    renderFollowed(t);
  }

  // Everything that follows the chosen query i: the picker, the outlined rows, the worked qⁱ,
  // the alignment drawing, the products that make bⁱ.
  function renderFollowed(t = strings()) {
    const i = state.selected;
    for (const input of document.querySelectorAll('#follow input')) input.checked = Number(input.value) === i;
    for (const id of ['inputs', 'query', 'scores', 'scaled', 'weights', 'outputs']) markRows($(id), 'highlight', (k) => k === i);
    markRows($('key'), 'compared', () => true);
    const q = computed.query.subarray(i * D, (i + 1) * D);
    $('query-worked').innerHTML = format(t.queryWorked, { i: i + 1, a: vector(state.inputs.subarray(i * D, (i + 1) * D)), q: vector(q) });
    const keys = Array.from({ length: N }, (_, j) => [...computed.key.subarray(j * D, (j + 1) * D)]);
    const points = drawAlignment($('alignment'), { query: [...q], keys, labels: keys.map((_, j) => `k${sup(j + 1)}`), queryLabel: `q${sup(i + 1)}` });
    $('alignment').setAttribute('aria-label', format(t.alignmentLabel, { i: sup(i + 1) }));
    const best = computed.scores.subarray(i * N, (i + 1) * N).reduce((b, x, j, row) => (x > row[b] ? j : b), 0);
    $('alignment-caption').innerHTML = format(t.alignmentCaption, { i: i + 1, best: best + 1, score: formatNumber(computed.scores[i * N + best], 2) });
    $('sum-caption').innerHTML = format(t.sumCaption, { i: i + 1 });
    renderProducts($('weighted-sum'), {
      weights: computed.weights.subarray(i * N, (i + 1) * N), values: computed.value, n: N, d: D,
      sum: computed.outputs.subarray(i * D, (i + 1) * D), rowLabel: tokenLabel('v'), weightTitle: `α̂(${i + 1}, j)`,
      sumLabel: `b${sup(i + 1)}`, hidden: (j) => hiddenBy(i, j), corner: t.cornerProducts,
    });
    window.attentionDemo.walk = {
      inputs: [...state.inputs], wq: [...state.wq], wk: [...state.wk], wv: [...state.wv],
      ...Object.fromEntries(['query', 'key', 'value', 'scores', 'scaled', 'weights', 'outputs', 'fromLayer'].map((k) => [k, [...computed[k]]])),
      options: { ...computed.options, mask: [...computed.options.mask] }, selected: i, layerDiff: computed.layerDiff,
      alignment: points,
    };
  }

  const select = (i) => {
    if (state.selected === i) return;
    state.selected = i;
    renderFollowed();
  };

  // A click on a row of Q, the scores, the weights or B chooses its query; B's rows also follow
  // the mouse and the keyboard focus.
  function wireRows() {
    for (const id of ['query', 'scores', 'scaled', 'weights', 'outputs']) {
      [...$(id).tBodies[0].rows].forEach((row, i) => row.addEventListener('click', () => select(i)));
    }
    [...$('outputs').tBodies[0].rows].forEach((row, i) => {
      row.tabIndex = 0;
      row.setAttribute('aria-label', format(strings().outputRowLabel, { i: sup(i + 1) }));
      row.addEventListener('mouseenter', () => select(i));
      row.addEventListener('focus', () => select(i));
    });
  }

  function buildControls() {
    const follow = $('follow');
    for (let i = 0; i < N; i++) {
      const input = el('input', { type: 'radio', name: 'follow', value: String(i) });
      input.addEventListener('change', () => select(i));
      follow.append(el('label', {}, input, ` q${sup(i + 1)}`));
    }
    const box = $('key-masks');
    for (let j = 0; j < N; j++) {
      const input = el('input', { type: 'checkbox' });
      input.dataset.key = String(j);
      input.addEventListener('change', () => {
        if (input.checked) state.maskedKeys.add(j);
        else state.maskedKeys.delete(j);
        renderDerived();
      });
      box.append(el('label', {}, input, ` k${sup(j + 1)}`));
    }
    $('causal').addEventListener('change', () => { state.causal = $('causal').checked; renderDerived(); });
    for (const radio of document.querySelectorAll('input[name="scale"]')) {
      radio.addEventListener('change', () => { state.scaleMode = radio.value; renderDerived(); });
    }
    $('scale-slider').addEventListener('input', () => {
      state.customScale = Number($('scale-slider').value);
      state.scaleMode = 'custom';
      document.querySelector('input[name="scale"][value="custom"]').checked = true;
      renderDerived();
    });
    $('random-inputs').addEventListener('click', () => { state.inputs = Float32Array.from({ length: N * D }, random); render(); });
    $('random-weights').addEventListener('click', () => {
      for (const w of ['wq', 'wk', 'wv']) state[w] = Float32Array.from({ length: D * D }, random);
      render();
    });
    $('reset').addEventListener('click', () => {
      for (const [k, v] of Object.entries(DEFAULTS)) state[k] = Float32Array.from(v);
      random = generator(7);
      render();
    });
  }

  function render() {
    renderEditable();
    renderDerived();
  }

  buildControls();
  return { render, state };
}
