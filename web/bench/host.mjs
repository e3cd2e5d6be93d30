// Runs engines (from engines.mjs) in turns, inside one process, page or worker. The
// benchmark's coordinator drives several hosts and decides who runs when; a host only times
// calls of one engine at a time, so nothing else runs in it meanwhile. Every method takes and
// returns plain data (it is called over IPC and through page.evaluate).
import { makeInputs } from './engines.mjs';

const SAMPLE = 256;  // output elements compared across engines
// The clock's step: browsers round performance.now() — Chromium to 0.1 ms and Firefox to 1 ms in
// pages that are not cross-origin isolated — so a timed group of calls lasts at least 20 steps.
function clockStep() {
  let step = Infinity;
  for (let i = 0; i < 5; i++) {
    const a = performance.now();
    let b = a;
    while (b === a) b = performance.now();
    step = Math.min(step, b - a);
  }
  return step;
}
const GROUP_MS = Math.max(2, 20 * clockStep());  // shortest timed group of calls

export function createBenchHost(engines) {
  let prepared = new Map();  // engine name → { run, read, release? }
  const releaseAll = async () => {
    for (const p of prepared.values()) await p.release?.();
    prepared = new Map();
  };
  return {
    engines: () => engines.map(({ name, config }) => ({ name, config })),

    // Sets every engine up for `shape` and times its first call; returns, per engine name,
    // { firstCall, sample, about } (sample: SAMPLE evenly spaced output elements; none for an
    // engine without read(); about: what the engine says it prepared, if it does) or { error }.
    async prepare({ batch, heads, kvHeads, seqQ, seqK, headDim, causal = false, model }) {
      // only what the engines take (kvHeads: the decode section's shapes; model: the model section's)
      const shape = { batch, heads, ...(kvHeads ? { kvHeads } : {}), seqQ, seqK, headDim, causal, ...(model ? { model } : {}) };
      await releaseAll();
      const inputs = makeInputs(shape);
      const size = inputs.q.length;
      const result = {};
      for (const engine of engines) {
        try {
          const p = await engine.prepare(shape, inputs);
          const t0 = performance.now();
          await p.run();
          const firstCall = performance.now() - t0;
          prepared.set(engine.name, p);
          // An engine without outputs (a probe; read absent) has nothing to cross-check.
          const sample = p.read && Array.from({ length: Math.min(SAMPLE, size) }, (_, j) => p.read(Math.floor((j * size) / Math.min(SAMPLE, size))));
          result[engine.name] = { firstCall, ...(sample ? { sample } : {}), ...(p.about ? { about: p.about } : {}) };
        } catch (error) {
          result[engine.name] = { error: String(error?.message ?? error) };
        }
      }
      return result;
    },

    // One turn of `name`: untimed calls for settleMs (at least one if settleMs > 0: what ran
    // before may still be winding down), then timed calls for ms (at least one, at most
    // maxCalls). Returns the time per call in ms, one entry per group: calls shorter than
    // GROUP_MS are timed in groups that last about that long, because browsers round
    // performance.now() (see clockStep).
    async turn(name, { ms = 0, settleMs = 0, maxCalls = 10000 } = {}) {
      const p = prepared.get(name);
      if (!p) throw new Error(`bench host: ${name} is not prepared`);
      let group = 1;
      if (settleMs > 0) {
        const t0 = performance.now();
        let calls = 0;
        do await p.run(), calls++; while (performance.now() < t0 + settleMs);
        group = Math.max(1, Math.min(maxCalls, Math.floor(GROUP_MS / ((performance.now() - t0) / calls))));
      }
      const times = [];
      const end = performance.now() + ms;
      let calls = 0;
      do {
        const t0 = performance.now();
        for (let i = 0; i < group; i++) await p.run();
        const elapsed = performance.now() - t0;
        calls += group;
        // A group that lasted under half of GROUP_MS (the engine got faster after the settle
        // calls, e.g. V8 tiered it up) is not timed to the clock's precision: it is doubled and
        // timed again, unless the turn is over.
        if (settleMs > 0 && elapsed < GROUP_MS / 2 && performance.now() < end && calls < maxCalls) {
          group = Math.min(maxCalls, 2 * group);
          continue;
        }
        times.push(elapsed / group);
      } while (performance.now() < end && calls < maxCalls);
      return times;
    },

    release: releaseAll,
  };
}
