// The model section of a benchmark run (sections.mjs, model-engines.mjs) as console report,
// figures of merit and the table of docs/performance.md. A row is a token step of one model,
// seqQ, cache dtype and thread count: ms per token, the bytes of K/V it streams (its L layers'
// cache.bytes) ÷ time, and the share of its roofline — the least time the step can take on as
// many threads: max(bytes ÷ the streaming read's GB/s, FLOP ÷ the multiply-add peak), both
// probes timed in the same rounds as the step, the share a median of per-round shares.
import { isProbe, peakName, readName, stepName } from './model-engines.mjs';
import { fmt, meritLine, pct, pairedRatio, printHosts, x } from './section-common.mjs';
import { median } from '../../web/bench/schedule.mjs';

const THREADS = [1, 2];
// 4·H·Sq·Sk·D per layer: Q·Kᵀ and P·V, a multiply and an add each
const flopOf = ({ batch, heads, seqQ, seqK, headDim, model }) => 4 * batch * heads * seqQ * seqK * headDim * model.layers;
export const modelLabel = ({ kvHeads, seqK, model }) => `kvHeads ${kvHeads} × ${model.layers} layers × ${seqK.toLocaleString('en-US')} positions`;
const sameModel = (a, b) => a.kvHeads === b.kvHeads && a.seqK === b.seqK && a.headDim === b.headDim && a.heads === b.heads && a.model.layers === b.model.layers;

// a's per-round figure f(i) over the rounds all of `engines` ran (by index), its median; or f of
// the medians when some engine lacks per-round times.
function perRound(engines, f) {
  const n = engines[0].rounds?.length;
  if (n && engines.every((e) => e.rounds?.length === n)) return median(Array.from({ length: n }, (_, i) => f((e) => e.rounds[i])));
  return f((e) => e.median);
}

// One result → its rows, one per thread count whose step ran:
// { threads, r, ms, gbps, readGbps, gflops, rooflineMs, bound, share, maxDiff }.
export function modelRows(result) {
  const flop = flopOf(result.shape);
  return THREADS.map((threads) => {
    const r = result.engines[stepName(threads)];
    if (!r?.median) return { threads, r };
    const read = result.engines[readName(threads)], peak = result.engines[peakName(threads)];
    const bytes = r.about?.tokenBytes;
    const haveProbes = read?.median && peak?.median && bytes;
    // the roofline in ms, from the probes' times t(read), t(peak) of one round
    const roofline = (t) => Math.max((bytes / read.about.bytes) * t(read), (flop / peak.about.flop) * t(peak));
    return {
      threads, r, ms: r.median, maxDiff: r.maxDiff,
      gbps: bytes ? bytes / (r.median * 1e6) : null,
      readGbps: read?.median ? read.about.bytes / (read.median * 1e6) : null,
      peakGflops: peak?.median ? peak.about.flop / (peak.median * 1e6) : null,
      gflops: flop / (r.median * 1e6),
      rooflineMs: haveProbes ? roofline((e) => e.median) : null,
      bound: haveProbes ? ((bytes / read.about.bytes) * read.median >= (flop / peak.about.flop) * peak.median ? 'memory' : 'compute') : null,
      share: haveProbes ? perRound([r, read, peak], (t) => roofline(t) / t(r)) : null,
    };
  });
}

// The float32 cache's row of the same model, seqQ and threads (the unit of the speed-ups).
function float32Row(run, result, threads) {
  const f32 = modelResults(run).find(({ shape }) => shape.model.dtype === 'float32' && shape.seqQ === result.shape.seqQ && sameModel(shape, result.shape));
  return f32 ? modelRows(f32).find((row) => row.threads === threads) : null;
}
const speedUp = (run, result, row) => {
  const f32 = float32Row(run, result, row.threads);
  return f32?.ms && row.ms ? f32.ms / row.ms : null;
};
// 2 threads ÷ 1 thread, paired by round.
const threadSpeedUp = (result) => pairedRatio(result.engines[stepName(1)], result.engines[stepName(2)]);

// one decimal, or two significant digits below 1 (a tiny step on a loaded machine is not 0.0 GB/s)
const figure = (v) => (v >= 1 ? v.toFixed(1) : v.toPrecision(2));
const mib = (bytes) => (bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(0)} MiB` : `${(bytes / 2 ** 10).toFixed(0)} KiB`);
const modelResults = (run) => (run.sections?.model ?? []).flatMap((part) => part.results);

// ---- console ----

export function printModel(run, out = console.log) {
  for (const part of run.sections?.model ?? []) {
    out(`\nmodel: ${part.label}; per token: the L layers' caches (their cache.bytes) ÷ time = GB/s; roofline = ` +
      'max(bytes ÷ the streaming read, FLOP ÷ the multiply-add peak) on as many threads, timed in the same rounds; share = roofline ÷ time');
    printHosts(part, out, (name, c) => c.how ?? '');
    for (const result of part.results) {
      out(`${result.label}: load average ${result.loadavg.before?.join(' ')} → ${result.loadavg.after?.join(' ')}`);
      out(`  ${'engine'.padEnd(34)} ${'ms/token'.padStart(9)} ${'[round spread]'.padStart(17)} ${'GB/s'.padStart(6)} ${'GFLOP/s'.padStart(8)} ` +
        `${'roofline'.padStart(9)} ${'bound'.padStart(8)} ${'share'.padStart(6)} ${'÷ f32'.padStart(6)} ${'÷ 1T'.padStart(6)} ${'max |Δ|'.padStart(8)} working set`);
      const spread = (r) => (r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '');
      for (const row of modelRows(result)) {
        const name = stepName(row.threads);
        if (!row.r) continue;
        if (row.r.error) { out(`  ${name.padEnd(34)} ${row.r.error}`); continue; }
        const n = (v, digits, width) => (v ? (v >= 1 ? v.toFixed(digits) : v.toPrecision(2)) : '').padStart(width);
        const about = row.r.about ?? {};
        out(`  ${name.padEnd(34)} ${fmt(row.ms).padStart(9)} ${spread(row.r).padStart(17)} ${n(row.gbps, 1, 6)} ${n(row.gflops, 1, 8)} ` +
          `${(row.rooflineMs ? fmt(row.rooflineMs) : '').padStart(9)} ${(row.bound ?? '').padStart(8)} ${pct(row.share).padStart(6)} ` +
          `${n(speedUp(run, result, row), 2, 6)} ${n(row.threads > 1 ? threadSpeedUp(result) : null, 2, 6)} ` +
          `${row.maxDiff !== undefined ? row.maxDiff.toExponential(0).padStart(8) : ''.padStart(8)} ` +
          `${about.copies ?? '?'} × ${mib(about.tokenBytes)}`);
      }
      for (const [name, r] of Object.entries(result.engines).filter(([nm]) => isProbe(nm))) {
        if (r.error) { out(`  ${name.padEnd(34)} ${r.error}`); continue; }
        const what = name.startsWith('wasm read') ? `${(r.about.bytes / (r.median * 1e6)).toFixed(1)} GB/s over ${mib(r.about.bytes)}`
          : `${(r.about.flop / (r.median * 1e6)).toFixed(1)} GFLOP/s`;
        out(`  ${name.padEnd(34)} ${fmt(r.median).padStart(9)} ${spread(r).padStart(17)} ${what}`);
      }
    }
  }
}

// ---- figures of merit ----

const GOALS = { float16: 1.7, bfloat16: 1.7, int8: 3, int4: 4.5 };

export function modelFigures(run) {
  const results = modelResults(run);
  if (!results.length) return [];
  const f = [];
  const rows = results.flatMap((result) => modelRows(result).filter((row) => row.share).map((row) => ({ result, row })));
  const name = ({ result, row }) => `${modelLabel(result.shape)}, seqQ ${result.shape.seqQ}, ${result.shape.model.dtype}, ${row.threads}T`;
  const below = rows.filter(({ row }) => row.share < 0.7);
  const shares = rows.map(({ row }) => row.share);
  f.push({ what: 'a token step over every layer\'s cache: time at the roofline ÷ time, every row', goal: '≥ 70 %',
    figure: shares.length ? `${pct(Math.min(...shares))}–${pct(Math.max(...shares))}${below.length ? `; below 70 %: ${below.map((w) => `${name(w)} ${pct(w.row.share)}`).join(', ')}` : ''}` : '—' });
  for (const [dtype, goal] of Object.entries(GOALS)) {
    const cells = results.filter((r) => r.shape.model.dtype === dtype && r.shape.kvHeads > 1).flatMap((result) => modelRows(result)
      .filter((row) => row.threads === 1 && row.ms).map((row) => `${modelLabel(result.shape)} seqQ ${result.shape.seqQ} ${x(speedUp(run, result, row))}`));
    if (cells.length) f.push({ what: `a token step: float32 cache ÷ ${dtype} cache per token (speed-up), 1 thread`, goal: `≥ ${goal}× (kvHeads 8 and 32)`, figure: cells.join(', ') });
  }
  f.push({ what: 'a token step on 2 threads ÷ 1 thread (speed-up)', goal: '≥ 1.8×',
    figure: results.map((result) => `${modelLabel(result.shape)} seqQ ${result.shape.seqQ} ${result.shape.model.dtype} ${x(threadSpeedUp(result))}`).join(', ') });
  return f;
}

// ---- docs/performance.md ----

export function modelBlock(run) {
  const parts = run.sections?.model ?? [];
  const results = parts.flatMap((p) => p.results);
  if (!results.length) return '';
  const loads = results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]]).filter((l) => l !== undefined && l !== null);
  const ours = Object.values(parts[0].engines).find((e) => e.config?.simd)?.config;
  const all = results.flatMap((result) => modelRows(result).filter((row) => row.ms).map((row) => ({ result, row })));
  const range = (values, digits) => (values.length ? `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}` : '—');
  const limit = (threads, key) => range(all.filter(({ row }) => row.threads === threads).map(({ row }) => row[key]).filter(Boolean), 1);
  const lines = [
    '| model (32 query heads, 128 dims) | new positions | cache | threads | ms per token | GB/s | roofline ms (bound) | share of it | float32 ÷ this | 2 threads ÷ 1 |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const { result, row } of all) {
    const s = result.shape;
    lines.push(`| ${modelLabel(s)} | ${s.seqQ} | ${s.model.dtype} | ${row.threads} | ${fmt(row.ms)} | ${row.gbps ? figure(row.gbps) : '—'} | ` +
      `${row.rooflineMs ? `${fmt(row.rooflineMs)} (${row.bound})` : '—'} | ${pct(row.share)} | ${x(speedUp(run, result, row))} | ${row.threads > 1 ? x(threadSpeedUp(result)) : ''} |`);
  }
  const peakKind = ours?.simd === 'relaxed-simd' ? 'relaxed-SIMD FMA' : 'SIMD128 mul + add';
  const copies = [...new Set(all.map(({ row }) => row.r.about?.copies).filter(Boolean))].sort((a, b) => a - b);
  return `Measured ${run.date.slice(0, 10)} by \`${run.command}\` in ${run.where} on ${run.machine.cpu} (${run.machine.cores} cores, shared), ` +
    `load average ${range(loads, 2)} during the section; each engine takes one untimed and one timed call per round, ${parts[0].timing.rounds} rounds ` +
    `in rotated order; medians of the rounds, shares and 2-thread speed-ups medians of per-round ratios (float32 ÷ this: a ratio of medians). ` +
    `attention-wasm's ${ours?.simd ?? '?'} build. A token step visits every layer's cache once (working set: ${copies.join(', ')} ${copies.length === 1 && copies[0] === 1 ? 'copy' : 'copies'} ` +
    `of the model's caches, at least 1 GiB, taken in turn). Limits, timed in the same rounds: the wasm streaming read of 1 GiB ` +
    `(\`scripts/bench/bandwidth.mjs\` in workers, \`probes.mjs\`) ${limit(1, 'readGbps')} GB/s on 1 thread, ${limit(2, 'readGbps')} GB/s on 2; ` +
    `the ${peakKind} peak (\`scripts/bench/peak.mjs\`) ${limit(1, 'peakGflops')} GFLOP/s on 1 thread, ${limit(2, 'peakGflops')} on 2. ` +
    'GB/s: the L layers\' `cache.bytes` ÷ time; roofline: max(bytes ÷ read, 4·H·Sq·Sk·D·L ÷ peak) on as many threads.\n\n' +
    `${lines.join('\n')}\n\n${modelFigures({ ...run, sections: { model: parts } }).map(meritLine).join('\n')}\n`;
}
