// "Why divide by √d_k?", the lecture's last question, tried out: random queries and keys whose
// numbers have mean 0 and variance 1 (uniform in ±√3), at d_k = 4, 64 and 512. The library
// computes their scores (lib.linear) and softmax (lib.attentionWeights) with the scale 1 and with
// 1/√d_k; the page shows how far the scores spread (their standard deviation) and how much of
// its weight a query gives its favourite key, with one query's weights as a row of shades.
import { $ } from './dom.mjs';
import { format } from './i18n.mjs';
import { renderMatrix, sup } from './matrix-view.mjs';
import { formatNumber } from './numbers.mjs';

export const SIZES = [4, 64, 512];
export const TOKENS = 8;  // queries and keys

export function uniform(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return (x / 2 ** 32 * 2 - 1) * Math.sqrt(3);
  };
}

// One d_k: { spread, largest: { one, scaled } (the mean over queries of each row's largest
// weight), rows: { one, scaled } (the first query's weights) }.
function measure(lib, d, random) {
  const q = Float32Array.from({ length: TOKENS * d }, random);
  const k = Float32Array.from({ length: TOKENS * d }, random);
  const scores = lib.linear(q, k, { inFeatures: d, outFeatures: TOKENS });
  const mean = scores.reduce((a, b) => a + b, 0) / scores.length;
  const spread = Math.sqrt(scores.reduce((a, x) => a + (x - mean) ** 2, 0) / scores.length);
  const at = (scale) => lib.attentionWeights(q, k, { heads: 1, seqQ: TOKENS, headDim: d, scale });
  const weights = { one: at(1), scaled: at(1 / Math.sqrt(d)) };
  const largest = (w) => Array.from({ length: TOKENS }, (_, i) => Math.max(...w.subarray(i * TOKENS, (i + 1) * TOKENS)))
    .reduce((a, b) => a + b, 0) / TOKENS;
  return { d, spread, largest: { one: largest(weights.one), scaled: largest(weights.scaled) },
    rows: { one: weights.one.subarray(0, TOKENS), scaled: weights.scaled.subarray(0, TOKENS) } };
}

const label = (i) => `dₖ = ${SIZES[i]}`;

export function startExperiment(lib, strings) {
  let seed = 1;
  let results;
  const run = () => {
    const random = uniform(seed);
    results = SIZES.map((d) => measure(lib, d, random));
  };
  run();
  const again = $('dk-again');
  again.addEventListener('click', () => {
    seed += 1;
    run();
    render();
  });

  function render() {
    const t = strings();
    const cell = (r, c) => [r.spread, Math.sqrt(r.d), r.spread / Math.sqrt(r.d), r.largest.one, r.largest.scaled][c];
    renderMatrix($('dk-table'), Float64Array.from(results.flatMap((r) => [0, 1, 2, 3, 4].map((c) => cell(r, c)))), SIZES.length, 5, {
      rowLabel: label, colLabel: t.dkColumns, corner: '', text: (i, c) => formatNumber(cell(results[i], c), c < 3 ? 1 : 3),
    });
    for (const [id, kind] of [['dk-one', 'one'], ['dk-scaled', 'scaled']]) {
      renderMatrix($(id), Float64Array.from(results.flatMap((r) => [...r.rows[kind]])), SIZES.length, TOKENS, {
        rowLabel: label, colLabel: (j) => `k${sup(j + 1)}`, corner: 'q¹ ╲ k', colHeadClass: 'k', heat: true, digits: 2,
      });
    }
    const [small, , large] = results;
    $('dk-reading').innerHTML = format(t.dkReading, {
      s4: formatNumber(small.spread, 1), s512: formatNumber(large.spread, 1), w512: formatNumber(large.largest.one, 3),
      lo: formatNumber(Math.min(...results.map((r) => r.largest.scaled)), 3), hi: formatNumber(Math.max(...results.map((r) => r.largest.scaled)), 3),
      even: formatNumber(1 / TOKENS, 3),
    });
    again.textContent = t.dkAgain;
    window.attentionDemo.dk = { seed, results: results.map((r) => ({ ...r, rows: { one: [...r.rows.one], scaled: [...r.rows.scaled] } })) };
  }
  return render;
}
