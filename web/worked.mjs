// The arithmetic of the followed query, written out so that a learner can redo it with a pencil
// and get what is shown: one component of qⁱ term by term (exact: the typed numbers multiplied out
// in full), its row of the softmax (every exp, the row's sum, each exp divided by it), and the
// products α̂·vʲ that add up to bⁱ. Every sum shown here adds up as shown; the DOM marks them
// (data-sum) so that the tests can add them up too.
import { exact, exactSum, formatExact, formatUnits, partsOf, times, units } from './numbers.mjs';
import { renderMatrix, shade } from './matrix-view.mjs';

// <span data-sum><span class="part">a</span> + … = <span class="total">t</span></span>; negative
// parts in brackets after the first.
function sumMarkup(parts, total) {
  const part = (p, k) => `${k > 0 && p.startsWith('−') ? '(' : ''}<span class="part">${p}</span>${k > 0 && p.startsWith('−') ? ')' : ''}`;
  return `<span class="sum" data-sum="line">${parts.map(part).join(' + ')} = <span class="total">${total}</span></span>`;
}

// Component c of qⁱ = row c of W_q times aⁱ: { terms, products } as markup, both exact.
export function componentSum(w, a) {
  const ws = [...w].map(exact), as = [...a].map(exact);
  const products = ws.map((x, m) => times(x, as[m]));
  const digits = Math.max(2, ...products.map((p) => p.digits));
  const shown = (x) => formatExact(x, 2);
  const terms = ws.map((x, m) => `${shown(x)} × ${as[m].units < 0n ? `(${shown(as[m])})` : shown(as[m])}`).join(' + ');
  return { terms, sum: sumMarkup(products.map((p) => formatExact(p, digits)), formatExact(exactSum(products), digits)) };
}

// How many decimals the scores α need so that a pencil, starting from the scores as shown, gets
// every weight α̂ as shown: α′ = s·α exactly (as shown: 1.727 × 0.5 = 0.8635, so α′ has the
// decimals of α and s together), exp(α′) to as many digits as it takes, their sum Σ (the sum of
// the exps as shown) and exp ÷ Σ, which at 3 decimals must be the library's weight. The fewest
// decimals (from 3) that do it for every row; the exps are taken after subtracting the row's
// largest score where they would be too large or too small to write (the library subtracts it
// too: the division gives the same weights). → { digits, scaled: { text, value }[], rows }, each
// row { d, shift, e, total } (exps and Σ in units of 10^-d) or null for a row with no visible key.
export function planScores(scores, s, weights, hidden, n) {
  const scale = exact(s);
  let plan = null;
  for (let p = 3; p <= 7; p++) {
    const scaled = [...scores].map((x, e) => {
      if (hidden(Math.floor(e / n), e % n)) return { text: '−∞', value: -Infinity };
      const product = times({ units: BigInt(units(x, p)), digits: p }, scale);
      return { text: formatExact(product, p + scale.digits), value: Number(formatExact(product).replace('−', '-')) };
    });
    const rows = Array.from({ length: n }, (_, i) => rowPlan(scaled.slice(i * n, (i + 1) * n).map((x) => x.value), weights.slice(i * n, (i + 1) * n)));
    plan = { digits: p, scaled, rows };
    if (rows.every((r) => !r || r.agrees)) return plan;
  }
  return plan;
}

function rowPlan(scaled, weights) {
  const visible = [...scaled.keys()].filter((j) => scaled[j] !== -Infinity);
  if (visible.length === 0) return null;
  const top = Math.max(...visible.map((j) => scaled[j]));
  const shift = top > 8 || top < -6 ? top : 0;
  const exps = scaled.map((x) => (x === -Infinity ? 0 : Math.exp(x - shift)));
  let e10 = 0;
  for (let big = Math.max(...exps); big >= 10; big /= 10) e10 += 1;
  for (let big = Math.max(...exps); big < 1; big *= 10) e10 -= 1;
  let row = null;
  for (let significant = 4; significant <= 9; significant++) {
    const d = Math.max(0, significant - 1 - e10);
    const e = exps.map((x) => units(x, d));
    const total = e.reduce((a, b) => a + b, 0);
    row = { d, shift, e, total, agrees: visible.every((j) => units(e[j] / total, 3) === units(weights[j], 3)) };
    if (row.agrees) return row;
  }
  return row;
}

// Row i of the softmax as a small table: α′(i, j) as step 3 shows it, exp(α′(i, j)) with their
// sum, and each exp divided by the sum; hidden keys −∞, 0 and 0 (masked(r, j) gives their cells).
// labels(shift) names the rows, shift being the score taken off every score as written, or null;
// returns shift.
export function renderSoftmaxRow(table, { plan, i, n, weights, labels, colLabel, colHeadClass, masked }) {
  const scaled = plan.scaled.slice(i * n, (i + 1) * n);
  const row = plan.rows[i];
  const shift = row?.shift ? scaled.find((x) => x.value === row.shift).text : null;
  const e = row?.e ?? Array(n).fill(0), total = row?.total ?? 0;
  const data = [...scaled.map((x) => x.value), NaN, ...e, total, ...weights, NaN];
  renderMatrix(table, data, 3, n + 1, {
    rowLabel: labels(shift), colLabel: (j) => (j < n ? colLabel(j) : 'Σ'), colHeadClass,
    special: (r, j) => (j === n ? (r === 1 ? null : { text: '', className: 'sum' }) : masked(r, j)),
    text: (r, j) => (r === 0 ? scaled[j].text : r === 1 ? formatUnits(j < n ? e[j] : total, row?.d ?? 0)
      : formatUnits(total ? units(e[j] / total, 3) : 0, 3)),
  });
  const [, expRow, weightRow] = table.tBodies[0].rows;
  if (row) expRow.dataset.sum = 'row';
  [...weightRow.cells].slice(1, n + 1).forEach((cell, j) => { if (!cell.classList.contains('masked')) shade(cell, weights[j]); });
  return shift;
}

// The products α̂(i, j)·vʲ, one row per key j, and their sum bⁱ under them: each row shaded by
// its weight, so the row bⁱ takes most from is the darkest. Each column's products are rounded
// so that they add up to bⁱ as the table of outputs shows it (numbers.mjs: partsOf). Shared with
// the search section.
export function renderProducts(table, { weights, values, n, d, sum, rowLabel, weightTitle, sumLabel, hidden, corner = '', rowHeadClass = '' }) {
  const product = (j, c) => (hidden?.(j) ? 0 : weights[j] * values[j * d + c]);
  const columns = Array.from({ length: d }, (_, c) => partsOf(Array.from({ length: n }, (_, j) => product(j, c)), sum[c], 3));
  const rows = [];
  for (let j = 0; j < n; j++) rows.push(weights[j], ...Array.from({ length: d }, (_, c) => product(j, c)));
  rows.push(NaN, ...sum);
  renderMatrix(table, rows, n + 1, d + 1, {
    rowLabel: (r) => (r < n ? rowLabel(r) : sumLabel), corner, rowHeadClass,
    colLabel: (c) => (c === 0 ? weightTitle : String(c)),
    special: (r, c) => (r === n ? (c === 0 ? { text: 'Σ =', className: 'sum' } : null)
      : hidden?.(r) ? { text: '0', className: 'masked masked-key' } : null),
    text: (r, c) => (r < n && c > 0 ? columns[c - 1][r] : undefined),
    rowClass: (r) => (r === n ? 'total' : ''),
  });
  table.dataset.sum = 'columns';
  [...table.tBodies[0].rows].slice(0, n).forEach((tr, j) => {
    for (const cell of [...tr.cells].slice(1)) if (!cell.classList.contains('masked')) shade(cell, weights[j]);
  });
  [...table.tBodies[0].rows].at(-1).cells[0].className = '';  // bⁱ is no value: not in V's colour
}
