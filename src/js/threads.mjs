// How many threads. WebAssembly threads need shared memory, which browsers give only to
// cross-origin-isolated pages; Node always has it. A threaded module cannot fall back by
// itself, so the choice is made here, before loading, and reported.
let warned = false;

export const ISOLATION_HINT = 'Serve it with Cross-Origin-Opener-Policy: same-origin and ' +
  'Cross-Origin-Embedder-Policy: require-corp';

// threads: 'auto' | a positive integer; env: { isNode, isolated, cores }.
// Returns { threads, reason }, or throws when `strict` and the request cannot be met.
export function chooseThreads({ threads: requested = 'auto', maxThreads = 8, strict = false }, env) {
  const canThread = env.isNode || env.isolated;
  const why = env.isNode ? '' : 'not cross-origin isolated (no SharedArrayBuffer)';
  if (requested === 1) return { threads: 1, reason: 'requested 1 thread' };
  if (requested === 'auto') {
    if (!canThread) return { threads: 1, reason: why };
    const threads = Math.max(1, Math.min(env.cores || 1, maxThreads));
    return { threads, reason: threads === 1 ? 'one core' : `auto: ${threads} of ${env.cores} cores` };
  }
  if (canThread) return { threads: requested, reason: `requested ${requested} threads` };
  const problem = `attention-wasm: ${requested} threads were requested, but this page is ${why}`;
  if (strict) throw new Error(`${problem}. ${ISOLATION_HINT}.`);
  if (!warned) {
    warned = true;
    console.warn(`${problem}; using 1 thread. ${ISOLATION_HINT}.`);
  }
  return { threads: 1, reason: why };
}
