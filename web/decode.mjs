// "Decoding with a KV cache": the sentence of words.mjs arrives one word at a time, as a language
// model produces it. Each step appends the new word's key and value to a lib.createKVCache()
// cache and attends with the new word's query to everything cached (lib.attention(query, cache,
// null, …)), so a word sees only the words before it. With the window box the cache is a
// sliding-window ring of 3 positions. Every row is checked against causal attention over the
// whole prefix at once.
import { format } from './i18n.mjs';
import { renderMatrix, sup } from './matrix-view.mjs';
import { formatScientific } from './numbers.mjs';
import { E, WQ, sentence } from './sentences.mjs';
import { $ } from './dom.mjs';

export const WINDOW = 3;

export function startDecode(lib, strings, language) {
  const next = $('decode-next'), all = $('decode-all'), reset = $('decode-reset'), windowed = $('decode-window');
  let cache = null, steps = [], lang = null;

  function restart(keep = 0) {
    cache?.dispose();
    const { n } = sentence(language());
    // k = v = the word's embedding (W_k = W_v = I, as in "Real words as tokens").
    cache = windowed.checked ? lib.createKVCache({ kvHeads: 1, headDim: E, window: WINDOW })
      : lib.createKVCache({ kvHeads: 1, headDim: E, maxSeq: n });
    steps = [];
    lang = language();
    for (let i = 0; i < Math.min(keep, n); i++) step();
  }

  function step() {
    const { embedding } = sentence(language());
    const p = cache.length;
    const a = embedding.subarray(p * E, (p + 1) * E);
    cache.append(a, a);
    const query = lib.linear(a, WQ, { inFeatures: E, outFeatures: E });
    const weights = new Float32Array(cache.length);
    // A ring keeps the WINDOW − 1 positions before each query: the call says it looks no further.
    const window = windowed.checked ? [WINDOW - 1, 0] : null;
    const out = lib.attention(query, cache, null, { heads: 1, seqQ: 1, window, weightsOut: weights });
    steps.push({ query, weights, out, length: cache.length, bytes: cache.bytes });
  }

  // Whether the query of step i may see position j: the cache holds it (j ≤ i) and, with the
  // window, it is one of the last WINDOW positions.
  const hiddenBy = (i, j) => (j > i ? 'future' : windowed.checked && j <= i - WINDOW ? 'window' : null);

  function render() {
    if (lang !== language()) restart(steps.length);  // the other language's sentence, as far as it had got
    const t = strings();
    const { tokens, embedding, n } = sentence(language());
    const done = steps.length;
    next.disabled = all.disabled = done === n;
    reset.disabled = done === 0;
    const label = (i) => `${tokens[i]}${sup(i + 1)}`;
    $('decode-sentence').replaceChildren(...tokens.map((w, i) => {
      const span = Object.assign(document.createElement('span'), { textContent: w });
      span.className = i < done - 1 ? 'arrived' : i === done - 1 ? 'newest' : 'future';
      return span;
    }));
    const last = steps.at(-1);
    const status = $('decode-status');
    if (!last) {
      status.innerHTML = t.decodeIdle;
    } else {
      const i = done - 1;
      const seen = tokens.slice(0, done).map((_, j) => j).filter((j) => !hiddenBy(i, j)).map(label).join(' ');
      const held = Math.min(last.length, windowed.checked ? WINDOW : n);
      status.innerHTML = format(t.decodeStatus, { step: done, word: label(i), held, seen, floats: held * 2 * E }) +
        format(t.decodeStatusDev, { length: last.length, bytes: last.bytes,
          room: windowed.checked ? format(t.decodeRoomWindow, { w: WINDOW }) : format(t.decodeRoom, { n }) });
    }
    status.dataset.step = String(done);
    $('decode-tables').hidden = done === 0;  // nothing cached yet: no empty tables

    const features = t.features;
    const held = (j) => !windowed.checked || j > done - 1 - WINDOW;
    renderMatrix($('decode-cache'), embedding, done, E, {
      rowLabel: label, colLabel: features, corner: t.cornerPosition, digits: 0,
      rowClass: (j) => (!held(j) ? 'dropped' : j === done - 1 ? 'highlight' : ''),
      extraColumn: { title: t.decodeHeldTitle, value: (j) => (held(j) ? t.decodeHeld : t.decodeDropped) },
    });
    const weights = new Float32Array(done * n);
    steps.forEach((s, i) => weights.set(s.weights, i * n));
    renderMatrix($('decode-weights'), weights, done, n, {
      rowLabel: label, colLabel: label, corner: t.cornerLooksAt, heat: true, digits: 2,
      rowClass: (i) => (i === done - 1 ? 'highlight' : ''),
      special: (i, j) => {
        const by = hiddenBy(i, j);
        if (!by) return null;
        return by === 'future' ? { text: '', className: 'masked masked-causal', title: format(t.decodeFutureTitle, { word: label(j) }) }
          : { text: '0', className: 'masked masked-key', title: format(t.decodeWindowTitle, { word: label(j), w: WINDOW }) };
      },
    });
    const outputs = new Float32Array(done * E);
    steps.forEach((s, i) => outputs.set(s.out, i * E));
    renderMatrix($('decode-outputs'), outputs, done, E, { rowLabel: label, colLabel: features, corner: t.cornerWord, digits: 2,
      rowClass: (i) => (i === done - 1 ? 'highlight' : '') });

    // The same rows from one causal call over the whole prefix (the window too, when on).
    let diff = 0;
    if (done > 0) {
      const prefix = embedding.subarray(0, done * E);
      const options = { heads: 1, seqQ: done, headDim: E, causal: true, window: windowed.checked ? [WINDOW - 1, 0] : null };
      const at = lib.attention(lib.linear(prefix, WQ, { inFeatures: E, outFeatures: E }), prefix, prefix, options);
      diff = at.reduce((m, x, e) => Math.max(m, Math.abs(x - outputs[e])), 0);
    }
    $('decode-check').innerHTML = done ? format(windowed.checked ? t.decodeCheckWindow : t.decodeCheck, { diff: formatScientific(diff, 1), w1: WINDOW - 1 }) : '';
    const badge = $('decode-badge');
    badge.hidden = done === 0;
    badge.textContent = diff <= 1e-6 ? t.badgeChecked : t.badgeFailed;
    badge.title = t.decodeBadgeTitle;
    badge.classList.toggle('failed', diff > 1e-6);
    window.attentionDemo.decode = {
      tokens, embedding: [...embedding], wq: [...WQ], windowed: windowed.checked, window: WINDOW, diff,
      steps: steps.map((s) => ({ query: [...s.query], weights: [...s.weights], out: [...s.out], length: s.length, bytes: s.bytes })),
    };
  }

  next.addEventListener('click', () => { if (steps.length < sentence(language()).n) step(); render(); });
  all.addEventListener('click', () => { while (steps.length < sentence(language()).n) step(); render(); });
  reset.addEventListener('click', () => { restart(0); render(); });
  windowed.addEventListener('change', () => { restart(steps.length); render(); });
  restart(0);
  return render;
}
