// "Watch it learn": trains one attention layer in this Web Worker and reports the loss and the
// attention weights as it goes. Task: the keys are the queries shuffled, value j is the one-hot
// code of key position j, and query i must output the code of the key equal to it: only
// attending to that key does it, so the weights α̂ turn into a permutation.
import { loadAttention } from '../dist/index.mjs';
import { randomArray } from './random-arrays.mjs';

const E = 8, N = 6, BATCH = 4, STEPS_PER_TICK = 10;
const libPromise = loadAttention();
let layer = null, running = false, step = 0;
let queries, keys, values, targets;

function initialise(lib) {
  layer?.dispose();
  layer = new lib.MultiHeadAttention({ embedDim: E, numHeads: 1 });
  const w = (seed) => randomArray(E * E, seed).map((x) => x * 0.5);
  layer.setWeights({ wq: w(1), wk: w(2), wv: w(3), wo: w(4), bq: new Float32Array(E), bk: new Float32Array(E),
    bv: new Float32Array(E), bo: new Float32Array(E) });
  queries = randomArray(BATCH * N * E, 5);
  keys = new Float32Array(queries.length);
  values = new Float32Array(queries.length);
  targets = new Float32Array(queries.length);
  for (let b = 0; b < BATCH; b++) {
    for (let j = 0; j < N; j++) {
      const source = (j * 5 + 3) % N;  // key j is query `source`
      keys.set(queries.subarray((b * N + source) * E, (b * N + source + 1) * E), (b * N + j) * E);
      values[(b * N + j) * E + j] = 1;
      targets[(b * N + source) * E + j] = 1;
    }
  }
  step = 0;
}

function tick() {
  if (!running) return;
  let loss = 0;
  const weightsOut = new Float32Array(BATCH * N * N);
  for (let s = 0; s < STEPS_PER_TICK; s++) {
    const y = layer.forward(queries, keys, values, { batch: BATCH, train: true, weightsOut });
    loss = 0;
    const dOut = y.map((v, i) => { const d = v - targets[i]; loss += d * d; return (2 * d) / y.length; });
    loss /= y.length;
    layer.adamStep(layer.backward(dOut).weights, { lr: 0.05 });
    step++;
  }
  self.postMessage({ type: 'progress', step, loss, weights: weightsOut.slice(0, N * N) });
  setTimeout(tick, 0);  // yield so 'stop' can arrive
}

self.addEventListener('message', async ({ data }) => {
  const lib = await libPromise;
  if (data === 'reset' || !layer) initialise(lib);
  if (data === 'start' && !running) {
    running = true;
    tick();
  } else if (data === 'stop') {
    running = false;
  }
  self.postMessage({ type: 'state', running, step });
});
