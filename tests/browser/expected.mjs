// What each engine must load, so that a silent change of build fails its suite: Chromium and
// Firefox run relaxed SIMD and, in a cross-origin-isolated page, threads; WebKitGTK runs SIMD128
// (no relaxed SIMD) on one thread (no SharedArrayBuffer, even when isolated).
import assert from 'node:assert/strict';

const RELAXED = 'auto: relaxed SIMD runs here';
const NOT_ISOLATED = 'not cross-origin isolated (no SharedArrayBuffer)';

export const EXPECTED = {
  chromium: { simd: 'relaxed-simd', simdReason: RELAXED, threads: true },
  firefox: { simd: 'relaxed-simd', simdReason: RELAXED, threads: true },
  webkit: {
    simd: 'simd128', simdReason: 'auto: this engine has no relaxed SIMD', threads: false,
    noThreadsReason: 'cross-origin isolated, but this browser gives pages no SharedArrayBuffer',
  },
};

// The SIMD levels whose builds (and Catch2 suites) run in `engine`.
export const levelsIn = (engine) => (EXPECTED[engine].simd === 'relaxed-simd' ? ['simd128', 'relaxed-simd'] : ['simd128']);

// info: a library's info from createAttention() with default options in a page of `engine`;
// isolated: whether that page is cross-origin isolated; cores: its navigator.hardwareConcurrency.
export function checkDefaultBuild(engine, info, { isolated, cores }) {
  const want = EXPECTED[engine];
  assert.deepEqual([info.simd, info.simdReason], [want.simd, want.simdReason], `${engine}: the SIMD level`);
  if (!isolated) {
    assert.deepEqual([info.threads, info.threadsReason], [1, NOT_ISOLATED], `${engine}, not isolated: one thread`);
  } else if (want.threads) {
    const threads = Math.min(cores, 8);
    assert.deepEqual([info.threads, info.threadsReason], [threads, cores === 1 ? 'one core' : `auto: ${threads} of ${cores} cores`],
      `${engine}, isolated: a thread per core`);
  } else {
    assert.deepEqual([info.threads, info.threadsReason], [1, want.noThreadsReason], `${engine}, isolated: still one thread`);
  }
}
