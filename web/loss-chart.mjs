// The loss curve of "Watch it learn" as an SVG line chart with axes: steps across, the loss on a
// log scale (10⁰ … 10⁻⁵) up, and a dashed line at the loss where training stops, labelled where
// the curve never is.
import { svg } from './dom.mjs';
import { power } from './numbers.mjs';

const W = 360, H = 200, LEFT = 52, RIGHT = 10, TOP = 10, BOTTOM = 36;
const LOG_HI = 0, LOG_LO = -5;
const LABEL_ROOM = 60;  // the stopping line's label and a margin ("stop", "停止线" at 12 px)

// losses: one per step; labels: { step, loss, stop }; stopAt: the loss that ends training.
export function drawLossChart(chart, losses, { labels, stopAt }) {
  const steps = Math.max(100, Math.ceil(losses.length / 100) * 100);
  const x = (s) => LEFT + (s / steps) * (W - LEFT - RIGHT);
  const y = (loss) => {
    const v = Math.min(LOG_HI, Math.max(LOG_LO, Math.log10(Math.max(loss, 1e-12))));
    return TOP + ((LOG_HI - v) / (LOG_HI - LOG_LO)) * (H - TOP - BOTTOM);
  };
  const parts = [];
  for (let e = LOG_HI; e >= LOG_LO; e--) {
    parts.push(svg('line', { x1: LEFT, x2: W - RIGHT, y1: y(10 ** e), y2: y(10 ** e), class: 'grid' }));
    parts.push(svg('text', { x: LEFT - 6, y: y(10 ** e) + 4, 'text-anchor': 'end', class: 'tick' }, power(e)));
  }
  const every = steps / 4;
  for (let s = 0; s <= steps; s += every) {
    parts.push(svg('line', { x1: x(s), x2: x(s), y1: H - BOTTOM, y2: H - BOTTOM + 4, class: 'axis' }));
    parts.push(svg('text', { x: x(s), y: H - BOTTOM + 15, 'text-anchor': 'middle', class: 'tick' }, String(s)));
  }
  parts.push(svg('line', { x1: LEFT, x2: LEFT, y1: TOP, y2: H - BOTTOM, class: 'axis' }));
  parts.push(svg('line', { x1: LEFT, x2: W - RIGHT, y1: H - BOTTOM, y2: H - BOTTOM, class: 'axis' }));
  parts.push(svg('text', { x: (LEFT + W - RIGHT) / 2, y: H - 4, 'text-anchor': 'middle', class: 'title' }, labels.step));
  parts.push(svg('text', { x: 12, y: (TOP + H - BOTTOM) / 2, 'text-anchor': 'middle', class: 'title',
    transform: `rotate(-90 12 ${(TOP + H - BOTTOM) / 2})` }, labels.loss));
  parts.push(svg('line', { x1: LEFT, x2: W - RIGHT, y1: y(stopAt), y2: y(stopAt), class: 'stop' }));
  // The line's label goes under it, at the left end: the curve stays above the line until its
  // last point (training stops once the loss is below it), and it is still high at the left.
  // Only a run that stopped within the label's width has it at the right end instead.
  const left = losses.length < 2 || x(losses.length - 1) > LEFT + LABEL_ROOM;
  parts.push(svg('text', { x: left ? LEFT + 4 : W - RIGHT - 2, y: y(stopAt) + 14, 'text-anchor': left ? 'start' : 'end', class: 'stop-label' }, labels.stop));
  if (losses.length > 1) {
    const points = losses.map((l, s) => `${x(s).toFixed(1)},${y(l).toFixed(1)}`).join(' ');
    parts.push(svg('polyline', { points, class: 'curve' }));
  }
  chart.replaceChildren(...parts);
}
