// Past 2 GiB in headless Chromium: the relaxed-SIMD builds, single-threaded and
// threaded (a SharedArrayBuffer-backed memory in a cross-origin-isolated page), grow to 4 GiB:
// caches adding up to about 3 GiB, attention over the last one (its keys past 2 GiB) against the
// JS reference, out of memory near 4 GiB with the sized Error, and the instance still working.
// tests/js/memory4g.test.mjs does the same in Node.
import assert from 'node:assert/strict';
import { freemem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser } from './chromium.mjs';

const GiB = 2 ** 30;
const LIMIT = 2 ** 32 - 2 ** 16;
const lacking = freemem() < 4 * GiB &&
  `needs 4 GiB of free memory for a 4 GiB wasm memory; the host has ${(freemem() / GiB).toFixed(1)} GiB free`;
if (lacking) console.log(`memory4g (browser): skipped: ${lacking}`);

const REPO = fileURLToPath(new URL('../..', import.meta.url));
let server, browser;
before(async () => {
  if (lacking) return;
  server = await startServer({ root: REPO });  // cross-origin isolated: threads
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

for (const threads of [1, 2]) {
  test(`${threads === 1 ? 'single-threaded' : 'threaded'} build: 3 GiB of caches, attention past 2 GiB, out of memory near 4 GiB`,
    { skip: lacking }, async () => {
      const page = await browser.newPage();
      const problems = [];
      page.on('pageerror', (e) => problems.push(e.message));
      try {
        await page.goto(`${server.url}tests/browser/memory4g/page.html?options=${encodeURIComponent(JSON.stringify({ threads }))}`);
        await page.waitForFunction(() => window.__result, null, { timeout: 60000 });
        const r = await page.evaluate(() => window.__result);
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual(problems, []);
        assert.equal(r.info.threads, threads, r.info.threadsReason);
        assert.equal(r.info.simd, 'relaxed-simd');
        assert.equal(r.filled.wasmMemoryLimit, LIMIT);
        assert.ok(r.filled.heapInUse > 3 * GiB - 2 ** 25, `about 3 GiB in use: ${r.filled.heapInUse}`);
        assert.ok(r.address >= 2 ** 31, `the last cache's keys past 2 GiB: ${r.address}`);
        assert.ok(r.maxError < 1e-5, `attention over it matches the reference (error ${r.maxError})`);
        assert.match(r.oom, /^attention-wasm: kv cache: out of memory \(asked for 512\.0 MiB; [0-9.]+ GiB in use, wasm memory [0-9.]+ GiB of at most 4\.00 GiB\); /);
        assert.ok(r.full.wasmMemory > 3.5 * GiB, `memory grew to ${r.full.wasmMemory}`);
        assert.ok(r.same, 'after freeing a cache the same attention gives the same result');
        console.log(`Chromium, ${threads} thread(s): keys at ${(r.address / GiB).toFixed(2)} GiB, out of memory at ` +
          `${(r.full.heapInUse / GiB).toFixed(2)} GiB in use (wasm memory ${(r.full.wasmMemory / GiB).toFixed(2)} GiB)`);
      } finally {
        await page.close();
      }
    });
}
