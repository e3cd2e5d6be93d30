// The demo page: one library instance computes every section on this page (the search, the
// walk-through, real words, position, multi-head attention, the KV cache and the masks);
// "Watch it learn" and the playground train and run in Web Workers of their own, the benchmark
// panel one per engine. A language switch re-renders everything; the "for developers" switch
// shows the cross-checks and the library calls behind each section.
import { loadAttention } from '../dist/index.mjs';
import { $ } from './dom.mjs';
import { startBench } from './bench-section.mjs';
import { STRINGS, format } from './i18n.mjs';
import { startDecode } from './decode.mjs';
import { startLearning } from './learn.mjs';
import { startMaskPictures } from './mask-pictures.mjs';
import { startMultiHead } from './multi-head.mjs';
import { startPlayground } from './playground.mjs';
import { startPosition } from './position.mjs';
import { startSearch } from './search.mjs';
import { startWalkthrough } from './walkthrough.mjs';
import { startWords } from './words.mjs';

let lang = 'en';
let lib = null;
let sections = [];  // render functions, called on a language switch
const strings = () => STRINGS[lang];
const language = () => lang;

function applyLanguage(next) {
  lang = next;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.title = strings().pageTitle;
  for (const node of document.querySelectorAll('[data-i18n]')) node.innerHTML = strings()[node.dataset.i18n];
  for (const b of document.querySelectorAll('.lang button')) b.setAttribute('aria-pressed', String(b.dataset.lang === lang));
  if (lib) {
    const { version, simd, threads, threadsReason } = lib.info;
    const why = threads === 1 && /isolated/.test(threadsReason) ? `: ${threadsReason}` : '';
    $('status').textContent = format(strings().status, { version, simd, threads, s: threads === 1 ? '' : 's', why });
  }
  for (const render of sections) render();
}

const devMode = $('dev-mode');
const applyDevMode = () => document.body.classList.toggle('dev-mode', devMode.checked);
devMode.addEventListener('change', applyDevMode);
applyDevMode();
applyLanguage('en');
for (const b of document.querySelectorAll('.lang button')) b.addEventListener('click', () => applyLanguage(b.dataset.lang));
try {
  lib = await loadAttention();
  window.attentionDemo = { info: { ...lib.info } };
  sections = [
    startSearch(lib, strings),
    startWalkthrough(lib, strings).render,
    startWords(lib, strings, language),
    startLearning(lib, strings, language),
    startPosition(lib, strings, language),
    startMultiHead(lib, strings, language),
    startDecode(lib, strings, language),
    startMaskPictures(lib, strings),
    startPlayground(strings, lib.info),
    startBench(strings),
  ];
  applyLanguage(lang);
  document.body.dataset.ready = 'true';
} catch (error) {
  $('status').textContent = error.message;
  $('status').classList.add('error');
  document.body.dataset.ready = 'error';
}
