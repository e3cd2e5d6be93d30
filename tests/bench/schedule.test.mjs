// The benchmark's scheduler and report on fake hosts (no engines, no timing): one engine at a
// time, turns in rotated order, slow and failing engines, medians of round medians, the
// cross-check of results, the ratios, the figures of merit and the tables of docs/performance.md.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createReader, measureBandwidth, STEP } from '../../scripts/bench/bandwidth.mjs';
import { measurePeak } from '../../scripts/bench/peak.mjs';
import { figuresOfMerit, performanceBlock, summaryRows } from '../../scripts/bench/report.mjs';
import { writeTable } from '../../scripts/bench/write-table.mjs';
import { pairedRatio } from '../../scripts/bench/section-report.mjs';
import { VARIANTS, visibleScores } from '../../scripts/bench/variant-engines.mjs';
import { createBenchHost } from '../../web/bench/host.mjs';
import { measureShape, TIMING as TIMINGS } from '../../web/bench/schedule.mjs';

const TIMING = { warmMs: 1, rounds: 4, turnMs: 1, settleMs: 1, slowMs: 1000, slowRounds: 2, skipMs: 20000 };
const SHAPE = { batch: 1, heads: 1, seqQ: 4, seqK: 4, headDim: 2, causal: false };

// engines: { name: { firstCall, times: round → ms list, sample, error } }; `log` records every
// call as [host, method, name], and `busy` catches two calls running at once.
function fakeHosts(spec, log) {
  let busy = false;
  return Object.entries(spec).map(([label, engines]) => {
    const turns = {};
    return {
      label, engines: Object.keys(engines).map((name) => ({ name, config: {} })),
      async call(method, name, options) {
        assert.equal(busy, false, 'two hosts ran at once');
        busy = true;
        await new Promise((done) => setTimeout(done, 1));
        busy = false;
        log.push([label, method, method === 'prepare' ? null : name, options]);
        if (method === 'prepare') {
          return Object.fromEntries(Object.entries(engines).map(([n, e]) => [n, e.error ? { error: e.error } : { firstCall: e.firstCall, sample: e.sample }]));
        }
        if (method === 'release') return undefined;
        if (options.ms === TIMING.warmMs && !options.settleMs) return [999];  // the warm-up
        turns[name] = (turns[name] ?? 0) + 1;
        return engines[name].times(turns[name] - 1);
      },
    };
  });
}

test('every engine gets turns in rotated order, one at a time; figures are medians of round medians', async () => {
  const log = [];
  const hosts = fakeHosts({
    ours: { 'attention-wasm 1T': { firstCall: 5, sample: [1, 2, 3], times: (r) => [10 + r, 10 + r, 50] } },
    ort: {
      'onnxruntime-web ops 1T': { firstCall: 9, sample: [1, 2, 3.5], times: (r) => [[20, 21, 22, 90][r]] },
      'onnxruntime-web MHA 1T': { error: 'unsupported op' },
    },
    plain: { 'plain JS': { firstCall: 4000, sample: [1, 2, 3], times: () => [3000] } },
  }, log);
  const result = await measureShape(hosts, SHAPE, TIMING, { load: () => [1, 2, 3] });
  const e = result.engines;

  assert.equal(e['attention-wasm 1T'].median, 12);  // round medians 10, 11, 12, 13
  assert.deepEqual(e['attention-wasm 1T'].spread, [10, 13]);
  assert.equal(e['onnxruntime-web ops 1T'].median, 22);  // 20, 21, 22, 90: one bad round does not move it
  assert.equal(e['onnxruntime-web ops 1T'].maxDiff, 0.5);
  assert.equal(e['attention-wasm 1T'].maxDiff, 0);
  assert.deepEqual(e['onnxruntime-web MHA 1T'], { error: 'unsupported op' });
  assert.deepEqual(e['plain JS'].rounds, [3000, 3000], 'a slow engine: one call in each of slowRounds rounds');
  assert.deepEqual(result.loadavg, { before: [1, 2, 3], after: [1, 2, 3] }, 'the load average is recorded');

  // Timed turns: the fast engines alternate, the first of each round rotating; each starts with settle time.
  const turns = log.filter(([, m, , o]) => m === 'turn' && o.settleMs).map(([, , n]) => n);
  assert.deepEqual(turns, ['attention-wasm 1T', 'onnxruntime-web ops 1T', 'onnxruntime-web ops 1T', 'attention-wasm 1T',
    'attention-wasm 1T', 'onnxruntime-web ops 1T', 'onnxruntime-web ops 1T', 'attention-wasm 1T']);
  assert.ok(log.filter(([, m, n]) => m === 'turn' && n === 'plain JS').every(([, , , o]) => o.maxCalls === 1));
  assert.equal(log.filter(([, m]) => m === 'release').length, 3, 'every host releases the shape');
});

test('the panel\'s schedule: medians over an odd number of rounds, for slow engines too', async () => {
  assert.equal(TIMINGS.panel.rounds % 2, 1);
  assert.equal(TIMINGS.panel.slowRounds, TIMINGS.panel.rounds, 'the status line says "medians of {rounds} rounds" of every engine');
  const hosts = fakeHosts({
    ours: { 'attention-wasm 1T': { firstCall: 5, sample: [1], times: (r) => [10 + r] } },
    plain: { 'plain JS': { firstCall: 4000, sample: [1], times: () => [3000] } },
  }, []);
  const { engines } = await measureShape(hosts, SHAPE, { ...TIMINGS.panel, warmMs: TIMING.warmMs, turnMs: 1, settleMs: 1, slowMs: 1000 });
  assert.equal(engines['attention-wasm 1T'].rounds.length, TIMINGS.panel.rounds);
  assert.equal(engines['plain JS'].rounds.length, TIMINGS.panel.rounds, 'a slow engine: as many rounds, not a median of 2');
});

test('an engine whose first call exceeds skipMs is reported as skipped, not timed', async () => {
  const log = [];
  const hosts = fakeHosts({
    ours: { 'attention-wasm 1T': { firstCall: 5, sample: [1], times: () => [10] } },
    tf: { 'tfjs-wasm 1T': { firstCall: 25000, sample: [1], times: () => assert.fail('timed') } },
  }, log);
  const { engines } = await measureShape(hosts, SHAPE, TIMING);
  assert.match(engines['tfjs-wasm 1T'].skipped, /first call 25\.0 s > 20 s/);
  assert.equal(log.filter(([, m, n]) => m === 'turn' && n === 'tfjs-wasm 1T').length, 0);
});

const RUN = {
  version: '0.2.0', where: 'Node v20.20.2', command: 'npm run bench', date: '2026-12-01T10:00:00.000Z',
  machine: { cpu: 'AMD EPYC', cores: 2, os: 'Debian' }, loadavg: { start: [1.5, 1, 1], end: [2, 1, 1] },
  timing: { rounds: 7, turnMs: 400 }, peak: { simd128: 60, relaxed: 68 },
  engines: { 'onnxruntime-web ops 1T': { config: { version: '1.30.0' } } },
  results: [{
    shape: '(1,12,512,512,64)', flops: 1,
    engines: {
      'attention-wasm 1T': { median: 20 }, 'attention-wasm 2T': { median: 10 },
      'onnxruntime-web ops 1T': { median: 30 }, 'onnxruntime-web MHA 1T': { median: 28 },
      'onnxruntime-web ops 2T': { median: 16 }, 'onnxruntime-web MHA 2T': { error: 'x' },
      'tfjs-wasm 1T': { median: 400 }, 'plain JS': { skipped: 'slow' }, 'native SSE 1T (g++)': { median: 19 },
    },
  }],
};

test('the summary compares ours with the faster ORT graph at the same thread count', () => {
  const [row] = summaryRows(RUN);
  assert.equal(row.ort1, 28);
  assert.equal(row.ratio1, 28 / 20);
  assert.equal(row.ratio2, 16 / 10);
  assert.equal(row.scaling, 2);
  const block = performanceBlock(RUN);
  assert.match(block, /^Measured 2026-12-01 by `npm run bench` in Node v20\.20\.2 on AMD EPYC \(2 cores, shared\), load average 1\.5 at start/);
  assert.match(block, /\| \(1, 12, 512, 512, 64\) \| 20\.0 ms \| 28\.0 ms \| 10\.0 ms \| 16\.0 ms \| 400 ms \| — \| 19\.0 ms \| 1\.40× \| 1\.60× \|/);
});

test('the figures of merit are computed from the run, each with its goal', () => {
  const run = { ...RUN, engines: { ...RUN.engines, 'attention-wasm 1T': { config: { simd: 'simd128' } } },
    extras: { coldStart: { importMs: 10, createMs: 5, firstCallMs: 7 }, wasmSizes: { 'attn.wasm': { bytes: 81000, gzip: 30000 } } } };
  run.results = [{ ...RUN.results[0], flops: 4 * 12 * 512 * 512 * 64 }];
  const figures = figuresOfMerit(run);
  const byName = (start) => figures.find((f) => f.what.startsWith(start));
  assert.deepEqual(byName('onnxruntime-web 1 thread ÷ ours 1 thread'), { what: 'onnxruntime-web 1 thread ÷ ours 1 thread, every shape (our simd128 build)',
    goal: '≥ 1.6×', figure: '(1,12,512,512,64) 1.40×' });
  assert.equal(byName('onnxruntime-web 2 threads').figure, '(1,12,512,512,64) 1.60×');
  assert.equal(byName('ours 2 threads ÷ ours 1 thread').figure, '(1,12,512,512,64) 2.00×');
  assert.equal(byName('share of the SIMD128 mul+add peak').figure, '(1,12,512,512,64) 67 %');  // 40.3 GFLOP/s of 60
  assert.equal(byName('first call').figure, '7.0 ms');
  assert.equal(byName('load in Node').figure, '15 ms');
  assert.equal(byName('size of each .wasm').figure, 'attn.wasm 81.0 KB (30.0 KB)');
  for (const f of figures) assert.match(f.goal, /^[≤≥] [\d.]+ ?(×|%|ms|KB)/, `${f.what} has a goal`);
});

test('a generated table is replaced between its markers, and only there', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-tables-'));
  try {
    const file = join(dir, 'performance.md');
    writeFileSync(file, 'before\n<!-- bench:node -->\nold table\n<!-- /bench:node -->\nafter\n');
    writeTable(file, 'node', 'new table\n');
    assert.equal(readFileSync(file, 'utf8'), 'before\n<!-- bench:node -->\nnew table\n<!-- /bench:node -->\nafter\n');
    assert.throws(() => writeTable(file, 'browser', 'x'), /no <!-- bench:browser --> … <!-- \/bench:browser --> markers/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the peak probe module validates and runs; relaxed SIMD only where the engine has it', async () => {
  assert.ok(await measurePeak('simd128', { warmMs: 20, reps: 3 }) > 1);
  const relaxed = WebAssembly.validate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 15, 1,
    13, 0, 65, 1, 253, 15, 65, 2, 253, 15, 253, 128, 2, 11]));
  const fma = await measurePeak('relaxed', { warmMs: 20, reps: 3 });
  assert.equal(fma === null, !relaxed);
});

test('the read probe streams every byte of its buffer once per pass, at any size it is resized to', async () => {
  // Its checksum is lane 0 of every 16 bytes added up: the buffer holds 1s, so a pass over n bytes
  // gives n / 16 × 0x01010101 (mod 2³², as a signed i32). A loop that skipped or repeated a
  // load would give another sum.
  const expected = (n) => Number(BigInt.asIntN(32, BigInt(n / 16) * 0x01010101n));
  const reader = await createReader(1000);
  assert.equal(reader.bytes, 1024, 'rounded up to a whole number of iterations');
  assert.equal(reader.run(), expected(1024));
  for (const n of [STEP, 3 * 2 ** 20 + 5, 300000, 2 ** 16]) {
    reader.resize(n);
    assert.equal(reader.bytes, Math.ceil(n / STEP) * STEP);
    assert.equal(reader.run(), expected(reader.bytes), `${n} bytes`);
  }
  assert.throws(() => reader.resize(0), /createReader: bytes must be positive, got 0/);
  const gbps = await measureBandwidth(2 ** 20, { warmMs: 20, reps: 3 });
  assert.ok(gbps > 0 && Number.isFinite(gbps), `${gbps} GB/s`);
});

test('a host times short calls in groups of about 2 ms (browsers round performance.now()), long ones one by one', async () => {
  const counts = {};
  const busy = (name, ms) => () => {
    counts[name] = (counts[name] ?? 0) + 1;
    const end = performance.now() + ms;
    while (performance.now() < end);
  };
  const engine = (name, ms) => ({ name, config: {}, prepare: async () => ({ run: busy(name, ms), read: () => 0 }) });
  const host = createBenchHost([engine('short', 0.02), engine('long', 3)]);
  await host.prepare({ batch: 1, heads: 1, seqQ: 2, seqK: 2, headDim: 2 });
  const calls = (name, run) => run.then((times) => ({ times, made: counts[name] }));
  counts.short = 0;
  const short = await calls('short', host.turn('short', { ms: 30, settleMs: 5 }));
  const settleAndTimed = short.made;
  assert.ok(short.times.length >= 1 && short.times.every((t) => t > 0));
  assert.ok(settleAndTimed > 2 * short.times.length, `${short.times.length} groups from ${settleAndTimed} calls`);
  counts.long = 0;
  const long = await calls('long', host.turn('long', { ms: 10, settleMs: 1 }));
  assert.equal(long.made - 1, long.times.length, 'one settle call, then every call timed on its own');
  counts.long = 0;
  assert.equal((await host.turn('long', { maxCalls: 1 })).length, 1);
  assert.equal(counts.long, 1);
});

test('a host times groups long enough for the clock even when an engine gets faster after its settle calls', async () => {
  // Slow (0.5 ms a call) while the turn settles, then fast (0.01 ms), as V8 tiering a loop up:
  // groups sized from the settle calls alone would hold 4 fast calls, 0.04 ms, under a
  // browser's 0.1 ms clock step.
  let slowUntil = 0, fastCalls = 0;
  const run = () => {
    const slow = performance.now() < slowUntil;
    if (!slow) fastCalls++;
    const end = performance.now() + (slow ? 0.5 : 0.01);
    while (performance.now() < end);
  };
  const host = createBenchHost([{ name: 'tiering', config: {}, prepare: async () => ({ run, read: () => 0 }) }]);
  await host.prepare({ batch: 1, heads: 1, seqQ: 2, seqK: 2, headDim: 2 });
  slowUntil = performance.now() + 5;
  const times = await host.turn('tiering', { ms: 40, settleMs: 5 });
  assert.ok(times.length >= 1 && times.every((t) => t > 0), JSON.stringify(times));
  assert.ok(fastCalls / times.length >= 20, `${times.length} groups timed from ${fastCalls} fast calls`);
});

test('the variants section counts the scores each variant computes, causal and window as flash-attention', () => {
  const brute = ({ seqQ, seqK }, { causal = false, window: [left, right] = [Infinity, Infinity] }) => {
    let n = 0;
    for (let i = 0; i < seqQ; i++) {
      for (let j = 0; j < seqK; j++) {
        const pos = i + seqK - seqQ;
        if ((!causal || j <= pos) && j >= pos - left && j <= pos + right) n++;
      }
    }
    return n;
  };
  for (const shape of [{ seqQ: 7, seqK: 7 }, { seqQ: 3, seqK: 11 }, { seqQ: 9, seqK: 4 }]) {
    for (const options of [{}, { causal: true }, { window: [2, 1] }, { causal: true, window: [3, 0] }, { window: [0, Infinity] }]) {
      assert.equal(visibleScores(shape, options), brute(shape, options), `${JSON.stringify(shape)} ${JSON.stringify(options)}`);
    }
  }
  const big = { seqQ: 8192, seqK: 8192 };
  assert.equal(visibleScores(big, VARIANTS['causal-window'].options(big)), 1024 * 1025 / 2 + (8192 - 1024) * 1024);
});

test('section ratios pair the rounds of two engines when both ran every round', () => {
  assert.equal(pairedRatio({ median: 2, rounds: [2, 4, 2] }, { median: 1, rounds: [1, 1, 2] }), 2);  // ratios 2, 4, 1
  assert.equal(pairedRatio({ median: 3, rounds: [3] }, { median: 2, rounds: [2, 2] }), 1.5, 'else the ratio of medians');
  assert.equal(pairedRatio({ error: 'x' }, { median: 2 }), null);
});
