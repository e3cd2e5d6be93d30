// The threads section of a benchmark run (sections.mjs: small decode steps and prefills on 1 and 2
// threads) as console report, figures of merit and docs/performance.md's table. Each engine of one
// thread (the single-threaded build) is paired with its twin of two (the threaded build, the same
// call), round by round: what a user who turns on cross-origin isolation sees, which must never be
// above 1. Beside it, 2 threads ÷ the threaded build's 1 (spec.threadedBuild): the pool's choice
// alone, without the threaded build's own cost per call. Each build runs in several instances
// (processes or pages, their engines' names ending ' (instance n)'); a build's time in a round is
// the mean of its instances'.
import { median } from '../../web/bench/schedule.mjs';
import { fmt, meritLine, pairedRatio, printHosts, sectionHeader, x } from './section-common.mjs';

const INSTANCE = / \(instance \d+\)$/;
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

// The instances of one engine as one: { median, rounds (each the instances' mean), instances
// (their medians) }, or the first instance's error.
function acrossInstances(list) {
  if (list.length === 1) return { ...list[0], instances: list[0].median ? [list[0].median] : [] };
  const failed = list.find((e) => !e.median);
  if (failed) return failed;
  const n = Math.min(...list.map((e) => e.rounds?.length ?? 0));
  const rounds = Array.from({ length: n }, (_, r) => mean(list.map((e) => e.rounds[r])));
  return { median: n ? median(rounds) : mean(list.map((e) => e.median)), rounds, instances: list.map((e) => e.median) };
}

// A result's engines by build and call, instances joined.
function byBuild(engines) {
  const groups = {};
  for (const [name, e] of Object.entries(engines)) (groups[name.replace(INSTANCE, '')] ??= []).push(e);
  return Object.fromEntries(Object.entries(groups).map(([name, list]) => [name, acrossInstances(list)]));
}

// A result's pairs: { what, one, two, ratio, oneMt, poolRatio } (ratio: 2 threads' time ÷ 1
// thread's; poolRatio: ÷ the threaded build's 1 thread, oneMt, where it ran).
function pairs(result) {
  const engines = byBuild(result.engines);
  return Object.entries(engines).filter(([name]) => / 1T /.test(name)).map(([name, one]) => {
    const two = engines[name.replace(' 1T ', ' 2T ')];
    const oneMt = engines[name.replace(' 1T ', ' 1T-mt ')];
    return { what: name.replace('attention-wasm 1T ', ''), one, two, ratio: pairedRatio(two, one), oneMt, poolRatio: oneMt ? pairedRatio(two, oneMt) : null };
  });
}
// How far a build's instances were apart: (slowest − fastest) ÷ their mean, in per cent.
const apart = (e) => (e?.instances?.length > 1 ? `${((100 * (Math.max(...e.instances) - Math.min(...e.instances))) / mean(e.instances)).toFixed(0)} %` : '—');
const ratioText = (r) => r?.toFixed(3) ?? '—';
// Times in microseconds (the section's calls take 4 µs to 30 ms; its engines report ms).
const us = (ms) => fmt(1000 * ms);

const rowsOf = (run) => (run.sections?.threads ?? []).flatMap((part) => part.results.flatMap((result) =>
  pairs(result).map((p) => ({ ...p, part, result }))));

export function printThreads(run, out = console.log) {
  for (const part of run.sections?.threads ?? []) {
    out(`\nthreads: ${part.label}; time per call on 1 and 2 threads, and their ratio (paired by round; 1T-mt: the threaded build on 1 thread)`);
    printHosts(part, out, (name, c) => c.how ?? c.variant ?? '');
    out(`  ${'shape'.padEnd(32)} ${'call'.padEnd(16)} ${'1T µs'.padStart(10)} ${'2T µs'.padStart(10)} ${'2T ÷ 1T'.padStart(8)} ${'2T ÷ 1T-mt'.padStart(10)}` +
      `   instances apart: 1T, 2T, 1T-mt`);
    for (const result of part.results) {
      for (const { what, one, two, ratio, poolRatio, oneMt } of pairs(result)) {
        out(`  ${result.label.padEnd(32)} ${what.padEnd(16)} ${(one.median ? us(one.median) : one.error ?? '—').padStart(10)} ` +
          `${(two?.median ? us(two.median) : two?.error ?? '—').padStart(10)} ${ratioText(ratio).padStart(8)} ${ratioText(poolRatio).padStart(10)}` +
          `   ${[one, two, oneMt].map(apart).join(', ')}`);
      }
    }
  }
}

// The slowest small call on 2 threads, relative to 1 thread on the single-threaded build (what a
// user sees), and relative to the threaded build on 1 thread (the pool's choice alone).
export function threadsFigures(run) {
  if (!run.sections?.threads) return [];
  const slowest = (key) => {
    const rows = rowsOf(run).filter((r) => r[key]);
    const worst = rows.reduce((a, b) => (b[key] > (a?.[key] ?? 0) ? b : a), null);
    return { count: rows.length, figure: worst ? `${x(worst[key])} (${worst.what}, ${worst.result.label})` : '—' };
  };
  const user = slowest('ratio'), pool = slowest('poolRatio');
  return [{
    what: `the slowest of ${user.count} small calls (decode steps over 1–16384 keys, prefills of 1–1024 positions) on 2 threads ÷ on 1`,
    goal: '≤ 1.00× (never slower)',
    figure: user.figure,
  }, {
    what: `the slowest of ${pool.count} small calls on 2 threads ÷ on 1 thread of the threaded build (the pool's choice alone)`,
    goal: '≤ 1.02× (the pool slows no call beyond its tries, which cost a timed class about 1 % by design)',
    figure: pool.figure,
  }];
}

export function threadsBlock(run) {
  const parts = run.sections?.threads ?? [];
  if (!parts.length) return '';
  const lines = ['| shape (B, H, Sq, Sk, D) | call | 1 thread, µs | 2 threads, µs | 2 threads ÷ 1 | 2 threads ÷ 1 on the threaded build |',
    '|---|---|---|---|---|---|'];
  for (const { what, one, two, ratio, poolRatio, result } of rowsOf(run)) {
    lines.push(`| ${result.label.replace(/,/g, ', ')} | ${what} | ${one.median ? us(one.median) : '—'} | ${two?.median ? us(two.median) : '—'} | ` +
      `${ratioText(ratio)} | ${ratioText(poolRatio)} |`);
  }
  const loads = parts.flatMap((p) => p.results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]])).filter((l) => l !== undefined && l !== null);
  const busy = Math.max(...loads) > run.machine.cores ? ' The load average was above the core count: other work held the cores, so ' +
    'where a call is large enough for the pool, its 2-thread time shows contention more than scaling.' : '';
  const ours = Object.values(parts[0]?.engines ?? {}).find((e) => e.config?.simd)?.config;
  // The instances that ran (their engines' names), and whether some host did not start.
  const names = parts.flatMap((p) => Object.keys(p.engines));
  const instances = new Set(names.map((n) => n.match(INSTANCE)?.[0] ?? '')).size;
  const missing = parts.some((p) => p.failed?.length) ? ' (some did not start: see the console report)' : '';
  const builds = `attention-wasm's ${ours?.simd ?? '?'} builds: 1 thread on the single-threaded build, 2 threads on the threaded ` +
    'build (what turning on cross-origin isolation changes, the goal\'s ratio), and 1 thread on the threaded build (the last column: ' +
    `the pool's choice alone), each build in ${instances} ${run.where.startsWith('Node') ? 'processes' : 'pages'}${missing}, its time in a round the mean of theirs`;
  return `${sectionHeader(run, parts, '1 and 2 threads', builds)}${busy}\n\n` +
    `${lines.join('\n')}\n\n${threadsFigures(run).map(meritLine).join('\n')}\n`;
}
