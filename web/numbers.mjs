// How the page writes a number: every number it shows goes through here (not the exported JSON or
// code). A typographic minus (−0.30, not -0.30), never −0.00, powers of ten for the very small and
// the very large (4.8 × 10⁻⁷), and the same digits in every engine: rounding is done here, on an
// integer count of units (Math.round of |x|·10^digits, exact IEEE arithmetic, ties away from 0),
// never by toFixed or toExponential, whose last digit engines have been seen to disagree on.
//
// A sum the page writes out adds up as shown: its total is the sum of its rounded parts (sum), or
// its parts are rounded so that they add up to a total shown elsewhere (partsOf); a product of
// typed numbers is written exactly (exact, times, exactSum).
const SUPERSCRIPT = { '-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹' };
const POW10 = Array.from({ length: 23 }, (_, k) => Number(`1e${k}`));  // exact doubles up to 10²²
const minus = (s) => s.replace(/-/g, '−');
const LARGE = 1e6;  // from here on with a power of ten

// x in units of 10^-digits: 2.38499999 → 238 at 2 digits.
export function units(x, digits) {
  const n = Math.round(Math.abs(x) * POW10[digits]);
  return x < 0 && n !== 0 ? -n : n;
}

// An integer count of units (a Number or a BigInt) written with `digits` decimals: 238 → "2.38".
export function formatUnits(n, digits) {
  const negative = n < 0;
  const text = String(negative ? -n : n).padStart(digits + 1, '0');
  const body = digits > 0 ? `${text.slice(0, -digits)}.${text.slice(-digits)}` : text;
  return negative ? `−${body}` : body;
}

// With `digits` decimals; without, as short as JavaScript writes it (a slider's value). Numbers of
// a million and more take a power of ten (1.81 × 10²⁹, not 181000000000000000000000000000.000).
export function formatNumber(x, digits) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'NaN' : x > 0 ? '∞' : '−∞';
  if (digits === undefined) return minus(String(x));
  if (Math.abs(x) >= LARGE) return formatScientific(x, 2);
  return formatUnits(units(x, digits), digits);
}

// 10 to the power e, written 10⁻⁵.
export const power = (e) => `10${[...String(e)].map((c) => SUPERSCRIPT[c]).join('')}`;

// x with `digits` decimals times a power of ten: 9.87 × 10⁻⁵; 1e-4 is just 10⁻⁴, and 0 is 0. The
// spaces around × are no-break spaces, so that a line never ends inside a number.
export function formatScientific(x, digits) {
  if (x === 0) return '0';
  if (!Number.isFinite(x)) return formatNumber(x);
  let e = Math.floor(Math.log10(Math.abs(x)));
  let m;
  for (;;) {  // log10 is approximate: correct e until the mantissa is in [1, 10)
    m = units(shift(x, -e), digits);
    if (Math.abs(m) >= 10 * POW10[digits]) e += 1;
    else if (Math.abs(m) < POW10[digits]) e -= 1;
    else break;
  }
  const mantissa = formatUnits(m, digits);
  return /^1(\.0*)?$/.test(mantissa) ? power(e) : `${mantissa}\u00a0×\u00a0${power(e)}`;
}

// x·10^k, by exact powers of ten.
function shift(x, k) {
  for (; k > 22; k -= 22) x *= POW10[22];
  for (; k < -22; k += 22) x /= POW10[22];
  return k >= 0 ? x * POW10[k] : x / POW10[-k];
}

// The parts rounded to `digits` decimals and their total, the sum of the rounded parts: what a
// pencil gets from the numbers shown. → { parts: [text], total: text }
export function sum(values, digits) {
  const parts = values.map((x) => units(x, digits));
  return { parts: parts.map((n) => formatUnits(n, digits)), total: formatUnits(parts.reduce((a, b) => a + b, 0), digits) };
}

// The parts rounded so that they add up to `total` as formatNumber writes it (largest remainders:
// each part within one unit of the last digit of its value, most of them the nearest): for a
// column of products shown above a total the library computed. → [text]
export function partsOf(values, total, digits) {
  const scaled = values.map((x) => x * POW10[digits]);
  const parts = values.map((x) => units(x, digits));
  let missing = units(total, digits) - parts.reduce((a, b) => a + b, 0);
  while (missing !== 0) {
    const step = Math.sign(missing);
    // The part whose rounding went furthest the other way takes the unit.
    let k = 0;
    for (let j = 1; j < parts.length; j++) if (step * (scaled[j] - parts[j]) > step * (scaled[k] - parts[k])) k = j;
    parts[k] += step;
    missing -= step;
  }
  return parts.map((n) => formatUnits(n, digits));
}

// The decimal a float32 was typed as: the shortest that reads back as the same float32 (0.1 for
// 0.100000001490116…). → { units: BigInt, digits }
export function exact(x) {
  for (let p = 1; p <= 9; p++) {
    const s = x.toPrecision(p);
    if (Math.fround(Number(s)) === Math.fround(x)) return parseDecimal(s);
  }
  return parseDecimal(x.toPrecision(17));
}

function parseDecimal(s) {
  const [mantissa, e = '0'] = s.split('e');
  const [whole, fraction = ''] = mantissa.split('.');
  let digits = fraction.length - Number(e);
  let n = BigInt(whole.replace('-', '') + fraction);
  if (digits < 0) {
    n *= 10n ** BigInt(-digits);
    digits = 0;
  }
  return trim({ units: s.startsWith('-') ? -n : n, digits });
}

// Without trailing zeros after the point: 0.2500 → 0.25.
function trim({ units: n, digits }) {
  while (digits > 0 && n % 10n === 0n) {
    n /= 10n;
    digits -= 1;
  }
  return { units: n, digits };
}

const align = (a, digits) => a.units * 10n ** BigInt(digits - a.digits);

// a·b exactly.
export const times = (a, b) => trim({ units: a.units * b.units, digits: a.digits + b.digits });

// The exact sum of exact decimals.
export function exactSum(terms) {
  const digits = Math.max(0, ...terms.map((t) => t.digits));
  return trim({ units: terms.reduce((s, t) => s + align(t, digits), 0n), digits });
}

// An exact decimal written out in full (with at least `minDigits` decimals): 0.85, −0.3034.
export function formatExact({ units: n, digits }, minDigits = 0) {
  const d = Math.max(digits, minDigits);
  return formatUnits(n * 10n ** BigInt(d - digits), d);
}
