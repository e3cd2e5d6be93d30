// The page's build of the library (lib.info: its SIMD level, threaded or not) as a compiled
// WebAssembly.Module for the worker of "Watch it learn", compiled from the
// bytes the page's own load left in the HTTP cache (cache: 'force-cache' takes them from there,
// stale or not), so the .wasm is downloaded once. Resolves to null if that fails: a worker then
// loads the library itself. Compiled once, however many workers ask.
export function buildFile({ simd, threads }) {
  return `attn${simd === 'relaxed-simd' ? '-relaxed' : ''}${threads > 1 ? '-mt' : ''}.wasm`;
}

let compiled = null;
export function compilePageBuild(info) {
  compiled ??= WebAssembly.compileStreaming(fetch(new URL(`../dist/${buildFile(info)}`, import.meta.url), { cache: 'force-cache' }))
    .catch(() => null);
  return compiled;
}
