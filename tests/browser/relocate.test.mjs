// The package served from another origin (a "CDN": a second server with CORS and CORP headers) in
// headless Chromium: the package imported from there as it is, baseUrl pointing there, wasmUrl
// and wasmBinary naming the threaded build, and what cannot work (a threaded file in a page that
// is not cross-origin isolated). Where each file came from is checked from the page's requests.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser } from './chromium.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const EXPECTED = [1.6604769, 2.6604769, 2.3395231, 3.3395231];
let site, plainSite, cdn, browser;
before(async () => {
  site = await startServer({ root: REPO });                  // the app's origin, cross-origin isolated
  plainSite = await startServer({ root: REPO, isolated: false });
  cdn = await startServer({ root: REPO, headers: { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' } });
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  for (const server of [site, plainSite, cdn]) await server?.close();
});

// Opens the page on `origin` with `entry` and `options`; returns { result, requests, problems }.
async function load(origin, entry, options = {}) {
  const page = await browser.newPage();
  const requests = [];
  const problems = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(m.text()); });
  const url = `${origin.url}tests/browser/relocate/page.html?entry=${encodeURIComponent(entry)}&options=${encodeURIComponent(JSON.stringify(options))}`;
  try {
    await page.goto(url);
    await page.waitForFunction(() => window.__result, null, { timeout: 30000 });
    return { result: await page.evaluate(() => window.__result), requests, problems };
  } finally {
    await page.close();
  }
}

function check({ result, problems }, simd, threaded) {
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(problems, []);
  result.out.forEach((x, i) => assert.ok(Math.abs(x - EXPECTED[i]) < 1e-5, `out[${i}] = ${x}`));
  assert.ok(result.finite);
  assert.equal(result.info.simd, simd);
  assert.equal(result.info.threads > 1, threaded, result.info.threadsReason);
}
const from = (requests, server, file) => requests.some((u) => u.startsWith(server.url) && u.endsWith(file));

test('the package imported from another origin as it is: the threaded relaxed build, its worker started through blob:', async () => {
  const loaded = await load(site, `${cdn.url}dist/index.mjs`);
  check(loaded, 'relaxed-simd', true);
  for (const file of ['attn-relaxed-mt.wasm', 'attn-relaxed-mt.worker.js', 'attn-relaxed-mt.mjs']) {
    assert.ok(from(loaded.requests, cdn, file), `${file} from the other origin`);
  }
  assert.ok(loaded.requests.some((u) => u.startsWith('blob:')), 'the worker started from a blob: script');
});

test('baseUrl: the app\'s own copy of the JS, every build file from the other origin', async () => {
  const loaded = await load(site, '/dist/index.mjs', { baseUrl: `${cdn.url}dist/` });
  check(loaded, 'relaxed-simd', true);
  for (const file of ['attn-relaxed-mt.wasm', 'attn-relaxed-mt.worker.js']) {
    assert.ok(from(loaded.requests, cdn, file), `${file} from baseUrl`);
    assert.ok(!from(loaded.requests, site, file), `${file} not from the app's origin`);
  }
  // The page's own glue runs the main thread; the workers import theirs from baseUrl.
  assert.ok(from(loaded.requests, cdn, 'attn-relaxed-mt.mjs'), 'the workers\' glue from baseUrl');
  const single = await load(site, '/dist/index.mjs', { baseUrl: `${cdn.url}dist`, threads: 1, simd: 'simd128' });
  check(single, 'simd128', false);
  assert.ok(from(single.requests, cdn, 'attn.wasm'));
});

test('wasmUrl and wasmBinary pin the threaded build, from anywhere', async () => {
  const byUrl = await load(site, '/dist/index.mjs', { wasmUrl: `${cdn.url}dist/attn-mt.wasm` });
  check(byUrl, 'simd128', true);
  assert.ok(from(byUrl.requests, cdn, 'attn-mt.wasm'));
  const byBytes = await load(site, '/dist/index.mjs', { wasmBinaryFrom: `${cdn.url}dist/attn-relaxed-mt.wasm`, threads: 2 });
  check(byBytes, 'relaxed-simd', true);
});

test('what cannot work is an Error that says why', async () => {
  const { result } = await load(plainSite, '/dist/index.mjs', { wasmBinaryFrom: '/dist/attn-mt.wasm' });
  assert.equal(result.error, 'Error: attention-wasm: options.wasmBinary is attn-mt.wasm, the threaded simd128 build, which ' +
    'needs shared memory, but this page is not cross-origin isolated (no SharedArrayBuffer). Serve it with Cross-Origin-Opener-Policy: same-origin and ' +
    'Cross-Origin-Embedder-Policy: require-corp.');
  const wrong = await load(site, '/dist/index.mjs', { wasmUrl: '/dist/attn.wasm', threads: 2 });
  assert.match(wrong.result.error, /^TypeError: createAttention: options\.wasmUrl \(\/dist\/attn\.wasm\) is attn\.wasm, the single-threaded simd128 build, but options\.threads is 2 \(that needs attn-mt\.wasm\)$/);
  const missing = await load(site, '/dist/index.mjs', { baseUrl: `${cdn.url}nowhere/` });
  assert.match(missing.result.error, new RegExp(`^Error: attention-wasm: could not load attn-relaxed-mt\\.wasm \\(the threaded relaxed-simd build\\) from ${cdn.url}nowhere/attn-relaxed-mt\\.wasm: HTTP 404`));
});
