// "Watch it learn": one attention layer learns, a few steps per animation frame on the page's own
// library instance, to attend to the key equal to its query. The keys are the queries shuffled and
// each key has a random value; query i must output the value of the key equal to it. Only
// attending to that key does it (with eight different examples the layer cannot unmix a blend of
// values instead), so the weights α̂ turn into a permutation. The learning rate decays (Adam at a
// constant 0.05 keeps spiking after it has converged), and training stops by itself once the loss
// is below STOP_LOSS.
import { format } from './i18n.mjs';
import { drawLossChart } from './loss-chart.mjs';
import { renderMatrix, sup } from './matrix-view.mjs';
import { randomArray } from './random-arrays.mjs';
import { $ } from './dom.mjs';

const E = 8, N = 6, STEPS_PER_FRAME = 2;
export const BATCH = 8;
export const STOP_LOSS = 1e-4;
export const CONFIG = { embedDim: E, numHeads: 1 };
export const MAX_STEPS = 3000;
const learningRate = (step) => 0.05 * 0.01 ** (step / 1500);
const sourceOf = (j) => (j * 5 + 3) % N;  // key j is query sourceOf(j)

export function makeTask() {
  const queries = randomArray(BATCH * N * E, 5);
  const values = randomArray(BATCH * N * E, 6);
  const keys = new Float32Array(queries.length);
  const targets = new Float32Array(queries.length);
  const row = (a, b, i) => a.subarray((b * N + i) * E, (b * N + i + 1) * E);
  for (let b = 0; b < BATCH; b++) {
    for (let j = 0; j < N; j++) {
      keys.set(row(queries, b, sourceOf(j)), (b * N + j) * E);
      targets.set(row(values, b, j), (b * N + sourceOf(j)) * E);
    }
  }
  return { queries, keys, values, targets };
}

export function startLearning(lib, strings) {
  const start = $('learn-start'), stop = $('learn-stop'), reset = $('learn-reset');
  const status = $('learn-status'), chart = $('learn-loss'), table = $('learn-weights');
  const task = makeTask();
  const weightsOut = new Float32Array(BATCH * N * N);
  let layer = null, losses = [], phase = 'idle', frame = 0;
  let exported = null;  // the step whose weights were exported last

  function initialise() {
    layer?.dispose();
    layer = new lib.MultiHeadAttention(CONFIG);
    const w = (seed) => randomArray(E * E, seed).map((x) => x * 0.5);
    const zeros = () => new Float32Array(E);
    layer.setWeights({ wq: w(1), wk: w(2), wv: w(3), wo: w(4), bq: zeros(), bk: zeros(), bv: zeros(), bo: zeros() });
    layer.forward(task.queries, task.keys, task.values, { batch: BATCH, weightsOut });
    losses = [];
    phase = 'idle';
    $('learn-export-box').hidden = true;
    exported = null;
  }

  function step() {
    const y = layer.forward(task.queries, task.keys, task.values, { batch: BATCH, train: true, weightsOut });
    let loss = 0;
    const dOut = y.map((v, i) => { const d = v - task.targets[i]; loss += d * d; return (2 * d) / y.length; });
    loss /= y.length;
    layer.adamStep(layer.backward(dOut).weights, { lr: learningRate(losses.length) });
    losses.push(loss);
    if (loss < STOP_LOSS) phase = 'converged';
    else if (losses.length >= MAX_STEPS) phase = 'limit';
  }

  function tick() {
    frame = 0;
    if (phase !== 'running') return;
    for (let s = 0; s < STEPS_PER_FRAME && phase === 'running'; s++) step();
    show();
    if (phase === 'running') frame = requestAnimationFrame(tick);
  }

  function show() {
    const t = strings();
    const last = losses.at(-1);
    const values = { step: losses.length, loss: last?.toExponential(2), lr: learningRate(losses.length).toPrecision(2), stop: STOP_LOSS.toExponential(0) };
    status.textContent = losses.length === 0 ? t.learnIdle : format(t[`learnStatus_${phase}`], values);
    Object.assign(status.dataset, { state: phase, step: String(losses.length), loss: String(last ?? ''), firstLoss: String(losses[0] ?? '') });
    start.disabled = phase === 'running' || phase === 'converged' || phase === 'limit';
    stop.disabled = phase !== 'running';
    drawLossChart(chart, losses, { labels: { step: t.chartStep, loss: t.chartLoss, stop: t.chartStop }, stopAt: STOP_LOSS });
    chart.setAttribute('aria-label', t.chartLabel);
    if (exported !== null) $('learn-export-note').innerHTML = format(t.learnExportNote, { step: exported });
    // The first example's weights; the cell each query should learn to pick is outlined.
    renderMatrix(table, weightsOut.subarray(0, N * N), N, N, {
      rowLabel: (i) => `q${sup(i + 1)}`, colLabel: (j) => `k${sup(j + 1)}`, heat: true, digits: 2,
    });
    [...table.tBodies[0].rows].forEach((row, i) => {
      for (let j = 0; j < N; j++) if (sourceOf(j) === i) row.cells[j + 1].classList.add('target');
    });
  }

  // The layer's weights now, as JSON a reader can save and load into a layer of their own.
  let downloadUrl = null;
  $('learn-export').addEventListener('click', () => {
    const text = weightsJson(layer, losses);
    $('learn-export-text').value = text;
    if (downloadUrl) URL.revokeObjectURL(downloadUrl);
    downloadUrl = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    $('learn-download').href = downloadUrl;
    $('learn-export-box').hidden = false;
    exported = losses.length;
    show();
  });

  start.addEventListener('click', () => {
    if (phase === 'running') return;
    phase = 'running';
    frame = requestAnimationFrame(tick);
    show();
  });
  stop.addEventListener('click', () => {
    if (phase === 'running') phase = 'stopped';
    cancelAnimationFrame(frame);
    show();
  });
  reset.addEventListener('click', () => {
    cancelAnimationFrame(frame);
    initialise();
    show();
  });
  initialise();
  show();
  return show;  // re-renders in the current language
}

// JSON of the layer's weights (mha.getWeights(): nn.Linear layout), one line per matrix. Nine
// significant digits give back every float32 exactly.
export function weightsJson(layer, losses) {
  const number = (x) => String(Number(x.toPrecision(9)));
  // The constructor's sizes (this section's layer has no rotary, window, softcap, ALiBi or sinks).
  const { embedDim, numHeads, numKvHeads, kdim, vdim, bias } = layer.config;
  const config = { embedDim, numHeads, numKvHeads, kdim, vdim, bias };
  const weights = Object.entries(layer.getWeights()).map(([name, w]) => `    "${name}": [${Array.from(w, number).join(', ')}]`);
  return [
    '{',
    '  "format": "attention-wasm MultiHeadAttention weights",',
    `  "config": ${JSON.stringify(config)},`,
    `  "step": ${losses.length},`,
    `  "loss": ${losses.length ? number(losses.at(-1)) : 'null'},`,
    '  "layout": "nn.Linear: W is [out, in], row-major; y = x·Wᵀ + b",',
    '  "load": "const layer = new lib.MultiHeadAttention(json.config); layer.setWeights(Object.fromEntries(Object.entries(json.weights).map(([k, v]) => [k, Float32Array.from(v)])))",',
    '  "weights": {',
    weights.join(',\n'),
    '  }',
    '}',
  ].join('\n') + '\n';
}
