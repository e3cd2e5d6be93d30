// The "watch it learn" section: start/stop a training run in learn-worker.mjs, draw the loss
// curve and show the attention weights of the first example as they change.
import { format } from './i18n.mjs';
import { renderMatrix, sup } from './matrix-view.mjs';

const N = 6;

export function startLearning(strings) {
  const start = document.getElementById('learn-start');
  const stop = document.getElementById('learn-stop');
  const reset = document.getElementById('learn-reset');
  const status = document.getElementById('learn-status');
  const canvas = document.getElementById('learn-loss');
  const table = document.getElementById('learn-weights');
  const worker = new Worker(new URL('./learn-worker.mjs', import.meta.url), { type: 'module' });
  let losses = [];
  let last = null;

  const show = () => {
    if (!last) return;
    status.textContent = format(strings().learnStatus, { step: last.step, loss: last.loss.toExponential(2) });
    status.dataset.step = String(last.step);
    status.dataset.loss = String(last.loss);
    status.dataset.firstLoss = String(losses[0] ?? last.loss);
    renderMatrix(table, last.weights, N, N, { rowLabel: (i) => `q${sup(i + 1)}`, colLabel: (j) => `k${sup(j + 1)}`, heat: true, digits: 2 });
  };
  worker.addEventListener('message', ({ data }) => {
    if (data.type === 'state') {
      start.disabled = data.running;
      stop.disabled = !data.running;
      if (data.step === 0) { losses = []; last = null; status.textContent = ''; drawLoss(canvas, losses); }
      return;
    }
    losses.push(data.loss);
    last = data;
    show();
    drawLoss(canvas, losses);
  });
  start.addEventListener('click', () => worker.postMessage('start'));
  stop.addEventListener('click', () => worker.postMessage('stop'));
  reset.addEventListener('click', () => worker.postMessage('reset'));
  stop.disabled = true;
  return show;  // re-renders the status in the current language
}

// Loss per tick on a log scale, newest on the right.
function drawLoss(canvas, losses) {
  const ctx = canvas.getContext('2d');
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = '#d5d9e0';
  ctx.strokeRect(0.5, 0.5, width - 1, height - 1);
  if (losses.length < 2) return;
  const logs = losses.map((l) => Math.log10(Math.max(l, 1e-8)));
  const hi = Math.max(...logs), lo = Math.min(...logs, hi - 1);
  ctx.strokeStyle = '#3558c8';
  ctx.lineWidth = 2;
  ctx.beginPath();
  logs.forEach((v, i) => {
    const x = 4 + (i / (logs.length - 1)) * (width - 8);
    const y = 4 + ((hi - v) / (hi - lo)) * (height - 8);
    if (i === 0) ctx.moveTo(x, y);
    else ctx.lineTo(x, y);
  });
  ctx.stroke();
}
