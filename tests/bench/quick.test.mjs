// `node scripts/bench.mjs --quick` runs end to end (every engine on one shape) and writes its
// JSON. Times are never asserted here: this machine is shared, and speed lives in the benchmark.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

test('the quick benchmark measures every engine and writes JSON', () => {
  const dir = mkdtempSync(join(tmpdir(), 'attention-bench-'));
  try {
    const json = join(dir, 'bench.json');
    const output = execFileSync(process.execPath, [fileURLToPath(new URL('../../scripts/bench.mjs', import.meta.url)), '--quick', '--json', json],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000 });
    assert.match(output, /time ÷ attention-wasm/);
    const result = JSON.parse(readFileSync(json, 'utf8'));
    assert.equal(result.results.length, 1);
    const { medians, firstCall } = result.results[0];
    for (const engine of ['attention-wasm', 'onnxruntime-web ops 1T', 'onnxruntime-web MHA 2T', 'tfjs-wasm', 'plain JS']) {
      assert.ok(medians[engine] > 0, `${engine} was timed`);
      assert.ok(firstCall[engine] > 0, `${engine}'s first call was timed`);
    }
    assert.ok(result.simdPeakGflops > 0, 'the SIMD128 peak probe ran');
    assert.ok(result.backward.backwardMs > 0 && result.backward.forwardMs > 0, 'the backward pass was timed');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
