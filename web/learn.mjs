// "Watch it learn", the page's side: the training itself runs in a Web Worker (learn-worker.mjs,
// on the page's build), so the page stays responsive; this module sends it the controls (start,
// pause, one step, speed, reset, export) and draws what it reports — the loss chart, the weights
// α̂ of the page's sentence (outlined where the hand-made head of "Real words" puts most weight),
// W_q and W_k as they change, and W_qᵀW_k, which is all the scores depend on: qⁱ·kʲ =
// aⁱ·(W_qᵀW_k)aʲ (outlined where the hand-made head's W_qᵀ·I is largest).
import { $ } from './dom.mjs';
import { format } from './i18n.mjs';
import { drawLossChart } from './loss-chart.mjs';
import { renderMatrix, sup, updateCells } from './matrix-view.mjs';
import { formatScientific } from './numbers.mjs';
import { compilePageBuild } from './page-build.mjs';
import { CONFIG, STOP_LOSS, initialWeights, makeTask, snapshot } from './learn-task.mjs';
import { E, WQ } from './sentences.mjs';

const transpose = (m) => Float32Array.from({ length: E * E }, (_, e) => m[(e % E) * E + Math.floor(e / E)]);

export function startLearning(lib, strings, language) {
  const start = $('learn-start'), stepButton = $('learn-step'), reset = $('learn-reset'), speed = $('learn-speed');
  const status = $('learn-status');
  let worker = null;
  let ready = null;  // resolves once the worker has been sent its module
  // Until the first Start or Step, the untrained layer is shown from the page's own library (the
  // worker starts then).
  const task = makeTask(lib);
  const untrained = () => {
    const layer = new lib.MultiHeadAttention(CONFIG);
    layer.setWeights(initialWeights());
    const shown = snapshot(layer, task.sentences.find((s) => s.lang === language()));
    layer.dispose();
    return { phase: 'idle', step: 0, loss: null, ...shown };
  };
  let shown = untrained();
  let losses = [];
  let exported = null;  // the step whose weights were exported last
  let downloadUrl = null;
  let shownLabels = '';  // the labels the tables were drawn with

  function send(message) {
    if (!worker) {
      worker = new Worker(new URL('./learn-worker.mjs', import.meta.url), { type: 'module' });
      worker.addEventListener('message', onMessage);
      worker.addEventListener('error', (e) => show({ phase: 'error', message: e.message }));
      const started = worker;
      ready = compilePageBuild(lib.info).then((module) => {
        started.postMessage({ type: 'init', module });
        started.postMessage({ type: 'show', lang: language() });
      });
    }
    const to = worker;
    ready.then(() => to.postMessage(message));
  }

  function onMessage({ data }) {
    if (data.type === 'error') return show({ ...shown, phase: 'error', message: data.message });
    if (data.type === 'export') return showExport(data);
    losses = data.from === 0 ? [...data.losses] : [...losses.slice(0, data.from), ...data.losses];
    show(data);
  }

  function show(data = shown) {
    shown = data;
    const t = strings();
    const { phase, step } = data;
    const values = { step, loss: data.loss == null ? '' : formatScientific(data.loss, 2), stop: formatScientific(STOP_LOSS, 0) };
    status.textContent = phase === 'error' ? format(t.learnError, { message: data.message })
      : step === 0 && phase !== 'running' ? t.learnIdle : format(t[`learnStatus_${phase}`], values);
    Object.assign(status.dataset, { state: phase, step: String(step), loss: String(data.loss ?? ''), firstLoss: String(losses[0] ?? '') });
    const finished = phase === 'converged' || phase === 'limit' || phase === 'error';
    start.textContent = phase === 'running' ? t.learnPause : t.learnStart;
    start.disabled = finished;
    stepButton.disabled = finished || phase === 'running';
    drawLossChart($('learn-loss'), losses, { labels: { step: t.chartStep, loss: t.chartLoss, stop: t.chartStop }, stopAt: STOP_LOSS });
    $('learn-loss').setAttribute('aria-label', t.chartLabel);
    if (exported !== null) $('learn-export-note').innerHTML = format(t.learnExportNote, { step: exported });
    if (!data.weights) return;
    // While training, only the numbers change: they go into the tables in place.
    const relabel = shownLabels !== `${t.features}|${data.words}`;
    shownLabels = `${t.features}|${data.words}`;
    const tokens = data.words.map((w, i) => `${w}${sup(i + 1)}`);
    const n = data.words.length;
    const heat = { heat: true, digits: 2 };
    if (relabel || !updateCells($('learn-weights'), data.weights, n, n, heat)) {
      renderMatrix($('learn-weights'), data.weights, n, n, { rowLabel: tokens, colLabel: tokens, corner: t.cornerLooksAt, ...heat });
      // Outlined: where the hand-made head gives a word most of its weight (the target's pattern).
      [...$('learn-weights').tBodies[0].rows].forEach((row, i) => {
        for (const j of data.targets[i]) row.cells[j + 1].classList.add('target');
      });
    }
    const signed = { digits: 1, signed: { max: Math.max(1e-6, ...data.wq.map(Math.abs), ...data.wk.map(Math.abs)) } };
    for (const [id, w, corner] of [['learn-wq', data.wq, 'q ╲ a'], ['learn-wk', data.wk, 'k ╲ a']]) {
      if (relabel || !updateCells($(id), w, E, E, signed)) {
        renderMatrix($(id), w, E, E, { rowLabel: (r) => String(r + 1), colLabel: t.features, corner, ...signed });
      }
    }
    // W_qᵀW_k = lib.linear(W_qᵀ, W_kᵀ) (linear multiplies by its second argument transposed).
    const product = lib.linear(transpose(data.wq), transpose(data.wk), { inFeatures: E, outFeatures: E });
    const productShading = { digits: 1, signed: { max: Math.max(1e-6, ...product.map(Math.abs)) } };
    if (relabel || !updateCells($('learn-wqk'), product, E, E, productShading)) {
      renderMatrix($('learn-wqk'), product, E, E, { rowLabel: t.features, colLabel: t.features, corner: t.cornerLookerLooked, ...productShading });
      [...$('learn-wqk').tBodies[0].rows].forEach((row, a) => {
        for (let b = 0; b < E; b++) row.cells[b + 1].classList.toggle('target', WQ[b * E + a] > 0);  // the hand-made W_qᵀ
      });
    }
    window.attentionDemo.learn = { phase, step, loss: data.loss, losses: [...losses], wq: [...data.wq], wk: [...data.wk], product: [...product],
      weights: [...data.weights], lang: data.lang };
  }

  function showExport({ json, step }) {
    $('learn-export-text').value = json;
    if (downloadUrl) URL.revokeObjectURL(downloadUrl);
    downloadUrl = URL.createObjectURL(new Blob([json], { type: 'application/json' }));
    $('learn-download').href = downloadUrl;
    $('learn-export-box').hidden = false;
    exported = step;
    show();
  }

  start.addEventListener('click', () => send(shown.phase === 'running' ? { type: 'pause' } : { type: 'start', speed: Number(speed.value) }));
  stepButton.addEventListener('click', () => send({ type: 'step' }));
  speed.addEventListener('change', () => send({ type: 'speed', speed: Number(speed.value) }));
  reset.addEventListener('click', () => {
    $('learn-export-box').hidden = true;
    exported = null;
    losses = [];
    if (worker) send({ type: 'reset' });
    else show(untrained());
  });
  $('learn-export').addEventListener('click', () => send({ type: 'export' }));
  show();

  // Re-renders in the current language (and tells the worker which sentence to show).
  return () => {
    if (shown.lang === language()) show();
    else if (worker) send({ type: 'show', lang: language() });
    else show(untrained());
  };
}
