// The threads section of a benchmark run (sections.mjs: small decode steps and prefills on 1 and 2
// threads) as console report, figure of merit and docs/performance.md's table. Each engine of one
// thread (the single-threaded build) is paired with its twin of two (the threaded build, the same
// call), round by round: what a user who turns on cross-origin isolation sees, which must never be
// above 1. Beside it, 2 threads ÷ the threaded build's 1 (spec.threadedBuild): the pool's choice
// alone, without the threaded build's own cost per call.
import { fmt, meritLine, pairedRatio, printHosts, sectionHeader, x } from './section-common.mjs';

// A result's pairs: { what, one, two, ratio, oneMt, poolRatio } (ratio: 2 threads' time ÷ 1
// thread's; poolRatio: ÷ the threaded build's 1 thread, oneMt, where it ran).
function pairs(result) {
  return Object.entries(result.engines).filter(([name]) => / 1T /.test(name)).map(([name, one]) => {
    const two = result.engines[name.replace(' 1T ', ' 2T ')];
    const oneMt = result.engines[name.replace(' 1T ', ' 1T-mt ')];
    return { what: name.replace('attention-wasm 1T ', ''), one, two, ratio: pairedRatio(two, one), oneMt, poolRatio: oneMt ? pairedRatio(two, oneMt) : null };
  });
}
const ratioText = (r) => r?.toFixed(3) ?? '—';

const rowsOf = (run) => (run.sections?.threads ?? []).flatMap((part) => part.results.flatMap((result) =>
  pairs(result).map((p) => ({ ...p, part, result }))));

export function printThreads(run, out = console.log) {
  for (const part of run.sections?.threads ?? []) {
    out(`\nthreads: ${part.label}; time per call on 1 and 2 threads, and their ratio (paired by round; 1T-mt: the threaded build on 1 thread)`);
    printHosts(part, out, (name, c) => c.how ?? c.variant ?? '');
    out(`  ${'shape'.padEnd(32)} ${'call'.padEnd(16)} ${'1T ms'.padStart(10)} ${'2T ms'.padStart(10)} ${'2T ÷ 1T'.padStart(8)} ${'2T ÷ 1T-mt'.padStart(10)}`);
    for (const result of part.results) {
      for (const { what, one, two, ratio, poolRatio } of pairs(result)) {
        out(`  ${result.label.padEnd(32)} ${what.padEnd(16)} ${(one.median ? fmt(one.median) : one.error ?? '—').padStart(10)} ` +
          `${(two?.median ? fmt(two.median) : two?.error ?? '—').padStart(10)} ${ratioText(ratio).padStart(8)} ${ratioText(poolRatio).padStart(10)}`);
      }
    }
  }
}

// The slowest small call on 2 threads, relative to 1 thread on the single-threaded build (what a
// user sees).
export function threadsFigures(run) {
  const rows = rowsOf(run).filter((r) => r.ratio);
  if (!run.sections?.threads) return [];
  const worst = rows.reduce((a, b) => (b.ratio > (a?.ratio ?? 0) ? b : a), null);
  return [{
    what: `the slowest of ${rows.length} small calls (decode steps over 1–16384 keys, prefills of 1–1024 positions) on 2 threads ÷ on 1`,
    goal: '≤ 1.00× (never slower)',
    figure: worst ? `${x(worst.ratio)} (${worst.what}, ${worst.result.label})` : '—',
  }];
}

export function threadsBlock(run) {
  const parts = run.sections?.threads ?? [];
  if (!parts.length) return '';
  const lines = ['| shape (B, H, Sq, Sk, D) | call | 1 thread, ms | 2 threads, ms | 2 threads ÷ 1 | 2 threads ÷ 1 on the threaded build |',
    '|---|---|---|---|---|---|'];
  for (const { what, one, two, ratio, poolRatio, result } of rowsOf(run)) {
    lines.push(`| ${result.label.replace(/,/g, ', ')} | ${what} | ${one.median ? fmt(one.median) : '—'} | ${two?.median ? fmt(two.median) : '—'} | ` +
      `${ratioText(ratio)} | ${ratioText(poolRatio)} |`);
  }
  const loads = parts.flatMap((p) => p.results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]])).filter((l) => l !== undefined && l !== null);
  const busy = Math.max(...loads) > run.machine.cores ? ' The load average was above the core count: other work held the cores, so ' +
    'where a call is large enough for the pool, its 2-thread time shows contention more than scaling.' : '';
  const ours = Object.values(parts[0]?.engines ?? {}).find((e) => e.config?.simd)?.config;
  const builds = `attention-wasm's ${ours?.simd ?? '?'} builds: 1 thread on the single-threaded build, 2 threads on the threaded ` +
    'build (what turning on cross-origin isolation changes, the goal\'s ratio), and 1 thread on the threaded build (the last column: ' +
    'the pool\'s choice alone)';
  return `${sectionHeader(run, parts, '1 and 2 threads', builds)}${busy}\n\n` +
    `${lines.join('\n')}\n\n${threadsFigures(run).map(meritLine).join('\n')}\n`;
}
