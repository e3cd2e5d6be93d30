// "Real words as tokens": a short sentence (English or Chinese, per the language switch) whose
// words have four named features, so W_q reads as "what each word looks for" and every weight
// as "this word looks at that one". One head here; multi-head.mjs splits the same W_q in two.
import { format } from './i18n.mjs';
import { renderMatrix } from './matrix-view.mjs';
import { $ } from './dom.mjs';

// Features, in this order: animal, action, place, relation word. Head 1 of the multi-head section
// takes the first two dims, head 2 the last two.
export const E = 4;
export const SENTENCES = {
  en: [['the', [0, 0, 0, 0]], ['cat', [1, 0, 0, 0]], ['sat', [0, 1, 0, 0]], ['on', [0, 0, 0, 1]], ['the', [0, 0, 0, 0]], ['mat', [0, 0, 1, 0]]],
  zh: [['小猫', [1, 0, 0, 0]], ['坐', [0, 1, 0, 0]], ['在', [0, 0, 0, 1]], ['垫子', [0, 0, 1, 0]], ['上', [0, 0, 0, 1]]],
};
const C = 5;  // how strongly a word looks for a feature
// Row r: "looks for feature r"; column c: "the word has feature c". An action looks for an animal
// (who?) and a place (where?), an animal for an action (does what?), a relation word for a place,
// a place for a relation word.
export const WQ = Float32Array.from([
  0, C, 0, 0,
  C, 0, 0, 0,
  0, C, 0, C,
  0, 0, C, 0,
]);
export const IDENTITY = Float32Array.from({ length: E * E }, (_, e) => (e % (E + 1) === 0 ? 1 : 0));

// tokens, their embeddings [n, E], and which token is the action (sat / 坐) and the animal.
export function sentence(lang) {
  const words = SENTENCES[lang];
  const find = (feature) => words.findIndex(([, f]) => f[feature] === 1);
  return { tokens: words.map(([w]) => w), embedding: Float32Array.from(words.flatMap(([, f]) => f)), n: words.length,
    action: find(1), animal: find(0) };
}

// Returns render(): recomputes and redraws for the current language.
export function startWords(lib, strings, language) {
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
    $('words-reading').innerHTML = format(t.wordsReading, { split: weights[action * n + animal].toFixed(2) });
    window.attentionDemo.words = {
      tokens, embedding: [...embedding], wq: [...WQ], query: [...query], key: [...key], value: [...value],
      weights: [...weights], outputs: [...outputs], options,
    };
  };
}
