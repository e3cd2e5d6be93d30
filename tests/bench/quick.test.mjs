// `node scripts/bench.mjs --quick` (Node) and `--browser --quick` (headless Chromium) run end to
// end — every engine on one shape, then the prefill, decode, variants, threads and model sections on tiny shapes; in
// Firefox and WebKitGTK the main table — and
// write their JSON: each engine in its own process or page with its own thread count, results
// that agree with ours, the configuration and the load recorded; the console report shows the
// medians the JSON holds, and the tables written to docs/performance.md parse, with a figure in
// every cell. Times are never asserted here: speed lives in the benchmark itself.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { performanceBlock } from '../../scripts/bench/report.mjs';
import { peakName, readName, stepName } from '../../scripts/bench/model-engines.mjs';
import { decodeBlock, modelBlock, prefillBlock, threadsBlock, variantsBlock } from '../../scripts/bench/section-report.mjs';
import { median } from '../../web/bench/schedule.mjs';

const BENCH = fileURLToPath(new URL('../../scripts/bench.mjs', import.meta.url));

async function quickRun(...flags) {
  const dir = mkdtempSync(join(tmpdir(), 'attention-bench-'));
  try {
    const json = join(dir, 'bench.json');
    const { stdout } = await promisify(execFile)(process.execPath, [BENCH, '--quick', ...flags, '--json', json],
      { encoding: 'utf8', timeout: 290000 });
    return { stdout, run: JSON.parse(readFileSync(json, 'utf8')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const number = (text) => Number(text.replace(/,/g, ''));

// The markdown tables of `markdown`, each as rows of cells, header first.
function parseTables(markdown) {
  const tables = [];
  let previous = '';
  for (const line of markdown.split('\n')) {
    if (line.startsWith('|') && !previous.startsWith('|')) tables.push([]);
    if (line.startsWith('|')) tables.at(-1).push(line);
    previous = line;
  }
  return tables.map(parseTable);
}

function parseTable(lines) {
  assert.ok(lines.length >= 3, `a table with a header, a rule and rows:\n${lines.join('\n')}`);
  assert.match(lines[1], /^\|(---\|)+$/, 'the second line is the header rule');
  const rows = lines.filter((_, i) => i !== 1).map((l) => l.slice(1, -1).split(' | ').map((c) => c.trim()));
  for (const row of rows) assert.equal(row.length, rows[0].length, `every row has ${rows[0].length} cells: ${row.join(' | ')}`);
  return rows;
}

// The console report's row for `name` on `shape` shows the median the JSON holds (to its rounding).
function checkConsoleMedian(stdout, shape, name, median) {
  const line = stdout.match(new RegExp(`^${escape(shape)}\\s+${escape(name)}\\s+([\\d.,]+)\\s`, 'm'));
  assert.ok(line, `the console report has a row for ${name} on ${shape}`);
  assert.ok(Math.abs(number(line[1]) - median) <= 0.01 * median + 0.005, `${name}: console ${line[1]} ms, JSON ${median} ms`);
}

// The lines of the console report about one result of a section (its label, then indented rows).
function sectionReport(stdout, label) {
  const start = stdout.indexOf(`\n${label}: load average`);
  assert.ok(start >= 0, `the console report has ${label}`);
  const lines = stdout.slice(start + 1).split('\n');
  const end = lines.findIndex((l, i) => i > 0 && !l.startsWith(' '));
  return lines.slice(1, end).join('\n');
}

// The main table: every engine timed, agreeing with ours, shown in the console report and in
// docs/performance.md's table (a time in each of our and ORT's columns).
function checkTable({ stdout, run }, engines) {
  assert.equal(run.results.length, 1);
  const row = run.results[0];
  for (const name of engines) {
    const r = row.engines[name];
    assert.ok(r && r.median > 0, `${name} was timed: ${JSON.stringify(r)}`);
    assert.ok(r.firstCall > 0, `${name}'s first call was timed`);
    assert.ok(r.maxDiff < 1e-5, `${name} computes what ours computes (max |Δ| ${r.maxDiff})`);
    checkConsoleMedian(stdout, row.shape, name, r.median);
  }
  // The table for docs/performance.md: one row per shape, a time in each of our and ORT's columns.
  const [[header, ...rows]] = parseTables(performanceBlock(run));
  assert.equal(rows.length, run.results.length);
  header.forEach((column, i) => {
    if (/^(attention-wasm|ORT) \d thread/.test(column)) assert.match(rows[0][i], /^[\d.,]+ ms$/, `${column}: ${rows[0][i]}`);
    if (/^ORT ÷ ours/.test(column)) assert.match(rows[0][i], /^[\d.]+×$/, `${column}: ${rows[0][i]}`);
  });
  assert.ok(run.peak.simd128 > 0 && Number.isFinite(run.peak.simd128), `the SIMD128 peak probe ran: ${run.peak.simd128}`);
  assert.equal(run.loadavg.start.length, 3, 'the machine load is recorded');
  assert.equal(row.loadavg.after.length, 3);
}

function checkRun({ stdout, run }, engines, prefillEngines) {
  checkTable({ stdout, run }, engines);
  // onnxruntime-web's thread count is per process/page: each host got its own.
  assert.equal(run.engines['onnxruntime-web ops 1T'].config.numThreads, 1);
  assert.equal(run.engines['onnxruntime-web MHA 2T'].config.numThreads, 2);
  assert.notEqual(run.engines['onnxruntime-web ops 1T'].host, run.engines['onnxruntime-web ops 2T'].host);
  assert.equal(run.engines['attention-wasm 2T'].config.threads, 2);
  checkPrefill({ stdout, run }, prefillEngines);
  checkSections({ stdout, run });
}

const PREFILL_PROBES = ['wasm mul+add peak (SIMD128)', 'wasm FMA peak (relaxed SIMD)'];
const PREFILL_ORT = ['onnxruntime-web ops 1T', 'onnxruntime-web MHA 1T', 'onnxruntime-web ops 2T', 'onnxruntime-web MHA 2T'];

// The prefill section: our 1-thread builds beside their peak probes, ours on 2 threads and ORT,
// timed and agreeing with ours; its table a time and a share of the peak for each of our builds.
function checkPrefill({ stdout, run }, ours) {
  const [part] = run.sections.prefill;
  assert.deepEqual(part.results.map((r) => r.label), ['(2,2,40,40,16)', '(1,2,70,70,16) causal']);
  for (const result of part.results) {
    const report = sectionReport(stdout, result.label);
    assert.deepEqual(Object.keys(result.engines).sort(), [...ours, ...PREFILL_ORT, ...PREFILL_PROBES].sort(), `${result.label}: the engines`);
    for (const [name, r] of Object.entries(result.engines)) {
      assert.ok(r.median > 0, `${result.label}: ${name} was timed: ${JSON.stringify(r)}`);
      checkConsoleMedian(report, ' ', name, r.median);
      if (PREFILL_PROBES.includes(name)) assert.equal(r.maxDiff, undefined, `${name}: a probe has no output to compare`);
      else assert.ok(r.maxDiff < 1e-5, `${result.label}: ${name} computes what ours computes (max |Δ| ${r.maxDiff})`);
    }
  }
  const [[header, ...rows]] = parseTables(prefillBlock(run));
  assert.deepEqual(header, ['model', 'shape (B, H, Sq, Sk, D)', '1 thread, SIMD128', 'share of the mul + add peak', '1 thread, relaxed SIMD',
    'share of the FMA peak', 'ORT 1 thread', '2 threads', 'ORT 2 threads', 'ORT ÷ ours, 2 threads']);
  assert.equal(rows.length, part.results.length);
  for (const row of rows) {
    for (const i of [2, 4, 6, 7, 8]) assert.match(row[i], /^[\d.,]+ ms$/, `${header[i]}: ${row.join(' | ')}`);
    for (const i of [3, 5]) checkShare(row[i], `${header[i]}: ${row.join(' | ')}`);
    assert.match(row[9], /^[\d.]+×$/, row.join(' | '));
  }
  const merit = (start) => run.figuresOfMerit.find((f) => f.what.startsWith(start))?.figure ?? '';
  const shares = String.raw`\(\S+\)( causal)? [\d.]+ %(, (?=\()|;|$)`;
  assert.match(merit('share of the multiply-add peak of its own build'), new RegExp(`^SIMD128: (${shares})+ relaxed SIMD: (${shares})+$`));
  assert.match(merit('onnxruntime-web 2 threads ÷ ours 2 threads, every prefill shape'), /^(\(\S+\)( causal)? [\d.]+×(, |$))+$/);
}

// Largest |Δ| from our float32 cache each decode engine may show on the quick shapes (the 2-thread
// caches by the same bound as the 1-thread ones).
const DECODE_TOLERANCE = { 'cache float32': 1e-6, 'cache float16': 2e-3, 'cache bfloat16': 1e-2, 'cache int8': 2e-2, 'attention() copying K/V': 1e-5, ops: 1e-5, MHA: 1e-5, GQA: 1e-5 };
const DTYPES = ['float32', 'float16', 'bfloat16', 'int8'];
const READERS = ["wasm read, float32 cache's bytes", "wasm read, 16-bit cache's bytes", "wasm read, int8 cache's bytes"];
const PEAK = 'wasm multiply-add peak';
const percent = (cell) => Number(cell.match(/^([\d.]+) %$/)?.[1]);
// A share of a limit (the read bandwidth, the multiply-add peak) the same run measured: a figure
// above 0 and, with room for the noise of two interleaved timings, not past 1.5 of it.
const checkShare = (cell, what) => assert.ok(percent(cell) > 0 && percent(cell) <= 150, `${what}: ${cell}`);

function checkDecode({ stdout, run }) {
  const [one, several] = run.sections.decode;
  assert.deepEqual(one.results.map((r) => [r.shape.kvHeads, r.shape.seqQ]), [[4, 1], [2, 1], [1, 1]], 'one new position: kvHeads = heads, grouped, one kv head');
  assert.deepEqual(several.results.map((r) => [r.shape.kvHeads, r.shape.seqQ]), [[2, 4], [1, 8]], 'several new positions over the same caches');
  for (const result of [...one.results, ...several.results]) {
    const report = sectionReport(stdout, result.label);
    const engines = Object.entries(result.engines);
    const expected = result.shape.seqQ === 1 ? [...DTYPES.flatMap((d) => [`attention-wasm 1T cache ${d}`, `attention-wasm 2T cache ${d}`]), 'attention-wasm 1T attention() copying K/V', 'onnxruntime-web ops 1T', 'onnxruntime-web MHA 1T', 'onnxruntime-web GQA 1T']
      : [...DTYPES.map((d) => `attention-wasm 1T cache ${d}`), PEAK];
    assert.deepEqual(engines.map(([n]) => n).sort(), [...expected, ...READERS].sort(), `${result.label}: the engines`);
    for (const [name, r] of engines) {
      if (name === 'onnxruntime-web MHA 1T' && result.shape.kvHeads !== result.shape.heads) {
        assert.match(r.error, /not applicable/, 'MultiHeadAttention has no grouped K/V');
        continue;
      }
      assert.ok(r.median > 0, `${result.label}: ${name} was timed: ${JSON.stringify(r)}`);
      checkConsoleMedian(report, ' ', name, r.median);
      if (READERS.includes(name) || name === PEAK) {
        assert.equal(r.maxDiff, undefined, `${name}: a probe has no output to compare`);
        continue;
      }
      const [, tolerance] = Object.entries(DECODE_TOLERANCE).find(([pattern]) => name.endsWith(` ${pattern}`) || name.includes(` ${pattern} `));
      assert.ok(r.maxDiff <= tolerance, `${result.label}: ${name} agrees with the float32 cache (max |Δ| ${r.maxDiff} > ${tolerance})`);
    }
    assert.equal(result.engines['attention-wasm 2T cache float32']?.maxDiff ?? 0, 0, `${result.label}: 2 threads give the 1-thread bits`);
  }
  for (const [label, b] of Object.entries(run.sectionExtras.kvBytes)) {
    assert.ok(b.int8 < b.float16 && b.float16 === b.bfloat16 && b.float16 < b.float32, `${label}: cache bytes shrink with the dtype`);
  }
  assert.deepEqual(Object.keys(run.sectionExtras.kvBytes), one.results.map((r) => r.label), 'one entry per shape of cache');

  // docs/performance.md's decode tables. One new position: a time, GB/s, the read bandwidth of as
  // many bytes and the share of it, the ratios, for every engine that ran (the float32 cache the
  // unit of the ratios).
  const [[oneHeader, ...oneRows], [severalHeader, ...severalRows], [, ...bytesRows]] = parseTables(decodeBlock(run));
  assert.deepEqual(oneHeader, ['shape (B, H, Sq, Sk, D)', 'engine', 'ms', 'K/V GB/s', 'wasm read GB/s, same bytes', 'share of it', 'time ÷ float32 cache', "ORT's fastest ÷ this"]);
  assert.equal(oneRows.length, one.results.reduce((n, r) => n + Object.values(r.engines).filter((e) => e.median).length - READERS.length, 0));
  for (const row of oneRows) {
    for (const i of [2, 3, 4, 6, 7]) assert.ok(number(row[i]) > 0 && Number.isFinite(number(row[i])), `${oneHeader[i]}: ${row.join(' | ')}`);
    checkShare(row[5], `share of the read bandwidth: ${row.join(' | ')}`);
  }
  for (const result of one.results) {
    const f32 = oneRows.find((row) => row[0] === result.label.replace(/,/g, ', ') && row[1] === 'ours: cache float32');
    assert.equal(f32[6], '1.00', `${result.label}: the float32 cache is the unit`);
  }
  assert.ok(oneRows.some((row) => row[1] === 'ours 2T: cache bfloat16'), 'the 2-thread caches have rows');
  // Several new positions: every cache, its time against one new position, GFLOP/s and the share of the peak.
  assert.deepEqual(severalHeader, ['shape (B, H, Sq, Sk, D)', 'cache, 1 thread', 'ms', 'time ÷ seqQ 1', 'GFLOP/s', 'share of the peak', 'K/V GB/s', 'wasm read GB/s, same bytes', 'share of it']);
  assert.equal(severalRows.length, several.results.length * DTYPES.length);
  for (const row of severalRows) {
    for (const i of [2, 3, 4, 6, 7]) assert.ok(number(row[i]) > 0 && Number.isFinite(number(row[i])), `${severalHeader[i]}: ${row.join(' | ')}`);
    checkShare(row[5], `share of the peak: ${row.join(' | ')}`);
    checkShare(row[8], `share of the read bandwidth: ${row.join(' | ')}`);
  }
  // The bytes table: one row per shape of cache, a byte count for each dtype, float32's the largest.
  assert.equal(bytesRows.length, one.results.length);
  for (const row of bytesRows) {
    const [f32Bytes, f16Bytes, bf16Bytes, i8Bytes] = row.slice(1).map((c) => number(c.split(' ')[0]));
    assert.ok(i8Bytes < f16Bytes && f16Bytes === bf16Bytes && f16Bytes < f32Bytes, row.join(' | '));
  }
  // The decode figures of merit: one figure per shape (and per dtype where it says so).
  const merit = (start) => run.figuresOfMerit.find((f) => f.what.startsWith(start))?.figure ?? '';
  assert.match(merit('onnxruntime-web (its fastest graph) ÷ our float32 cache'), /^(\(\S+\) kvHeads \d+ [\d.]+×(, |$)){3}$/);
  const perDtype = (unit, n) => new RegExp(`^(\\(\\S+\\) kvHeads \\d+: (${DTYPES.map((d) => `${d} [\\d.]+${unit}`).join(', ')})(; |$)){${n}}$`);
  assert.match(merit("a step's K/V bytes ÷ time as a share"), perDtype(' %', 3));
  assert.match(merit('time of a step of 4 new positions'), perDtype('×', 1));
  assert.match(merit('a step of 8 new positions'), perDtype(' %', 1));
  assert.match(merit('our cache, 2 threads ÷ 1 thread'), perDtype('×', 3));
  for (const dtype of ['float16', 'bfloat16', 'int8']) assert.match(merit(`float32 cache ÷ ${dtype} cache`), /^(\(\S+\) kvHeads \d+ [\d.]+×(, |$)){3}$/);
}

// The model section on its tiny model: a token step of every cache dtype the library has, seqQ 1
// and 4, on 1 and 2 threads (the same bits), with the read and peak probes on 1 and 2 threads
// timed in its rounds; each in the console report, the table and the figures of merit.
function checkModel({ stdout, run }) {
  const [part] = run.sections.model;
  const dtypes = part.engines[stepName(1)].config.dtypes;
  assert.deepEqual(dtypes, [...DTYPES, 'int4'], 'the dtypes the library has, float32 first');
  assert.deepEqual(part.results.map((r) => [r.shape.model.dtype, r.shape.seqQ]), dtypes.flatMap((d) => [[d, 1], [d, 4]]));
  const probes = [1, 2].flatMap((n) => [readName(n), peakName(n)]);
  for (const result of part.results) {
    const report = sectionReport(stdout, result.label);
    assert.deepEqual(Object.keys(result.engines).sort(), [stepName(1), stepName(2), ...probes].sort(), `${result.label}: the engines`);
    for (const [name, r] of Object.entries(result.engines)) {
      assert.ok(r.median > 0 && r.rounds.length === part.timing.rounds, `${result.label}: ${name} was timed every round: ${JSON.stringify(r)}`);
      checkConsoleMedian(report, ' ', name, r.median);
    }
    assert.equal(result.engines[stepName(2)].maxDiff, 0, `${result.label}: 2 threads give the 1-thread bits`);
    const { tokenBytes, copies, workingSetBytes } = result.engines[stepName(1)].about;
    assert.ok(tokenBytes > 0 && copies * tokenBytes === workingSetBytes && workingSetBytes >= 2 ** 22 && (copies - 1) * tokenBytes < 2 ** 22,
      `${result.label}: copies of the model's caches up to the working set: ${JSON.stringify(result.engines[stepName(1)].about)}`);
    for (const n of [1, 2]) assert.equal(result.engines[readName(n)].about.bytes, 2 ** 22, `${readName(n)} reads 4 MiB`);
  }
  // docs/performance.md's table: a row per result and thread count, a figure in every cell.
  const [[header, ...rows]] = parseTables(modelBlock(run));
  assert.deepEqual(header, ['model (32 query heads, 128 dims)', 'new positions', 'cache', 'threads', 'ms per token', 'GB/s', 'roofline ms (bound)',
    'share of it', 'float32 ÷ this', '2 threads ÷ 1']);
  assert.equal(rows.length, 2 * part.results.length);
  for (const row of rows) {
    for (const i of [4, 5]) assert.ok(number(row[i]) > 0, `${header[i]}: ${row.join(' | ')}`);
    assert.match(row[6], /^[\d.,]+ \((memory|compute)\)$/, row.join(' | '));
    assert.ok(percent(row[7]) > 0, row.join(' | '));
    assert.match(row[8], /^[\d.]+×$/, row.join(' | '));
    if (row[3] === '2') assert.match(row[9], /^[\d.]+×$/, row.join(' | '));
  }
  const merit = (start) => run.figuresOfMerit.find((f) => f.what.startsWith(start))?.figure ?? '';
  assert.match(merit('a token step over every layer\'s cache'), /^[\d.]+ %–[\d.]+ %/);
  assert.match(merit('a token step on 2 threads ÷ 1 thread'), /^(kvHeads 2 × 2 layers × 256 positions seqQ [14] \S+ [\d.]+×(, |$))+$/);
  for (const dtype of dtypes.slice(1)) assert.match(merit(`a token step: float32 cache ÷ ${dtype} cache`), /seqQ 1 [\d.]+×, .* seqQ 4 [\d.]+×$/);
}

// The threads section: every small call on 1 and 2 threads and on the threaded build on 1 thread,
// each build in two instances (their engines' names end ' (instance 1)' and ' (instance 2)'); the
// console's rows show a build's time within its instances' rounds, both ratios and how far the
// instances were apart; the table one row per call with both times and both ratios; the figures
// with their goals.
function checkThreads({ stdout, run }) {
  const parts = run.sections.threads;
  assert.deepEqual(parts.map((p) => p.results.length), [2, 2], 'two decode steps and two prefills');
  let pairs = 0;
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const part of parts) {
    for (const result of part.results) {
      const names = Object.keys(result.engines);
      assert.ok(names.length >= 6 && names.length % 6 === 0, `${result.label}: 1T, 2T and 1T-mt engines in two instances (${names})`);
      for (const name of names.filter((n) => / 1T .* \(instance 1\)$/.test(n))) {
        const twinNames = [' 1T ', ' 2T ', ' 1T-mt '].map((t) => [1, 2].map((i) => name.replace(' 1T ', t).replace('(instance 1)', `(instance ${i})`)));
        const twins = twinNames.map((pair) => pair.map((n) => result.engines[n]));
        for (const e of twins.flat()) assert.ok(e?.median > 0, `${result.label}: ${name}, its 2-thread and its threaded 1-thread twins were timed in both instances`);
        for (const [a, b] of twinNames) assert.notEqual(part.engines[a].host, part.engines[b].host, `${a} and ${b}: instances in hosts of their own`);
        const call = name.replace('attention-wasm 1T ', '').replace(' (instance 1)', '');
        const row = stdout.match(new RegExp(`^\\s+${escape(result.label)}\\s+${escape(call)}\\s+([\\d.,]+)\\s+([\\d.,]+)\\s+[\\d.]+\\s+[\\d.]+\\s+(\\d+) %, (\\d+) %, (\\d+) %$`, 'm'));
        assert.ok(row, `the console report has ${call} on ${result.label}, with how far its instances were apart`);
        // A build's time: the median over rounds of its instances' mean (µs in the report, ms in the JSON).
        twins.slice(0, 2).forEach((instances, k) => {
          const want = 1000 * median(instances[0].rounds.map((_, r) => mean(instances.map((e) => e.rounds[r]))));
          assert.ok(Math.abs(number(row[1 + k]) - want) <= 0.005 * want + 0.005, `${call}: console ${row[1 + k]} µs, the instances' mean per round ${want} µs`);
        });
        twins.forEach((instances, k) => {
          const medians = instances.map((e) => e.median);
          const apart = Math.round((100 * (Math.max(...medians) - Math.min(...medians))) / mean(medians));
          assert.ok(Math.abs(Number(row[3 + k]) - apart) <= 1, `${call}: instances apart ${row[3 + k]} %, from the JSON ${apart} %`);
        });
        pairs++;
      }
    }
  }
  const [[header, ...rows]] = parseTables(threadsBlock(run));
  assert.deepEqual(header, ['shape (B, H, Sq, Sk, D)', 'call', '1 thread, µs', '2 threads, µs', '2 threads ÷ 1', '2 threads ÷ 1 on the threaded build']);
  assert.equal(rows.length, pairs);
  for (const row of rows) assert.match(row.slice(2).join(' '), /^[\d.,]+ [\d.,]+ [\d.]+ [\d.]+$/, row.join(' | '));
  for (const end of ['on 2 threads ÷ on 1', '(the pool\'s choice alone)']) {
    const figure = run.figuresOfMerit.find((f) => f.what.includes('small calls') && f.what.endsWith(end));
    assert.match(figure?.figure ?? '', /^[\d.]+× \(.+, \(1,8,\d+,\d+,64\)( kvHeads 2)?\)$/, JSON.stringify(figure));
  }
}

function checkSections({ stdout, run }) {
  checkDecode({ stdout, run });
  checkThreads({ stdout, run });
  checkModel({ stdout, run });
  const variants = run.sections.variants.flatMap((p) => p.results);
  assert.equal(variants.length, 2);
  for (const result of variants) {
    for (const [name, r] of Object.entries(result.engines)) assert.ok(r.median > 0, `${result.label}: ${name} was timed`);
  }
  assert.deepEqual(Object.keys(variants[0].engines).map((n) => n.replace(/^attention-wasm 1T /, '')),
    ['plain', 'window [448, 448]', "ALiBi (BLOOM's slopes)", 'sinks', 'softcap 50 (Gemma 2)']);
  for (const result of variants) {
    for (const [name, r] of Object.entries(result.engines)) checkConsoleMedian(sectionReport(stdout, result.label), ' ', name, r.median);
  }
  // The figures of merit that the quick shapes measure come from this run, each with its goal.
  const merit = (start) => run.figuresOfMerit.find((f) => f.what.startsWith(start));
  for (const start of ['onnxruntime-web 1 thread ÷ ours', 'onnxruntime-web 2 threads ÷ ours', 'ours 2 threads ÷ ours 1 thread', 'int8 cache bytes per token']) {
    assert.match(merit(start)?.figure ?? '', /^(\(\S+\)( kvHeads \d+)? [\d.]+×(, |$))+$/, `${start}: ${merit(start)?.figure}`);
  }
  for (const f of run.figuresOfMerit) assert.match(f.goal, /^[≤≥] [\d.]+/, `${f.what} has a goal`);
  // The variants table: one row per variant and shape, the first row of each shape its unit.
  const [[, ...variantRows]] = parseTables(variantsBlock(run));
  assert.equal(variantRows.length, variants.reduce((n, r) => n + Object.keys(r.engines).length, 0));
  for (const row of variantRows) assert.match(row.slice(2).join(' '), /^[\d.,]+ [\d.]+ [\d.]+$/, row.join(' | '));
}

const ENGINES = ['attention-wasm 1T', 'attention-wasm 2T', 'onnxruntime-web ops 1T', 'onnxruntime-web MHA 1T',
  'onnxruntime-web ops 2T', 'onnxruntime-web MHA 2T', 'tfjs-wasm 1T', 'plain JS'];

test('the quick benchmark in Node: every engine in its own process, timed, results agreeing', async () => {
  const result = await quickRun();
  checkRun(result, [...ENGINES, 'attention-wasm 1T relaxed'], ['attention-wasm 1T', 'attention-wasm 1T relaxed', 'attention-wasm 2T']);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'simd128', 'Node without the flag: SIMD128');
  assert.equal(result.run.engines['attention-wasm 1T relaxed'].config.simd, 'relaxed-simd', 'its own process, with the flag');
  const { extras } = result.run;
  assert.ok(extras.backward.backwardMs > 0 && extras.backward.forwardMs > 0, 'the backward pass was timed');
  assert.ok(extras.coldStart.firstCallMs > 0 && extras.coldStart.createMs > 0, 'load and first call were timed');
  assert.ok(extras.wasmSizes['attn.wasm'].gzip > 0, 'the .wasm sizes were measured');
});

test('the quick benchmark in Chromium: a 1-thread page and a cross-origin-isolated 2-thread page', async () => {
  const result = await quickRun('--browser');
  checkRun(result, [...ENGINES, 'attention-wasm 1T simd128', 'attention-wasm 2T simd128'], ['attention-wasm 1T', 'attention-wasm 1T simd128', 'attention-wasm 2T']);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'relaxed-simd', "Chromium: 'auto' picks relaxed SIMD");
  assert.equal(result.run.engines['attention-wasm 2T simd128'].config.simd, 'simd128');
  assert.match(result.run.where, /^Chromium \d+/);
  assert.match(result.run.engines['attention-wasm 1T'].host, /not isolated/);
  assert.match(result.run.engines['attention-wasm 2T'].host, /cross-origin isolated/);
});

// Firefox and WebKitGTK: the main table (the sections run the same pages as in Chromium).
test('the quick benchmark in Firefox: the same engines and pages as in Chromium', async () => {
  const result = await quickRun('--browser', 'firefox', '--section', 'shapes');
  checkTable(result, [...ENGINES, 'attention-wasm 1T simd128', 'attention-wasm 2T simd128']);
  assert.match(result.run.where, /^Firefox \d+/);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'relaxed-simd', "Firefox: 'auto' picks relaxed SIMD");
  assert.equal(result.run.engines['attention-wasm 2T'].config.threads, 2);
  assert.ok(result.run.peak.relaxed > 0, 'the FMA peak probe ran');
});

test('the quick benchmark in WebKitGTK: the 1-thread page; the isolated page left out (no SharedArrayBuffer)', async () => {
  const result = await quickRun('--browser', 'webkit', '--section', 'shapes');
  checkTable(result, ENGINES.filter((name) => !/ 2T$/.test(name)));
  assert.match(result.run.where, /^WebKitGTK \d+/);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'simd128', 'WebKitGTK has no relaxed SIMD');
  assert.deepEqual(Object.keys(result.run.engines).filter((name) => / 2T/.test(name)), []);
  assert.ok(result.run.hostsFailed.some((f) => /^page 2T/.test(f.label) && /no SharedArrayBuffer/.test(f.reason)),
    JSON.stringify(result.run.hostsFailed));
  assert.equal(result.run.peak.relaxed, null, 'no FMA peak without relaxed SIMD');
});
