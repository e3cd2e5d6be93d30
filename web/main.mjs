// The demo page: one library instance computes every section on this page (the search, the
// walk-through, real words, position, multi-head attention, the KV cache and the masks), on one
// thread: the lesson's calls are a few tokens wide, and the single-threaded build is the smaller
// download (no worker glue, no thread pool). "Watch it learn" and the playground train and run in
// Web Workers of their own (the playground's with threads where the page may have them), the
// benchmark panel one per engine; the playground and the panel load when a reader gets near them.
// The page opens in the visitor's language (language.mjs); a switch re-renders everything; the
// "for developers" switch shows the cross-checks and the library calls behind each section.
import { loadAttention } from '../dist/index.mjs';
import { $, whenNear } from './dom.mjs';
import { startBench } from './bench-section.mjs';
import { format, loadStrings } from './i18n.mjs';
import { openingLanguage, rememberLanguage } from './language.mjs';
import { startDecode } from './decode.mjs';
import { startExperiment } from './dk-experiment.mjs';
import { startLearning } from './learn.mjs';
import { startMaskPictures } from './mask-pictures.mjs';
import { startMultiHead } from './multi-head.mjs';
import { startPosition } from './position.mjs';
import { startSearch } from './search.mjs';
import { startWalkthrough } from './walkthrough.mjs';
import { startWords } from './words.mjs';

let lang = null;
let shown = {};  // the strings of `lang`
let lib = null;
let sections = [];  // render functions, called on a language switch
const strings = () => shown;
const language = () => lang;

// Shows the page in `next` once its strings are loaded (the last language asked for wins).
let asked = null;
async function applyLanguage(next) {
  asked = next;
  const loaded = await loadStrings(next);
  if (asked !== next) return;
  lang = next;
  shown = loaded;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.title = shown.pageTitle;
  for (const node of document.querySelectorAll('[data-i18n]')) node.innerHTML = shown[node.dataset.i18n];
  for (const node of document.querySelectorAll('[data-i18n-label]')) node.setAttribute('aria-label', shown[node.dataset.i18nLabel]);
  for (const b of document.querySelectorAll('.lang button')) b.setAttribute('aria-pressed', String(b.dataset.lang === lang));
  if (lib) {
    const { version, simd } = lib.info;
    $('status').textContent = format(shown.status, { version, simd });
  }
  for (const render of sections) render();
  document.body.dataset.lang = lang;
}

// The playground's code (playground.mjs) loads when the playground comes near the screen, or when
// its form is used before that (the Run then happens as soon as the code is in).
function startPlaygroundWhenNear() {
  const form = $('playground');
  let refresh = null;
  let loading = null;
  const load = () => (loading ??= import('./playground.mjs').then(({ startPlayground }) => { refresh = startPlayground(strings); }));
  form.addEventListener('submit', (event) => {
    if (refresh) return;
    event.preventDefault();
    load().then(() => form.requestSubmit());
  });
  whenNear(form, load);
  return () => refresh?.();
}

const devMode = $('dev-mode');
const applyDevMode = () => document.body.classList.toggle('dev-mode', devMode.checked);
devMode.addEventListener('change', applyDevMode);
applyDevMode();
for (const b of document.querySelectorAll('.lang button')) {
  b.addEventListener('click', () => {
    rememberLanguage(b.dataset.lang);
    applyLanguage(b.dataset.lang);
  });
}
try {
  [lib] = await Promise.all([loadAttention({ threads: 1, layers: true }), applyLanguage(openingLanguage())]);
  window.attentionDemo = { info: { ...lib.info } };
  sections = [
    startSearch(lib, strings),
    startWalkthrough(lib, strings).render,
    startExperiment(lib, strings),
    startWords(lib, strings, language),
    startLearning(lib, strings, language),
    startPosition(lib, strings, language),
    startMultiHead(lib, strings, language),
    startDecode(lib, strings, language),
    startMaskPictures(lib, strings),
    startPlaygroundWhenNear(),
    startBench(strings),
  ];
  await applyLanguage(lang);
  document.body.dataset.ready = 'true';
} catch (error) {
  $('status').textContent = error.message;
  $('status').classList.add('error');
  document.body.dataset.ready = 'error';
}
