// The package's eight builds: SIMD128 or relaxed SIMD, single-threaded or threaded, and either
// what inference needs (attention, caches, linear, rotary: the default) or that and the layer
// and training API (MultiHeadAttention, attentionBackward: loadAttention({ layers: true })).
// Relaxed SIMD (f32x4.relaxed_madd, fused multiply-add on most CPUs) runs without flags in
// Chrome/Edge 114+ and Firefox 146+, not in Safari (WebKit) as of this writing; Node 20 needs
// --experimental-wasm-relaxed-simd, which only the application can set. The two builds of one
// SIMD level and threading share one JS glue (`glue`, its base name): scripts/build.sh checks that
// their glues differ only in the name of the .wasm, which the loader compiles itself.
import BUILT from './fingerprints.mjs';
import { fingerprint } from './fingerprint.mjs';

export const BUILDS = [
  { glue: 'attn', simd: 'simd128', threaded: false },
  { glue: 'attn-mt', simd: 'simd128', threaded: true },
  { glue: 'attn-relaxed', simd: 'relaxed-simd', threaded: false },
  { glue: 'attn-relaxed-mt', simd: 'relaxed-simd', threaded: true },
].flatMap((b) => [false, true].map((layers) => Object.freeze({
  ...b, layers, wasm: `${layers ? b.glue.replace(/^attn/, 'attn-layers') : b.glue}.wasm`,
  what: `${b.threaded ? 'threaded' : 'single-threaded'} ${b.simd} build${layers ? ' with the layer and training API' : ''}`,
})));

export const buildFor = (simd, threaded, layers = false) =>
  BUILDS.find((b) => b.simd === simd && b.threaded === threaded && b.layers === layers);

// The smallest modules that use a SIMD128 instruction (v128.const + i8x16.splat) and the final
// relaxed_madd opcode (fd 85 02); engines without the feature reject them.
const SIMD_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15,
  253, 98, 11];
const RELAXED_PROBE = [0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 19, 1, 17, 0, 65, 0, 253,
  15, 65, 0, 253, 15, 65, 0, 253, 15, 253, 133, 2, 11];

function validates(bytes) {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(new Uint8Array(bytes));
  } catch {
    return false;
  }
}
export const hasWasmSimd = () => validates(SIMD_PROBE);
export const hasRelaxedSimd = () => validates(RELAXED_PROBE);

export const RELAXED_HINT = 'Chrome/Edge 114+ and Firefox 146+ run relaxed SIMD without flags (Safari does not, ' +
  'as of this writing); Node.js 20 needs `node --experimental-wasm-relaxed-simd` (attention-wasm never sets V8 flags itself)';

let warned = false;

// What keeps relaxed SIMD from running here, for lib.info.simdReason: in Node.js (20; later
// releases run it by default) a flag only the application can pass.
const NODE_FLAG = 'Node.js runs relaxed SIMD only under node --experimental-wasm-relaxed-simd';

// simd: 'auto' | 'relaxed' | 'simd128'. Returns { simd: 'relaxed-simd' | 'simd128', reason }, or
// throws when `strict` and relaxed SIMD was asked for but cannot run (`isNode`: says why).
export function chooseSimd({ simd = 'auto', strict = false }, relaxedRuns, isNode = false) {
  if (simd === 'simd128') return { simd: 'simd128', reason: 'requested simd128' };
  if (relaxedRuns) return { simd: 'relaxed-simd', reason: simd === 'auto' ? 'auto: relaxed SIMD runs here' : 'requested relaxed' };
  if (simd === 'auto') return { simd: 'simd128', reason: isNode ? `auto: ${NODE_FLAG}` : 'auto: this engine has no relaxed SIMD' };
  const problem = 'attention-wasm: relaxed SIMD was requested, but this JavaScript engine does not run it';
  if (strict) throw new Error(`${problem}. ${RELAXED_HINT}.`);
  if (!warned) {
    warned = true;
    console.warn(`${problem}; using simd128. ${RELAXED_HINT}.`);
  }
  return { simd: 'simd128', reason: isNode ? `requested relaxed, but ${NODE_FLAG}` : 'requested relaxed, which this engine does not run' };
}

// Which of this version's builds `module` is, or undefined.
export function identify(module) {
  const print = fingerprint(module);
  return BUILDS.find((b) => BUILT.files[b.wasm] === print);
}
