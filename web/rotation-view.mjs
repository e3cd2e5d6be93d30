// Draws rotary embeddings' pairs as circles in an SVG: for each 2-D pair, the key of every
// position as a thin arrow labelled with its word, and one query as a thick arrow, both at the
// coordinates the library computed (so the drawing shows its numbers, not a second computation).
// Built with DOM calls and presentation attributes only (the page runs under a strict CSP).
const NS = 'http://www.w3.org/2000/svg';
const BOX = 200;       // each pair's square, in viewBox units
const RADIUS = 62;     // the arrows' length for a vector of length `unit`

function node(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// pairs: [{ title, keys: [[x, y] per position], query: [x, y] }]; labels: a word per position;
// chosen: the query's position (its own key is drawn too); unit: the vectors' length.
export function drawRotation(svg, { pairs, labels, chosen, unit, queryLabel }) {
  svg.setAttribute('viewBox', `0 0 ${BOX * pairs.length} ${BOX + 20}`);
  const parts = [];
  pairs.forEach((pair, c) => {
    const cx = BOX * c + BOX / 2, cy = BOX / 2 + 14;
    const at = ([x, y], r = RADIUS) => [cx + (x / unit) * r, cy - (y / unit) * r];  // y up
    const g = node('g', { class: 'pair' });
    g.append(node('text', { x: cx, y: 12, class: 'pair-title', 'text-anchor': 'middle' }, pair.title));
    g.append(node('circle', { cx, cy, r: RADIUS, class: 'orbit' }));
    g.append(node('line', { x1: cx - RADIUS - 8, y1: cy, x2: cx + RADIUS + 8, y2: cy, class: 'axis' }));
    g.append(node('line', { x1: cx, y1: cy - RADIUS - 8, x2: cx, y2: cy + RADIUS + 8, class: 'axis' }));
    pair.keys.forEach((k, p) => {
      const [x, y] = at(k);
      g.append(node('line', { x1: cx, y1: cy, x2: x, y2: y, class: p === chosen ? 'key own' : 'key' }));
      g.append(node('circle', { cx: x, cy: y, r: 2.5, class: 'key-tip' }));
      const [lx, ly] = at(k, RADIUS + 15);
      g.append(node('text', { x: lx, y: ly + 4, class: 'key-label', 'text-anchor': 'middle' }, labels[p]));
    });
    const [qx, qy] = at(pair.query, RADIUS - 10);
    g.append(node('line', { x1: cx, y1: cy, x2: qx, y2: qy, class: 'query' }));
    g.append(node('circle', { cx: qx, cy: qy, r: 4, class: 'query-tip' }));
    parts.push(g);
  });
  parts.push(node('text', { x: BOX * pairs.length / 2, y: BOX + 16, class: 'rotation-legend', 'text-anchor': 'middle' }, queryLabel));
  svg.replaceChildren(...parts);
}
