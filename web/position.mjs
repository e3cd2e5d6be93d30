// "Position": attention alone does not see word order — the sentence of "Real words" and the
// same words in another order give the same outputs, moved with their words; then the classic
// fix, a position vector eⁱ added to each input aⁱ (the original Transformer's sinusoids, or a
// learned table), after which the shuffled sentence gives other outputs; then rotary embeddings
// (lib.rotary), the modern form: a head whose queries and keys are the same for every word, so
// that only the rotation by position can tell the words apart; its query is its key turned back
// by one position, so with rotary every word looks at the word before it. Positions are counted
// from 1 everywhere, as the labels a¹, a², … count them.
import { format } from './i18n.mjs';
import { renderMatrix, sub, sup } from './matrix-view.mjs';
import { formatNumber, formatScientific } from './numbers.mjs';
import { drawRotation } from './rotation-view.mjs';
import { E, IDENTITY, WQ, sentence } from './sentences.mjs';
import { $ } from './dom.mjs';
import { randomArray } from './random-arrays.mjs';

// The position head: d = 4, two adjacent pairs (interleaved), base 10 → θ = 1 and 10^(−1/2).
export const D = 4;
export const BASE = 10;
export const THETAS = [0, 1].map((c) => BASE ** (-2 * c / D));
const C = 3;  // the vectors' length: at the 1/√d scale the word before gets ~0.8 of the weight
export const KEY = Float32Array.from([C, 0, C, 0]);
export const QUERY = Float32Array.from(THETAS.flatMap((t) => [C * Math.cos(t), -C * Math.sin(t)]));  // KEY turned back by θ
export const ROPE = { heads: 1, headDim: D, base: BASE, interleaved: true, positionOffset: 1 };  // a¹ is at position 1

// Position vectors eⁱ for positions 1…n: the original Transformer's sinusoids (pair c turns at
// ω_c = 10000^(−2(c−1)/d): e_{2c−1} = sin(i·ω_c), e_{2c} = cos(i·ω_c)), or a learned table (here
// seeded random numbers standing in for trained ones, as in GPT-2 and BERT).
export function positionVectors(kind, n, d = E) {
  if (kind === 'learned') return randomArray(n * d, 21).map((x) => x * 0.8);
  return Float32Array.from({ length: n * d }, (_, e) => {
    const i = Math.floor(e / d) + 1, c = Math.floor((e % d) / 2);
    const angle = i * 10000 ** (-2 * c / d);
    return e % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
  });
}

// A seeded permutation of n positions that moves at least one (for the shuffle button).
function shuffled(n, seed) {
  let x = seed >>> 0;
  const next = () => { x = (x * 1664525 + 1013904223) >>> 0; return x / 2 ** 32; };
  for (;;) {
    const p = [...Array(n).keys()];
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [p[i], p[j]] = [p[j], p[i]];
    }
    if (p.some((v, i) => v !== i)) return p;
  }
}

// order[k] = the position in the sentence of the word now at position k.
export function orderOf(kind, n, { animal, place }, seed) {
  const order = [...Array(n).keys()];
  if (kind === 'swap') [order[animal], order[place]] = [order[place], order[animal]];
  if (kind === 'reverse') order.reverse();
  if (kind === 'shuffle') return shuffled(n, seed);
  return order;
}

const repeat = (row, n) => Float32Array.from({ length: n * row.length }, (_, e) => row[e % row.length]);
const rowDiffs = (b, moved, order, width) => order.map((src, k) => {
  let m = 0;
  for (let c = 0; c < width; c++) m = Math.max(m, Math.abs(moved[k * width + c] - b[src * width + c]));
  return m;
});

export function startPosition(lib, strings, language) {
  const state = { kind: 'swap', seed: 1, chosen: null, lang: null, vectors: 'sinusoidal' };
  const kindButtons = [...document.querySelectorAll('#pos-kind button')];
  const narrow = matchMedia('(max-width: 520px)');  // a phone: the rotation's pairs one under the other
  narrow.addEventListener('change', () => render());
  for (const b of kindButtons) b.addEventListener('click', () => { state.vectors = b.dataset.kind; render(); });
  const orderButtons = [...document.querySelectorAll('#pos-orders button')];
  for (const b of orderButtons) {
    b.addEventListener('click', () => {
      if (b.dataset.order === 'shuffle') state.seed += 1;
      state.kind = b.dataset.order;
      render();
    });
  }

  function compute() {
    const { tokens, embedding, n, action, animal } = sentence(language());
    const place = tokens.findIndex((_, i) => embedding[i * E + 2] === 1);
    const order = orderOf(state.kind, n, { animal, place }, state.seed);
    const moved = Float32Array.from({ length: n * E }, (_, e) => embedding[order[Math.floor(e / E)] * E + (e % E)]);
    // The head of words.mjs (W_q, W_k = W_v = I) on both orders.
    const content = (a) => {
      const q = lib.linear(a, WQ, { inFeatures: E, outFeatures: E });
      const k = lib.linear(a, IDENTITY, { inFeatures: E, outFeatures: E });
      return lib.attention(q, k, k, { heads: 1, seqQ: n, headDim: E });
    };
    const outputs = content(embedding), movedOutputs = content(moved);
    // With eⁱ added: the position vectors stay with the positions, the words move.
    const e = positionVectors(state.vectors, n);
    const plus = (a) => a.map((x, k) => x + e[k]);
    const added = content(plus(embedding)), addedMoved = content(plus(moved));
    // The position head: the same q and k for every word; only the rotation tells them apart.
    const query = repeat(QUERY, n), key = repeat(KEY, n);
    const rope = { ...ROPE, seq: n };
    const rq = lib.rotary(query, rope), rk = lib.rotary(key, rope);
    const options = { heads: 1, seqQ: n, headDim: D };
    const scores = lib.linear(rq, rk, { inFeatures: D, outFeatures: n });  // row i, column j: q̃ⁱ·k̃ʲ
    const before = lib.attentionWeights(query, key, options);
    const after = lib.attentionWeights(rq, rk, options);
    const rotOutputs = lib.attention(rq, rk, embedding, options);         // W_v = I: V = A
    const rotMoved = lib.attention(rq, rk, moved, options);
    return {
      tokens, movedTokens: order.map((i) => tokens[i]), n, action, order, embedding, moved,
      outputs, movedOutputs, diffs: rowDiffs(outputs, movedOutputs, order, E),
      e, sum: plus(embedding), added, addedMoved, addedDiffs: rowDiffs(added, addedMoved, order, E),
      query, key, rq, rk, scores, before, after, rotOutputs, rotMoved, rotDiffs: rowDiffs(rotOutputs, rotMoved, order, E),
    };
  }

  function renderPicker(t, tokens, chosen) {
    const picker = $('pos-picker');
    picker.replaceChildren(Object.assign(document.createElement('legend'), { innerHTML: t.posPicker }),
      ...tokens.map((w, i) => {
        const label = document.createElement('label');
        const input = Object.assign(document.createElement('input'), { type: 'radio', name: 'pos-query', value: String(i), checked: i === chosen });
        input.addEventListener('change', () => { state.chosen = i; render(); });
        label.append(input, ` ${w}${sup(i + 1)}`);
        return label;
      }));
  }

  function render() {
    const t = strings();
    const r = compute();
    const { n, tokens, movedTokens } = r;
    if (state.lang !== language()) Object.assign(state, { lang: language(), chosen: r.action });  // the action word: sat / 坐
    const i = state.chosen;
    for (const b of orderButtons) b.setAttribute('aria-pressed', String(b.dataset.order === state.kind));
    const join = (words) => words.join(language() === 'zh' ? '' : ' ');
    const features = t.features;
    const word = { rowLabel: tokens, colLabel: features, corner: t.cornerWord, digits: 2 };
    const movedWord = { ...word, rowLabel: movedTokens };
    const delta = (diffs, show) => ({ title: t.posDelta, value: (k) => show(diffs[k]) });

    // Shuffle the words.
    $('pos-outputs-caption').textContent = format(t.posOutputsCaption, { sentence: join(tokens) });
    $('pos-moved-caption').textContent = format(t.posMovedCaption, { sentence: join(movedTokens) });
    renderMatrix($('pos-outputs'), r.outputs, n, E, word);
    // Differences to the tables' two decimals (float32 rounding shows as 0.00), the exact largest
    // one for developers.
    renderMatrix($('pos-moved-outputs'), r.movedOutputs, n, E, { ...movedWord, extraColumn: delta(r.diffs, (d) => formatNumber(d, 2)) });
    const largest = Math.max(...r.diffs);
    $('pos-shuffle-reading').innerHTML = format(t.posShuffleReading, { diff: formatNumber(largest, 2), exact: formatScientific(largest, 1) });

    // Add a position vector.
    for (const b of kindButtons) b.setAttribute('aria-pressed', String(b.dataset.kind === state.vectors));
    $('pos-kind-text').innerHTML = state.vectors === 'learned' ? t.posLearnedText : t.posSinusoidalText;
    const positions = (k) => `e${sup(k + 1)}`;
    const eMax = Math.max(...r.e.map(Math.abs));
    renderMatrix($('pos-e'), r.e, n, E, { rowLabel: positions, colLabel: (c) => String(c + 1), corner: t.cornerPositionComponent, digits: 2, signed: { max: eMax } });
    renderMatrix($('pos-sum'), r.sum, n, E, { ...word, rowLabel: tokens.map((w, k) => `${w}${sup(k + 1)}`) });
    $('pos-add-outputs-caption').textContent = format(t.posAddOutputsCaption, { sentence: join(tokens) });
    $('pos-add-moved-caption').textContent = format(t.posAddMovedCaption, { sentence: join(movedTokens) });
    renderMatrix($('pos-add-outputs'), r.added, n, E, word);
    renderMatrix($('pos-add-moved'), r.addedMoved, n, E, { ...movedWord, extraColumn: delta(r.addedDiffs, (d) => formatNumber(d, 2)) });
    $('pos-add-reading').innerHTML = Math.max(...r.addedDiffs) < 1e-3 ? t.posOrderSame
      : format(t.posAddReading, { sentence: join(movedTokens), diff: formatNumber(Math.max(...r.addedDiffs), 2) });

    // The rotation, drawn from the library's rotated rows.
    const pairOf = (m, p, c) => [m[p * D + 2 * c], m[p * D + 2 * c + 1]];
    const labels = tokens.map((w, p) => `${w}${sup(p + 1)}`);
    renderPicker(t, tokens, i);
    drawRotation($('pos-rotation'), {
      pairs: THETAS.map((theta, c) => ({
        title: format(t.posPairTitle, { c: c + 1, cs: sub(c + 1), x1: `x${sub(2 * c + 1)}`, x2: `x${sub(2 * c + 2)}`, theta: formatNumber(theta, 2) }),
        keys: tokens.map((_, p) => pairOf(r.rk, p, c)), query: pairOf(r.rq, i, c),
      })),
      labels, chosen: i, unit: C, columns: narrow.matches ? 1 : 2,
    });
    $('pos-rotation-legend').textContent = format(t.posQueryLegend, { word: labels[i] });
    $('pos-rotation').setAttribute('aria-label', t.posRotationLabel);
    $('pos-rotation-caption').innerHTML = i === 0 ? format(t.posRotationFirst, { word: labels[0] })
      : format(t.posRotationCaption, { word: labels[i], prev: labels[i - 1] });
    const comp = (name) => (c) => `${name}${sub(c + 1)}`;
    const highlight = (k) => (k === i ? 'highlight' : '');
    renderMatrix($('pos-rq'), r.rq, n, D, { rowLabel: tokens, colLabel: comp('q̃'), corner: t.cornerWord, rowClass: highlight });
    renderMatrix($('pos-rk'), r.rk, n, D, { rowLabel: tokens, colLabel: comp('k̃'), corner: t.cornerWord, rowClass: (k) => (k === i - 1 ? 'highlight' : '') });

    // What it does to the weights, and to the shuffled sentence.
    const square = { rowLabel: tokens, colLabel: tokens, corner: t.cornerLooksAt, digits: 2 };
    renderMatrix($('pos-scores'), r.scores, n, n, { ...square, rowClass: highlight });
    renderMatrix($('pos-before'), r.before, n, n, { ...square, heat: true });
    renderMatrix($('pos-after'), r.after, n, n, { ...square, heat: true, rowClass: highlight });
    [...$('pos-after').tBodies[0].rows].forEach((row, q) => { if (q > 0) row.cells[q].classList.add('target'); });
    $('pos-effect-text').innerHTML = format(t.posEffectText, { same: formatNumber(QUERY.reduce((s, x, c) => s + x * KEY[c], 0), 2),
      prev: formatNumber(r.after[i * n + Math.max(0, i - 1)], 2) });
    $('pos-rot-outputs-caption').textContent = format(t.posRotOutputsCaption, { sentence: join(tokens) });
    $('pos-rot-moved-caption').textContent = format(t.posRotMovedCaption, { sentence: join(movedTokens) });
    renderMatrix($('pos-rot-outputs'), r.rotOutputs, n, E, word);
    renderMatrix($('pos-rot-moved'), r.rotMoved, n, E, { ...movedWord, extraColumn: delta(r.rotDiffs, (d) => formatNumber(d, 2)) });
    // The word whose output changed most, what it looks at now and what it looked at before.
    const k = r.rotDiffs.indexOf(Math.max(...r.rotDiffs));
    const before = (ws, p) => (p === 0 ? t.posItself : `<b>${ws[p - 1]}</b>`);
    $('pos-order-reading').innerHTML = Math.max(...r.rotDiffs) < 1e-3 ? t.posOrderSame : format(t.posOrderReading, {
      sentence: join(movedTokens), word: movedTokens[k], now: before(movedTokens, k), was: before(tokens, r.order[k]),
      diff: formatNumber(Math.max(...r.rotDiffs), 2),
    });

    window.attentionDemo.position = {
      kind: state.kind, order: r.order, tokens, movedTokens, chosen: i, embedding: [...r.embedding], moved: [...r.moved],
      outputs: [...r.outputs], movedOutputs: [...r.movedOutputs], diffs: r.diffs,
      vectors: state.vectors, e: [...r.e], added: [...r.added], addedMoved: [...r.addedMoved], addedDiffs: r.addedDiffs,
      query: [...r.query], key: [...r.key], rq: [...r.rq], rk: [...r.rk], rope: { ...ROPE, seq: n }, scores: [...r.scores],
      before: [...r.before], after: [...r.after], rotOutputs: [...r.rotOutputs], rotMoved: [...r.rotMoved], rotDiffs: r.rotDiffs,
    };
  }

  return render;
}
