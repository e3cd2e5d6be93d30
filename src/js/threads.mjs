// How many threads. WebAssembly threads need shared memory (SharedArrayBuffer), which browsers
// give only to cross-origin-isolated pages — and some (WebKitGTK) not even to those; Node always
// has it. A threaded module cannot fall back by itself, so the choice is made here, before
// loading, and reported.
const warned = new Set();

export const ISOLATION_HINT = 'Serve it with Cross-Origin-Opener-Policy: same-origin and ' +
  'Cross-Origin-Embedder-Policy: require-corp';

// Why a page gets no threads: the reason info.threadsReason gives, the same as a clause for
// messages, and what would change it.
const NO_THREADS = {
  notIsolated: {
    reason: 'not cross-origin isolated (no SharedArrayBuffer)',
    problem: 'this page is not cross-origin isolated (no SharedArrayBuffer)',
    hint: ISOLATION_HINT,
  },
  noSharedMemory: {
    reason: 'cross-origin isolated, but this browser gives pages no SharedArrayBuffer',
    problem: 'this browser gives pages no SharedArrayBuffer, not even cross-origin-isolated ones (WebKitGTK is one such browser)',
    hint: 'The page already sends the isolation headers; no header changes this',
  },
};

// env: { isNode, crossOriginIsolated, sharedMemory, cores, coresNote? } → a NO_THREADS entry, or
// null where threads can run.
export function noThreads(env) {
  if (env.isNode || (env.crossOriginIsolated && env.sharedMemory)) return null;
  return env.crossOriginIsolated ? NO_THREADS.noSharedMemory : NO_THREADS.notIsolated;
}

// What `threads: 'auto'` may take from navigator.hardwareConcurrency: { cores, coresNote? }.
// Chromium and Firefox report the machine's logical processors. WebKit (Safari, and every browser
// on iOS) reports a bucket instead, against fingerprinting: 4 on any machine with fewer than 8
// cores, 8 on the rest. A 4 from WebKit says only "fewer than 8", so 'auto' takes 2 there (the
// fewest a device that runs Safari has): more threads than cores would make the page's main
// thread, which busy-waits for the others, compete with them. An 8 means at least 8.
export function browserCores(navigator) {
  const reported = Number(navigator?.hardwareConcurrency) || 1;
  if (navigator?.vendor === 'Apple Computer, Inc.' && reported > 2 && reported < 8) {
    return { cores: 2, coresNote: `WebKit reports ${reported} cores for any machine with fewer than 8, so 2 are assumed` };
  }
  return { cores: reported };
}

function warnOnce(kind, message) {
  if (warned.has(kind)) return;
  warned.add(kind);
  console.warn(message);
}

// threads: 'auto' | a positive integer; env as for noThreads().
// Returns { threads, reason }, or throws when `strict` and the request cannot be met.
export function chooseThreads({ threads: requested = 'auto', maxThreads = 8, strict = false }, env) {
  const blocked = noThreads(env);
  if (requested === 1) return { threads: 1, reason: 'requested 1 thread' };
  if (requested === 'auto') {
    if (blocked) return { threads: 1, reason: blocked.reason };
    const threads = Math.max(1, Math.min(env.cores || 1, maxThreads));
    const of = env.coresNote ? ` (${env.coresNote})` : ` of ${env.cores} cores`;
    return { threads, reason: (env.cores || 1) === 1 ? 'one core' : `auto: ${threads}${of}` };
  }
  if (!blocked) return { threads: requested, reason: `requested ${requested} threads` };
  const problem = `attention-wasm: ${requested} threads were requested, but ${blocked.problem}`;
  if (strict) throw new Error(`${problem}. ${blocked.hint}.`);
  warnOnce(blocked, `${problem}; using 1 thread. ${blocked.hint}.`);
  return { threads: 1, reason: blocked.reason };
}
