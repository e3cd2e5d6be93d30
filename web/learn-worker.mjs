// "Watch it learn", off the page's thread: one attention layer learns W_q and W_k from the
// sentences of "Real words as tokens" (both languages, the same four features), so that its
// outputs become those of the hand-made head there. W_v = W_o = I stay fixed (their gradients are
// not applied), so the outputs can only come right by attending to the right words. Training
// runs at the page's chosen speed and reports each step's loss, W_q, W_k and the weights α̂ of
// the sentence the page shows.
//   → { type: 'init', module }        the page's compiled build (or null: load the library here)
//   → { type: 'start', speed } | { type: 'pause' } | { type: 'step' } | { type: 'speed', speed }
//   → { type: 'reset' } | { type: 'show', lang } | { type: 'export' }
//   ← { type: 'state', phase, step, loss, lr, losses (new since `from`), from, weights, wq, wk, words, targets, lang }
//   ← { type: 'export', json, step }   ← { type: 'error', message }
import { loadAttention } from '../dist/index.mjs';
import { CONFIG, LEARNING_RATE, MAX_STEPS, STOP_LOSS, initialWeights, makeTask, snapshot, weightsJson } from './learn-task.mjs';

let lib = null, layer = null, task = null;
let phase = 'idle', losses = [], sent = 0, lang = 'en', speed = 10, timer = 0;
const zeros = new Float32Array(CONFIG.embedDim * CONFIG.embedDim);

async function load(module) {
  if (module) {
    try { return await loadAttention({ wasmBinary: module, layers: true }); } catch { /* load one of our own */ }
  }
  return loadAttention({ layers: true });
}

function reset() {
  layer?.dispose();
  layer = new lib.MultiHeadAttention(CONFIG);
  layer.setWeights(initialWeights());
  losses = [];
  sent = 0;
  phase = 'idle';
}

// One step: the loss and gradients of both sentences (forward and backward per sentence, the
// gradients summed), then one Adam step on W_q and W_k.
function step() {
  const dims = CONFIG.embedDim * CONFIG.embedDim;
  const gq = new Float32Array(dims), gk = new Float32Array(dims);
  let loss = 0;
  for (const s of task.sentences) {
    const y = layer.forward(s.embedding, null, null, { train: true });
    const dOut = y.map((v, e) => { const d = v - s.target[e]; loss += d * d; return (2 * d) / task.size; });
    const { wq, wk } = layer.backward(dOut).weights;
    wq.forEach((g, e) => { gq[e] += g; });
    wk.forEach((g, e) => { gk[e] += g; });
  }
  loss /= task.size;
  layer.adamStep({ wq: gq, wk: gk, wv: zeros, wo: zeros }, { lr: LEARNING_RATE });
  losses.push(loss);
  if (loss < STOP_LOSS) phase = 'converged';
  else if (losses.length >= MAX_STEPS) phase = 'limit';
}

function report() {
  const shown = snapshot(layer, task.sentences.find((x) => x.lang === lang));
  self.postMessage({ type: 'state', phase, step: losses.length, loss: losses.at(-1) ?? null, lr: LEARNING_RATE,
    losses: losses.slice(sent), from: sent, ...shown });
  sent = losses.length;
}

// At `speed` steps a second: a tick every 1000/speed ms (at most 10 a second: the page redraws
// on every report), as many steps as make up that time.
function schedule() {
  clearTimeout(timer);
  if (phase !== 'running') return;
  const interval = Math.max(1000 / speed, 100);
  const perTick = Math.max(1, Math.round((speed * interval) / 1000));
  timer = setTimeout(() => {
    for (let k = 0; k < perTick && phase === 'running'; k++) step();
    report();
    schedule();
  }, interval);
}

const handlers = {
  async init({ module }) {
    lib = await load(module);
    task = makeTask(lib);
    reset();
    report();
  },
  start({ speed: s }) {
    if (phase === 'converged' || phase === 'limit') return;
    speed = s ?? speed;
    phase = 'running';
    report();
    schedule();
  },
  pause() {
    if (phase === 'running') phase = 'paused';
    clearTimeout(timer);
    report();
  },
  step() {
    if (phase === 'converged' || phase === 'limit') return;
    clearTimeout(timer);
    phase = 'paused';
    step();
    if (phase === 'running') phase = 'paused';
    report();
  },
  speed({ speed: s }) { speed = s; schedule(); },
  reset() { clearTimeout(timer); reset(); report(); },
  show({ lang: l }) { lang = l; if (layer) report(); },
  export() { self.postMessage({ type: 'export', json: weightsJson(layer, losses), step: losses.length }); },
};

let queue = Promise.resolve();  // messages in order (init is asynchronous)
self.addEventListener('message', ({ data }) => {
  queue = queue.then(() => handlers[data.type](data)).catch((error) => {
    self.postMessage({ type: 'error', message: `${error.name}: ${error.message}` });
  });
});
