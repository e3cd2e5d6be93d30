// The demo page: attention step by step on four tokens (every number from the library), a
// language switch, and the playground (playground.mjs).
import { loadAttention } from '../dist/index.mjs';
import { STRINGS, format } from './i18n.mjs';
import { renderMatrix, shade, sup } from './matrix-view.mjs';
import { startLearning } from './learn.mjs';
import { startPlayground } from './playground.mjs';

const N = 4;  // tokens a¹…a⁴
const D = 4;  // size of each input, query, key and value (d_model = d_k)
const $ = (id) => document.getElementById(id);

// A small seeded generator, so the page opens on the same numbers every time.
function generator(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return Math.round((x / 2 ** 32 * 2 - 1) * 100) / 100;
  };
}
const INITIAL = (() => {
  const r = generator(20260517);
  const m = () => Float32Array.from({ length: N * D }, r);
  return { inputs: m(), wq: m(), wk: m(), wv: m() };
})();
const state = {
  inputs: INITIAL.inputs.slice(), wq: INITIAL.wq.slice(), wk: INITIAL.wk.slice(), wv: INITIAL.wv.slice(),
  causal: false, maskedKeys: new Set(), lang: 'en',
};
let random = generator(7);
let lib;
let layer;
let computed;
let refreshPlayground = () => {};
let refreshLearning = () => {};

function applyLanguage(lang) {
  state.lang = lang;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) el.innerHTML = STRINGS[lang][el.dataset.i18n];
  for (const b of document.querySelectorAll('.lang button')) b.setAttribute('aria-pressed', String(b.dataset.lang === lang));
  if (lib) {
    const { version, simd, threads, threadsReason } = lib.info;
    const why = threads === 1 && /isolated/.test(threadsReason) ? `: ${threadsReason}` : '';
    $('status').textContent = format(STRINGS[lang].status, { version, simd, threads, s: threads === 1 ? '' : 's', why });
    render();
    refreshPlayground();
    refreshLearning();
  }
}

// Every number shown comes from the library: projections and Q·Kᵀ from lib.linear, weights
// from lib.attentionWeights, outputs from lib.attention, and the cross-check from the layer.
function compute() {
  const lin = (x, w, outFeatures) => lib.linear(x, w, { inFeatures: D, outFeatures });
  const query = lin(state.inputs, state.wq, D);
  const key = lin(state.inputs, state.wk, D);
  const value = lin(state.inputs, state.wv, D);
  const scores = lib.linear(query, key, { inFeatures: D, outFeatures: N });  // Q·Kᵀ
  const scale = 1 / Math.sqrt(D);
  const scaled = scores.map((s) => s * scale);
  const mask = new Uint8Array(N * N).map((_, e) => (state.maskedKeys.has(e % N) ? 0 : 1));
  const options = { heads: 1, seqQ: N, headDim: D, causal: state.causal, mask };
  const weights = lib.attentionWeights(query, key, options);
  const outputs = lib.attention(query, key, value, options);
  layer.setWeights({ wq: state.wq, wk: state.wk, wv: state.wv, wo: IDENTITY });
  const fromLayer = layer.forward(state.inputs, null, null, { causal: state.causal, mask });
  const layerDiff = outputs.reduce((m, o, i) => Math.max(m, Math.abs(o - fromLayer[i])), 0);
  return { query, key, value, scores, scaled, weights, outputs, fromLayer, layerDiff, options: { ...options, mask: [...mask] } };
}
const IDENTITY = Float32Array.from({ length: D * D }, (_, e) => (e % (D + 1) === 0 ? 1 : 0));

function render() {
  computed = compute();
  const t = STRINGS[state.lang];
  const dim = (j) => `d${j + 1}`;
  const token = (name) => (i) => `${name}${sup(i + 1)}`;
  const edit = (name) => (index, v) => { state[name][index] = v; render(); };
  renderMatrix($('inputs'), state.inputs, N, D, { rowLabel: token('a'), colLabel: dim, editable: true, onEdit: edit('inputs'), name: 'A' });
  for (const w of ['wq', 'wk', 'wv']) {
    renderMatrix($(w), state[w], D, D, { rowLabel: (i) => `${i + 1}`, colLabel: dim, editable: true, onEdit: edit(w), name: w });
  }
  renderMatrix($('query'), computed.query, N, D, { rowLabel: token('q'), colLabel: dim });
  renderMatrix($('key'), computed.key, N, D, { rowLabel: token('k'), colLabel: dim });
  renderMatrix($('value'), computed.value, N, D, { rowLabel: token('v'), colLabel: dim });
  renderMatrix($('scores'), computed.scores, N, N, { rowLabel: token('q'), colLabel: token('k') });
  renderMatrix($('scaled'), computed.scaled, N, N, { rowLabel: token('q'), colLabel: token('k') });
  renderMatrix($('weights'), computed.weights, N, N, {
    rowLabel: token('q'), colLabel: token('k'), heat: true,
    extraColumn: { title: t.rowSums, value: (i) => computed.weights.subarray(i * N, i * N + N).reduce((a, b) => a + b, 0).toFixed(3) },
  });
  renderMatrix($('outputs'), computed.outputs, N, D, { rowLabel: token('b'), colLabel: dim });
  $('layer-check').innerHTML = format(t.layerCheck, { diff: computed.layerDiff.toExponential(1) });
  wireHighlights();
  window.attentionDemo = { info: { ...lib.info }, inputs: [...state.inputs], wq: [...state.wq], wk: [...state.wk], wv: [...state.wv], ...Object.fromEntries(
    ['query', 'key', 'value', 'scores', 'scaled', 'weights', 'outputs', 'fromLayer'].map((k) => [k, [...computed[k]]])), options: computed.options };
}

// Hovering or focusing output row i highlights weights row i and shades the value rows by the
// weight each one gets.
function wireHighlights() {
  const outRows = $('outputs').tBodies[0].rows;
  const weightRows = $('weights').tBodies[0].rows;
  const valueRows = $('value').tBodies[0].rows;
  const clear = () => {
    for (const r of [...outRows, ...weightRows]) r.classList.remove('highlight');
    for (const r of valueRows) for (const c of r.cells) { c.style.backgroundColor = ''; c.style.color = ''; }
  };
  [...outRows].forEach((row, i) => {
    row.tabIndex = 0;
    const show = () => {
      clear();
      row.classList.add('highlight');
      weightRows[i].classList.add('highlight');
      [...valueRows].forEach((vr, j) => { for (const c of [...vr.cells].slice(1)) shade(c, computed.weights[i * N + j]); });
    };
    row.addEventListener('mouseenter', show);
    row.addEventListener('focus', show);
    row.addEventListener('mouseleave', clear);
    row.addEventListener('blur', clear);
  });
}

function buildKeyMasks() {
  const box = $('key-masks');
  for (let j = 0; j < N; j++) {
    const label = document.createElement('label');
    const input = document.createElement('input');
    input.type = 'checkbox';
    input.dataset.key = String(j);
    input.addEventListener('change', () => {
      if (input.checked) state.maskedKeys.add(j);
      else state.maskedKeys.delete(j);
      render();
    });
    label.append(input, ` k${sup(j + 1)}`);
    box.append(label);
  }
}

applyLanguage('en');
for (const b of document.querySelectorAll('.lang button')) b.addEventListener('click', () => applyLanguage(b.dataset.lang));
try {
  lib = await loadAttention();
  layer = new lib.MultiHeadAttention({ embedDim: D, numHeads: 1, bias: false });
  buildKeyMasks();
  $('causal').addEventListener('change', () => { state.causal = $('causal').checked; render(); });
  $('random-inputs').addEventListener('click', () => { state.inputs = Float32Array.from({ length: N * D }, random); render(); });
  $('random-weights').addEventListener('click', () => {
    for (const w of ['wq', 'wk', 'wv']) state[w] = Float32Array.from({ length: D * D }, random);
    render();
  });
  $('reset').addEventListener('click', () => {
    Object.assign(state, { inputs: INITIAL.inputs.slice(), wq: INITIAL.wq.slice(), wk: INITIAL.wk.slice(), wv: INITIAL.wv.slice() });
    random = generator(7);
    render();
  });
  applyLanguage(state.lang);
  refreshPlayground = startPlayground(() => STRINGS[state.lang]);
  refreshLearning = startLearning(() => STRINGS[state.lang]);
  document.body.dataset.ready = 'true';
} catch (error) {
  $('status').textContent = error.message;
  $('status').classList.add('error');
  document.body.dataset.ready = 'error';
}
