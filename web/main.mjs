// The demo page: one library instance computes every section on this page (the walk-through,
// real words, multi-head attention, position, the KV cache and the masks, "Watch it learn"); the
// playground runs in a Web Worker of its own, the benchmark panel one per engine. A language
// switch re-renders everything.
import { loadAttention } from '../dist/index.mjs';
import { startBench } from './bench-section.mjs';
import { STRINGS, format } from './i18n.mjs';
import { startDecode } from './decode.mjs';
import { startLearning } from './learn.mjs';
import { startMaskPictures } from './mask-pictures.mjs';
import { startMultiHead } from './multi-head.mjs';
import { startPlayground } from './playground.mjs';
import { startPosition } from './position.mjs';
import { startWalkthrough } from './walkthrough.mjs';
import { startWords } from './words.mjs';
import { $ } from './dom.mjs';

let lang = 'en';
let lib = null;
let sections = [];  // render functions, called on a language switch
const strings = () => STRINGS[lang];

function applyLanguage(next) {
  lang = next;
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.title = strings().pageTitle;
  for (const el of document.querySelectorAll('[data-i18n]')) el.innerHTML = strings()[el.dataset.i18n];
  for (const b of document.querySelectorAll('.lang button')) b.setAttribute('aria-pressed', String(b.dataset.lang === lang));
  if (lib) {
    const { version, simd, threads, threadsReason } = lib.info;
    const why = threads === 1 && /isolated/.test(threadsReason) ? `: ${threadsReason}` : '';
    $('status').textContent = format(strings().status, { version, simd, threads, s: threads === 1 ? '' : 's', why });
  }
  for (const render of sections) render();
}

applyLanguage('en');
for (const b of document.querySelectorAll('.lang button')) b.addEventListener('click', () => applyLanguage(b.dataset.lang));
try {
  lib = await loadAttention();
  window.attentionDemo = { info: { ...lib.info } };
  sections = [
    startWalkthrough(lib, strings).render,
    startWords(lib, strings, () => lang),
    startMultiHead(lib, strings, () => lang),
    startPosition(lib, strings, () => lang),
    startDecode(lib, strings, () => lang),
    startMaskPictures(lib, strings),
    startLearning(lib, strings),
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
