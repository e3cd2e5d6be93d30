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

// Each key's label just past its tip, on the key's line produced; where it would come within
// GAP of another label, a key's tip or line, or the query's, it turns to either side of that
// line and then moves further out, until it is clear (keys at nearly the same angle would
// otherwise print their labels into each other: "k⁴k³"). If nothing is clear, the place with the
// fewest clashes.
const GAP = 3;
function spreadLabels(figure) {
  const grow = (b) => ({ x: b.x - GAP, y: b.y - GAP, width: b.width + 2 * GAP, height: b.height + 2 * GAP });
  const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  const inside = (b, x, y) => x > b.x && x < b.x + b.width && y > b.y && y < b.y + b.height;
  const number = (node, ...names) => names.map((n) => Number(node.getAttribute(n)));
  const tips = [...figure.querySelectorAll('.key-tip')].map((c) => { const [x, y] = number(c, 'cx', 'cy'); return { x: x - 3, y: y - 3, width: 6, height: 6 }; });
  const lines = [...figure.querySelectorAll('line.key, line.query')].map((l) => number(l, 'x1', 'y1', 'x2', 'y2'));
  const crosses = (b, [x1, y1, x2, y2]) => {
    const steps = Math.ceil(Math.hypot(x2 - x1, y2 - y1) / 2);
    for (let k = 0; k <= steps; k++) if (inside(b, x1 + ((x2 - x1) * k) / steps, y1 + ((y2 - y1) * k) / steps)) return true;
    return false;
  };
  const placed = [figure.querySelector('.query-label').getBBox()];
  [...figure.querySelectorAll('.key-label')].forEach((label, j) => {
    const [x, y, ux, uy] = JSON.parse(label.dataset.tip);
    const along = Math.atan2(uy, ux);
    let best = null;
    for (let r = 8; r <= 80 && best?.clashes !== 0; r += 6) {
      for (const turn of [0, 0.6, -0.6, 1.2, -1.2]) {
        const dx = Math.cos(along + turn), dy = Math.sin(along + turn);
        const at = { x: x + dx * r, y: y - dy * r + 4, 'text-anchor': dx > 0.3 ? 'start' : dx < -0.3 ? 'end' : 'middle' };
        for (const [k, v] of Object.entries(at)) label.setAttribute(k, String(v));
        // Its own key's tip and line only must not be covered; everything else must be GAP away.
        const own = label.getBBox(), box = grow(own);
        const near = (b, k) => overlap(k === j ? own : box, b);
        const clashes = placed.filter((b) => overlap(box, b)).length + tips.filter(near).length +
          lines.filter((l, k) => crosses(k === j ? own : box, l)).length +
          (box.x < 0 || box.y < 0 || box.x + box.width > W || box.y + box.height > H ? 1 : 0);
        if (!best || clashes < best.clashes) best = { clashes, at };
        if (clashes === 0) break;
      }
    }
    for (const [k, v] of Object.entries(best.at)) label.setAttribute(k, String(v));
    placed.push(label.getBBox());
  });
}
