// Loads attention-wasm for one bench host: spec.threads threads (strict), or, with
// spec.threadedBuild, the threaded build on 1 thread (its .wasm named, maxThreads 1; relaxed SIMD
// where the engine runs it, as 'auto' chooses). Beside the single-threaded build on 1 thread and
// the threaded one on 2, that host tells what the pool's choice does from what the threaded build
// costs by itself (the threads section). deps.dist: the URL of the package's dist/ folder.
// Returns { lib, requested, loadMs, tag, suffix } (tag: the engines' thread label, '1T', '2T' or
// '1T-mt'; suffix: ' (instance n)' for spec.instance n, the threads section's several hosts of one
// build, else '': what an engine's name ends with).
export async function loadOurs({ threads = 1, threadedBuild = false, instance = 0 }, { createAttention, dist }) {
  const t0 = performance.now();
  const suffix = instance ? ` (instance ${instance})` : '';
  if (!threadedBuild) {
    const requested = { threads, strict: true };
    const lib = await createAttention(requested);
    return { lib, requested, loadMs: performance.now() - t0, tag: `${lib.info.threads}T`, suffix };
  }
  // The threaded build 'auto' would choose: relaxed SIMD where the engine runs it (the package's
  // own probe), so a failure to load it is reported, never measured as the SIMD128 build instead.
  const { hasRelaxedSimd } = await import(new URL('builds.mjs', dist).href);
  const requested = { wasmUrl: new URL(hasRelaxedSimd() ? 'attn-relaxed-mt.wasm' : 'attn-mt.wasm', dist).href, maxThreads: 1 };
  const lib = await createAttention(requested);
  return { lib, requested, loadMs: performance.now() - t0, tag: `${lib.info.threads}T-mt`, suffix };
}

// Whether a host's spec needs shared memory (in a browser, a cross-origin-isolated page).
export const needsSharedMemory = (spec) => spec.threads > 1 || Boolean(spec.threadedBuild);
