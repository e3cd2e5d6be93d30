// The prefill section of a benchmark run (sections.mjs, prefill-engines.mjs) as console report,
// figures of merit and the tables of docs/performance.md. Each of our 1-thread builds is held to
// the multiply-add peak of its own SIMD level (peak.mjs: SIMD128 mul + add, relaxed-SIMD FMA),
// timed in the same rounds; shares and ratios pair the engines round by round.
import { PEAK_BUILDS, PEAK_NAMES } from './prefill-engines.mjs';
import { fmt, isOrt, meritLine, pairedRatio, pct, printHosts, sectionHeader, threadsOf, x } from './section-common.mjs';
import { flops } from './shapes.mjs';

const BUILD_LABELS = { simd128: 'SIMD128', 'relaxed-simd': 'relaxed SIMD' };
const isProbe = (name) => Object.values(PEAK_NAMES).includes(name);
const isOurs = (name) => name.startsWith('attention-wasm');

// The probe of `build` in a result: { probe, flop, gflops }, or null where it did not run.
function peakOf(part, result, build) {
  const kind = Object.keys(PEAK_BUILDS).find((k) => PEAK_BUILDS[k] === build);
  const name = PEAK_NAMES[kind], probe = result.engines[name], flop = part.engines[name]?.config?.flopsPerCall;
  return probe?.median && flop ? { probe, flop, gflops: flop / (probe.median * 1e6) } : null;
}

// The fastest onnxruntime-web graph on `threads` threads: [name, figures] or null.
const bestOrt = (result, threads) => Object.entries(result.engines).filter(([n, r]) => isOrt(n) && threadsOf(n) === threads && r.median)
  .sort(([, a], [, b]) => a.median - b.median)[0] ?? null;

// One result → a row per engine that is not a probe: { name, r, threads, build, gflops, share (of
// its build's peak, per thread; ours only), ortOverThis (the fastest ORT graph on as many threads) }.
export function prefillRows(part, result) {
  return Object.entries(result.engines).filter(([name]) => !isProbe(name)).map(([name, r]) => {
    const threads = threadsOf(name), build = part.engines[name]?.config?.simd;
    const peak = isOurs(name) ? peakOf(part, result, build) : null;
    const ort = bestOrt(result, threads);
    return {
      name, r, threads, build,
      gflops: r.median ? flops(result.shape) / (r.median * 1e6) : null,
      share: peak ? (pairedRatio(peak.probe, r) * flops(result.shape)) / peak.flop / threads : null,
      ortOverThis: ort && !isOrt(name) ? pairedRatio(ort[1], r) : null,
    };
  });
}

// Our 1-thread row of `build`, our 2-thread row (the default build) and ORT's fastest of each.
function columns(part, result) {
  const rows = prefillRows(part, result);
  const ours = (threads, build) => rows.find((row) => isOurs(row.name) && row.threads === threads && (!build || row.build === build));
  return {
    simd128: ours(1, 'simd128'), relaxed: ours(1, 'relaxed-simd'), ours2: ours(2) ?? null,
    ort1: bestOrt(result, 1)?.[1], ort2: bestOrt(result, 2)?.[1],
  };
}

// ---- console ----

export function printPrefill(run, out = console.log) {
  for (const part of run.sections?.prefill ?? []) {
    out(`\nprefill: ${part.label}; GFLOP/s = 4·B·H·Sq·Sk·D (halved for causal) ÷ time; % peak: of the multiply-add peak of the engine's ` +
      'build (scripts/bench/peak.mjs, timed in the same rounds), per thread; ORT ÷ this: the fastest onnxruntime-web graph on as many threads');
    printHosts(part, out, (name, c) => c.how ?? '');
    for (const result of part.results) {
      out(`${result.label}: load average ${result.loadavg.before?.join(' ')} → ${result.loadavg.after?.join(' ')}; ${result.shape.name}`);
      out(`  ${'engine'.padEnd(46)} ${'median ms'.padStart(10)} ${'[round spread]'.padStart(17)} ${'GFLOP/s'.padStart(8)} ${'% peak'.padStart(7)} ${'ORT ÷ this'.padStart(11)} ${'max |Δ|'.padStart(8)}`);
      const line = (name, r, cells) => {
        if (r.error) return out(`  ${name.padEnd(46)} ${r.error}`);
        const spread = r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '';
        return out(`  ${name.padEnd(46)} ${fmt(r.median).padStart(10)} ${spread.padStart(17)} ${cells}`);
      };
      for (const { name, r, gflops, share, ortOverThis } of prefillRows(part, result)) {
        line(name, r, `${(gflops?.toFixed(1) ?? '').padStart(8)} ${(share ? pct(share) : '').padStart(7)} ${(ortOverThis ? x(ortOverThis) : '').padStart(11)} ` +
          `${r.maxDiff !== undefined ? r.maxDiff.toExponential(0).padStart(8) : ''}`);
      }
      for (const name of Object.values(PEAK_NAMES)) {
        const r = result.engines[name], flop = part.engines[name]?.config?.flopsPerCall;
        if (r) line(name, r, `${r.median && flop ? (flop / (r.median * 1e6)).toFixed(1).padStart(8) : ''}`);
      }
    }
  }
}

// ---- figures of merit ----

export function prefillFigures(run) {
  const parts = run.sections?.prefill ?? [];
  if (!parts.length) return [];
  const results = parts.flatMap((part) => part.results.map((result) => ({ part, result, c: columns(part, result) })));
  const builds = ['simd128', 'relaxed'].filter((b) => results.some(({ c }) => c[b]));
  return [
    { what: 'share of the multiply-add peak of its own build (SIMD128 mul + add, relaxed-SIMD FMA), 1 thread, every prefill shape', goal: '≥ 80 %',
      figure: builds.map((b) => `${BUILD_LABELS[PEAK_BUILDS[b]]}: ${results.map(({ result, c }) => `${result.label} ${pct(c[b]?.share)}`).join(', ')}`).join('; ') },
    { what: 'onnxruntime-web 2 threads ÷ ours 2 threads, every prefill shape', goal: '≥ 1.5×',
      figure: results.map(({ result, c }) => `${result.label} ${x(c.ours2?.ortOverThis)}`).join(', ') },
  ];
}

// ---- docs/performance.md ----

export function prefillBlock(run) {
  const parts = run.sections?.prefill ?? [];
  const results = parts.flatMap((part) => part.results.map((result) => ({ part, result, c: columns(part, result) })));
  if (!results.length) return '';
  const ms = (row) => (row?.r?.median ? `${fmt(row.r.median)} ms` : '—');
  const orts = (r) => (r?.median ? `${fmt(r.median)} ms` : '—');
  const cols = [
    ['model', ({ result }) => result.shape.name],
    ['shape (B, H, Sq, Sk, D)', ({ result }) => result.label.replace(/,/g, ', ')],
    ['1 thread, SIMD128', ({ c }) => ms(c.simd128)], ['share of the mul + add peak', ({ c }) => pct(c.simd128?.share)],
    ['1 thread, relaxed SIMD', ({ c }) => ms(c.relaxed)], ['share of the FMA peak', ({ c }) => pct(c.relaxed?.share)],
    ['ORT 1 thread', ({ c }) => orts(c.ort1)],
    ['2 threads', ({ c }) => ms(c.ours2)], ['ORT 2 threads', ({ c }) => orts(c.ort2)],
    ['ORT ÷ ours, 2 threads', ({ c }) => x(c.ours2?.ortOverThis)],
  ].filter(([, get]) => results.some((r) => get(r) !== '—'));
  const lines = [`| ${cols.map(([h]) => h).join(' | ')} |`, `|${cols.map(() => '---').join('|')}|`,
    ...results.map((r) => `| ${cols.map(([, get]) => get(r)).join(' | ')} |`)];
  const range = (build) => {
    const g = results.map(({ part, result }) => peakOf(part, result, build)?.gflops).filter(Boolean);
    return g.length ? `${Math.min(...g).toFixed(0)}–${Math.max(...g).toFixed(0)} GFLOP/s` : null;
  };
  const ours2 = results.find(({ c }) => c.ours2)?.c.ours2;
  const peaks = [['SIMD128 mul + add', range('simd128')], ['relaxed-SIMD FMA', range('relaxed-simd')]].filter(([, r]) => r)
    .map(([what, r]) => `${what} ${r}`).join(', ');
  const merits = prefillFigures({ ...run, sections: { prefill: parts } });
  const builds = `attention-wasm's SIMD128 and relaxed-SIMD builds on 1 thread, its ${ours2?.build ?? '?'} build on 2`;
  return `${sectionHeader(run, parts, null, builds)} ` +
    'ORT = onnxruntime-web, the faster of its two graphs, `env.wasm.numThreads` = its thread count. ' +
    `Shares: GFLOP/s (4·B·H·Sq·Sk·D, halved for causal) ÷ the multiply-add peak of the build (\`scripts/bench/peak.mjs\`, one thread), timed in the same rounds: ${peaks}.\n\n` +
    `${lines.join('\n')}\n\n${merits.map(meritLine).join('\n')}\n`;
}
