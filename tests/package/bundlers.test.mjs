// The packed package in bundled web apps, each run in headless Chromium (which runs relaxed SIMD,
// so the relaxed builds are the ones used): Vite with the worker recipe of docs/api.md (one build in
// the worker's bundle), and webpack 5 with zero warnings. (The plain Vite app runs in every
// engine: tests/browser/engines.test.mjs.)
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser, openPage } from '../browser/chromium.mjs';
import { bin, EXPECTED, makeApp, REPO, run } from './app.mjs';

let app, browser;
before(async () => {
  app = makeApp();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  app?.remove();
});

// Serves `folder` (cross-origin isolated, so threads load too), opens it, returns the result.
async function resultOf(folder) {
  const server = await startServer({ root: folder });
  try {
    const { page, problems } = await openPage(browser, server.url);
    await page.waitForFunction(() => document.getElementById('result').textContent !== 'loading', null, { timeout: 30000 });
    const text = await page.textContent('#result');
    assert.deepEqual(problems, []);
    assert.doesNotMatch(text, /^error/);
    const { info, out } = JSON.parse(text);
    out.forEach((x, i) => assert.ok(Math.abs(x - EXPECTED[i]) < 1e-5, `out[${i}] = ${x}`));
    return info;
  } finally {
    await server.close();
  }
}

const files = (folder) => readdirSync(folder, { recursive: true }).filter((f) => statSync(join(folder, f)).isFile());

test('Vite, the worker recipe: attention-wasm/simd128 puts one build in the worker', async () => {
  run(bin('vite'), ['build', 'worker-app', '--logLevel', 'error', '--outDir', '../site-worker', '--emptyOutDir'], app.dir);
  const site = join(app.dir, 'site-worker');
  const all = files(site);
  // Vite names an asset name-HASH.wasm, the hash 8 characters of base64url (which has '-' and '_').
  const unhashed = (f) => f.replace(/^.*\//, '').replace(/-[\w-]{8}\.wasm$/, '.wasm');
  assert.deepEqual(all.filter((f) => f.endsWith('.wasm')).map(unhashed), ['attn.wasm']);
  const scripts = all.filter((f) => f.endsWith('.js'));
  const code = scripts.map((f) => readFileSync(join(site, f), 'utf8')).join('\n');
  // One Emscripten glue (each has this message once), the single-threaded SIMD128 one.
  assert.equal(code.split('both async and sync fetching of the wasm failed').length - 1, 1, 'one glue in the bundle');
  const gz = scripts.reduce((n, f) => n + gzipSync(readFileSync(join(site, f))).length, 0);
  const info = await resultOf(site);
  assert.deepEqual([info.simd, info.threads], ['simd128', 1]);
  console.log(`# worker recipe: ${scripts.length} scripts, ${(gz / 1024).toFixed(1)} KB gzipped, + attn.wasm`);
});

test('webpack 5: builds with zero warnings, and the bundle runs the threaded relaxed-SIMD build', async () => {
  const { default: webpack } = await import(join(REPO, 'node_modules', 'webpack', 'lib', 'index.js'));
  const out = join(app.dir, 'webpack-site');
  const stats = await new Promise((resolve, reject) => {
    const compiler = webpack({
      mode: 'production', context: app.dir, entry: './web.mjs', output: { path: out, clean: true },
      resolve: { modules: [join(app.dir, 'node_modules')] },
    });
    compiler.run((error, result) => compiler.close(() => (error ? reject(error) : resolve(result))));
  });
  const { warnings, errors } = stats.toJson({ all: false, warnings: true, errors: true });
  assert.deepEqual(errors.map((e) => e.message), []);
  assert.deepEqual(warnings.map((w) => w.message), [], 'no warnings');
  writeFileSync(join(out, 'index.html'), readFileSync(join(app.dir, 'index.html'), 'utf8')
    .replace('<script type="module" src="./web.mjs"></script>', '<script src="./main.js"></script>'));
  const info = await resultOf(out);
  assert.deepEqual([info.simd, info.threads > 1], ['relaxed-simd', true], info.threadsReason);
});
