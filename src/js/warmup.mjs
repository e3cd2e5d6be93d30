// V8 runs new WebAssembly code in its baseline compiler (Liftoff) and recompiles a function with
// TurboFan, on a background thread, only after it has run for a while; a call keeps the code it
// started with. Without help the first real call (and often the second) runs at a fraction of
// full speed: 20–40 ms instead of ~1 ms for (1, 8, 128, 128, 64). So the loader makes the
// kernel's functions hot with small calls, then probes until a call runs at full speed, sleeping
// between probes so the compiler thread gets the core. Bounded: it never takes longer than
// DEADLINE_MS, and a slow machine just gets a partly warm module.
const DEADLINE_MS = 100;
const SHAPE = { heads: 1, seqQ: 128, headDim: 64 };  // the forward's block loops, packing and softmax

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function warmUp(lib) {
  const x = Float32Array.from({ length: SHAPE.seqQ * SHAPE.headDim }, (_, i) => Math.sin(i));
  const out = new Float32Array(x.length);
  const time = () => {
    const start = performance.now();
    lib.attention(x, x, x, { ...SHAPE, out });
    return performance.now() - start;
  };
  const start = performance.now();
  const cold = Math.max(time(), time(), time());  // these make the functions hot
  let best = Infinity;
  while (performance.now() - start < DEADLINE_MS) {
    await sleep(4);
    const t = time();
    // Full speed: well below the cold calls, and no longer getting faster.
    if (t < cold / 2 && t > 0.8 * best) return;
    best = Math.min(best, t);
  }
}
