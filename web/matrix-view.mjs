// Draws a row-major matrix as a table with row and column headers, built with DOM calls (no
// HTML strings, no inline style attributes: the page runs under a strict CSP).
const SUP = '⁰¹²³⁴⁵⁶⁷⁸⁹';
const SUB = '₀₁₂₃₄₅₆₇₈₉';
export const sup = (n) => String(n).split('').map((c) => SUP[c]).join('');
export const sub = (n) => String(n).split('').map((c) => SUB[c]).join('');

// Labels: a function of the index or an array of strings.
const labelOf = (label, i) => (typeof label === 'function' ? label(i) : label[i]);

// options:
//   rowLabel, colLabel   function (i) → string, or an array of strings
//   corner               text of the top-left cell (what the rows and columns are)
//   digits               decimals shown (default 3)
//   heat                 shade cells by value in [0, 1]
//   editable, onEdit     cells are number inputs; onEdit(index, value) runs on every keystroke
//   name                 the matrix's name, for the inputs' accessible labels
//   special(i, j)        → null, or { text, className, title }: the cell shows `text` instead of
//                        the number (e.g. a greyed −∞ where a mask acts), `title` as its tooltip
//   extraColumn          { title, value(i) → string } (e.g. row sums)
//   rowClass(i), columnClass(j)  → a class name for row i / column j, or ''
export function renderMatrix(table, data, rows, cols, options) {
  const { rowLabel, colLabel, corner = '', digits = 3, heat = false, editable = false, onEdit, special, extraColumn, rowClass, columnClass } = options;
  const head = document.createElement('thead');
  const headRow = head.insertRow();
  const cornerCell = document.createElement('th');
  cornerCell.className = 'corner';
  cornerCell.textContent = corner;
  headRow.append(cornerCell);
  for (let j = 0; j < cols; j++) {
    const th = headerCell('col', labelOf(colLabel, j));
    if (columnClass) th.className = columnClass(j);
    headRow.append(th);
  }
  if (extraColumn) headRow.append(headerCell('col', extraColumn.title));
  const body = document.createElement('tbody');
  for (let i = 0; i < rows; i++) {
    const tr = body.insertRow();
    const cls = rowClass?.(i);
    if (cls) tr.className = cls;
    tr.append(headerCell('row', labelOf(rowLabel, i)));
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
        td.textContent = formatNumber(x, digits);
        if (heat) shade(td, x);
      }
    }
    if (extraColumn) tr.insertCell().textContent = extraColumn.value(i);
  }
  table.replaceChildren(head, body);
}

function headerCell(scope, text) {
  const th = document.createElement('th');
  th.scope = scope;
  th.textContent = text;
  return th;
}

// A number input that reports every valid value as it is typed (not only on Enter or blur).
function numberInput(x, label, onValue) {
  const input = document.createElement('input');
  input.type = 'number';
  input.step = '0.1';
  input.value = String(Math.round(x * 100) / 100);
  input.setAttribute('aria-label', label);
  input.addEventListener('input', () => {
    if (input.value === '') return;  // mid-edit ("", "-"): keep the last value
    const v = Number(input.value);
    if (Number.isFinite(v)) onValue(v);
  });
  return input;
}

// −0.000 reads as a different number from 0.000 to a learner; show it as 0.
export function formatNumber(x, digits) {
  const s = x.toFixed(digits);
  return Number(s) === 0 ? (0).toFixed(digits) : s.replace('-', '−');
}

export function shade(cell, x) {
  const t = Math.max(0, Math.min(1, x));
  cell.style.backgroundColor = `rgba(53, 88, 200, ${(0.06 + 0.85 * t).toFixed(3)})`;
  cell.style.color = t > 0.5 ? 'white' : '';
}
