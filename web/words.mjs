// "Real words as tokens": a short sentence (English or Chinese, per the language switch) whose
// words have four named features, so W_q reads as "what each word looks for" and every weight
// as "this word looks at that one". One head here; multi-head.mjs splits the same W_q in two.
// One word is followed (the picker, or a click on a row): its rows of A, α̂ and B outlined, and
// the column of W_q its feature picks out — that column is its query.
import { format } from './i18n.mjs';
import { markRows, renderMatrix, sup } from './matrix-view.mjs';
import { formatNumber } from './numbers.mjs';
import { $, el } from './dom.mjs';
import { E, IDENTITY, WQ, sentence } from './sentences.mjs';

const bold = (word) => `<b>${word}</b>`;

// Returns render(): recomputes and redraws for the current language.
export function startWords(lib, strings, language) {
  const selected = {};  // language → the word followed (at first the action: sat, 坐)
  let drawn = null;     // what the tables were last drawn from

  // The sentence under the picker: what the followed word is, looks for and looks at.
  function reading(t, i) {
    const { tokens, embedding, n, weights } = drawn;
    const feature = [...embedding.subarray(i * E, (i + 1) * E)].indexOf(1);
    const row = weights.subarray(i * n, (i + 1) * n);
    if (feature < 0) return format(t.wordsFollowedNone, { word: bold(tokens[i]), even: formatNumber(row[0], 2) });
    const list = (items) => items.join(t.listAnd);
    const looksFor = list([...Array(E).keys()].filter((r) => WQ[r * E + feature] > 0).map((r) => t.features[r]));
    const top = Math.max(...row);
    const best = [...Array(n).keys()].filter((j) => top - row[j] < 1e-3);
    return format(t.wordsFollowed, {
      word: bold(tokens[i]), kind: t.featureKinds[feature], feature: t.features[feature], looksFor,
      top: format(best.length > 1 ? t.wordsTopEach : t.wordsTopOne, { words: list(best.map((j) => bold(tokens[j]))), w: formatNumber(top, 2) }),
    });
  }

  function follow(i) {
    const lang = language();
    selected[lang] = i;
    const t = strings();
    const { tokens, embedding } = drawn;
    for (const input of document.querySelectorAll('#words-follow input')) input.checked = Number(input.value) === i;
    for (const id of ['words-embedding', 'words-weights', 'words-outputs']) markRows($(id), 'highlight', (k) => k === i);
    const feature = [...embedding.subarray(i * E, (i + 1) * E)].indexOf(1);
    for (const cell of $('words-wq').querySelectorAll('th, td')) cell.classList.toggle('used', feature >= 0 && cell.cellIndex === feature + 1);
    $('words-followed').innerHTML = reading(t, i);
    window.attentionDemo.words.selected = i;
    window.attentionDemo.words.followed = { word: tokens[i], wqColumn: feature };
  }

  return function render() {
    const t = strings();
    const { tokens, embedding, n, action, animal } = sentence(language());
    const lin = (x, w) => lib.linear(x, w, { inFeatures: E, outFeatures: E });
    const query = lin(embedding, WQ);
    const key = lin(embedding, IDENTITY);    // W_k = I: a word offers its own features
    const value = lin(embedding, IDENTITY);  // W_v = I: and passes them on
    const options = { heads: 1, seqQ: n, headDim: E };
    const weights = lib.attentionWeights(query, key, options);
    const outputs = lib.attention(query, key, value, options);
    const features = t.features;
    $('sentence').textContent = tokens.join(language() === 'zh' ? ' · ' : ' ');
    renderMatrix($('words-embedding'), embedding, n, E, { rowLabel: tokens, colLabel: features, corner: t.cornerWord, digits: 0 });
    renderMatrix($('words-wq'), WQ, E, E, { rowLabel: t.looksFor, colLabel: features, corner: t.cornerLooksFor, digits: 0 });
    renderMatrix($('words-weights'), weights, n, n, { rowLabel: tokens, colLabel: tokens, corner: t.cornerLooksAt, heat: true, digits: 2 });
    renderMatrix($('words-outputs'), outputs, n, E, { rowLabel: tokens, colLabel: features, corner: t.cornerWord, digits: 2 });
    $('words-reading').innerHTML = format(t.wordsReading, { split: formatNumber(weights[action * n + animal], 2) });
    window.attentionDemo.words = {
      tokens, embedding: [...embedding], wq: [...WQ], query: [...query], key: [...key], value: [...value],
      weights: [...weights], outputs: [...outputs], options,
    };
    drawn = { tokens, embedding, n, weights };
    const picker = $('words-follow');
    picker.replaceChildren(el('span', { id: 'words-follow-label', textContent: t.wordsFollowLabel }), ...tokens.map((word, i) => {
      const input = el('input', { type: 'radio', name: 'words-follow', value: String(i) });
      input.addEventListener('change', () => follow(i));
      return el('label', {}, input, ` ${word}${sup(i + 1)}`);
    }));
    for (const id of ['words-embedding', 'words-weights', 'words-outputs']) {
      [...$(id).tBodies[0].rows].forEach((tr, i) => tr.addEventListener('click', () => follow(i)));
    }
    follow(Math.min(selected[language()] ?? action, n - 1));
  };
}
