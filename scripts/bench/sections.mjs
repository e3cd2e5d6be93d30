// The benchmark's sections after the main table, each a list of parts with their own hosts,
// shapes and timing, run by the same scheduler (web/bench/schedule.mjs: interleaved turns,
// medians of round medians):
//   decode: a step of one new position over a standalone KV cache per dtype, 1 and 2 threads,
//     with 32 (MHA), 8 (Llama-3-8B's GQA) and 1 (MQA) kv heads, beside a plain attention() call
//     that copies K and V in, onnxruntime-web fed the same K/V (1 thread), and the wasm
//     read-bandwidth probe over each cache's bytes; then steps of 4 and 8 new positions
//     (a speculative verify, a chunk of prefill) over the same caches, 1 thread, beside the
//     read probes and the multiply-add peak probe;
//   variants: the score variants against plain attention, and a causal sliding
//     window against plain causal attention, single-threaded.
// A host with threads > 1 needs shared memory: in a browser its own cross-origin-isolated page.
import { TIMING, measureShape } from '../../web/bench/schedule.mjs';

export const SECTION_NAMES = ['decode', 'variants'];

const decodeShape = (heads, kvHeads, seqQ, seqK, headDim) => ({ batch: 1, heads, kvHeads, seqQ, seqK, headDim, causal: false });
const square = (batch, heads, s, headDim) => ({ batch, heads, seqQ: s, seqK: s, headDim, causal: false });

// Calls of a second and more: one timed call per engine per round, in the same order each
// round, no untimed calls (the process warmed up on the part before).
const LONG = { warmMs: 0, rounds: 5, turnMs: 0, settleMs: 0, slowMs: 0, slowRounds: 5, skipMs: 60000 };
// --quick: tiny shapes and a few short turns, a smoke run of every engine (npm test runs it),
// not figures: `--section decode` (or variants) measures.
const SMOKE = { warmMs: 50, rounds: 2, turnMs: 30, settleMs: 10, slowMs: 300, slowRounds: 1, skipMs: 20000 };
// The decode section's many short engines (a step takes milliseconds): shorter turns than the
// main table's, as many rounds.
const DECODE = { ...TIMING.full, warmMs: 500, turnMs: 250, settleMs: 50 };

// name → (quick) → [{ label, hosts: [{ label, spec }], shapes, timing }]
const PLANS = {
  decode: (quick) => {
    const [heads, seqK, headDim, kvHeads] = quick ? [4, 256, 64, [4, 2, 1]] : [32, 4096, 128, [32, 8, 1]];
    // (quick: 3 rounds, so that one disturbed round does not decide the ratio of a step to the probe)
    const timing = quick ? { ...SMOKE, rounds: 3 } : DECODE;
    const ours = (threads, parts) => ({ section: 'decode', kind: 'ours', threads, parts });
    return [{
      label: 'decode step, one new position',
      hosts: [
        { label: 'process: ours 1T (KV caches, attention(), read probes)', spec: ours(1, ['caches', 'copy', 'reads']) },
        { label: 'process: ours 2T (KV caches)', spec: ours(2, ['caches']) },
        { label: 'process: ORT 1T (decode graphs)', spec: { section: 'decode', kind: 'ort', threads: 1 } },
      ],
      shapes: kvHeads.map((kv) => decodeShape(heads, kv, 1, seqK, headDim)),
      timing,
    }, {
      label: 'a step of several new positions, 1 thread',
      hosts: [{ label: 'process: ours 1T (KV caches, read and peak probes)', spec: ours(1, ['caches', 'reads', 'peak']) }],
      // (quick: two of the six, grouped and one kv head, to keep the smoke run short)
      shapes: quick ? [decodeShape(heads, 2, 4, seqK, headDim), decodeShape(heads, 1, 8, seqK, headDim)]
        : [4, 8].flatMap((seqQ) => kvHeads.map((kv) => decodeShape(heads, kv, seqQ, seqK, headDim))),
      timing,
    }];
  },
  variants: (quick) => [{
    label: 'score variants, 1 thread',
    hosts: [{ label: 'process: ours 1T (variants)', spec: { section: 'variants', kind: 'ours', threads: 1, variants: ['plain', 'window', 'alibi', 'sinks', 'softcap'] } }],
    shapes: [quick ? square(1, 2, 128, 64) : square(1, 12, 512, 64)],
    timing: quick ? SMOKE : TIMING.full,
  }, {
    label: 'causal sliding window, 1 thread',
    hosts: [{ label: 'process: ours 1T (causal, window)', spec: { section: 'variants', kind: 'ours', threads: 1, variants: ['causal', 'causal-window', 'plain'] } }],
    shapes: [quick ? square(1, 1, 1536, 64) : square(1, 8, 8192, 64)],
    timing: quick ? { ...LONG, rounds: 1, slowRounds: 1 } : LONG,
  }],
};

export const sectionLabel = (s) => `(${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim})${s.kvHeads !== undefined ? ` kvHeads ${s.kvHeads}` : ''}`;

// Runs the sections; `startHosts(list of { label, spec })` → { hosts, failed, close() } starts
// them where the benchmark runs (Node processes or Chromium pages). Returns { name: [part] },
// part: { label, hosts, failed, results: [{ shape, label, loadavg, engines }] }.
export async function runSections(names, { quick, startHosts, log, load }) {
  const out = {};
  for (const name of names) {
    out[name] = [];
    for (const part of PLANS[name](quick)) {
      log(`${name}: starting ${part.hosts.map((h) => h.label).join(', ')}`);
      const { hosts, failed, close } = await startHosts(part.hosts);
      const results = [];
      try {
        for (const shape of part.shapes) {
          const l = sectionLabel(shape);
          log(`${name}: measuring ${l}`);
          const r = await measureShape(hosts, shape, part.timing, { log: (s) => log(`  ${l}: ${s}`), load });
          results.push({ shape, label: l, ...r });
        }
      } finally {
        await close();
      }
      const engines = Object.fromEntries(hosts.flatMap((h) => h.engines.map((e) => [e.name, { host: h.label, config: e.config }])));
      out[name].push({ label: part.label, timing: part.timing, engines, failed, results });
    }
  }
  return out;
}
