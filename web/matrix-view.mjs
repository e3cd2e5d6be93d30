// Draws a row-major matrix as a table with row and column headers, built with DOM calls (no
// HTML strings, no inline style attributes: the page runs under a strict CSP).
const SUP = '⁰¹²³⁴⁵⁶⁷⁸⁹';
export const sup = (n) => String(n).split('').map((c) => SUP[c]).join('');

// options: rowLabel(i), colLabel(j), digits, heat (shade cells by value in [0, 1]),
// editable (cells are number inputs; onEdit(index, value) is called on change),
// extraColumn { title, value(i) } (e.g. row sums).
export function renderMatrix(table, data, rows, cols, options) {
  const { rowLabel, colLabel, digits = 3, heat = false, editable = false, onEdit, extraColumn } = options;
  const head = document.createElement('thead');
  const headRow = head.insertRow();
  headRow.append(document.createElement('th'));
  for (let j = 0; j < cols; j++) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = colLabel(j);
    headRow.append(th);
  }
  if (extraColumn) {
    const th = document.createElement('th');
    th.scope = 'col';
    th.textContent = extraColumn.title;
    headRow.append(th);
  }
  const body = document.createElement('tbody');
  for (let i = 0; i < rows; i++) {
    const tr = body.insertRow();
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = rowLabel(i);
    tr.append(th);
    for (let j = 0; j < cols; j++) {
      const td = tr.insertCell();
      const x = data[i * cols + j];
      if (editable) {
        const input = document.createElement('input');
        input.type = 'number';
        input.step = '0.1';
        input.value = String(Math.round(x * 100) / 100);
        input.setAttribute('aria-label', `${options.name ?? ''} ${rowLabel(i)} ${colLabel(j)}`.trim());
        input.addEventListener('change', () => {
          const v = Number(input.value);
          if (Number.isFinite(v)) onEdit(i * cols + j, v);
        });
        td.append(input);
      } else {
        td.textContent = x.toFixed(digits);
      }
      if (heat) shade(td, x);
    }
    if (extraColumn) tr.insertCell().textContent = extraColumn.value(i);
  }
  table.replaceChildren(head, body);
}

export function shade(cell, x) {
  const t = Math.max(0, Math.min(1, x));
  cell.style.backgroundColor = `rgba(53, 88, 200, ${(0.06 + 0.85 * t).toFixed(3)})`;
  cell.style.color = t > 0.5 ? 'white' : '';
}
