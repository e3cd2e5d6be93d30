// The decode and variants sections of a benchmark run (sections.mjs) as console report, figures of
// merit and the tables of docs/performance.md. Ratios pair the engines round by round (each round's
// turns ran back to back) and take the median of those ratios.
import { median } from '../../web/bench-schedule.mjs';
import { DTYPES } from './decode-engines.mjs';
import { visibleScores, VARIANTS } from './variant-engines.mjs';

const fmt = (ms) => (ms >= 1000 ? `${Math.round(ms).toLocaleString('en-US')}` : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
const x = (r) => (r ? `${r.toFixed(2)}×` : '—');
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const isOrt = (name) => name.startsWith('onnxruntime-web');

// a's time ÷ b's: the median of per-round ratios when both ran every round, else of medians.
export function pairedRatio(a, b) {
  if (!a?.median || !b?.median) return null;
  if (a.rounds?.length && a.rounds.length === b.rounds?.length) return median(a.rounds.map((t, i) => t / b.rounds[i]));
  return a.median / b.median;
}

// ---- decode ----

const dtypeOf = (name) => name.match(/ cache (float32|float16|int8)$/)?.[1];
// Bytes of K and V an engine streams per step: the cache's own (measured) for a cache, float32
// K and V for the others (they are copied in as float32).
const streamedBytes = (name, kv) => kv?.[dtypeOf(name) ?? 'float32'];

// One decode result → the figures the report and docs/performance.md show.
function decodeRows(result, kvBytes) {
  const names = Object.keys(result.engines);
  const f32 = result.engines[names.find((n) => dtypeOf(n) === 'float32')];
  const kv = kvBytes?.[result.label];
  const rows = names.map((name) => {
    const r = result.engines[name];
    const bytes = streamedBytes(name, kv);
    return { name, r, gbps: r.median && bytes ? bytes / (r.median * 1e6) : null, vsF32: pairedRatio(r, f32) };
  });
  const ort = rows.filter((row) => isOrt(row.name) && row.r.median).sort((a, b) => a.r.median - b.r.median)[0] ?? null;
  const ratio = (dtype) => { const row = rows.find((w) => dtypeOf(w.name) === dtype); return row?.vsF32 ? 1 / row.vsF32 : null; };
  return { rows, f32, ort, ortOverF32: ort?.vsF32 ?? null, f16Speedup: ratio('float16'), i8Speedup: ratio('int8') };
}

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

const findResult = (run, section, label) => {
  for (const part of run.sections?.[section] ?? []) {
    const r = part.results.find((x) => x.label === label);
    if (r) return { part, result: r };
  }
  return null;
};

// ---- console ----

export function printSections(run, out = console.log) {
  const kvBytes = run.sectionExtras?.kvBytes;
  for (const part of run.sections?.decode ?? []) {
    out(`\ndecode: ${part.label}; K/V GB/s = bytes of K and V the step reads (a cache's own bytes; float32 for the others) ÷ time`);
    printHosts(part, out);
    for (const result of part.results) {
      const d = decodeRows(result, kvBytes);
      out(`${result.label}: load average ${result.loadavg.before?.join(' ')} → ${result.loadavg.after?.join(' ')}`);
      out(`  ${'engine'.padEnd(46)} ${'median ms'.padStart(10)} ${'[round spread]'.padStart(17)} ${'K/V GB/s'.padStart(9)} ${'÷ f32 cache'.padStart(12)} ${'max |Δ|'.padStart(8)}`);
      for (const { name, r, gbps, vsF32 } of d.rows) {
        if (r.error) { out(`  ${name.padEnd(46)} ${r.error}`); continue; }
        const spread = r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '';
        out(`  ${name.padEnd(46)} ${fmt(r.median).padStart(10)} ${spread.padStart(17)} ${(gbps?.toFixed(1) ?? '').padStart(9)} ${(vsF32?.toFixed(2) ?? '').padStart(12)} ${r.maxDiff !== undefined ? r.maxDiff.toExponential(0).padStart(8) : ''}`);
      }
      out(`  ORT (${d.ort?.name ?? '—'}) ÷ ours float32 cache ${x(d.ortOverF32)}; float32 ÷ float16 cache ${x(d.f16Speedup)}; float32 ÷ int8 cache ${x(d.i8Speedup)}`);
    }
  }
  if (kvBytes) {
    out('\nKV cache bytes per token per layer (cache.bytes ÷ maxSeq, measured):');
    for (const [label, b] of Object.entries(kvBytes)) {
      out(`  ${label.padEnd(34)} ${DTYPES.map((d) => `${d} ${(b[d] / b.maxSeq).toLocaleString('en-US')} (${(b[d] / b.float32).toFixed(3)}×)`).join(', ')}`);
    }
  }
  for (const part of run.sections?.variants ?? []) {
    out(`\nvariants: ${part.label}; GFLOP/s over the scores each variant computes (4·B·H·D per visible score)`);
    printHosts(part, out);
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

function printHosts(part, out) {
  for (const [name, e] of Object.entries(part.engines)) {
    const c = e.config ?? {};
    const how = isOrt(name) ? `onnxruntime-web ${c.version}, wasm EP, graph ${c.graph}; env.wasm.numThreads ${c.numThreads}, proxy ${c.proxy ? 'on' : 'off'}, ` +
      `graphOptimizationLevel '${c.graphOptimizationLevel}', executionMode '${c.executionMode}', enableCpuMemArena ${c.enableCpuMemArena}, enableMemPattern ${c.enableMemPattern}`
      : `${c.simd} build, ${c.threads} thread(s); ${c.how ?? VARIANTS[c.variant]?.label ?? ''}`;
    out(`  ${name.padEnd(46)} [${e.host}] ${how}`);
  }
  for (const f of part.failed ?? []) out(`  not run: ${f.label}: ${f.reason}`);
}

// ---- figures of merit ----

const DECODE_32 = '(1,32,1,4096,128) kvHeads 32', DECODE_8 = '(1,32,1,4096,128) kvHeads 8';
const VARIANTS_512 = '(1,12,512,512,64)', WINDOW_8192 = '(1,8,8192,8192,64)';

// The figures each section is judged by: what is measured, the benchmark's goal, this run's value.
export function sectionFigures(run) {
  const f = [];
  const kvBytes = run.sectionExtras?.kvBytes;
  if (run.sections?.decode) {
    const d = [DECODE_32, DECODE_8].map((l) => [l, findResult(run, 'decode', l)]).map(([l, r]) => [l, r && decodeRows(r.result, kvBytes)]);
    f.push({ what: "onnxruntime-web (its fastest graph) ÷ our float32 cache, 1 thread", goal: '≥ 3×',
      figure: d.map(([l, r]) => `${l} ${x(r?.ortOverF32)}`).join(', ') });
    const d32 = d[0][1];
    f.push({ what: 'float32 cache ÷ int8 cache (speed-up), kvHeads 32', goal: '≥ 1.8×', figure: x(d32?.i8Speedup) });
    f.push({ what: 'float32 cache ÷ float16 cache (speed-up), kvHeads 32', goal: '≥ 1.3×', figure: x(d32?.f16Speedup) });
  }
  if (kvBytes) {
    const ratios = Object.entries(kvBytes).map(([l, b]) => [l, b.int8 / b.float32]);
    f.push({ what: 'int8 cache bytes per token ÷ float32', goal: '≤ 0.27×', figure: ratios.map(([l, r]) => `${l} ${r.toFixed(3)}×`).join(', ') });
  }
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

const meritLine = (f) => `- ${f.what}: ${f.figure} (the benchmark's goal: ${f.goal}).`;

function header(run, section, parts) {
  const loads = parts.flatMap((p) => p.results.flatMap((r) => [r.loadavg.before?.[0], r.loadavg.after?.[0]])).filter((l) => l !== undefined && l !== null);
  const load = loads.length ? `load average ${Math.min(...loads)}–${Math.max(...loads)} during the section` : `load average ${run.loadavg.start[0]} at start and ${run.loadavg.end[0]} at end`;
  const timing = [...new Set(parts.map((p) => (p.timing.slowMs === 0 ? `${p.timing.slowRounds} rounds of one call each` : `${p.timing.rounds} rounds of ${p.timing.turnMs} ms turns`)))].join(', then ');
  const ours = Object.values(parts[0]?.engines ?? {}).find((e) => e.config?.simd)?.config;
  return `Measured ${run.date.slice(0, 10)} by \`${run.command}\` in ${run.where} on ${run.machine.cpu} (${run.machine.cores} cores, shared), ${load}; ` +
    `engines take interleaved turns (${timing}), medians of the round medians; ratios are medians of per-round ratios. attention-wasm's ${ours?.simd ?? '?'} build, 1 thread.`;
}

export function decodeBlock(run) {
  const parts = run.sections?.decode ?? [];
  const kvBytes = run.sectionExtras?.kvBytes;
  const results = parts.flatMap((p) => p.results);
  if (!results.length) return '';
  const decoded = results.map((r) => decodeRows(r, kvBytes));
  const ortConfig = Object.entries(parts[0].engines).find(([n]) => isOrt(n))?.[1]?.config;
  const names = [...new Set(decoded.flatMap((d) => d.rows.map((r) => r.name)))];
  const lines = [
    `| engine, 1 thread | ${results.map((r) => `${r.label.replace(/,/g, ', ')}: ms | GB/s | time ÷ float32 cache`).join(' | ')} |`,
    `|---|${results.map(() => '---|---|---').join('|')}|`,
  ];
  for (const name of names) {
    const cells = decoded.map((d) => {
      const row = d.rows.find((r) => r.name === name);
      if (!row?.r.median) return '— | — | —';
      return `${fmt(row.r.median)} | ${row.gbps ? row.gbps.toFixed(1) : '—'} | ${row.vsF32 ? row.vsF32.toFixed(2) : '—'}`;
    });
    lines.push(`| ${name.replace(/^attention-wasm 1T /, 'ours: ').replace(/^onnxruntime-web (\S+) 1T$/, 'ORT $1')} | ${cells.join(' | ')} |`);
  }
  const bytesLines = kvBytes ? [
    '', '| KV cache, bytes per token per layer | float32 | float16 | int8 |', '|---|---|---|---|',
    ...Object.entries(kvBytes).map(([l, b]) => `| ${l.replace(/^\(1,\d+,1,\d+,(\d+)\) kvHeads (\d+)$/, '$2 kv heads × $1 dims')} | ${DTYPES.map((d) => `${(b[d] / b.maxSeq).toLocaleString('en-US')}${d === 'float32' ? '' : ` (${(b[d] / b.float32).toFixed(3)}×)`}`).join(' | ')} |`),
  ] : [];
  const summary = results.map((r, i) => `${r.label.replace(/,/g, ', ')}: ORT's fastest graph (${decoded[i].ort?.name.replace(/^onnxruntime-web (\S+) 1T$/, '$1') ?? '—'}) ÷ float32 cache ${x(decoded[i].ortOverF32)}, ` +
    `float32 ÷ float16 cache ${x(decoded[i].f16Speedup)}, float32 ÷ int8 cache ${x(decoded[i].i8Speedup)}`);
  const meritLines = sectionFigures({ ...run, sections: { decode: parts } }).map(meritLine);
  return `${header(run, 'decode', parts)} ORT = onnxruntime-web ${ortConfig?.version ?? ''}, wasm backend, \`env.wasm.numThreads\` 1 in its own ${run.where.startsWith('Node') ? 'process' : 'page'}, ` +
    `graphOptimizationLevel 'all', proxy off, CPU arena and memory pattern on. GB/s: bytes of K and V the step reads (the cache's own; float32 for the engines that are handed K and V) ÷ time.\n\n` +
    `${lines.join('\n')}\n${bytesLines.join('\n')}\n\n${[...summary.map((s) => `- ${s}.`), ...meritLines].join('\n')}\n`;
}

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
  return `${header(run, 'variants', parts)} GFLOP/s over the scores each variant computes (4·B·H·D per visible score).\n\n${lines.join('\n')}\n\n` +
    `${merits.map(meritLine).join('\n')}\n`;
}
