// Draws rotary embeddings' pairs as circles in an SVG: for each 2-D pair, the key of every
// position as a thin arrow labelled with its word, and one query as a thick arrow, both at the
// coordinates the library computed (so the drawing shows its numbers, not a second computation).
// Built with DOM calls and presentation attributes only (the page runs under a strict CSP).
import { svg } from './dom.mjs';

const BOX = 200;       // each pair's square, in viewBox units
const RADIUS = 62;     // the arrows' length for a vector of length `unit`

// A key's word just past its arrow's tip, `r` from the centre: to the right of arrows pointing
// right, to the left of those pointing left, above or below the ones pointing up or down.
function placeLabel(text, cx, cy, [ux, uy], r) {
  const anchor = ux > 0.3 ? 'start' : ux < -0.3 ? 'end' : 'middle';
  for (const [k, v] of Object.entries({ x: cx + ux * r, y: cy - uy * r + 4 - 4 * uy, 'text-anchor': anchor })) text.setAttribute(k, String(v));
}

const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

// Keys a few positions apart point almost the same way; once the labels are laid out (their
// sizes known), each one that would cover an earlier one (or the title) moves outwards.
function spreadLabels(g, cx, cy) {
  const placed = [g.querySelector('.pair-title').getBBox()];
  for (const text of g.querySelectorAll('.key-label')) {
    const dir = [Number(text.dataset.ux), Number(text.dataset.uy)];
    for (let r = RADIUS + 7; r <= RADIUS + 37; r += 5) {
      placeLabel(text, cx, cy, dir, r);
      if (!placed.some((box) => overlap(box, text.getBBox()))) break;
    }
    placed.push(text.getBBox());
  }
}

// pairs: [{ title, keys: [[x, y] per position], query: [x, y] }]; labels: a word per position;
// chosen: the query's position (its own key is drawn too); unit: the vectors' length; columns:
// pairs side by side (one on a phone, so that the text stays legible).
export function drawRotation(figure, { pairs, labels, chosen, unit, columns = pairs.length }) {
  const rows = Math.ceil(pairs.length / columns);
  figure.setAttribute('viewBox', `0 0 ${BOX * columns} ${(BOX + 10) * rows}`);
  const parts = [];
  pairs.forEach((pair, c) => {
    const cx = BOX * (c % columns) + BOX / 2, top = (BOX + 10) * Math.floor(c / columns), cy = top + BOX / 2 + 14;
    const at = ([x, y], r = RADIUS) => [cx + (x / unit) * r, cy - (y / unit) * r];  // y up
    const g = svg('g', { class: 'pair' });
    g.append(svg('text', { x: cx, y: top + 12, class: 'pair-title', 'text-anchor': 'middle' }, pair.title));
    g.append(svg('circle', { cx, cy, r: RADIUS, class: 'orbit' }));
    g.append(svg('line', { x1: cx - RADIUS - 8, y1: cy, x2: cx + RADIUS + 8, y2: cy, class: 'axis' }));
    g.append(svg('line', { x1: cx, y1: cy - RADIUS - 8, x2: cx, y2: cy + RADIUS + 8, class: 'axis' }));
    pair.keys.forEach((k, p) => {
      const [x, y] = at(k);
      g.append(svg('line', { x1: cx, y1: cy, x2: x, y2: y, class: p === chosen ? 'key own' : 'key' }));
      g.append(svg('circle', { cx: x, cy: y, r: 2.5, class: 'key-tip' }));
      const len = Math.hypot(...k) || 1;
      const text = svg('text', { class: 'key-label', 'data-ux': k[0] / len, 'data-uy': k[1] / len }, labels[p]);
      placeLabel(text, cx, cy, [k[0] / len, k[1] / len], RADIUS + 7);
      g.append(text);
    });
    const [qx, qy] = at(pair.query, RADIUS - 10);
    g.append(svg('line', { x1: cx, y1: cy, x2: qx, y2: qy, class: 'query' }));
    g.append(svg('circle', { cx: qx, cy: qy, r: 4, class: 'query-tip' }));
    parts.push({ g, cx, cy });
  });
  figure.replaceChildren(...parts.map((p) => p.g));
  for (const { g, cx, cy } of parts) spreadLabels(g, cx, cy);
}
