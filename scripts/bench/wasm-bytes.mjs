// The few pieces of the WebAssembly binary format that the benchmark's hand-written probes
// (peak.mjs, bandwidth.mjs) are assembled from, so both write bytes the same way.
export const uleb = (n) => {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
export const section = (id, bytes) => [id, ...uleb(bytes.length), ...bytes];
export const SIMD = 0xfd;  // the prefix of every SIMD opcode
export const get = (i) => [0x20, ...uleb(i)];  // local.get
export const set = (i) => [0x21, ...uleb(i)];  // local.set
