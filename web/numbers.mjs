// How the page writes a number: every number it shows goes through here (not the values of its
// inputs, the exported JSON or code). A typographic minus (−0.30, not -0.30), never −0.00, and
// small numbers as powers of ten (4.8 × 10⁻⁷, 10⁻⁴), as the loss chart's axis writes them.
const SUPERSCRIPT = { '-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹' };
const minus = (s) => s.replace(/-/g, '−');

// With `digits` decimals; without, as short as JavaScript writes it (a slider's value).
export function formatNumber(x, digits) {
  if (digits === undefined) return minus(String(x));
  const s = x.toFixed(digits);
  return Number(s) === 0 ? (0).toFixed(digits) : minus(s);
}

// 10 to the power e, written 10⁻⁵.
export const power = (e) => `10${[...String(e)].map((c) => SUPERSCRIPT[c]).join('')}`;

// x with `digits` decimals times a power of ten: 9.87 × 10⁻⁵; 1e-4 is just 10⁻⁴, and 0 is 0.
export function formatScientific(x, digits) {
  if (x === 0) return '0';
  const [mantissa, e] = x.toExponential(digits).split('e');
  return mantissa === '1' ? power(Number(e)) : `${minus(mantissa)} × ${power(Number(e))}`;
}
