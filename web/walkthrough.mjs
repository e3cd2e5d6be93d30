// "Self-attention, step by step": four tokens a¹…a⁴ of four numbers each, every matrix computed
// live by the library — projections and Q·Kᵀ by lib.linear, weights by lib.attentionWeights,
// outputs by lib.attention — with the scale and the masks next to the tables they change, and
// the lecture's matrix form in its place: the scores stacked as K·Qᵀ, transposed to Q·Kᵀ,
// softmax row by row, B = Â·V. One query is followed through every step (q¹ at first; the
// picker, or a click on a row): its input, its query with one component worked out, every key
// it is compared with (drawn as alignment), its scores, its softmax worked out and the products
// α̂(i, j)·vʲ that add up to its output bⁱ (worked.mjs).
import { $, el } from './dom.mjs';
import { drawAlignment } from './alignment-view.mjs';
import { format } from './i18n.mjs';
import { markRows, renderMatrix, sup } from './matrix-view.mjs';
import { exact, formatExact, formatNumber, formatScientific } from './numbers.mjs';
import { componentSum, planScores, renderProducts, renderSoftmaxRow } from './worked.mjs';

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

// A small seeded generator for the Randomise buttons: two decimals in [−1, 1) for the inputs; the
// weights as an untrained layer starts them (PyTorch's nn.Linear: uniform in ±1/√in = ±0.5).
function generator(seed) {
  let x = seed >>> 0;
  return (range = 1) => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return Math.round((x / 2 ** 32 * 2 - 1) * range * 100) / 100;
  };
}
const INIT_RANGE = 1 / Math.sqrt(D);

// Tokens are numbered by superscripts (a², the second input), components by plain numbers in the
// column headers (the corner says which is which). Q, K and V keep their colours (.q, .k, .v).
const tokenLabel = (name) => (i) => `${name}${sup(i + 1)}`;
const componentLabel = (c) => String(c + 1);
const vector = (v, write = (x) => formatNumber(x, 3)) => `(${[...v].map(write).join(', ')})`;
const row = (m, i, width = D) => m.subarray(i * width, (i + 1) * width);

// Returns { render(), state }: render() redraws everything in the current language.
export function startWalkthrough(lib, strings) {
  const state = {
    ...Object.fromEntries(Object.entries(DEFAULTS).map(([k, v]) => [k, Float32Array.from(v)])),
    scaleMode: 'sqrt', customScale: 0.5, causal: false, maskedKeys: new Set(), selected: 0, component: 0, randomWeights: false,
  };
  let random = generator(7);
  const layer = new lib.MultiHeadAttention({ embedDim: D, numHeads: 1, bias: false });
  let computed, plan;

  const scale = () => (state.scaleMode === 'sqrt' ? 1 / Math.sqrt(D) : state.scaleMode === 'one' ? 1 : state.customScale);

  // Why key j is hidden from query i: 'causal', 'key' (masked key), or null when visible.
  const hiddenBy = (i, j) => (state.causal && j > i ? 'causal' : state.maskedKeys.has(j) ? 'key' : null);

  function compute() {
    const lin = (x, w) => lib.linear(x, w, { inFeatures: D, outFeatures: D });
    const query = lin(state.inputs, state.wq);
    const key = lin(state.inputs, state.wk);
    const value = lin(state.inputs, state.wv);
    const scores = lib.linear(query, key, { inFeatures: D, outFeatures: N });  // row i, column j: qⁱ·kʲ
    const stacked = lib.linear(key, query, { inFeatures: D, outFeatures: N });  // K·Qᵀ: column i holds qⁱ's scores
    const s = scale();
    const attendMask = new Uint8Array(N * N).map((_, e) => (state.maskedKeys.has(e % N) ? 0 : 1));  // 1 = may attend
    const options = { heads: 1, seqQ: N, headDim: D, causal: state.causal, attendMask, scale: s };
    const scaled = scores.map((x, e) => (hiddenBy(Math.floor(e / N), e % N) ? -Infinity : x * s));
    const weights = lib.attentionWeights(query, key, options);
    const outputs = lib.attention(query, key, value, options);
    // The layer always divides by √d_k; W_q·s·√d_k makes it use the scale s.
    layer.setWeights({ wq: state.wq.map((w) => w * s * Math.sqrt(D)), wk: state.wk, wv: state.wv, wo: IDENTITY });
    const fromLayer = layer.forward(state.inputs, null, null, { causal: state.causal, attendMask });
    const layerDiff = outputs.reduce((m, o, i) => Math.max(m, Math.abs(o - fromLayer[i])), 0);
    return { query, key, value, scores, stacked, scaled, weights, outputs, fromLayer, layerDiff, options };
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
    const edit = (name) => (index, v) => {
      state[name][index] = v;
      renderDerived();
    };
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
    const tokens = { rowLabel: tokenLabel('q'), colLabel: tokenLabel('k'), corner: 'q ╲ k', rowHeadClass: 'q', colHeadClass: 'k' };
    for (const [id, name] of [['query', 'q'], ['key', 'k'], ['value', 'v']]) {
      renderMatrix($(id), computed[id], N, D, { rowLabel: tokenLabel(name), colLabel: componentLabel, corner: t.cornerTokenDim, rowHeadClass: name });
    }
    // The scores with the decimals a pencil needs to get from them to the weights shown (worked.mjs).
    plan = planScores(computed.scores, s, computed.weights, hiddenBy, N);
    const digits = plan.digits;
    renderMatrix($('stacked'), computed.stacked, N, N, { rowLabel: tokenLabel('k'), colLabel: tokenLabel('q'), corner: 'k ╲ q', rowHeadClass: 'k', colHeadClass: 'q', digits });
    renderMatrix($('scores'), computed.scores, N, N, { ...tokens, digits });
    renderMatrix($('scaled'), computed.scaled, N, N, { ...tokens, special: maskedCell(t, '−∞'), text: (i, j) => plan.scaled[i * N + j].text });
    $('scale-shown').textContent = formatNumber(s, 2);
    $('scale-value').textContent = formatNumber(state.customScale, 2);
    renderMatrix($('weights'), computed.weights, N, N, { ...tokens, heat: true, special: maskedCell(t, '0') });
    const empty = emptyRows();
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
    // Random weights: how evenly they spread the weights (with no mask, so that even means 1/4).
    const reading = $('random-reading');
    reading.hidden = !state.randomWeights || state.causal || state.maskedKeys.size > 0;
    reading.innerHTML = format(t.randomReading, {
      lo: formatNumber(Math.min(...computed.weights), 2), hi: formatNumber(Math.max(...computed.weights), 2), even: formatNumber(1 / N, 2),
    });
    wireRows();
    renderFollowed(t);
  }

  // Everything that follows the chosen query i: the picker, the outlined rows (column i of K·Qᵀ),
  // the worked qⁱ and its component, the alignment drawing, its softmax, the products that make bⁱ.
  function renderFollowed(t = strings()) {
    const i = state.selected, c = state.component;
    for (const input of document.querySelectorAll('#follow input')) input.checked = Number(input.value) === i;
    for (const b of document.querySelectorAll('#component-picker button')) b.setAttribute('aria-pressed', String(Number(b.value) === c));
    for (const id of ['inputs', 'query', 'scores', 'scaled', 'weights', 'outputs']) markRows($(id), 'highlight', (k) => k === i);
    markRows($('key'), 'compared', () => true);
    markRows($('wq'), 'used-row', (r) => r === c);
    for (const tr of $('stacked').rows) [...tr.cells].forEach((cell, k) => cell.classList.toggle('used', k === i + 1));
    [...$('query').tBodies[0].rows].forEach((tr, k) => [...tr.cells].forEach((cell, m) => cell.classList.toggle('target', k === i && m === c + 1)));
    const q = row(computed.query, i), a = row(state.inputs, i);
    $('query-worked').innerHTML = format(t.queryWorked, { i: i + 1, a: vector(a, (x) => formatExact(exact(x), 2)), q: vector(q) });
    const { terms, sum } = componentSum(row(state.wq, c), a);
    $('component-worked').innerHTML = format(t.componentWorked, { i: i + 1, c: c + 1, terms, sum, shown: formatNumber(q[c], 3) });
    const keys = Array.from({ length: N }, (_, j) => [...row(computed.key, j)]);
    const points = drawAlignment($('alignment'), { query: [...q], keys, labels: keys.map((_, j) => `k${sup(j + 1)}`), queryLabel: `q${sup(i + 1)}` });
    $('alignment').setAttribute('aria-label', format(t.alignmentLabel, { i: sup(i + 1) }));
    const best = row(computed.scores, i, N).reduce((b, x, j, r) => (x > r[b] ? j : b), 0);
    $('alignment-caption').innerHTML = format(t.alignmentCaption, { i: i + 1, best: best + 1, score: formatNumber(computed.scores[i * N + best], plan.digits) });
    $('stacked-caption').innerHTML = format(t.stackedCaption, { i: i + 1 });
    const hidden = maskedCell(t, '');
    const shift = renderSoftmaxRow($('softmax-row'), {
      plan, i, n: N, weights: [...row(computed.weights, i, N)], colLabel: tokenLabel('k'), colHeadClass: 'k',
      labels: (shift) => [`α′(${i + 1}, j)`, shift ? `exp(α′(${i + 1}, j) − ${shift})` : `exp(α′(${i + 1}, j))`, `α̂(${i + 1}, j)`],
      masked: (r, j) => { const m = hidden(i, j); return m && { ...m, text: r === 0 ? '−∞' : '0' }; },
    });
    $('softmax-caption').innerHTML = format(shift ? t.softmaxShifted : t.softmaxWorked, { i: i + 1, shift });
    $('sum-caption').innerHTML = format(t.sumCaption, { i: i + 1 });
    renderProducts($('weighted-sum'), {
      weights: row(computed.weights, i, N), values: computed.value, n: N, d: D,
      sum: row(computed.outputs, i), rowLabel: (j) => `α̂(${i + 1},${j + 1})·v${sup(j + 1)}`, weightTitle: `α̂(${i + 1}, j)`,
      sumLabel: `b${sup(i + 1)}`, hidden: (j) => hiddenBy(i, j), corner: t.cornerProducts, rowHeadClass: 'v',
    });
    window.attentionDemo.walk = {
      inputs: [...state.inputs], wq: [...state.wq], wk: [...state.wk], wv: [...state.wv],
      ...Object.fromEntries(['query', 'key', 'value', 'scores', 'stacked', 'scaled', 'weights', 'outputs', 'fromLayer'].map((k) => [k, [...computed[k]]])),
      options: { ...computed.options, attendMask: [...computed.options.attendMask] }, selected: i, component: c, layerDiff: computed.layerDiff,
      alignment: points,
    };
  }

  const select = (i, c = state.component) => {
    if (state.selected === i && state.component === c) return;
    state.selected = i;
    state.component = c;
    renderFollowed();
  };

  // A click on a row of A, Q, the scores, the weights or B follows its query (a click on a number
  // of Q also works out that component); column i of K·Qᵀ is query i's. The keyboard has the pickers.
  function wireRows() {
    for (const id of ['inputs', 'scores', 'scaled', 'weights', 'outputs']) {
      [...$(id).tBodies[0].rows].forEach((tr, i) => tr.addEventListener('click', () => select(i)));
    }
    [...$('query').tBodies[0].rows].forEach((tr, i) => [...tr.cells].forEach((cell, m) => {
      cell.addEventListener('click', () => select(i, m > 0 ? m - 1 : state.component));
    }));
    for (const tr of $('stacked').rows) [...tr.cells].forEach((cell, k) => { if (k > 0) cell.addEventListener('click', () => select(k - 1)); });
  }

  function buildControls() {
    const follow = $('follow');
    for (let i = 0; i < N; i++) {
      const input = el('input', { type: 'radio', name: 'follow', value: String(i) });
      input.addEventListener('change', () => select(i));
      follow.append(el('label', {}, input, ` q${sup(i + 1)}`));
    }
    for (let c = 0; c < D; c++) {
      const b = el('button', { type: 'button', value: String(c), textContent: String(c + 1) });
      b.addEventListener('click', () => select(state.selected, c));
      $('component-picker').append(b);
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
    $('random-inputs').addEventListener('click', () => { state.inputs = Float32Array.from({ length: N * D }, () => random()); render(); });
    $('random-weights').addEventListener('click', () => {
      for (const w of ['wq', 'wk', 'wv']) state[w] = Float32Array.from({ length: D * D }, () => random(INIT_RANGE));
      state.randomWeights = true;
      render();
    });
    $('reset').addEventListener('click', () => {
      for (const [k, v] of Object.entries(DEFAULTS)) state[k] = Float32Array.from(v);
      state.randomWeights = false;
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
