// The decode section of a benchmark run (sections.mjs, decode-engines.mjs) as console report,
// figures of merit and the tables of docs/performance.md. Every step is shown as the bytes of K and
// V it reads ÷ its time (GB/s) and as a share of the wasm read bandwidth over as many bytes,
// measured in the same rounds (bandwidth.mjs); steps of several new positions also as GFLOP/s and
// a share of the multiply-add peak, also timed in their rounds (peak.mjs); ratios pair the
// engines round by round.
import { DTYPES, PEAK_NAME, readerName } from './decode-engines.mjs';
import { sectionLabel } from './sections.mjs';
import { findResult, fmt, isOrt, meritLine, pairedRatio, pct, printHosts, sectionHeader, threadsOf, x } from './section-common.mjs';

// below 1, two significant digits (a tiny step on a loaded machine is not 0.0 GB/s)
const cell = (v, digits = 2) => (v ? (v >= 1 ? v.toFixed(digits) : v.toPrecision(2)) : '—');
const dtypeOf = (name) => name.match(/ cache (float32|float16|bfloat16|int8)$/)?.[1];
const isReader = (name) => name.startsWith('wasm read');
const isProbe = (name) => isReader(name) || name === PEAK_NAME;
const cacheName = (dtype, threads = 1) => `attention-wasm ${threads}T cache ${dtype}`;
// The bytes of a shape's caches (sectionExtras.kvBytes) are the same for every seqQ.
export const bytesLabel = (shape) => sectionLabel({ ...shape, seqQ: 1 });
const flopsOf = ({ batch, heads, seqQ, seqK, headDim }) => 4 * batch * heads * seqQ * seqK * headDim;

// The peak probe's GFLOP/s in `result` (null where it did not run).
const peakOf = (part, result) => {
  const probe = result.engines[PEAK_NAME], flop = part.engines[PEAK_NAME]?.config?.flopsPerCall;
  return probe?.median && flop ? { probe, flop, gflops: flop / (probe.median * 1e6) } : null;
};

// One decode result → a row per engine (the probes give the bandwidth and peak columns, not rows):
// { name, r, threads, dtype, gbps, readGbps, share, vsF32, ortOverThis, gflops, peakShare }.
export function decodeRows(run, part, result) {
  const kv = run.sectionExtras?.kvBytes?.[bytesLabel(result.shape)];
  const f32 = result.engines[cacheName('float32')];
  const peak = peakOf(part, result);
  const ort = Object.entries(result.engines).filter(([n, r]) => isOrt(n) && r.median).sort(([, a], [, b]) => a.median - b.median)[0] ?? null;
  const rows = Object.entries(result.engines).filter(([name]) => !isProbe(name)).map(([name, r]) => {
    // a cache streams its own bytes; the others are handed float32 K and V
    const dtype = dtypeOf(name) ?? 'float32';
    const bytes = kv?.[dtype];
    const reader = result.engines[readerName(dtype)];
    const threads = threadsOf(name);
    const gflops = r.median ? flopsOf(result.shape) / (r.median * 1e6) : null;
    return {
      name, r, threads, dtype: dtypeOf(name),
      gbps: r.median && bytes ? bytes / (r.median * 1e6) : null,
      readGbps: reader?.median && bytes ? bytes / (reader.median * 1e6) : null,
      share: pairedRatio(reader, r),  // (bytes ÷ time) ÷ (bytes ÷ the probe's time)
      vsF32: pairedRatio(r, f32),
      ortOverThis: ort ? pairedRatio(ort[1], r) : null,
      // (flop ÷ time) ÷ (the probe's flop ÷ its time), paired by round; per thread for our 2T
      gflops, peakShare: peak && !isOrt(name) ? (pairedRatio(peak.probe, r) * flopsOf(result.shape)) / peak.flop / threads : null,
    };
  });
  return { rows, ort: ort && { name: ort[0], ...ort[1] }, peak };
}

// The step of one new position that a step of several is compared with: same caches, seqQ 1.
const oneRowResult = (run, shape) => findResult(run, 'decode', sectionLabel({ ...shape, seqQ: 1 }));
function vsOneRow(run, shape, name) {
  const one = oneRowResult(run, shape)?.result.engines[name];
  const r = findResult(run, 'decode', sectionLabel(shape))?.result.engines[name];
  return one?.median && r?.median ? r.median / one.median : null;
}

// ---- console ----

export function printDecode(run, out = console.log) {
  const kvBytes = run.sectionExtras?.kvBytes;
  for (const part of run.sections?.decode ?? []) {
    out(`\ndecode: ${part.label}; K/V GB/s = bytes of K and V the step reads (a cache's own bytes; float32 for the others) ÷ time; ` +
      'read GB/s = the wasm streaming read of as many bytes (scripts/bench/bandwidth.mjs) in the same rounds; share = K/V GB/s ÷ read GB/s');
    printHosts(part, out, (name, c) => c.how ?? '');
    for (const result of part.results) {
      const { rows, ort } = decodeRows(run, part, result);
      const several = result.shape.seqQ > 1;
      out(`${result.label}: load average ${result.loadavg.before?.join(' ')} → ${result.loadavg.after?.join(' ')}`);
      out(`  ${'engine'.padEnd(46)} ${'median ms'.padStart(10)} ${'[round spread]'.padStart(17)} ${'K/V GB/s'.padStart(9)} ${'read GB/s'.padStart(10)} ${'share'.padStart(6)} ` +
        `${'÷ f32 cache'.padStart(12)} ${'ORT ÷ this'.padStart(11)} ${'GFLOP/s'.padStart(8)} ${'% peak'.padStart(7)} ${(several ? '÷ seqQ 1' : '').padStart(9)} ${'max |Δ|'.padStart(8)}`);
      const line = (name, r, cells) => {
        if (r.error) return out(`  ${name.padEnd(46)} ${r.error}`);
        const spread = r.spread ? `[${fmt(r.spread[0])}–${fmt(r.spread[1])}]` : '';
        return out(`  ${name.padEnd(46)} ${fmt(r.median).padStart(10)} ${spread.padStart(17)} ${cells}`);
      };
      const n = (v, digits, width) => (v ? cell(v, digits) : '').padStart(width);
      for (const row of rows) {
        line(row.name, row.r, `${n(row.gbps, 1, 9)} ${n(row.readGbps, 1, 10)} ${(row.share ? pct(row.share) : '').padStart(6)} ${n(row.vsF32, 2, 12)} ` +
          `${n(row.ortOverThis, 2, 11)} ${n(row.gflops, 1, 8)} ${(row.peakShare ? pct(row.peakShare) : '').padStart(7)} ` +
          `${n(several && row.dtype ? vsOneRow(run, result.shape, row.name) : null, 2, 9)} ${row.r.maxDiff !== undefined ? row.r.maxDiff.toExponential(0).padStart(8) : ''}`);
      }
      const kv = kvBytes?.[bytesLabel(result.shape)];
      for (const [name, r] of Object.entries(result.engines).filter(([nm]) => isReader(nm))) {
        const dtype = DTYPES.find((d) => readerName(d) === name);
        line(name, r, `${''.padStart(9)} ${n(kv && r.median ? kv[dtype] / (r.median * 1e6) : null, 1, 10)}`);
      }
      const peak = peakOf(part, result);
      if (peak) line(PEAK_NAME, peak.probe, `${''.padStart(9)} ${''.padStart(10)} ${''.padStart(6)} ${''.padStart(12)} ${''.padStart(11)} ${n(peak.gflops, 1, 8)}`);
      if (ort) out(`  fastest ORT graph: ${ort.name}`);
    }
  }
  if (kvBytes) {
    out('\nKV cache bytes per token per layer (cache.bytes ÷ maxSeq, measured):');
    for (const [label, b] of Object.entries(kvBytes)) {
      out(`  ${label.padEnd(34)} ${DTYPES.map((d) => `${d} ${(b[d] / b.maxSeq).toLocaleString('en-US')} (${(b[d] / b.float32).toFixed(3)}×)`).join(', ')}`);
    }
  }
}

// ---- figures of merit ----

// `label dtype figure, …; label …` over the results of `seqQ` (one thread's caches).
function perDtype(run, seqQ, figure) {
  const out = [];
  for (const part of run.sections?.decode ?? []) {
    for (const result of part.results.filter((r) => r.shape.seqQ === seqQ)) {
      const { rows } = decodeRows(run, part, result);
      const cells = DTYPES.map((d) => [d, rows.find((row) => row.name === cacheName(d))]).filter(([, row]) => row);
      out.push(`${result.label}: ${cells.map(([d, row]) => `${d} ${figure(row, result)}`).join(', ')}`);
    }
  }
  return out.join('; ') || '—';
}
const oneRowResults = (run) => (run.sections?.decode ?? []).flatMap((part) => part.results.filter((r) => r.shape.seqQ === 1).map((result) => ({ part, result })));

export function decodeFigures(run) {
  const f = [];
  const kvBytes = run.sectionExtras?.kvBytes;
  if (run.sections?.decode) {
    const ones = oneRowResults(run).map(({ part, result }) => ({ result, d: decodeRows(run, part, result) }));
    const f32Row = (d) => d.rows.find((row) => row.name === cacheName('float32'));
    f.push({ what: 'onnxruntime-web (its fastest graph) ÷ our float32 cache, 1 thread, one new position', goal: '≥ 3.5×',
      figure: ones.map(({ result, d }) => `${result.label} ${x(f32Row(d)?.ortOverThis)}`).join(', ') || '—' });
    f.push({ what: "a step's K/V bytes ÷ time as a share of the wasm read bandwidth over as many bytes, 1 thread, one new position", goal: '≥ 70 %',
      figure: perDtype(run, 1, (row) => pct(row.share)) });
    const speedUps = { float16: 1.5, bfloat16: 1.7, int8: 2.5 };
    for (const [dtype, goal] of Object.entries(speedUps)) {
      f.push({ what: `float32 cache ÷ ${dtype} cache (speed-up), 1 thread, one new position`, goal: `≥ ${goal}× (kvHeads = heads)`,
        figure: ones.map(({ result, d }) => { const row = d.rows.find((w) => w.name === cacheName(dtype)); return `${result.label} ${x(row?.vsF32 ? 1 / row.vsF32 : null)}`; }).join(', ') || '—' });
    }
    f.push({ what: 'time of a step of 4 new positions ÷ a step of one, over the same cache, 1 thread', goal: '≤ 1.4×',
      figure: perDtype(run, 4, (row, result) => x(vsOneRow(run, result.shape, row.name))) });
    f.push({ what: 'a step of 8 new positions: GFLOP/s (4·B·H·Sq·Sk·D) as a share of the multiply-add peak of our build, 1 thread', goal: '≥ 75 %',
      figure: perDtype(run, 8, (row) => pct(row.peakShare)) });
    f.push({ what: 'our cache, 2 threads ÷ 1 thread (speed-up), one new position', goal: '≥ 1.8×',
      figure: ones.map(({ result, d }) => `${result.label}: ${DTYPES.map((dtype) => {
        const two = d.rows.find((row) => row.name === cacheName(dtype, 2));
        const one = d.rows.find((row) => row.name === cacheName(dtype));
        const s = two && one ? pairedRatio(one.r, two.r) : null;
        return `${dtype} ${x(s)}`;
      }).join(', ')}`).join('; ') || '—' });
  }
  if (kvBytes) {
    f.push({ what: 'int8 cache bytes per token ÷ float32', goal: '≤ 0.27×', figure: Object.entries(kvBytes).map(([l, b]) => `${l} ${(b.int8 / b.float32).toFixed(3)}×`).join(', ') });
  }
  return f;
}

// ---- docs/performance.md ----

const engineLabel = (name) => name.replace(/^attention-wasm 1T /, 'ours: ').replace(/^attention-wasm (\d+)T /, 'ours $1T: ').replace(/^onnxruntime-web (\S+) 1T$/, 'ORT $1');
const shapeCell = (label) => label.replace(/,/g, ', ');

export function decodeBlock(run) {
  const parts = run.sections?.decode ?? [];
  const kvBytes = run.sectionExtras?.kvBytes;
  const all = parts.flatMap((part) => part.results.map((result) => ({ part, result, d: decodeRows(run, part, result) })));
  if (!all.length) return '';
  const ortConfig = parts.flatMap((p) => Object.entries(p.engines)).find(([n]) => isOrt(n))?.[1]?.config;
  const oursConfig = Object.entries(parts[0].engines).find(([n]) => dtypeOf(n))?.[1]?.config;
  const peaks = all.map(({ d }) => d.peak?.gflops).filter(Boolean);
  const peakKind = `${oursConfig?.simd === 'relaxed-simd' ? 'relaxed-SIMD FMA' : 'SIMD128 mul + add'} (\`scripts/bench/peak.mjs\`, one thread)` +
    (peaks.length ? `, ${Math.min(...peaks).toFixed(0)}–${Math.max(...peaks).toFixed(0)} GFLOP/s` : '');

  const one = all.filter(({ result }) => result.shape.seqQ === 1);
  const oneLines = [
    '| shape (B, H, Sq, Sk, D) | engine | ms | K/V GB/s | wasm read GB/s, same bytes | share of it | time ÷ float32 cache | ORT\'s fastest ÷ this |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const { result, d } of one) {
    for (const row of d.rows.filter((w) => w.r.median)) {
      oneLines.push(`| ${shapeCell(result.label)} | ${engineLabel(row.name)} | ${fmt(row.r.median)} | ${cell(row.gbps, 1)} | ${cell(row.readGbps, 1)} | ${row.share ? pct(row.share) : '—'} | ${cell(row.vsF32)} | ${cell(row.ortOverThis)} |`);
    }
  }
  const several = all.filter(({ result }) => result.shape.seqQ > 1);
  const severalLines = [
    '| shape (B, H, Sq, Sk, D) | cache, 1 thread | ms | time ÷ seqQ 1 | GFLOP/s | share of the peak | K/V GB/s | wasm read GB/s, same bytes | share of it |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const { result, d } of several) {
    for (const row of d.rows.filter((w) => w.r.median && w.dtype)) {
      severalLines.push(`| ${shapeCell(result.label)} | ${row.dtype} | ${fmt(row.r.median)} | ${cell(vsOneRow(run, result.shape, row.name))} | ${cell(row.gflops, 1)} | ${row.peakShare ? pct(row.peakShare) : '—'} | ` +
        `${cell(row.gbps, 1)} | ${cell(row.readGbps, 1)} | ${row.share ? pct(row.share) : '—'} |`);
    }
  }
  const bytesLines = kvBytes ? [
    `| KV cache, bytes per token per layer | ${DTYPES.join(' | ')} |`, `|---|${DTYPES.map(() => '---').join('|')}|`,
    ...Object.entries(kvBytes).map(([l, b]) => `| ${l.replace(/^\(1,\d+,1,\d+,(\d+)\) kvHeads (\d+)$/, (_, d, kv) => `${kv} kv head${kv === '1' ? '' : 's'} × ${d} dims`)} | ${DTYPES.map((dt) => `${(b[dt] / b.maxSeq).toLocaleString('en-US')}${dt === 'float32' ? '' : ` (${(b[dt] / b.float32).toFixed(3)}×)`}`).join(' | ')} |`),
  ] : [];
  const fastest = one.map(({ result, d }) => `${shapeCell(result.label)} ${d.ort?.name.replace(/^onnxruntime-web (\S+) 1T$/, '$1') ?? '—'}`).join(', ');
  const tables = [oneLines, ...(several.length ? [severalLines] : []), ...(bytesLines.length ? [bytesLines] : [])].map((t) => t.join('\n'));
  return `${sectionHeader(run, parts, '1 thread unless the engine says 2T')} ` +
    `ORT = onnxruntime-web ${ortConfig?.version ?? ''}, wasm backend, \`env.wasm.numThreads\` 1 in its own ${run.where.startsWith('Node') ? 'process' : 'page'}, ` +
    `graphOptimizationLevel 'all', proxy off, CPU arena and memory pattern on; its fastest graph: ${fastest || '—'}. ` +
    'K/V GB/s: bytes of K and V the step reads (the cache\'s own; float32 for the engines that are handed K and V) ÷ time; ' +
    'wasm read GB/s: a SIMD streaming read of as many bytes (`scripts/bench/bandwidth.mjs`, one thread), timed in the same rounds; share = K/V GB/s ÷ it. ' +
    `GFLOP/s: 4·B·H·Sq·Sk·D ÷ time; share of the peak: of the multiply-add peak of our build, ${peakKind}, timed in the same rounds as the steps of several positions.\n\n` +
    `${tables.join('\n\n')}\n\n${decodeFigures({ ...run, sections: { decode: parts } }).map(meritLine).join('\n')}\n`;
}
