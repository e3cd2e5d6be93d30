// Who runs when. Hosts (Node processes or Chromium pages, each { label, engines, call }) hold the
// engines; for each shape every engine is set up and its first call timed, then warmed up, then
// timed in rounds: in each round every engine gets one turn of many calls while everything else
// is idle, in an order rotated from round to round. A turn starts with untimed calls (the engine
// that ran before, e.g. onnxruntime-web's spinning pool threads, may still be winding down and
// the cores may have idled). An engine's figure is the median of its round medians; the spread of
// those round medians shows the noise. Slow engines (first call over slowMs) get one call per
// round for slowRounds rounds. Shared by the Node and Chromium benchmark (scripts/bench.mjs) and
// the demo's benchmark panel (panel.mjs), so it imports nothing.

export const TIMING = {
  full: { warmMs: 1000, rounds: 7, turnMs: 400, settleMs: 100, slowMs: 1000, slowRounds: 3, skipMs: 20000 },
  quick: { warmMs: 300, rounds: 3, turnMs: 150, settleMs: 30, slowMs: 300, slowRounds: 1, skipMs: 20000 },
  panel: { warmMs: 300, rounds: 3, turnMs: 300, settleMs: 50, slowMs: 300, slowRounds: 3, skipMs: 20000 },
};

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rotate = (xs, by) => xs.map((_, i) => xs[(i + by) % xs.length]);

// The reference every other engine is compared with (results and speed): our first 1-thread engine.
export const referenceOf = (names) => names.find((n) => /^attention-wasm 1T$/.test(n)) ?? names.find((n) => n.startsWith('attention-wasm'));

// Returns { loadavg: { before, after }, engines: { name: figures } }; `load` gives the machine's
// load average where there is one (Node), `log` hears of each round.
export async function measureShape(hosts, shape, timing, { log = () => {}, load = () => null } = {}) {
  const loadBefore = load();
  const entries = [];
  for (const host of hosts) {
    const prepared = await host.call('prepare', shape);
    for (const [name, r] of Object.entries(prepared)) entries.push({ host, name, ...r, rounds: [], samples: 0 });
  }
  const reference = entries.find((e) => e.name === referenceOf(entries.map((x) => x.name)) && e.sample);
  for (const e of entries) {
    if (e.sample && reference) e.maxDiff = Math.max(...e.sample.map((x, i) => Math.abs(x - reference.sample[i])));
  }
  const active = entries.filter((e) => !e.error && e.firstCall <= timing.skipMs);
  const fast = active.filter((e) => e.firstCall <= timing.slowMs);
  const slow = active.filter((e) => e.firstCall > timing.slowMs);
  for (const e of fast) await e.host.call('turn', e.name, { ms: timing.warmMs });
  for (let r = 0; r < timing.rounds; r++) {
    for (const e of rotate(fast, r)) {
      const times = await e.host.call('turn', e.name, { ms: timing.turnMs, settleMs: timing.settleMs });
      e.rounds.push(median(times));
      e.samples += times.length;
    }
    if (r < timing.slowRounds) {
      for (const e of slow) {
        const [ms] = await e.host.call('turn', e.name, { maxCalls: 1 });
        e.rounds.push(ms);
        e.samples += 1;
      }
    }
    log(`round ${r + 1}/${timing.rounds}`);
  }
  for (const host of hosts) await host.call('release');
  const engines = {};
  for (const e of entries) {
    engines[e.name] = e.error ? { error: e.error } : {
      firstCall: e.firstCall, maxDiff: e.maxDiff, samples: e.samples, ...(e.about ? { about: e.about } : {}),
      ...(e.rounds.length ? { median: median(e.rounds), spread: [Math.min(...e.rounds), Math.max(...e.rounds)], rounds: e.rounds }
        : { skipped: `first call ${(e.firstCall / 1000).toFixed(1)} s > ${timing.skipMs / 1000} s` }),
    };
  }
  return { loadavg: { before: loadBefore, after: load() }, engines };
}
