// What the reports of the benchmark's sections (decode-report.mjs, section-report.mjs) share:
// number formats, paired ratios, the engines' configuration lines and the tables' header line.
import { median } from '../../web/bench/schedule.mjs';

export const fmt = (ms) => (ms >= 1000 ? `${Math.round(ms).toLocaleString('en-US')}` : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
export const x = (r) => (r ? `${r.toFixed(2)}×` : '—');
// a share in per cent: whole numbers from 10 %, two significant digits below (tiny steps on tiny shapes)
export const pct = (r) => (r ? `${r >= 0.1 ? (100 * r).toFixed(0) : (100 * r).toPrecision(2)} %` : '—');
export const isOrt = (name) => name.startsWith('onnxruntime-web');
export const threadsOf = (name) => Number(name.match(/ (\d+)T\b/)?.[1] ?? 1);

// a's time ÷ b's: the median of per-round ratios when both ran every round, else of medians.
export function pairedRatio(a, b) {
  if (!a?.median || !b?.median) return null;
  if (a.rounds?.length && a.rounds.length === b.rounds?.length) return median(a.rounds.map((t, i) => t / b.rounds[i]));
  return a.median / b.median;
}

export const findResult = (run, section, label) => {
  for (const part of run.sections?.[section] ?? []) {
    const r = part.results.find((y) => y.label === label);
    if (r) return { part, result: r };
  }
  return null;
};

// How each engine of a part ran (`describe(name, config)` for what is particular to a section).
export function printHosts(part, out, describe = () => '') {
  for (const [name, e] of Object.entries(part.engines)) {
    const c = e.config ?? {};
    const how = isOrt(name) ? `onnxruntime-web ${c.version}, wasm EP, graph ${c.graph}; env.wasm.numThreads ${c.numThreads}, proxy ${c.proxy ? 'on' : 'off'}, ` +
      `graphOptimizationLevel '${c.graphOptimizationLevel}', executionMode '${c.executionMode}', enableCpuMemArena ${c.enableCpuMemArena}, enableMemPattern ${c.enableMemPattern}`
      : `${c.simd} build, ${c.threads} thread(s); ${describe(name, c)}`;
    out(`  ${name.padEnd(46)} [${e.host}] ${how}`);
  }
  for (const f of part.failed ?? []) out(`  not run: ${f.label}: ${f.reason}`);
}

export const meritLine = (f) => `- ${f.what}: ${f.figure} (the benchmark's goal: ${f.goal}).`;

// The line that says when, where and how a section's table was measured; `builds` says which of
// our builds ran (default: the build of our first engine, on `threads`).
export function sectionHeader(run, parts, threads = '1 thread', builds = null) {
  const loads = parts.flatMap((p) => p.results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]])).filter((l) => l !== undefined && l !== null);
  const load = loads.length ? `load average ${Math.min(...loads)}–${Math.max(...loads)} during the section` : `load average ${run.loadavg.start[0]} at start and ${run.loadavg.end[0]} at end`;
  const timing = [...new Set(parts.map((p) => (p.timing.slowMs === 0 ? `${p.timing.slowRounds} rounds of one call each` : `${p.timing.rounds} rounds of ${p.timing.turnMs} ms turns`)))].join(', then ');
  const ours = Object.values(parts[0]?.engines ?? {}).find((e) => e.config?.simd)?.config;
  return `Measured ${run.date.slice(0, 10)} by \`${run.command}\` in ${run.where} on ${run.machine.cpu} (${run.machine.cores} cores, shared), ${load}; ` +
    `engines take interleaved turns (${timing}), medians of the round medians; ratios are medians of per-round ratios. ${builds ?? `attention-wasm's ${ours?.simd ?? '?'} build, ${threads}`}.`;
}
