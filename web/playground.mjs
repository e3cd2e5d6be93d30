// The playground: the form's shape runs in a Web Worker (playground-worker.mjs), so long runs
// never block the page; results and one head's weights come back to be shown.
import { format } from './i18n.mjs';

// Returns refresh(), which re-renders the last result in the current language.
export function startPlayground(strings) {
  const form = document.getElementById('playground');
  const status = document.getElementById('play-status');
  const figure = document.getElementById('heatmap-figure');
  const canvas = document.getElementById('heatmap');
  const caption = document.getElementById('heatmap-caption');
  const worker = new Worker(new URL('./playground-worker.mjs', import.meta.url), { type: 'module' });
  const button = form.querySelector('button[type="submit"]');
  let last = null;

  function showResult(data) {
    const t = strings();
    status.classList.remove('error');
    status.textContent = format(t.result, {
      ms: data.ms.toFixed(2), gflops: data.gflops.toFixed(1), plainMs: data.plainMs.toFixed(1),
      speedup: (data.plainMs / data.ms).toFixed(1), diff: data.maxDiff.toExponential(1),
    });
    caption.textContent = data.weights ? t.heatmap : t.heatmapSkipped;
    canvas.setAttribute('aria-label', caption.textContent);
  }

  worker.addEventListener('message', ({ data }) => {
    const t = strings();
    if (data.type === 'progress') {
      status.textContent = format(t.running, { step: data.step === 'library' ? t.stepLibrary : t.stepPlain });
      return;
    }
    button.disabled = false;
    if (data.type === 'error') {
      status.textContent = data.message;
      status.classList.add('error');
      return;
    }
    last = data;
    showResult(data);
    status.dataset.speedup = String(data.plainMs / data.ms);
    status.dataset.maxDiff = String(data.maxDiff);
    if (data.weights) drawHeatmap(canvas, data.weights, data.seqQ, data.seqK);
    figure.hidden = false;
  });
  worker.addEventListener('error', (e) => {
    button.disabled = false;
    status.textContent = e.message;
    status.classList.add('error');
  });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const f = new FormData(form);
    const shape = Object.fromEntries(['batch', 'heads', 'kvHeads', 'seqQ', 'seqK', 'headDim'].map((k) => [k, Number(f.get(k))]));
    shape.causal = f.get('causal') === 'on';
    button.disabled = true;
    status.classList.remove('error');
    status.textContent = format(strings().running, { step: strings().stepLibrary });
    worker.postMessage(shape);
  });

  return () => { if (last) showResult(last); };
}

// One pixel per weight, scaled up by CSS; each row is normalised to its own maximum so that
// long rows stay visible.
function drawHeatmap(canvas, weights, rows, cols) {
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(cols, rows);
  for (let i = 0; i < rows; i++) {
    let max = 0;
    for (let j = 0; j < cols; j++) max = Math.max(max, weights[i * cols + j]);
    for (let j = 0; j < cols; j++) {
      const t = max > 0 ? weights[i * cols + j] / max : 0;
      const p = 4 * (i * cols + j);
      image.data[p] = 255 - 202 * t;
      image.data[p + 1] = 255 - 167 * t;
      image.data[p + 2] = 255 - 55 * t;
      image.data[p + 3] = 255;
    }
  }
  ctx.putImageData(image, 0, 0);
}
