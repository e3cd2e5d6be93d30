// The sections of a benchmark run (sections.mjs) as console report, figures of merit and the
// tables of docs/performance.md: the prefill section's in prefill-report.mjs, the decode section's
// in decode-report.mjs, the threads section's in threads-report.mjs, the model section's in
// model-report.mjs, the variants' here.
// Ratios pair the engines round by round (each round's turns ran back to back) and take the
// median of those ratios.
import { decodeBlock, decodeFigures, printDecode } from './decode-report.mjs';
import { modelBlock, modelFigures, printModel } from './model-report.mjs';
import { prefillBlock, prefillFigures, printPrefill } from './prefill-report.mjs';
import { printThreads, threadsBlock, threadsFigures } from './threads-report.mjs';
import { visibleScores, VARIANTS } from './variant-engines.mjs';
import { findResult, fmt, meritLine, pairedRatio, printHosts, sectionHeader, x } from './section-common.mjs';

export { decodeBlock, modelBlock, pairedRatio, prefillBlock, threadsBlock };

// ---- variants ----

function variantRows(result, engines) {
  const names = Object.keys(result.engines);
  const ref = result.engines[names[0]];
  return names.map((name) => {
    const r = result.engines[name];
    const options = VARIANTS[engines[name]?.config?.variant]?.options(result.shape) ?? {};
    const flop = 4 * result.shape.batch * result.shape.heads * result.shape.headDim * visibleScores(result.shape, options);
    return { name, r, gflops: r.median ? flop / (r.median * 1e6) : null, vsRef: pairedRatio(r, ref), variant: engines[name]?.config?.variant };
  });
}

// ---- console ----

export function printSections(run, out = console.log) {
  printPrefill(run, out);
  printDecode(run, out);
  printThreads(run, out);
  printModel(run, out);
  for (const part of run.sections?.variants ?? []) {
    out(`\nvariants: ${part.label}; GFLOP/s over the scores each variant computes (4·B·H·D per visible score)`);
    printHosts(part, out, (name, c) => VARIANTS[c.variant]?.label ?? '');
    for (const result of part.results) {
      const rows = variantRows(result, part.engines);
      out(`${result.label}: load average ${result.loadavg.before?.join(' ')} → ${result.loadavg.after?.join(' ')}`);
      out(`  ${'engine'.padEnd(46)} ${'median ms'.padStart(10)} ${'[round spread]'.padStart(19)} ${'GFLOP/s'.padStart(8)} ${`÷ ${rows[0]?.variant ?? ''}`.padStart(10)}`);
      for (const { name, r, gflops, vsRef } of rows) {
        if (r.error) { out(`  ${name.padEnd(46)} ${r.error}`); continue; }
        const spread = r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '';
        out(`  ${name.padEnd(46)} ${fmt(r.median).padStart(10)} ${spread.padStart(19)} ${(gflops?.toFixed(1) ?? '').padStart(8)} ${(vsRef?.toFixed(3) ?? '').padStart(10)}`);
      }
    }
  }
  const merits = sectionFigures(run);
  if (merits.length) {
    out('\nfigures of merit of the sections (the benchmark\'s goal in brackets; ratios of interleaved rounds, which load moves):');
    for (const f of merits) out(`  ${f.what}: ${f.figure} (goal ${f.goal})`);
  }
}

// ---- figures of merit ----

const VARIANTS_512 = '(1,12,512,512,64)', WINDOW_8192 = '(1,8,8192,8192,64)';

// The figures each section is judged by: what is measured, the benchmark's goal, this run's value.
export function sectionFigures(run) {
  const f = [...prefillFigures(run), ...decodeFigures(run), ...threadsFigures(run), ...modelFigures(run)];
  if (run.sections?.variants) {
    const a = findResult(run, 'variants', VARIANTS_512);
    const rows = a ? variantRows(a.result, a.part.engines) : [];
    const cost = (v) => rows.find((r) => r.variant === v)?.vsRef;
    const limits = { window: 1.1, alibi: 1.1, sinks: 1.1, softcap: 1.2 };
    for (const [v, limit] of Object.entries(limits)) {
      f.push({ what: `${VARIANTS[v].label} ÷ plain on ${VARIANTS_512}, 1 thread`, goal: `≤ ${limit.toFixed(2)}×`, figure: x(cost(v)) });
    }
    const b = findResult(run, 'variants', WINDOW_8192);
    const wrows = b ? variantRows(b.result, b.part.engines) : [];
    const w = wrows.find((r) => r.variant === 'causal-window')?.vsRef;
    const plain = wrows.find((r) => r.variant === 'plain')?.vsRef;
    f.push({ what: `plain causal ÷ causal + window [1023, 0] (speed-up) on ${WINDOW_8192}, 1 thread`, goal: '≥ 6×',
      figure: w ? `${x(1 / w)} (and ${plain ? x(plain / w) : '—'} over plain non-causal; scores computed: ${x(scoreRatio('causal'))} and ${x(scoreRatio('plain'))} fewer)` : '—' });
  }
  return f;
}

// How many times fewer scores causal + window [1023, 0] computes than `variant` on (1,8,8192,8192,64).
function scoreRatio(variant) {
  const shape = { seqQ: 8192, seqK: 8192 };
  return visibleScores(shape, VARIANTS[variant].options(shape)) / visibleScores(shape, VARIANTS['causal-window'].options(shape));
}

// ---- docs/performance.md ----

export function variantsBlock(run) {
  const parts = run.sections?.variants ?? [];
  const results = parts.flatMap((p) => p.results.map((r) => ({ r, part: p })));
  if (!results.length) return '';
  const lines = ['| shape (B, H, Sq, Sk, D) | variant | ms | GFLOP/s | time ÷ first row |', '|---|---|---|---|---|'];
  for (const { r, part } of results) {
    for (const row of variantRows(r, part.engines)) {
      lines.push(`| ${r.label.replace(/,/g, ', ')} | ${VARIANTS[row.variant]?.label ?? row.name} | ${row.r.median ? fmt(row.r.median) : '—'} | ${row.gflops ? row.gflops.toFixed(1) : '—'} | ${row.vsRef ? row.vsRef.toFixed(3) : '—'} |`);
    }
  }
  const merits = sectionFigures({ ...run, sections: { variants: parts }, sectionExtras: {} });
  return `${sectionHeader(run, parts)} GFLOP/s over the scores each variant computes (4·B·H·D per visible score).\n\n${lines.join('\n')}\n\n` +
    `${merits.map(meritLine).join('\n')}\n`;
}
