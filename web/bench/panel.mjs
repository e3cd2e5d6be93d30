// "Benchmark in your browser": a small panel that times attention-wasm against plain JavaScript
// and, where the server provides onnxruntime-web's files, against onnxruntime-web — on the
// visitor's own machine, with the same engines, inputs and turn-taking as `npm run bench`.
//
// Contract, for the page that embeds it:
//   import { mountBenchPanel } from './bench/panel.mjs';
//   const panel = mountBenchPanel(element, options);
// - element: an HTMLElement, normally empty; the panel renders into it (a shape picker, a Run
//   button and a Cancel button, a status line, a results table, a note on how it measured) and
//   sets element.dataset.state to 'idle' | 'running' | 'done' | 'cancelled' | 'error'. It adds
//   no heading: give it one. Its stylesheet panel.css (all rules under .bench-panel) is linked
//   into document.head once, unless options.stylesheet is false (then link it yourself).
// - options (all optional):
//     ortUrl: folder of onnxruntime-web's dist files (default '../../vendor/onnxruntime-web/' relative to
//       this file, which `npm start` serves from node_modules); null: no onnxruntime-web. When the
//       folder does not answer, the panel says so and compares attention-wasm with plain JS only.
//     shapes: [{ label, batch, heads, seqQ, seqK, headDim, causal? }] to choose from (a default list).
//     timing: overrides of the schedule ({ warmMs, rounds, turnMs, settleMs, slowMs, slowRounds },
//       see schedule.mjs); rounds and slowRounds odd (a RangeError otherwise): every figure is
//       the median of the rounds, one of them, as the status line says.
//     text: overrides of the English strings in TEXT (for a translated page).
// - Each engine runs in its own module Web Worker (panel-worker.mjs), one at a time; at
//   1 thread, and also at navigator.hardwareConcurrency threads (≤ 8) when the page is
//   cross-origin isolated. Works under `script-src 'self' 'wasm-unsafe-eval'`.
// - Returns { run(shape?, timing?) → Promise<results> (null when cancelled), results, update({ text?, shapes? }),
//   destroy() }. run() measures the shape picked (or the one given; `timing` overrides the
//   schedule for this run). update() switches the strings (the page's language) and the shape
//   list (same length: the pick stays) and re-renders what is shown, results included. A
//   finished run also fires a 'bench-panel-done' event on element with the results as detail:
//   { shape, threads, ort, rows: [{ name, median, spread, gflops, relative, maxDiff, error, skipped }] }.
// - DEFAULT_SHAPES (exported) is the shape list used when options.shapes is not given.
import { el } from '../dom.mjs';
import { formatNumber } from '../numbers.mjs';
import { measureShape, referenceOf, TIMING } from './schedule.mjs';

export const TEXT = {
  shape: 'Shape (batch, heads, queries, keys, head size)',
  run: 'Run benchmark',
  cancel: 'Cancel',
  cancelled: 'Cancelled.',
  loading: 'Loading the engines…',
  measuring: 'Measuring: round {round} of {rounds}…',
  done: 'Done: {shape}, medians of {rounds} rounds on this device.',
  failed: 'The benchmark failed: {message}',
  engine: 'engine',
  median: 'median time',
  speed: 'GFLOP/s',
  relative: 'time ÷ attention-wasm',
  bar: 'relative speed (fastest = full bar)',
  oneThread: '1 thread',
  threads: '{n} threads',
  noOrt: 'onnxruntime-web is not served here ({url}): comparing with plain JavaScript only. `npm start` serves it.',
  noThreads: 'This page is not cross-origin isolated, so every engine runs on 1 thread.',
  how: 'Each engine runs in its own Web Worker, one at a time, in turns of many calls; the time is the median of the round medians (the range in brackets).',
};

export const DEFAULT_SHAPES = [
  { label: 'BERT-base layer (1, 12, 512, 512, 64)', batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64 },
  { label: 'the same, causal', batch: 1, heads: 12, seqQ: 512, seqK: 512, headDim: 64, causal: true },
  { label: 'short sequence (1, 8, 128, 128, 64)', batch: 1, heads: 8, seqQ: 128, seqK: 128, headDim: 64 },
  { label: 'ViT-B/16 batch (4, 12, 197, 197, 64)', batch: 4, heads: 12, seqQ: 197, seqK: 197, headDim: 64 },
];

const fill = (template, values) => template.replace(/\{(\w+)\}/g, (_, k) => String(values[k]));
const fmt = (ms) => formatNumber(ms, ms >= 100 ? 0 : ms >= 10 ? 1 : 2);

function linkStylesheet() {
  if (document.querySelector('link[data-bench-panel]')) return;
  const link = el('link', { rel: 'stylesheet', href: new URL('./panel.css', import.meta.url).href });
  link.dataset.benchPanel = '';
  document.head.append(link);
}

// A worker holding the engines of one spec, with the interface schedule.mjs drives. `live`
// holds a stop function for every worker not yet closed: Cancel ends them all, and each call
// still waiting then fails with CANCELLED.
const CANCELLED = 'cancelled';
function startWorker(spec, ortUrl, live) {
  const worker = new Worker(new URL('./panel-worker.mjs', import.meta.url), { type: 'module' });
  const pending = new Map();
  let nextId = 0;
  worker.addEventListener('message', ({ data }) => {
    const { ok, fail } = pending.get(data.id);
    pending.delete(data.id);
    if ('error' in data) fail(new Error(data.error));
    else ok(data.result);
  });
  worker.addEventListener('error', (e) => {
    for (const { fail } of pending.values()) fail(new Error(e.message || 'the worker failed to start'));
    pending.clear();
  });
  const call = (method, ...args) => new Promise((ok, fail) => {
    const id = nextId++;
    pending.set(id, { ok, fail });
    worker.postMessage({ id, method, args });
  });
  const close = () => {
    worker.terminate();
    live.delete(close);
    for (const { fail } of pending.values()) fail(new Error(CANCELLED));
    pending.clear();
  };
  live.add(close);
  return call('load', spec, { ortUrl: ortUrl && String(ortUrl) })
    .then((engines) => ({ label: JSON.stringify(spec), engines, call, close }))
    .catch((error) => {
      close();
      if (error.message === CANCELLED) throw error;
      return { label: JSON.stringify(spec), failed: error.message };
    });
}

// Whether onnxruntime-web's loader is there (a GET read to the end: Chromium reports HEAD requests
// as aborted, and the workers load the same file next).
async function served(url) {
  try {
    const response = await fetch(new URL('ort.wasm.min.mjs', url));
    await response.arrayBuffer();
    return response.ok;
  } catch {
    return false;
  }
}

// The panel reports medians of rounds: over an even number of rounds a median is no round's
// figure (of 2, schedule.mjs's median is the larger one), so rounds come in odd numbers.
function checkTiming(timing) {
  for (const key of ['rounds', 'slowRounds']) {
    const v = timing[key];
    if (!Number.isInteger(v) || v < 1 || v % 2 === 0) {
      throw new RangeError(`mountBenchPanel: timing.${key} must be an odd whole number (the figures are medians of the rounds), got ${v}`);
    }
  }
}

export function mountBenchPanel(element, options = {}) {
  if (!(element instanceof HTMLElement)) {
    throw new TypeError(`mountBenchPanel: element must be an HTMLElement, got ${element === null ? 'null' : typeof element}`);
  }
  let text = { ...TEXT, ...options.text };
  let shapes = options.shapes ?? DEFAULT_SHAPES;
  const timing = { ...TIMING.panel, ...options.timing };
  checkTiming(timing);
  const ortUrl = options.ortUrl === null ? null : new URL(options.ortUrl ?? '../../vendor/onnxruntime-web/', import.meta.url);
  if (options.stylesheet !== false) linkStylesheet();

  const select = el('select', { name: 'shape' });
  const button = el('button', { type: 'submit' });
  const cancel = el('button', { type: 'button', disabled: true });
  const shapeLabel = document.createTextNode('');
  const form = el('form', { className: 'bench-panel-form' }, el('label', {}, shapeLabel, select), button, cancel);
  const status = el('p', { className: 'bench-panel-status', role: 'status' });
  const headRow = el('tr');
  const body = el('tbody');
  const table = el('table', { className: 'bench-panel-results', hidden: true }, el('thead', {}, headRow), body);
  const note = el('p', { className: 'bench-panel-note' });
  element.classList.add('bench-panel');
  element.replaceChildren(form, status, table, note);
  element.dataset.state = 'idle';

  let results = null;
  let measuredIndex = -1;  // which of `shapes` the results are for (-1: a shape given to run())
  let running = null;
  let workers = [];
  const live = new Set();  // every worker's stop function (see startWorker)
  // What the status line and the note say, as [key of text, values], so update() can re-say it.
  let said = null;
  let notes = [['how']];
  const say = (key, values = {}) => {
    said = [key, values];
    status.textContent = fill(text[key], values);
  };

  // The strings and shape options (again, after update()).
  function label() {
    const picked = select.value || '0';
    shapeLabel.textContent = `${text.shape} `;
    select.replaceChildren(...shapes.map((s, i) => el('option', { value: String(i), textContent: s.label })));
    select.value = picked;
    button.textContent = text.run;
    cancel.textContent = text.cancel;
    headRow.replaceChildren(...[text.engine, text.median, text.speed, text.relative].map((h) => el('th', { scope: 'col', textContent: h })),
      el('th', { scope: 'col', className: 'bench-panel-bar-cell', textContent: text.bar }));
    note.textContent = notes.map(([key, values]) => fill(text[key], values ?? {})).join(' ');
    if (said?.[0] === 'done' && measuredIndex >= 0) said[1].shape = shapes[measuredIndex].label;  // in the new language
    if (said) status.textContent = fill(text[said[0]], said[1]);
    if (results) render(results.rows);
  }

  function render(rows) {
    const best = Math.min(...rows.filter((r) => r.median).map((r) => r.median));
    body.replaceChildren(...rows.map((r) => {
      const name = r.name.replace(/ (\d+)T\b/, (_, n) => `, ${n === '1' ? text.oneThread : fill(text.threads, { n })}`);
      if (!r.median) return el('tr', {}, el('th', { scope: 'row', textContent: name }), el('td', { colSpan: 4, textContent: r.error ?? r.skipped }));
      // Speed relative to the fastest, as a bar (set through the CSSOM, allowed under a strict CSP).
      const bar = el('td', { className: 'bench-panel-bar-cell' }, el('span', { className: 'bench-panel-bar' }));
      bar.setAttribute('aria-hidden', 'true');
      bar.style.setProperty('--speed', String(best / r.median));
      return el('tr', {},
        el('th', { scope: 'row', textContent: name }),
        el('td', {}, el('span', { textContent: `${fmt(r.median)} ms` }), ' ', el('span', { className: 'bench-panel-spread', textContent: `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` })),
        el('td', { textContent: formatNumber(r.gflops, 1) }),
        el('td', { textContent: `${formatNumber(r.relative, 2)}×` }),
        bar);
    }));
    table.hidden = false;
  }

  async function measure(shape, timing) {
    const isolated = globalThis.crossOriginIsolated === true;
    const threads = isolated ? Math.min(navigator.hardwareConcurrency || 1, 8) : 1;
    const ort = ortUrl !== null && await served(ortUrl);
    const specs = [{ kind: 'ours', threads: 1 }, { kind: 'plain' }];
    if (ort) specs.push({ kind: 'ort', threads: 1, graphs: ['mha', 'ops'] });
    if (threads > 1) {
      specs.push({ kind: 'ours', threads });
      if (ort) specs.push({ kind: 'ort', threads, graphs: ['mha', 'ops'] });
    }
    notes = [['how']];
    if (!ort && ortUrl !== null) notes.unshift(['noOrt', { url: ortUrl.href }]);
    if (!isolated) notes.unshift(['noThreads']);
    label();

    say('loading');
    const hosts = [];
    for (const spec of specs) hosts.push(await startWorker(spec, ortUrl, live));  // one at a time: loads compete
    workers = hosts.filter((h) => !h.failed);
    try {
      let round = 0;
      const { engines } = await measureShape(workers, shape, timing, {
        log: () => say('measuring', { round: ++round, rounds: timing.rounds }),
      });
      const reference = engines[referenceOf(Object.keys(engines))]?.median;
      const flops = 4 * shape.batch * shape.heads * shape.seqQ * shape.seqK * shape.headDim * (shape.causal && shape.seqQ === shape.seqK ? 0.5 : 1);
      const rows = Object.entries(engines).map(([name, r]) => (r.median
        ? { name, median: r.median, spread: r.spread, gflops: flops / (r.median * 1e6), relative: r.median / reference, maxDiff: r.maxDiff }
        : { name, error: r.error, skipped: r.skipped }));
      for (const h of hosts.filter((x) => x.failed)) rows.push({ name: h.label, error: h.failed });
      return { shape, threads, ort, rows };
    } finally {
      for (const w of workers) w.close();
      workers = [];
    }
  }

  async function run(shape = shapes[Number(select.value)], timingOverrides) {
    if (running) return running;
    const runTiming = { ...timing, ...timingOverrides };
    checkTiming(runTiming);
    element.dataset.state = 'running';
    button.disabled = select.disabled = true;
    cancel.disabled = false;
    running = (async () => {
      try {
        results = await measure(shape, runTiming);
        measuredIndex = shapes.indexOf(shape);
        render(results.rows);
        say('done', { rounds: runTiming.rounds, shape: shape.label ?? `(${shape.batch}, ${shape.heads}, ${shape.seqQ}, ${shape.seqK}, ${shape.headDim})` });
        element.dataset.state = 'done';
        element.dispatchEvent(new CustomEvent('bench-panel-done', { detail: results }));
        return results;
      } catch (error) {
        if (error.message === CANCELLED) {
          say('cancelled');
          element.dataset.state = 'cancelled';
          return null;
        }
        say('failed', { message: error.message });
        element.dataset.state = 'error';
        throw error;
      } finally {
        button.disabled = select.disabled = false;
        cancel.disabled = true;
        running = null;
      }
    })();
    return running;
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    run().catch(() => {});  // shown in the status line
  });
  cancel.addEventListener('click', () => { for (const stop of [...live]) stop(); });
  label();

  return {
    run,
    get results() { return results; },
    update(changes = {}) {
      if (changes.text) text = { ...TEXT, ...changes.text };
      if (changes.shapes) {
        if (!Array.isArray(changes.shapes) || changes.shapes.length !== shapes.length) {
          throw new RangeError(`mountBenchPanel: update({ shapes }) needs ${shapes.length} shapes, got ${changes.shapes?.length}`);
        }
        shapes = changes.shapes;
      }
      label();
    },
    destroy() {
      for (const stop of [...live]) stop();
      element.replaceChildren();
      element.classList.remove('bench-panel');
      delete element.dataset.state;
    },
  };
}
