// The threads section of a benchmark run (sections.mjs: small decode steps and prefills on 1 and 2
// threads) as console report, figure of merit and docs/performance.md's table. Each engine of one
// thread is paired with its twin of two (the same call), round by round: 2 threads ÷ 1 must never
// be above 1, since a call too small to gain from the pool runs on the calling thread.
import { fmt, meritLine, pairedRatio, printHosts, sectionHeader, x } from './section-common.mjs';

// A result's pairs: { what, one, two, ratio } (ratio: 2 threads' time ÷ 1 thread's).
function pairs(result) {
  return Object.entries(result.engines).filter(([name]) => / 1T /.test(name)).map(([name, one]) => {
    const two = result.engines[name.replace(' 1T ', ' 2T ')];
    return { what: name.replace('attention-wasm 1T ', ''), one, two, ratio: pairedRatio(two, one) };
  });
}

const rowsOf = (run) => (run.sections?.threads ?? []).flatMap((part) => part.results.flatMap((result) =>
  pairs(result).map((p) => ({ ...p, part, result }))));

export function printThreads(run, out = console.log) {
  for (const part of run.sections?.threads ?? []) {
    out(`\nthreads: ${part.label}; time per call on 1 and 2 threads, and their ratio (paired by round)`);
    printHosts(part, out, (name, c) => c.how ?? c.variant ?? '');
    out(`  ${'shape'.padEnd(32)} ${'call'.padEnd(16)} ${'1T ms'.padStart(10)} ${'2T ms'.padStart(10)} ${'2T ÷ 1T'.padStart(8)}`);
    for (const result of part.results) {
      for (const { what, one, two, ratio } of pairs(result)) {
        out(`  ${result.label.padEnd(32)} ${what.padEnd(16)} ${(one.median ? fmt(one.median) : one.error ?? '—').padStart(10)} ` +
          `${(two?.median ? fmt(two.median) : two?.error ?? '—').padStart(10)} ${(ratio?.toFixed(3) ?? '—').padStart(8)}`);
      }
    }
  }
}

// The slowest small call on 2 threads, relative to 1.
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
  const lines = ['| shape (B, H, Sq, Sk, D) | call | 1 thread, ms | 2 threads, ms | 2 threads ÷ 1 |', '|---|---|---|---|---|'];
  for (const { what, one, two, ratio, result } of rowsOf(run)) {
    lines.push(`| ${result.label.replace(/,/g, ', ')} | ${what} | ${one.median ? fmt(one.median) : '—'} | ${two?.median ? fmt(two.median) : '—'} | ${ratio ? ratio.toFixed(3) : '—'} |`);
  }
  const loads = parts.flatMap((p) => p.results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]])).filter((l) => l !== undefined && l !== null);
  const busy = Math.max(...loads) > run.machine.cores ? ' The load average was above the core count: other work held the cores, so ' +
    'where a call is large enough for the pool, its 2-thread time shows contention more than scaling.' : '';
  return `${sectionHeader(run, parts, '1 and 2 threads')}${busy}\n\n` +
    `${lines.join('\n')}\n\n${threadsFigures(run).map(meritLine).join('\n')}\n`;
}
