// "Real words as tokens": a short sentence (English or Chinese, per the language switch) whose
// words have four named features, so W_q reads as "what each word looks for" and every weight
// as "this word looks at that one". One head here; multi-head.mjs splits the same W_q in two.
import { format } from './i18n.mjs';
import { renderMatrix } from './matrix-view.mjs';
import { $ } from './dom.mjs';
import { E, IDENTITY, WQ, sentence } from './sentences.mjs';

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
