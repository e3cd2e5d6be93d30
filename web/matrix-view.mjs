// Draws a row-major matrix as a table with row and column headers, built with DOM calls (no
// HTML strings, no inline style attributes: the page runs under a strict CSP).
import { exact, formatExact, formatNumber } from './numbers.mjs';

const SUP = '⁰¹²³⁴⁵⁶⁷⁸⁹';
const SUB = '₀₁₂₃₄₅₆₇₈₉';
export const sup = (n) => String(n).split('').map((c) => SUP[c]).join('');
export const sub = (n) => String(n).split('').map((c) => SUB[c]).join('');

// Labels: a function of the index or an array of strings.
const labelOf = (label, i) => (typeof label === 'function' ? label(i) : label[i]);

// options:
//   rowLabel, colLabel   function (i) → string, or an array of strings
//   corner               text of the top-left cell (what the rows and columns are)
//   rowHeadClass, colHeadClass  a class for the row / column headers (the colour of Q, K or V)
//   digits               decimals shown (default 3)
//   text(i, j)           → the cell's text instead of formatNumber's, or undefined (kept shaded)
//   heat                 shade cells by value in [0, 1]
//   signed               { max }: shade cells red (< 0) or blue (> 0) by |value| / max
//   editable, onEdit     cells are inputs of numbers; onEdit(index, value) runs on every keystroke
//   name                 the matrix's name, for the inputs' accessible labels
//   special(i, j)        → null, or { text, className, title }: the cell shows `text` instead of
//                        the number (e.g. a greyed −∞ where a mask acts), `title` as its tooltip
//   extraColumn          { title, value(i) → string } (e.g. row sums)
//   rowClass(i), columnClass(j)  → a class name for row i / column j, or ''
export function renderMatrix(table, data, rows, cols, options) {
  const { rowLabel, colLabel, corner = '', rowHeadClass = '', colHeadClass = '', digits = 3, heat = false, signed = null, editable = false,
    onEdit, special, text, extraColumn, rowClass, columnClass } = options;
  const head = document.createElement('thead');
  const headRow = head.insertRow();
  const cornerCell = document.createElement('th');
  cornerCell.className = 'corner';
  cornerCell.textContent = corner;
  headRow.append(cornerCell);
  for (let j = 0; j < cols; j++) {
    const th = headerCell('col', labelOf(colLabel, j), colHeadClass);
    if (columnClass) th.classList.add(...columnClass(j).split(' ').filter(Boolean));
    headRow.append(th);
  }
  if (extraColumn) headRow.append(headerCell('col', extraColumn.title));
  const body = document.createElement('tbody');
  for (let i = 0; i < rows; i++) {
    const tr = body.insertRow();
    const cls = rowClass?.(i);
    if (cls) tr.className = cls;
    tr.append(headerCell('row', labelOf(rowLabel, i), rowHeadClass));
    for (let j = 0; j < cols; j++) {
      const td = tr.insertCell();
      const x = data[i * cols + j];
      if (columnClass) td.className = columnClass(j);
      const m = special?.(i, j);
      if (m) {
        td.textContent = m.text;
        td.className = m.className;
        if (m.title) td.title = m.title;
      } else if (editable) {
        td.append(numberInput(x, `${options.name ?? ''} ${labelOf(rowLabel, i)} ${labelOf(colLabel, j)}`.trim(),
          (v) => onEdit(i * cols + j, v)));
      } else {
        td.textContent = text?.(i, j) ?? formatNumber(x, digits);
        if (heat) shade(td, x);
        if (signed) shadeSigned(td, x, signed.max);
      }
    }
    if (extraColumn) tr.insertCell().textContent = extraColumn.value(i);
  }
  table.replaceChildren(head, body);
  // Named by its figure's caption (a figcaption names the figure, not the table in it).
  const caption = table.closest('figure')?.querySelector('figcaption');
  if (caption && !table.hasAttribute('aria-labelledby')) {
    caption.id ||= `${table.id}-caption`;
    table.setAttribute('aria-labelledby', caption.id);
  }
}

function headerCell(scope, text, className) {
  const th = document.createElement('th');
  th.scope = scope;
  th.textContent = text;
  if (className) th.className = className;
  return th;
}

// An editable number, written as the page writes numbers (−0.10, not -0.1) and read back as typed
// (a minus sign or a hyphen, a decimal point or comma). Every keystroke that leaves a number
// reports it; an emptied cell is 0 (its placeholder says so); what is not a number yet ("−", or
// beyond ±LIMIT) is marked and changes nothing, and on leaving the cell shows again the number in
// use. Beyond ±LIMIT it is marked and ±LIMIT is used (shown on leaving the cell). ArrowUp and
// ArrowDown step by 0.1. The computation uses what the cell shows.
const LIMIT = 1000;
const STEP = 0.1;
const written = (x) => formatExact(exact(x), 2);
function parse(text) {
  const t = text.trim().replace(/[−–]/g, '-').replace(',', '.');
  if (t === '') return 0;
  return /^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(t) ? Number(t) : null;
}
function numberInput(x, label, onValue) {
  const input = Object.assign(document.createElement('input'), { type: 'text', value: written(x), placeholder: '0',
    autocomplete: 'off', spellcheck: false });
  input.setAttribute('aria-label', label);
  let value = x;
  const use = (v) => {
    value = Math.fround(v);
    onValue(value);
  };
  input.addEventListener('input', () => {
    const v = parse(input.value);
    input.setAttribute('aria-invalid', String(v === null || Math.abs(v) > LIMIT));
    if (v !== null) use(Math.max(-LIMIT, Math.min(LIMIT, v)));
  });
  input.addEventListener('change', () => {
    input.setAttribute('aria-invalid', 'false');
    input.value = input.value.trim() === '' && value === 0 ? '' : written(value);
  });
  input.addEventListener('keydown', (event) => {
    if (event.key !== 'ArrowUp' && event.key !== 'ArrowDown') return;
    event.preventDefault();
    const v = Math.round((value + (event.key === 'ArrowUp' ? STEP : -STEP)) * 1e6) / 1e6;
    if (Math.abs(v) > LIMIT) return;
    input.value = written(Math.fround(v));
    use(v);
  });
  return input;
}

// Heat cells go from white to a dark blue as x goes from 0 to 1; diverging cells from red
// (negative) through white to blue (positive). The text is black or white, whichever gives the
// cell's colour a contrast of at least 4.5:1 (at a relative luminance of 0.179 both do).
const WHITE = [255, 255, 255], BLUE = [33, 64, 170], RED = [178, 34, 52];
const mix = (a, b, t) => a.map((v, k) => Math.round(v + (b[k] - v) * t));
const channel = (v) => { const c = v / 255; return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
export const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
function paint(cell, rgb) {
  cell.style.backgroundColor = `rgb(${rgb.join(', ')})`;
  cell.style.color = luminance(rgb) > 0.179 ? '#000' : '#fff';
}

export function shade(cell, x) {
  paint(cell, mix(WHITE, BLUE, 0.06 + 0.94 * Math.max(0, Math.min(1, x))));
}

// x in [−max, max]: red below 0, blue above.
export function shadeSigned(cell, x, max) {
  const t = max > 0 ? Math.max(-1, Math.min(1, x / max)) : 0;
  paint(cell, mix(WHITE, t < 0 ? RED : BLUE, 0.9 * Math.abs(t)));
}

// Sets class `cls` on the body rows of `table` for which which(i) is true, off on the others
// (the rows stay: a resting mouse or the keyboard focus is not disturbed).
export function markRows(table, cls, which) {
  [...table.tBodies[0].rows].forEach((row, i) => row.classList.toggle(cls, which(i)));
}

// Puts new numbers into a table renderMatrix drew, in place (no new elements: cheaper to lay out
// when a table changes many times a second). Returns false, changing nothing, when the table
// does not have rows × cols number cells.
export function updateCells(table, data, rows, cols, { digits = 3, heat = false, signed = null } = {}) {
  const body = table.tBodies[0];
  if (!body || body.rows.length !== rows || [...body.rows].some((r) => r.cells.length !== cols + 1)) return false;
  [...body.rows].forEach((tr, i) => {
    for (let j = 0; j < cols; j++) {
      const td = tr.cells[j + 1], x = data[i * cols + j];
      td.textContent = formatNumber(x, digits);
      if (heat) shade(td, x);
      if (signed) shadeSigned(td, x, signed.max);
    }
  });
  return true;
}
