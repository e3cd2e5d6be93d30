// Turns a benchmark run (the JSON that goes to artifacts/bench/) into the console report and the
// generated table of docs/performance.md.
import { referenceOf } from '../../web/bench/schedule.mjs';

const fmt = (ms) => (ms >= 1000 ? `${Math.round(ms).toLocaleString('en-US')}` : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
const gflops = (flop, ms) => flop / (ms * 1e6);
const isOrt = (name) => name.startsWith('onnxruntime-web');
const threadsOf = (name) => Number(name.match(/ (\d+)T\b/)?.[1] ?? 1);
const NATIVE = 'native SSE 1T (g++)';

// One line per engine: where it ran and how it was configured.
function describeConfig(name, { config }) {
  const c = config ?? {};
  if (name.startsWith('attention-wasm')) {
    return `${c.simd} build, ${c.threads} thread(s) (${c.threadsReason}), loadAttention(${JSON.stringify(c.requested)}), load ${c.loadMs?.toFixed(0)} ms`;
  }
  if (isOrt(name)) {
    return `onnxruntime-web ${c.version}, wasm EP; graph ${c.graph}; env.wasm.numThreads ${c.numThreads}, proxy ${c.proxy ? 'on' : 'off'}, ` +
      `simd ${c.simd}; graphOptimizationLevel '${c.graphOptimizationLevel}', executionMode '${c.executionMode}', ` +
      `intraOpNumThreads ${c.intraOpNumThreads}, enableCpuMemArena ${c.enableCpuMemArena}, enableMemPattern ${c.enableMemPattern}`;
  }
  if (name.startsWith('tfjs')) {
    return `tfjs ${c.version} backend '${c.backend}', ${c.threads} thread(s), SIMD ${c.simd}, prod mode ${c.prodMode}; ${c.ops}`;
  }
  return c.code ?? '';
}

// Our engine with the same thread count and build as `name`'s peer comparison uses.
const oursFor = (names, threads) => names.find((n) => n === `attention-wasm ${threads}T`);
const bestOrt = (engines, threads) => {
  let best = null;
  for (const [n, r] of Object.entries(engines)) {
    if (isOrt(n) && threadsOf(n) === threads && r.median && (!best || r.median < best.median)) best = { name: n, median: r.median };
  }
  return best;
};

export function printReport(run, out = console.log) {
  const { machine } = run;
  out(`attention-wasm ${run.version} against its peers in ${run.where}; ${run.date.slice(0, 16).replace('T', ' ')} UTC`);
  out(`machine: ${machine.cpu}, ${machine.cores} cores, ${machine.os}; load average (1/5/15 min) ${run.loadavg.start.join(' ')} at start, ${run.loadavg.end.join(' ')} at end`);
  const node = run.where.startsWith('Node');
  out(`peak (scripts/bench/peak.mjs, this run): SIMD128 mul+add ${run.peak.simd128?.toFixed(1) ?? '?'} GFLOP/s per core; ` +
    `relaxed-SIMD FMA ${run.peak.relaxed ? `${run.peak.relaxed.toFixed(1)} GFLOP/s${node ? ' (node --experimental-wasm-relaxed-simd)' : ''}` : 'not available'}`);
  out('\nhow each engine ran (each host is its own process or page; hosts take turns, never run together):');
  for (const [name, e] of Object.entries(run.engines)) out(`  ${name.padEnd(30)} [${e.host}] ${describeConfig(name, e)}`);
  for (const f of run.hostsFailed) out(`  not run: ${f.label}: ${f.reason}`);
  const t = run.timing;
  out(`timing: per shape a first call, ${t.warmMs} ms warm-up, then ${t.rounds} rounds; in each round every engine gets one turn ` +
    `(${t.settleMs} ms untimed, then ${t.turnMs} ms of timed calls), in rotated order; figure = median of the round medians ` +
    `[min–max of them]; engines whose first call took > ${t.slowMs / 1000} s: one call in each of ${t.slowRounds} rounds.`);

  out(`\n${'shape (B,H,Sq,Sk,D)'.padEnd(26)} ${'engine'.padEnd(30)} ${'median ms'.padStart(10)} ${'[round spread]'.padStart(17)} ${'GFLOP/s'.padStart(8)} ${'% peak'.padStart(7)} ${'× ours 1T'.padStart(10)} ${'max |Δ|'.padStart(8)}`);
  for (const row of run.results) {
    const names = Object.keys(row.engines);
    const ref = row.engines[referenceOf(names)]?.median;
    for (const [name, r] of Object.entries(row.engines)) {
      if (r.error || r.skipped) {
        out(`${row.shape.padEnd(26)} ${name.padEnd(30)} ${r.error ? `error: ${r.error}` : `skipped: ${r.skipped}`}`);
        continue;
      }
      const g = gflops(row.flops, r.median);
      const relaxed = run.engines[name]?.config?.simd === 'relaxed-simd';
      const peak = (relaxed ? run.peak.relaxed : run.peak.simd128) * threadsOf(name);
      const spread = r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '';
      out(`${row.shape.padEnd(26)} ${name.padEnd(30)} ${fmt(r.median).padStart(10)} ${spread.padStart(17)} ${g.toFixed(1).padStart(8)} ` +
        `${peak && !name.startsWith('native') ? `${(100 * g / peak).toFixed(0)}%`.padStart(7) : ''.padStart(7)} ${ref ? (r.median / ref).toFixed(2).padStart(10) : ''.padStart(10)} ` +
        `${r.maxDiff !== undefined ? r.maxDiff.toExponential(0).padStart(8) : ''}`);
    }
    const first = row.engines[referenceOf(names)]?.firstCall;
    out(`${''.padEnd(26)} load average ${row.loadavg.before.join(' ')} → ${row.loadavg.after.join(' ')}; first call of ours 1T ${first?.toFixed(1)} ms`);
  }

  out('\nattention-wasm vs onnxruntime-web (the faster of its two graphs), same thread count; × = ORT time ÷ ours:');
  out(`${'shape'.padEnd(26)} ${'ours 1T'.padStart(9)} ${'ORT 1T'.padStart(9)} ${'×'.padStart(6)}   ${'ours 2T'.padStart(9)} ${'ORT 2T'.padStart(9)} ${'×'.padStart(6)}   ours 2T ÷ 1T`);
  for (const row of summaryRows(run)) {
    const c = (x) => (x ? fmt(x).padStart(9) : '—'.padStart(9));
    const r = (x) => (x ? x.toFixed(2).padStart(6) : '—'.padStart(6));
    out(`${row.shape.padEnd(26)} ${c(row.ours1)} ${c(row.ort1)} ${r(row.ratio1)}   ${c(row.ours2)} ${c(row.ort2)} ${r(row.ratio2)}   ${row.scaling ? row.scaling.toFixed(2) : '—'}`);
  }
  for (const line of run.notes ?? []) out(line);
  out('\nfigures of merit, from this run (the benchmark\'s goal in brackets; load moves them, so compare ratios from one run):');
  for (const f of figuresOfMerit(run)) out(`  ${f.what}: ${f.figure} (goal ${f.goal})`);
}

// The figures this benchmark is judged by, each with what it measures, its goal and this run's value.
export function figuresOfMerit(run) {
  const node = run.where.startsWith('Node');
  const rows = summaryRows(run);
  const list = (pick) => rows.map((r) => `${r.shape} ${pick(r) ? `${pick(r).toFixed(2)}×` : '—'}`).join(', ');
  const big = run.results.filter((r) => /^\(1,(12,512,512|8,2048,2048),64\)$/.test(r.shape));
  const ours1 = run.engines['attention-wasm 1T']?.config;
  const relaxed = ours1?.simd === 'relaxed-simd';
  const peak = relaxed ? run.peak.relaxed : run.peak.simd128;
  const share = (r) => r.engines['attention-wasm 1T']?.median && peak ? r.flops / (r.engines['attention-wasm 1T'].median * 1e6) / peak : null;
  const scaling = (r) => summaryRows({ ...run, results: [r] })[0].scaling;
  const f = [
    { what: `onnxruntime-web 1 thread ÷ ours 1 thread, every shape (our ${ours1?.simd ?? '?'} build)`, goal: `≥ ${node ? '1.6' : '2'}×`, figure: list((r) => r.ratio1) },
    { what: `share of the ${relaxed ? 'FMA' : 'SIMD128 mul+add'} peak, 1 thread, on 512² and 2048²`, goal: '≥ 70 %',
      figure: big.map((r) => `${r.shape} ${share(r) ? `${(100 * share(r)).toFixed(0)} %` : '—'}`).join(', ') },
    { what: 'ours 2 threads ÷ ours 1 thread (speed-up) on 512² and 2048²', goal: '≥ 1.8×', figure: big.map((r) => `${r.shape} ${scaling(r) ? `${scaling(r).toFixed(2)}×` : '—'}`).join(', ') },
    { what: 'onnxruntime-web 2 threads ÷ ours 2 threads, every shape', goal: '≥ 1.5×', figure: list((r) => r.ratio2) },
  ];
  const c = run.extras?.coldStart;
  if (c) {
    f.push({ what: 'first call on (1,8,128,128,64) after load', goal: '≤ 5 ms', figure: `${c.firstCallMs.toFixed(1)} ms` });
    const bare = c.withoutWarmUp ?? c;
    f.push({ what: `load in Node (import + instantiate${c.withoutWarmUp ? ', warmUp: false' : ''})`, goal: '≤ 50 ms',
      figure: `${(bare.importMs + bare.createMs).toFixed(0)} ms${c.withoutWarmUp ? ` (${(c.importMs + c.createMs).toFixed(0)} ms with the loader's warm-up)` : ''}` });
  }
  const sizes = run.extras?.wasmSizes;
  if (sizes) {
    const files = Object.entries(sizes).filter(([file]) => !file.startsWith('node-mt/'));
    f.push({ what: 'size of each .wasm (gzipped)', goal: '≤ 100 KB (≤ 40 KB)', figure: files.map(([file, x]) => `${file} ${(x.bytes / 1000).toFixed(1)} KB (${(x.gzip / 1000).toFixed(1)} KB)`).join(', ') });
  }
  return f;
}

export function summaryRows(run) {
  return run.results.map((row) => {
    const names = Object.keys(row.engines);
    const ours1 = row.engines[oursFor(names, 1)]?.median, ours2 = row.engines[oursFor(names, 2)]?.median;
    const ort1 = bestOrt(row.engines, 1)?.median, ort2 = bestOrt(row.engines, 2)?.median;
    return {
      shape: row.shape, ours1, ours2, ort1, ort2,
      ratio1: ours1 && ort1 ? ort1 / ours1 : null, ratio2: ours2 && ort2 ? ort2 / ours2 : null,
      scaling: ours1 && ours2 ? ours1 / ours2 : null,
    };
  });
}

// docs/performance.md's table for one run (markdown), with the line that says when, where and how.
export function performanceBlock(run) {
  const first = run.results[0]?.engines ?? {};
  // Per thread count that ran (a browser without SharedArrayBuffer has no 2-thread page): our
  // default build, any other build of ours beside it (e.g. simd128), ORT.
  const counts = [1, 2].filter((t) => Object.keys(first).some((n) => threadsOf(n) === t));
  const cols = counts.flatMap((t) => {
    const unit = t === 1 ? '1 thread' : `${t} threads`;
    const others = Object.keys(first).filter((n) => n.startsWith(`attention-wasm ${t}T `));
    return [
      [`attention-wasm ${unit}`, (r) => r.engines[`attention-wasm ${t}T`]],
      ...others.map((n) => [`attention-wasm ${unit}, ${n.slice(`attention-wasm ${t}T `.length)}`, (r) => r.engines[n]]),
      [`ORT ${unit}`, (r) => bestOrt(r.engines, t)],
    ];
  });
  cols.push(
    ['tfjs-wasm', (r) => r.engines[Object.keys(r.engines).find((n) => n.startsWith('tfjs') && threadsOf(n) === 1)]],
    ['plain JS', (r) => r.engines['plain JS']],
    ...(run.results.some((r) => r.engines[NATIVE]) ? [['native SSE, 1 thread', (r) => r.engines[NATIVE]]] : []));
  const rows = summaryRows(run);
  const ratios = counts.map((t) => [`ORT ÷ ours, ${t === 1 ? '1 thread' : `${t} threads`}`, (row) => row[`ratio${t}`]]);
  const lines = [
    `| shape (B, H, Sq, Sk, D) | ${[...cols, ...ratios].map(([c]) => c).join(' | ')} |`,
    `|---|${[...cols, ...ratios].map(() => '---').join('|')}|`,
  ];
  run.results.forEach((r, i) => {
    const cell = (x) => (x?.median ? `${fmt(x.median)} ms` : '—');
    const ratio = (x) => (x ? `${x.toFixed(2)}×` : '—');
    lines.push(`| ${r.shape.replace(/,/g, ', ')} | ${[...cols.map(([, get]) => cell(get(r))), ...ratios.map(([, get]) => ratio(get(rows[i])))].join(' | ')} |`);
  });
  const ortConfig = Object.entries(run.engines).find(([n]) => isOrt(n))?.[1]?.config;
  const header = `Measured ${run.date.slice(0, 10)} by \`${run.command}\` in ${run.where} on ${run.machine.cpu} (${run.machine.cores} cores, shared), ` +
    `load average ${run.loadavg.start[0]} at start and ${run.loadavg.end[0]} at end; medians of ${run.timing.rounds} rounds of ${run.timing.turnMs} ms turns. ` +
    `attention-wasm's default build here: ${run.engines['attention-wasm 1T']?.config?.simd ?? '?'}. ` +
    `SIMD128 mul+add peak ${run.peak.simd128?.toFixed(0)} GFLOP/s per core` +
    `${run.peak.relaxed ? `, FMA ${run.peak.relaxed.toFixed(0)}` : ''}. ORT = onnxruntime-web ${ortConfig?.version ?? ''}, the faster of its two graphs, ` +
    `\`env.wasm.numThreads\` = its thread count in its own ${run.where.startsWith('Node') ? 'process' : 'page'}, ` +
    `graphOptimizationLevel 'all', proxy off.` +
    (Math.max(run.loadavg.start[0], run.loadavg.end[0]) > run.machine.cores
      ? ` The load average was above the core count: other work held the cores, so ${counts.includes(2) ? 'the 2-thread columns show contention more than scaling' : 'every figure is slower than on an idle machine'}.` : '');
  const extras = [];
  const { coldStart: c, wasmSizes, backward: bw, memory: m } = run.extras ?? {};
  if (c) {
    const w = c.withoutWarmUp;
    extras.push(`- Load and first call (a fresh Node process): import ${c.importMs.toFixed(0)} ms + \`createAttention({ threads: 1 })\` ${c.createMs.toFixed(0)} ms; the first (1, 8, 128, 128, 64) call ${c.firstCallMs.toFixed(1)} ms, the next ones ${c.laterCallMs.toFixed(2)} ms` +
      (w ? `; with \`warmUp: false\` ${w.importMs.toFixed(0)} + ${w.createMs.toFixed(0)} ms, then ${w.firstCallMs.toFixed(1)} ms for the first call (V8 compiling what it needs).` : '.'));
  }
  if (wasmSizes) extras.push(`- \`.wasm\` sizes (bytes, gzip -9): ${Object.entries(wasmSizes).filter(([f]) => !f.startsWith('node-mt/')).map(([f, x]) => `${f} ${x.bytes.toLocaleString('en-US')} (${x.gzip.toLocaleString('en-US')})`).join(', ')}.`);
  if (bw) extras.push(`- Backward ${bw.shape.replace(/,/g, ', ')}, 1 thread, from the forward's saved log-sum-exp and output: ${bw.backwardMs.toFixed(1)} ms, ${bw.ratio.toFixed(2)}× the forward's ${bw.forwardMs.toFixed(1)} ms (${bw.recomputeMs.toFixed(1)} ms when it recomputes them).`);
  if (m) extras.push(`- Memory: one (1, 1, 8192, 8192, 64) call grows a fresh module from ${(m.before / 2 ** 20).toFixed(0)} to ${(m.after / 2 ** 20).toFixed(0)} MiB (a score matrix alone would be 256 MiB).`);
  if (run.results.some((r) => r.engines[NATIVE])) extras.push('- native SSE: the same C++ compiled by g++ for 128-bit SSE, timed in its own process (no copies in or out).');
  return `${header}\n\n${lines.join('\n')}\n${extras.length ? `\n${extras.join('\n')}\n` : ''}`;
}
