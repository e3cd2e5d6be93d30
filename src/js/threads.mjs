// Which build to load and with how many threads. WebAssembly threads need shared memory, which
// browsers give only to cross-origin-isolated pages; Node always has it. A threaded module
// cannot fall back by itself, so the choice is made here, before loading, and reported.
let warned = false;

// threads: 'auto' | a positive integer; env: { isNode, isolated, cores }.
// Returns { threads, reason }, or throws when `strict` and the request cannot be met.
export function chooseThreads({ threads: requested = 'auto', maxThreads = 8, strict = false, wasmUrl, wasmBinary }, env) {
  const canThread = env.isNode || env.isolated;
  const why = env.isNode ? '' : 'not cross-origin isolated (no SharedArrayBuffer)';
  if (requested === 1) return { threads: 1, reason: 'requested 1 thread' };
  if (requested === 'auto' && (wasmUrl || wasmBinary)) {
    return { threads: 1, reason: 'wasmUrl or wasmBinary given: they name the single-threaded module' };
  }
  if (requested === 'auto') {
    if (!canThread) return { threads: 1, reason: why };
    const threads = Math.max(1, Math.min(env.cores || 1, maxThreads));
    return { threads, reason: threads === 1 ? 'one core' : `auto: ${threads} of ${env.cores} cores` };
  }
  if (canThread) return { threads: requested, reason: `requested ${requested} threads` };
  const message = `attention-wasm: ${requested} threads were requested, but this page is ${why}; using 1 thread. ` +
    'Serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp.';
  if (strict) throw new Error(message);
  if (!warned) {
    warned = true;
    console.warn(message);
  }
  return { threads: 1, reason: why };
}
