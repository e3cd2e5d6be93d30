// The first demo page: loads the package, runs attention on small typed arrays and shows them.
import { loadAttention } from '../dist/index.mjs';

const N = 4;  // tokens
const D = 4;  // size of q, k, v
const $ = (id) => document.getElementById(id);

let seed = 7;
function random() {  // small seeded PRNG, so a reload shows the same numbers
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
}
const randomArray = (n) => Float32Array.from({ length: n }, () => Math.round((random() * 2 - 1) * 100) / 100);

function showMatrix(table, data, rows, cols, rowName, colName, heat = false) {
  const head = `<tr><th></th>${Array.from({ length: cols }, (_, j) => `<th scope="col">${colName(j)}</th>`).join('')}</tr>`;
  const body = Array.from({ length: rows }, (_, i) => {
    const cells = Array.from({ length: cols }, (_, j) => {
      const x = data[i * cols + j];
      const style = heat ? ` style="background: rgba(53, 88, 200, ${(0.08 + 0.8 * x).toFixed(3)}); color: ${x > 0.55 ? 'white' : 'inherit'}"` : '';
      return `<td${style}>${x.toFixed(3)}</td>`;
    }).join('');
    return `<tr><th scope="row">${rowName(i)}</th>${cells}</tr>`;
  }).join('');
  table.innerHTML = head + body;
}

const sup = (i) => '¹²³⁴⁵⁶⁷⁸⁹'[i];
const state = { query: randomArray(N * D), key: randomArray(N * D), value: randomArray(N * D) };

function render(lib) {
  const options = { heads: 1, seqQ: N, headDim: D, causal: $('causal').checked };
  const weights = lib.attentionWeights(state.query, state.key, options);
  const output = lib.attention(state.query, state.key, state.value, options);
  const dimName = (j) => `d${j + 1}`;
  showMatrix($('query'), state.query, N, D, (i) => `q${sup(i)}`, dimName);
  showMatrix($('key'), state.key, N, D, (i) => `k${sup(i)}`, dimName);
  showMatrix($('value'), state.value, N, D, (i) => `v${sup(i)}`, dimName);
  showMatrix($('weights'), weights, N, N, (i) => `q${sup(i)}`, (j) => `k${sup(j)}`, true);
  showMatrix($('output'), output, N, D, (i) => `b${sup(i)}`, dimName);
  // Read by the browser test: the arrays behind the tables, at full precision.
  window.attentionDemo = { ...state, options, weights, output };
}

function measure(lib) {
  const shape = { batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64 };
  const n = 12 * 512 * 64;
  const [q, k, v] = [randomArray(n), randomArray(n), randomArray(n)];
  const out = new Float32Array(n);
  lib.attention(q, k, v, { ...shape, out });  // warm-up
  const times = [];
  for (let r = 0; r < 7; r++) {
    const t0 = performance.now();
    lib.attention(q, k, v, { ...shape, out });
    times.push(performance.now() - t0);
  }
  const ms = times.sort((a, b) => a - b)[3];
  const gflops = (4 * 12 * 512 * 512 * 64) / (ms * 1e6);
  $('speed').textContent = `median of 7 runs: ${ms.toFixed(1)} ms, ${gflops.toFixed(1)} GFLOP/s`;
}

try {
  const lib = await loadAttention();
  const { version, simd, threads } = lib.info;
  $('status').textContent = `Computed by attention-wasm ${version} (${simd}, ${threads} thread${threads === 1 ? '' : 's'}).`;
  render(lib);
  $('causal').addEventListener('change', () => render(lib));
  $('randomise').addEventListener('click', () => {
    Object.assign(state, { query: randomArray(N * D), key: randomArray(N * D), value: randomArray(N * D) });
    render(lib);
  });
  $('measure').addEventListener('click', () => {
    $('speed').textContent = 'Measuring…';
    setTimeout(() => measure(lib), 20);  // let the status paint first
  });
  document.body.dataset.ready = 'true';
} catch (error) {
  $('status').textContent = error.message;
  $('status').classList.add('error');
  document.body.dataset.ready = 'error';
}
