// The relaxed-SIMD builds in headless Chromium (which runs relaxed SIMD without flags): the
// Catch2 suite built for the web, and the JS API on every build the loader picks there, checked
// against the JS reference (tests/browser/relaxed/). The page is cross-origin isolated, so the
// threaded builds load too.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser, openPage } from './chromium.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
let server, browser;
before(async () => {
  server = await startServer({ root: REPO });  // the pages need build/, dist/ and tests/js/reference.mjs
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

async function resultOf(page, timeout) {
  await page.waitForFunction(() => window.__result, null, { timeout });
  return page.evaluate(() => window.__result);
}

test('the Catch2 suite (relaxed SIMD) passes in Chromium, every test case of it', async () => {
  // As many test cases as the node build of the same suite lists (Catch2 exits with the count).
  const listed = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', 'build/wasm/attn_tests_wasm_relaxed.cjs',
    '--list-test-names-only'], { cwd: REPO, encoding: 'utf8' });
  const expected = listed.stdout.split('\n').filter((line) => line.trim()).length;
  assert.ok(expected > 0 && listed.status === expected, `node lists ${expected} test cases (exit ${listed.status})`);
  const { page, problems } = await openPage(browser, `${server.url}tests/browser/relaxed/catch2.html`);
  const { code, output } = await resultOf(page, 120000);
  assert.equal(code, 0, output);
  const summary = output.match(/All tests passed \((\d+) assertions? in (\d+) test cases?\)/);
  assert.ok(summary, output.slice(-2000));
  assert.equal(Number(summary[2]), expected, 'test cases run');
  assert.deepEqual(problems, []);
});

test('the JS API in Chromium: relaxed-simd by default, simd128 when forced, each against the reference', async () => {
  const { page, problems } = await openPage(browser, `${server.url}tests/browser/relaxed/api.html`);
  const result = await resultOf(page, 60000);
  assert.equal(result.error, undefined, result.error);
  const levels = result.builds.map((b) => [b.info.simd, b.info.threads]);
  assert.deepEqual(levels, [['relaxed-simd', 1], ['relaxed-simd', 2], ['simd128', 1], ['simd128', 2]]);
  assert.equal(result.builds[0].info.simdReason, 'auto: relaxed SIMD runs here');
  for (const { options, errors } of result.builds) {
    for (const [fn, ratio] of Object.entries(errors)) assert.ok(ratio <= 1, `${JSON.stringify(options)} ${fn}: ${ratio.toFixed(2)}× the tolerance`);
  }
  assert.deepEqual(result.identicalAcrossThreads, { relaxed: true, simd128: true }, 'bit-identical across thread counts');
  assert.equal(result.identicalAcrossLevels, false, 'relaxed SIMD (fused multiply-add) really ran: its results differ in the last bits');
  assert.deepEqual(problems, []);
});
