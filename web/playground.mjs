// The playground: the form's shape runs in a Web Worker (playground-worker.mjs), so long runs never
// block the page. The worker loads the library's default build for this page — threaded where the
// page is cross-origin isolated, unlike the lesson's single-threaded instance — when the
// playground comes near the screen, so that the first Run finds it loaded; Cancel ends it at once
// (a long kernel call cannot be interrupted any other way) and the next Run starts a new one,
// which finds the build in the HTTP cache.
import { whenNear } from './dom.mjs';
import { format } from './i18n.mjs';
import { formatNumber, formatScientific } from './numbers.mjs';

// Returns refresh(), which re-renders the last result in the current language.
export function startPlayground(strings) {
  const form = document.getElementById('playground');
  const status = document.getElementById('play-status');
  const figure = document.getElementById('heatmap-figure');
  const canvas = document.getElementById('heatmap');
  const caption = document.getElementById('heatmap-caption');
  const run = form.querySelector('button[type="submit"]');
  const cancel = document.getElementById('play-cancel');
  let worker = null;
  let shown = null;  // what the status line shows, re-rendered on a language switch: { kind, ... }

  const setRunning = (running) => {
    run.disabled = running;
    cancel.disabled = !running;
    status.dataset.state = running ? 'running' : shown?.kind ?? '';
  };

  function showStatus() {
    const t = strings();
    status.classList.toggle('error', shown?.kind === 'error' || shown?.kind === 'invalid');
    if (!shown) {
      status.textContent = '';
      return;
    }
    if (shown.kind === 'running') status.textContent = format(t.running, { step: shown.step === 'library' ? t.stepLibrary : t.stepPlain });
    if (shown.kind === 'cancelled') status.textContent = t.cancelled;
    if (shown.kind === 'error') status.textContent = format(t.playError, { message: shown.message });
    if (shown.kind === 'invalid') status.textContent = format(t[shown.key], shown.values);
    if (shown.kind === 'result') {
      const d = shown.data;
      const { threads, threadsReason } = d.library;
      const why = WHY[threadsReason];
      const values = {
        threads, s: threads === 1 ? '' : 's', why: threads === 1 && why ? t[why] : '',
        ms: formatNumber(d.ms, 2), runs: d.runs, gflops: formatNumber(d.gflops, 1), pairs: grouped(d.pairs),
        plainMs: d.plainMs == null ? '' : formatNumber(d.plainMs, 1), speedup: d.plainMs && formatNumber(d.plainMs / d.ms, 1),
        diff: d.maxDiff == null ? '' : formatScientific(d.maxDiff, 1),
      };
      status.textContent = format(d.plainMs === null ? t.resultNoPlain : t.result, values);
      caption.textContent = d.weights ? format(t.heatmap, { pattern: d.pattern === 'positions' ? t.heatmapPositions : t.heatmapRandom }) : t.heatmapSkipped;
      canvas.setAttribute('aria-label', caption.textContent);
    }
  }

  function onMessage({ data }) {
    if (data.type === 'progress') {
      shown = { kind: 'running', step: data.step };
      showStatus();
      return;
    }
    if (data.type === 'error') {
      shown = { kind: 'error', message: data.message };
    } else {
      shown = { kind: 'result', data };
      Object.assign(status.dataset, { flops: String(data.flops), pairs: String(data.pairs), gflops: String(data.gflops),
        speedup: data.plainMs === null ? '' : String(data.plainMs / data.ms), maxDiff: data.maxDiff === null ? '' : String(data.maxDiff) });
      if (data.pixels) drawHeatmap(canvas, data.pixels, data.seqQ, data.seqK);
      figure.hidden = !data.weights;
      window.playgroundResult = data;
    }
    setRunning(false);
    showStatus();
  }

  function startWorker() {
    worker = new Worker(new URL('./playground-worker.mjs', import.meta.url), { type: 'module' });
    worker.addEventListener('message', onMessage);
    worker.addEventListener('error', (e) => {
      shown = { kind: 'error', message: e.message };
      setRunning(false);
      showStatus();
    });
  }

  const readShape = () => {
    const f = new FormData(form);
    const shape = Object.fromEntries(['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim'].map((k) => [k, Number(f.get(k))]));
    return { ...shape, causal: f.get('causal') === 'on' };
  };
  // The one rule the form cannot express: query heads share the K/V heads in equal groups.
  const problem = (shape) => (shape.heads % shape.kvHeads !== 0
    ? { kind: 'invalid', key: 'playKvHeads', values: { heads: shape.heads, kvHeads: shape.kvHeads } } : null);

  // An error is about the form as it was: once the form changes, it says what is wrong now, or nothing.
  form.addEventListener('input', () => {
    if (shown?.kind !== 'invalid' && shown?.kind !== 'error') return;
    shown = problem(readShape());
    status.dataset.state = shown?.kind ?? '';
    showStatus();
  });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const shape = readShape();
    const f = new FormData(form);
    shown = problem(shape);
    if (shown) {
      status.dataset.state = 'invalid';
      showStatus();
      return;
    }
    if (!worker) startWorker();
    shown = { kind: 'running', step: 'library' };
    setRunning(true);
    showStatus();
    worker.postMessage({ type: 'run', shape, pattern: f.get('pattern'), plain: f.get('plain') === 'on' });
  });
  cancel.addEventListener('click', () => {
    worker?.terminate();
    worker = null;
    shown = { kind: 'cancelled' };
    setRunning(false);
    showStatus();
  });

  whenNear(form, () => { if (!worker) startWorker(); });

  return showStatus;
}

// 86400 → "86,400". Not toLocaleString: its first call loads the locale data, a 35–180 ms task
// on the page's thread.
const grouped = (n) => String(n).replace(/\B(?=(\d{3})+$)/g, ',');
// The library's reasons for one thread that a reader can act on (src/js/threads.mjs), by the
// key of their words in the page's language.
const WHY = {
  'not cross-origin isolated (no SharedArrayBuffer)': 'whyNotIsolated',
  'cross-origin isolated, but this browser gives pages no SharedArrayBuffer': 'whyNoSharedMemory',
};

// The heatmap's pixels come from the worker (heatmapPixels): here they are only copied in. The
// canvas has a pixel per weight; on the page it is scaled to 512 px along its longer side and
// kept at least THINNEST px along the other, so that 512 × 1 is a column and 1 × 512 a band.
const LONGEST = 512, THINNEST = 48;
function drawHeatmap(canvas, pixels, rows, cols) {
  canvas.width = cols;
  canvas.height = rows;
  canvas.getContext('2d').putImageData(new ImageData(pixels, cols, rows), 0, 0);
  const scale = LONGEST / Math.max(rows, cols);
  const width = Math.max(THINNEST, cols * scale), height = Math.max(THINNEST, rows * scale);
  canvas.style.width = `${width}px`;
  canvas.style.aspectRatio = `${width} / ${height}`;
}
