// The benchmark's sections after the main table, each a list of parts with their own hosts,
// shapes and timing, run by the same scheduler (web/bench/schedule.mjs: interleaved turns,
// medians of round medians):
//   prefill: the shapes encoders and prompts run every day (BERT-base, ViT-B/16, a GPT-2 prompt,
//     the Whisper-base encoder, a Llama-style prompt) by our SIMD128 and relaxed-SIMD builds on
//     1 thread beside the multiply-add peak probe of each (timed in the same rounds), by ours on 2
//     threads, and by onnxruntime-web on 1 and 2;
//   decode: a step of one new position over a standalone KV cache per dtype, 1 and 2 threads,
//     with 32 (MHA), 8 (Llama-3-8B's GQA) and 1 (MQA) kv heads, beside a plain attention() call
//     that copies K and V in, onnxruntime-web fed the same K/V (1 thread), and the wasm
//     read-bandwidth probe over each cache's bytes; then steps of 4 and 8 new positions
//     (a speculative verify, a chunk of prefill) over the same caches, 1 thread, beside the
//     read probes and the multiply-add peak probe;
//   variants: the score variants against plain attention, and a causal sliding
//     window against plain causal attention, single-threaded;
//   threads: small calls on 1 and 2 threads, where waking the pool costs as much as the call (the
//     pool is used only where it pays, src/runtime/parallel.h): decode steps over caches of 1 to
//     16384 keys (every dtype) and causal prefills of 1 to 1024 positions, 8 query heads (2 kv
//     heads for decode), 64 dims; 2 threads must never be slower than 1 (the single-threaded
//     build's 1 thread); beside them the threaded build on 1 thread (the pool's choice alone);
//   model: a token step as a model runs it (model-engines.mjs): every layer's cache once per
//     token, from memory (a working set of at least 1 GiB), for three models, seqQ 1 and 4, 1 and
//     2 threads, every cache dtype the library has; beside it, in the same rounds, the streaming
//     read and the multiply-add peak on 1 and 2 threads, the step's limits.
// A host with threads > 1 or the threaded build needs shared memory: in a browser a cross-origin-isolated page.
import { TIMING, measureShape } from '../../web/bench/schedule.mjs';
import { CANDIDATE_DTYPES } from './model-engines.mjs';

export const SECTION_NAMES = ['prefill', 'decode', 'variants', 'threads', 'model'];

const decodeShape = (heads, kvHeads, seqQ, seqK, headDim) => ({ batch: 1, heads, kvHeads, seqQ, seqK, headDim, causal: false });
const square = (batch, heads, s, headDim, causal = false) => ({ batch, heads, seqQ: s, seqK: s, headDim, causal });

// Calls of a second and more: one timed call per engine per round, in the same order each
// round, no untimed calls (the process warmed up on the part before).
const LONG = { warmMs: 0, rounds: 5, turnMs: 0, settleMs: 0, slowMs: 0, slowRounds: 5, skipMs: 60000 };
// --quick: tiny shapes and a few short turns, a smoke run of every engine (npm test runs it),
// not figures: `--section decode` (or variants) measures.
const SMOKE = { warmMs: 50, rounds: 2, turnMs: 30, settleMs: 10, slowMs: 300, slowRounds: 1, skipMs: 20000 };
// The decode section's many short engines (a step takes milliseconds): shorter turns than the
// main table's, as many rounds.
const DECODE = { ...TIMING.full, warmMs: 500, turnMs: 250, settleMs: 50 };

// The threads section: small calls (microseconds) in three instances of each of three builds, so
// shorter turns than the decode section's (a turn still holds thousands of calls).
const THREADS_INSTANCES = 3;
const THREADS = { ...DECODE, turnMs: 100, settleMs: 20 };

// The model section's steps last 50-500 ms and stream from memory (nothing to warm but V8's
// tiers): per round one untimed call (the other core may have idled) and one timed call each.
const MODEL = { warmMs: 300, rounds: 7, turnMs: 0, settleMs: 1, slowMs: 60000, slowRounds: 0, skipMs: 60000 };

// The model section's models (32 query heads, 128 dims): Llama-3-8B's grouped-query layers at a
// 4096-token context (1 GiB of float32 K/V per token), a multi-head model of 8 layers, a
// multi-query model at 32768 tokens; quick: a tiny one.
export const MODELS = [
  { heads: 32, kvHeads: 8, layers: 32, seqK: 4096, headDim: 128 },
  { heads: 32, kvHeads: 32, layers: 8, seqK: 4096, headDim: 128 },
  { heads: 32, kvHeads: 1, layers: 32, seqK: 32768, headDim: 128 },
];
const QUICK_MODEL = { heads: 4, kvHeads: 2, layers: 2, seqK: 256, headDim: 64 };

// The prefill section's shapes, each named by what runs it (a layer's batch, heads, tokens, head dim).
const PREFILL_SHAPES = [
  { name: 'BERT-base, batch 8 × 128 tokens', ...square(8, 12, 128, 64) },
  { name: 'ViT-B/16, batch 4 × 197 tokens', ...square(4, 12, 197, 64) },
  { name: 'GPT-2 prompt, 512 tokens', ...square(1, 12, 512, 64, true) },
  { name: 'Whisper-base encoder, 1500 frames', ...square(1, 8, 1500, 64) },
  { name: 'Llama-style prompt, 2048 tokens, head 128', ...square(1, 32, 2048, 128, true) },
];
const QUICK_PREFILL_SHAPES = [
  { name: 'a tiny encoder', ...square(2, 2, 40, 16) },
  { name: 'a tiny prompt', ...square(1, 2, 70, 16, true) },
];

// name → (quick, { browser }) → [{ label, hosts: [{ label, spec, execArgv? }], shapes, timing,
// applies? }]; applies(shape, engines) leaves out the shapes the started engines cannot run (a
// cache dtype the library lacks).
const PLANS = {
  prefill: (quick, { browser }) => {
    const spec = (kind, threads, more = {}) => ({ section: 'prefill', kind, threads, ...more });
    // Node runs relaxed SIMD only behind a flag, in a process of its own; a browser's default
    // build is the relaxed one where it has relaxed SIMD, with SIMD128 beside it on the same page.
    const ours1 = browser
      ? [{ label: 'page: ours 1T and both peak probes', spec: spec('ours', 1, { peaks: ['simd128', 'relaxed'] }) },
          { label: 'page: ours 1T simd128', spec: spec('ours', 1, { simd: 'simd128' }) }]
      : [{ label: 'process: ours 1T, SIMD128 peak probe', spec: spec('ours', 1, { peaks: ['simd128'] }) },
          { label: 'process: ours 1T relaxed, FMA peak probe (node --experimental-wasm-relaxed-simd)', spec: spec('ours', 1, { simd: 'relaxed', peaks: ['relaxed'] }), execArgv: ['--experimental-wasm-relaxed-simd'] }];
    return [{
      label: 'the shapes encoders and prompts run',
      hosts: [
        ...ours1,
        { label: `${browser ? 'page' : 'process'}: ours 2T`, spec: spec('ours', 2) },
        { label: `${browser ? 'page' : 'process'}: ORT 1T`, spec: spec('ort', 1) },
        { label: `${browser ? 'page' : 'process'}: ORT 2T`, spec: spec('ort', 2) },
      ],
      shapes: quick ? QUICK_PREFILL_SHAPES : PREFILL_SHAPES,
      // (quick: the main table's quick timing, not SMOKE: fresh hosts, whose probes must be tiered
      // up by the warm-up, and three rounds, so that one disturbed turn does not decide a share)
      timing: quick ? TIMING.quick : TIMING.full,
    }];
  },
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
  threads: (quick) => {
    // 1 thread on the single-threaded build, 1 on the threaded build, 2 on the threaded build, each
    // in THREADS_INSTANCES processes (pages): one process's figure for a small call moves by a few
    // per cent with the process (its compiled code, where its memory lies), as much as the builds
    // differ, so a build's time is the mean of its instances' (threads-report.mjs).
    const instances = quick ? 2 : THREADS_INSTANCES;
    const both = (label, spec) => Array.from({ length: instances }, (_, i) => i + 1).flatMap((instance) => [
      ...[1, 2].map((threads) => ({ label: `process: ours ${threads}T (${label}), instance ${instance}`, spec: { ...spec, threads, instance } })),
      { label: `process: ours 1T, threaded build (${label}), instance ${instance}`, spec: { ...spec, threads: 1, threadedBuild: true, instance } },
    ]);
    return [{
      label: 'decode steps over short caches, 1 and 2 threads',
      hosts: both('KV caches', { section: 'decode', kind: 'ours', parts: ['caches'] }),
      shapes: (quick ? [1, 256] : [1, 4, 16, 64, 256, 1024, 4096, 16384]).map((seqK) => decodeShape(8, 2, 1, seqK, 64)),
      timing: quick ? SMOKE : THREADS,
    }, {
      label: 'prefills of a few positions, 1 and 2 threads',
      hosts: both('causal prefill', { section: 'variants', kind: 'ours', variants: ['causal'] }),
      shapes: (quick ? [1, 64] : [1, 4, 16, 64, 256, 1024]).map((s) => square(1, 8, s, 64)),
      timing: quick ? SMOKE : THREADS,
    }];
  },
  model: (quick) => {
    const ours = (threads, probes) => ({ section: 'model', kind: 'ours', threads, probes, quick });
    const workingSet = quick ? 2 ** 22 : 2 ** 30;
    return [{
      label: 'a token step over every layer\'s cache',
      hosts: [
        { label: 'process: ours 1T (token steps; read and peak on 1 and 2 threads)', spec: ours(1, [1, 2]) },
        { label: 'process: ours 2T (token steps)', spec: ours(2, []) },
      ],
      shapes: (quick ? [QUICK_MODEL] : MODELS).flatMap(({ layers, ...m }) => CANDIDATE_DTYPES.flatMap((dtype) => [1, 4].map((seqQ) => ({
        batch: 1, ...m, seqQ, causal: false, model: { layers, dtype, workingSet },
      })))),
      applies: (shape, engines) => engines.some((e) => e.config?.dtypes?.includes(shape.model.dtype)),
      timing: quick ? { ...MODEL, warmMs: 50, rounds: 3 } : MODEL,
    }];
  },
};

export const sectionLabel = (s) => `(${s.batch},${s.heads},${s.seqQ},${s.seqK},${s.headDim})${s.kvHeads !== undefined ? ` kvHeads ${s.kvHeads}` : ''}` +
  `${s.causal ? ' causal' : ''}${s.model ? ` × ${s.model.layers} layers, ${s.model.dtype}` : ''}`;

// Runs the sections; `startHosts(list of { label, spec })` → { hosts, failed, close() } starts
// them where the benchmark runs (Node processes, or pages of a browser when `browser`). Returns
// { name: [part] }, part: { label, hosts, failed, results: [{ shape, label, loadavg, engines }] }.
export async function runSections(names, { quick, browser = false, startHosts, log, load }) {
  const out = {};
  for (const name of names) {
    out[name] = [];
    for (const part of PLANS[name](quick, { browser })) {
      log(`${name}: starting ${part.hosts.map((h) => h.label).join(', ')}`);
      const { hosts, failed, close } = await startHosts(part.hosts);
      const results = [];
      const engines = hosts.flatMap((h) => h.engines);
      try {
        for (const shape of part.shapes.filter((sh) => !part.applies || part.applies(sh, engines))) {
          const l = sectionLabel(shape);
          log(`${name}: measuring ${l}`);
          const r = await measureShape(hosts, shape, part.timing, { log: (s) => log(`  ${l}: ${s}`), load });
          results.push({ shape, label: l, ...r });
        }
      } finally {
        await close();
      }
      const byName = Object.fromEntries(hosts.flatMap((h) => h.engines.map((e) => [e.name, { host: h.label, config: e.config }])));
      out[name].push({ label: part.label, timing: part.timing, engines: byName, failed, results });
    }
  }
  return out;
}
