// `node scripts/bench.mjs --quick` (Node) and `--browser --quick` (headless Chromium) run end to
// end — every engine on one shape, then the decode and variants sections on tiny shapes — and
// write their JSON: each engine in its own process or page with its own thread count, results
// that agree with ours, the configuration and the load recorded, the sections' tables and
// targets. Times are never asserted here: this machine is shared, and speed lives in the benchmark.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { decodeReadmeBlock, variantsReadmeBlock } from '../../scripts/bench/section-report.mjs';

const BENCH = fileURLToPath(new URL('../../scripts/bench.mjs', import.meta.url));

async function quickRun(...flags) {
  const dir = mkdtempSync(join(tmpdir(), 'attention-bench-'));
  try {
    const json = join(dir, 'bench.json');
    const { stdout } = await promisify(execFile)(process.execPath, [BENCH, '--quick', ...flags, '--json', json],
      { encoding: 'utf8', timeout: 240000 });
    return { stdout, run: JSON.parse(readFileSync(json, 'utf8')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function checkRun({ stdout, run }, engines) {
  assert.match(stdout, /how each engine ran/);
  assert.match(stdout, /attention-wasm vs onnxruntime-web/);
  assert.equal(run.results.length, 1);
  const row = run.results[0];
  for (const name of engines) {
    const r = row.engines[name];
    assert.ok(r && r.median > 0, `${name} was timed: ${JSON.stringify(r)}`);
    assert.ok(r.firstCall > 0, `${name}'s first call was timed`);
    assert.ok(r.maxDiff < 1e-5, `${name} computes what ours computes (max |Δ| ${r.maxDiff})`);
  }
  // onnxruntime-web's thread count is per process/page: each host got its own.
  assert.equal(run.engines['onnxruntime-web ops 1T'].config.numThreads, 1);
  assert.equal(run.engines['onnxruntime-web MHA 2T'].config.numThreads, 2);
  assert.notEqual(run.engines['onnxruntime-web ops 1T'].host, run.engines['onnxruntime-web ops 2T'].host);
  assert.equal(run.engines['attention-wasm 2T'].config.threads, 2);
  assert.ok(run.peak.simd128 > 0, 'the SIMD128 peak probe ran');
  assert.equal(run.loadavg.start.length, 3, 'the machine load is recorded');
  assert.equal(row.loadavg.after.length, 3);
  checkSections({ stdout, run });
}

// Largest |Δ| from our float32 cache each decode engine may show on the quick shapes.
const DECODE_TOLERANCE = { 'cache float32': 1e-6, 'cache float16': 2e-3, 'cache int8': 2e-2, 'attention() copying K/V': 1e-5, ops: 1e-5, MHA: 1e-5, GQA: 1e-5 };

function checkSections({ stdout, run }) {
  assert.match(stdout, /decode \(issue 13\)/);
  assert.match(stdout, /variants \(issue 12\)/);
  const [decode] = run.sections.decode;
  assert.deepEqual(decode.results.map((r) => r.shape.kvHeads), [4, 2], 'both decode shapes: kvHeads = heads and grouped');
  for (const result of decode.results) {
    for (const [pattern, tolerance] of Object.entries(DECODE_TOLERANCE)) {
      const [name, r] = Object.entries(result.engines).find(([n]) => n.endsWith(` ${pattern}`) || n.includes(` ${pattern} `)) ?? [];
      assert.ok(r, `${result.label}: ${pattern} ran`);
      if (pattern === 'MHA' && result.shape.kvHeads !== result.shape.heads) {
        assert.match(r.error, /not applicable/, 'MultiHeadAttention has no grouped K/V');
        continue;
      }
      assert.ok(r.median > 0, `${result.label}: ${name} was timed: ${JSON.stringify(r)}`);
      assert.ok(r.maxDiff <= tolerance, `${result.label}: ${name} agrees with the float32 cache (max |Δ| ${r.maxDiff} > ${tolerance})`);
    }
  }
  for (const [label, b] of Object.entries(run.sectionExtras.kvBytes)) {
    assert.ok(b.int8 < b.float16 && b.float16 < b.float32, `${label}: cache bytes shrink with the dtype`);
  }
  const variants = run.sections.variants.flatMap((p) => p.results);
  assert.equal(variants.length, 2);
  for (const result of variants) {
    for (const [name, r] of Object.entries(result.engines)) assert.ok(r.median > 0, `${result.label}: ${name} was timed`);
  }
  assert.deepEqual(Object.keys(variants[0].engines).map((n) => n.replace(/^attention-wasm 1T /, '')),
    ['plain', 'window [448, 448]', "ALiBi (BLOOM's slopes)", 'sinks', 'softcap 50 (Gemma 2)']);
  const targets = run.targets.map((t) => t.target).join('\n');
  for (const t of [/float32 cache ≥ 3× onnxruntime-web/, /int8 cache ≥ 1\.8×/, /float16 cache ≥ 1\.3×/, /int8 bytes per token ≤ 0\.27×/, /softcap .* ≤ 1\.20× plain/, /window \[1023, 0\] ≥ 6× faster/]) {
    assert.match(targets, t);
  }
  assert.match(decodeReadmeBlock(run), /\| ours: cache int8 \| [\d.]+ \| /, 'the decode README table has figures');
  assert.match(variantsReadmeBlock(run), /\| softcap 50 \(Gemma 2\) \| [\d.]+ \| /, 'the variants README table has figures');
}

const ENGINES = ['attention-wasm 1T', 'attention-wasm 2T', 'onnxruntime-web ops 1T', 'onnxruntime-web MHA 1T',
  'onnxruntime-web ops 2T', 'onnxruntime-web MHA 2T', 'tfjs-wasm 1T', 'plain JS'];

test('the quick benchmark in Node: every engine in its own process, timed, results agreeing', async () => {
  const result = await quickRun();
  checkRun(result, [...ENGINES, 'attention-wasm 1T relaxed']);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'simd128', 'Node without the flag: SIMD128');
  assert.equal(result.run.engines['attention-wasm 1T relaxed'].config.simd, 'relaxed-simd', 'its own process, with the flag');
  const { extras } = result.run;
  assert.ok(extras.backward.backwardMs > 0 && extras.backward.forwardMs > 0, 'the backward pass was timed');
  assert.ok(extras.coldStart.firstCallMs > 0 && extras.coldStart.createMs > 0, 'load and first call were timed');
  assert.ok(extras.wasmSizes['attn.wasm'].gzip > 0, 'the .wasm sizes were measured');
});

test('the quick benchmark in Chromium: a 1-thread page and a cross-origin-isolated 2-thread page', async () => {
  const result = await quickRun('--browser');
  checkRun(result, [...ENGINES, 'attention-wasm 1T simd128', 'attention-wasm 2T simd128']);
  assert.equal(result.run.engines['attention-wasm 1T'].config.simd, 'relaxed-simd', "Chromium: 'auto' picks relaxed SIMD");
  assert.equal(result.run.engines['attention-wasm 2T simd128'].config.simd, 'simd128');
  assert.match(result.run.where, /^Chromium \d+/);
  assert.match(result.run.engines['attention-wasm 1T'].host, /not isolated/);
  assert.match(result.run.engines['attention-wasm 2T'].host, /cross-origin isolated/);
});
