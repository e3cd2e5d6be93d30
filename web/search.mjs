// "Attention starts with search": the lecture's analogy, computed. Four articles, each with a
// key (what it is about, one number per tag) and a value (what it hands back); a query made from
// the tags pressed; its dot product with every key, scaled, then a softmax; and the result, the
// values blended by those weights. The keys, values and the "own queries" are K, V and Q of the
// walk-through at its starting numbers, computed by the library: the same numbers, renamed.
import { $, el } from './dom.mjs';
import { format } from './i18n.mjs';
import { renderMatrix, shade, sup } from './matrix-view.mjs';
import { formatNumber, formatUnits, units } from './numbers.mjs';
import { DEFAULTS } from './walkthrough.mjs';
import { renderProducts } from './worked.mjs';

const N = 4, D = 4;
export const TAG_WEIGHT = 3;  // how strongly a pressed tag is looked for (the walk-through's queries are ~3.5)

export function startSearch(lib, strings) {
  const lin = (x, w, out = D) => lib.linear(Float32Array.from(x), Float32Array.from(w), { inFeatures: D, outFeatures: out });
  const keys = lin(DEFAULTS.inputs, DEFAULTS.wk);
  const values = lin(DEFAULTS.inputs, DEFAULTS.wv);
  const queries = lin(DEFAULTS.inputs, DEFAULTS.wq);
  const state = { tags: new Set([2]), own: null };  // start by looking for travel

  const tagButtons = [], ownButtons = [];
  for (let c = 0; c < D; c++) {
    const b = el('button', { type: 'button' });
    b.addEventListener('click', () => {
      if (state.own !== null) state.tags.clear();
      state.own = null;
      if (state.tags.has(c)) state.tags.delete(c); else state.tags.add(c);
      render();
    });
    tagButtons.push(b);
  }
  $('search-tags').append(...tagButtons);
  for (let i = 0; i < N; i++) {
    const b = el('button', { type: 'button', textContent: `q${sup(i + 1)}` });
    b.addEventListener('click', () => { state.own = i; render(); });
    ownButtons.push(b);
  }
  $('search-own-queries').append(...ownButtons);

  function compute() {
    const query = state.own !== null ? queries.slice(state.own * D, (state.own + 1) * D)
      : Float32Array.from({ length: D }, (_, c) => (state.tags.has(c) ? TAG_WEIGHT : 0));
    const scores = lib.linear(query, keys, { inFeatures: D, outFeatures: N });  // q·kʲ
    const options = { heads: 1, seqQ: 1, seqK: N, headDim: D };
    const weights = lib.attentionWeights(query, keys, options);
    const result = lib.attention(query, keys, values, options);
    return { query, scores, weights, result };
  }

  function render() {
    const t = strings();
    const r = compute();
    const titles = t.searchArticles.map((title, j) => `${j + 1}. ${title}`);
    tagButtons.forEach((b, c) => {
      b.textContent = t.searchTags[c];
      b.setAttribute('aria-pressed', String(state.own === null && state.tags.has(c)));
    });
    ownButtons.forEach((b, i) => b.setAttribute('aria-pressed', String(state.own === i)));
    renderMatrix($('search-keys'), keys, N, D, { rowLabel: titles, colLabel: t.searchTags, corner: t.cornerArticleTag, digits: 2, colHeadClass: 'k' });
    renderMatrix($('search-values'), values, N, D, { rowLabel: titles, colLabel: (c) => String(c + 1), corner: t.cornerArticleComponent, digits: 2, colHeadClass: 'v' });
    renderMatrix($('search-query'), r.query, 1, D, { rowLabel: ['q'], colLabel: t.searchTags, corner: '', digits: 2, rowHeadClass: 'q' });
    // q·kʲ as shown, halved exactly (one more decimal: 4.77 ÷ 2 = 2.385), and the library's weight.
    const table = Float32Array.from({ length: N * 3 }, (_, e) => [r.scores, r.scores, r.weights][e % 3][Math.floor(e / 3)]);
    renderMatrix($('search-scores'), table, N, 3, {
      rowLabel: titles, colLabel: t.searchScoreColumns, corner: '',
      text: (j, c) => (c === 0 ? formatNumber(r.scores[j], 2) : c === 1 ? formatUnits(units(r.scores[j], 2) * 5, 3) : formatNumber(r.weights[j], 3)),
    });
    [...$('search-scores').tBodies[0].rows].forEach((row, j) => shade(row.cells[3], r.weights[j]));  // the weights
    renderProducts($('search-result'), {
      weights: r.weights, values, n: N, d: D, sum: r.result, rowLabel: (j) => `α̂${sup(j + 1)}·v${sup(j + 1)}`,
      weightTitle: 'α̂ʲ', sumLabel: t.searchResultRow, corner: '', rowHeadClass: 'v',
    });
    const best = r.weights.reduce((b, w, j) => (w > r.weights[b] ? j : b), 0);
    const own = state.own !== null ? format(t.searchOwnReading, { i: sup(state.own + 1), n: state.own + 1 }) : '';
    $('search-reading').innerHTML = (r.query.every((x) => x === 0) ? t.searchEmptyReading
      : format(t.searchReading, { title: t.searchArticles[best], w: formatNumber(r.weights[best], 3) })) + own;
    window.attentionDemo.search = {
      keys: [...keys], values: [...values], queries: [...queries], tags: [...state.tags], own: state.own,
      query: [...r.query], scores: [...r.scores], weights: [...r.weights], result: [...r.result],
    };
  }
  return render;
}
