// Deterministic pseudo-random Float32Arrays in [-1, 1) (a linear congruential generator), shared
// by the demo's playground and the benchmark so both feed engines the same kind of data.
export function randomArray(n, seed) {
  const a = new Float32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (x * 1664525 + 1013904223) >>> 0;
    a[i] = x / 2 ** 31 - 1;
  }
  return a;
}
