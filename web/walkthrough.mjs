// "Attention, step by step": four tokens a¹…a⁴ of four numbers each, every matrix computed live by
// the library — projections and Q·Kᵀ by lib.linear, weights by lib.attentionWeights, outputs by
// lib.attention — with the scale and the masks next to the tables they change, and the weighted
// sum bⁱ = Σⱼ α̂(i, j)·vʲ spelled out beside the outputs.
import { format } from './i18n.mjs';
import { renderMatrix, shade, sub, sup } from './matrix-view.mjs';
import { $ } from './dom.mjs';

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

// A small seeded generator for the Randomise buttons (two decimals, in [-1, 1)).
function generator(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return Math.round((x / 2 ** 32 * 2 - 1) * 100) / 100;
  };
}

const tokenLabel = (name) => (i) => `${name}${sup(i + 1)}`;
const dimLabel = (name) => (c) => `${name}${sub(c + 1)}`;

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
    const edit = (name) => (index, v) => { state[name][index] = v; renderDerived(); };
    renderMatrix($('inputs'), state.inputs, N, D, {
      rowLabel: tokenLabel('a'), colLabel: dimLabel('a'), corner: strings().cornerTokenDim, editable: true, onEdit: edit('inputs'), name: 'A',
    });
    for (const [w, out] of [['wq', 'q'], ['wk', 'k'], ['wv', 'v']]) {
      renderMatrix($(w), state[w], D, D, {
        rowLabel: dimLabel(out), colLabel: dimLabel('a'), corner: `${out} ╲ a`, editable: true, onEdit: edit(w), name: w,
      });
    }
  }

  function renderDerived() {
    computed = compute();
    const t = strings();
    const s = computed.options.scale;
    renderMatrix($('query'), computed.query, N, D, { rowLabel: tokenLabel('q'), colLabel: dimLabel('q') });
    renderMatrix($('key'), computed.key, N, D, { rowLabel: tokenLabel('k'), colLabel: dimLabel('k') });
    renderMatrix($('value'), computed.value, N, D, { rowLabel: tokenLabel('v'), colLabel: dimLabel('v') });
    renderMatrix($('scores'), computed.scores, N, N, { rowLabel: tokenLabel('q'), colLabel: tokenLabel('k') });
    renderMatrix($('scaled'), computed.scaled, N, N, { rowLabel: tokenLabel('q'), colLabel: tokenLabel('k'), special: maskedCell(t, '−∞') });
    $('scale-shown').textContent = s.toFixed(2);
    $('scale-value').textContent = state.customScale.toFixed(2);
    const empty = emptyRows();
    const rowSum = (i) => computed.weights.subarray(i * N, i * N + N).reduce((a, b) => a + b, 0);
    renderMatrix($('weights'), computed.weights, N, N, {
      rowLabel: tokenLabel('q'), colLabel: tokenLabel('k'), heat: true, special: maskedCell(t, '0'),
      extraColumn: { title: t.rowSums, value: (i) => rowSum(i).toFixed(3) },
      rowClass: (i) => (i === state.selected ? 'highlight' : ''),
    });
    const note = $('empty-row-note');
    note.hidden = empty.length === 0;
    note.textContent = empty.map((i) => format(t.emptyRow, { i: sup(i + 1) })).join(' ');
    renderMatrix($('outputs'), computed.outputs, N, D, {
      rowLabel: tokenLabel('b'), colLabel: dimLabel('b'), rowClass: (i) => (i === state.selected ? 'highlight' : ''),
    });
    renderWeightedSum(t);
    $('layer-check').innerHTML = format(t.layerCheck, { diff: computed.layerDiff.toExponential(1) });
    wireOutputRows();
    window.attentionDemo.walk = {
      inputs: [...state.inputs], wq: [...state.wq], wk: [...state.wk], wv: [...state.wv],
      ...Object.fromEntries(['query', 'key', 'value', 'scores', 'scaled', 'weights', 'outputs', 'fromLayer'].map((k) => [k, [...computed[k]]])),
      options: { ...computed.options, mask: [...computed.options.mask] }, selected: state.selected,
    };
  }

  // bⁱ spelled out: each value row vʲ with its weight α̂(i, j), shaded by that weight, then bⁱ.
  function renderWeightedSum(t) {
    const i = state.selected;
    $('sum-caption').innerHTML = format(t.sumCaption, { i: i + 1 });
    const table = $('weighted-sum');
    const rows = [];
    for (let j = 0; j < N; j++) rows.push([computed.weights[i * N + j], ...computed.value.subarray(j * D, j * D + D)]);
    rows.push([NaN, ...computed.outputs.subarray(i * D, i * D + D)]);
    renderMatrix(table, rows.flat(), N + 1, D + 1, {
      rowLabel: (r) => (r < N ? `v${sup(r + 1)}` : `b${sup(i + 1)}`),
      colLabel: (c) => (c === 0 ? `α̂(${i + 1}, j)` : `v${sub(c)}`),
      special: (r, c) => (c > 0 ? null : r === N ? { text: '= Σ', className: 'sum' } : maskedCell(t, '0')(i, r)),
      rowClass: (r) => (r === N ? 'total' : ''),
    });
    // Shade each value row by its weight: the brightest row is the one bⁱ takes most from.
    [...table.tBodies[0].rows].slice(0, N).forEach((tr, j) => {
      for (const cell of [...tr.cells].slice(1)) if (!cell.classList.contains('masked')) shade(cell, computed.weights[i * N + j]);
    });
  }

  // Hovering, focusing or clicking output row i selects it: its weights row is outlined and the
  // weighted sum beside it shows how bⁱ is made. The rows stay (only their classes change), so a
  // row under a resting mouse does not take the selection back from the keyboard.
  function wireOutputRows() {
    [...$('outputs').tBodies[0].rows].forEach((row, i) => {
      row.tabIndex = 0;
      const select = () => {
        if (state.selected === i) return;
        state.selected = i;
        for (const id of ['outputs', 'weights']) {
          [...$(id).tBodies[0].rows].forEach((r, k) => r.classList.toggle('highlight', k === i));
        }
        renderWeightedSum(strings());
        window.attentionDemo.walk.selected = i;
      };
      row.addEventListener('mouseenter', select);
      row.addEventListener('focus', select);
      row.addEventListener('click', select);
    });
  }

  function buildControls() {
    const box = $('key-masks');
    for (let j = 0; j < N; j++) {
      const label = document.createElement('label');
      const input = document.createElement('input');
      input.type = 'checkbox';
      input.dataset.key = String(j);
      input.addEventListener('change', () => {
        if (input.checked) state.maskedKeys.add(j);
        else state.maskedKeys.delete(j);
        renderDerived();
      });
      label.append(input, ` k${sup(j + 1)}`);
      box.append(label);
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
  return { render };
}
