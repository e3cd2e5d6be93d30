// "A dot product measures alignment": one query and every key, drawn flat. The vectors have four
// components, so the drawing keeps what the dot product depends on — each key's length and its
// angle to the query — and folds the other directions into one: the query points right, key j
// sits at its true angle θ to it, and qⁱ·kʲ = |qⁱ|·|kʲ|·cos θ = |qⁱ| × (how far kʲ reaches along
// qⁱ), shown by the key's drop line to the query's axis.
import { svg } from './dom.mjs';

const W = 340, H = 190, PAD = 26;

// query: [d]; keys: [[d] per key]; labels: a name per key; queryLabel: the query's name.
export function drawAlignment(figure, { query, keys, labels, queryLabel }) {
  const dot = (a, b) => a.reduce((s, x, c) => s + x * b[c], 0);
  const qLen = Math.hypot(...query);
  const points = keys.map((k) => {
    const along = qLen > 0 ? dot(query, k) / qLen : 0;
    return { along, across: Math.sqrt(Math.max(0, dot(k, k) - along * along)) };
  });
  const reach = Math.max(qLen, ...keys.map((k) => Math.hypot(...k)), 1e-9);
  const unit = Math.min(W / 2 - PAD, H - 2 * PAD) / reach;  // one scale both ways: true angles
  const cx = W / 2, cy = H - PAD;
  const at = (x, y) => [cx + x * unit, cy - y * unit];
  figure.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const parts = [
    svg('line', { x1: PAD / 2, y1: cy, x2: W - PAD / 2, y2: cy, class: 'axis' }),
    svg('line', { x1: cx, y1: cy, x2: cx, y2: PAD / 2, class: 'axis' }),
  ];
  points.forEach(({ along, across }, j) => {
    const [x, y] = at(along, across);
    parts.push(svg('line', { x1: x, y1: y, x2: x, y2: cy, class: 'drop' }));
    parts.push(svg('line', { x1: cx, y1: cy, x2: x, y2: y, class: 'key' }));
    parts.push(svg('circle', { cx: x, cy: y, r: 3, class: 'key-tip' }));
    const len = Math.hypot(along, across) || 1;
    const label = svg('text', { class: 'key-label', 'text-anchor': along / len > 0.3 ? 'start' : along / len < -0.3 ? 'end' : 'middle' }, labels[j]);
    label.dataset.tip = JSON.stringify([x, y, along / len, across / len]);
    parts.push(label);
  });
  const [qx, qy] = at(qLen, 0);
  parts.push(svg('line', { x1: cx, y1: cy, x2: qx, y2: qy, class: 'query' }));
  parts.push(svg('text', { x: qx, y: cy + 18, 'text-anchor': 'middle', class: 'query-label' }, queryLabel));
  figure.replaceChildren(...parts);
  spreadLabels(figure);
  return points;
}

// Each key's label just past its tip, pushed further out along the key while it would cover a
// label placed before it (keys at nearly the same angle would otherwise print on each other).
function spreadLabels(figure) {
  const placed = [];
  const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  for (const label of figure.querySelectorAll('.key-label')) {
    const [x, y, ux, uy] = JSON.parse(label.dataset.tip);
    for (let r = 8; r <= 80; r += 6) {
      label.setAttribute('x', String(x + ux * r));
      label.setAttribute('y', String(y - uy * r + 4));
      if (!placed.some((box) => overlap(box, label.getBBox()))) break;
    }
    placed.push(label.getBBox());
  }
}
