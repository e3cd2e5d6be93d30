// The packed package in bundled web apps, each run in headless Chromium (which runs relaxed SIMD,
// so the relaxed builds are the ones used): Vite with the worker recipe of docs/api.md (the main
// entry in a module worker: no glue in the bundle, the chosen build's downloaded once), and
// webpack 5 with zero warnings. (The plain Vite app and the worker recipe run in every engine:
// tests/browser/engines.test.mjs.)
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser, openPage } from '../browser/chromium.mjs';
import { bin, checkBundledLayers, EXPECTED, makeApp, REPO, run } from './app.mjs';

let app, browser;
before(async () => {
  app = makeApp();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  app?.remove();
});

// Serves `folder` (cross-origin isolated, so threads load too; cacheable for an hour, as hosts serve
// a bundler's hashed files), opens it, returns the result and the files the server sent (with a
// 200) to the page and its workers: { file, bytes }.
async function resultOf(folder) {
  const downloads = [];
  const onServed = (path, status) => {
    if (status === 200) downloads.push({ file: path.slice(1), bytes: statSync(join(folder, path)).size });
  };
  const server = await startServer({ root: folder, headers: { 'Cache-Control': 'max-age=3600' }, onServed });
  try {
    const { page, problems } = await openPage(browser, server.url);
    await page.waitForFunction(() => document.getElementById('result').textContent !== 'loading', null, { timeout: 30000 });
    const text = await page.textContent('#result');
    assert.deepEqual(problems, []);
    assert.doesNotMatch(text, /^error/);
    const result = JSON.parse(text);
    result.out.forEach((x, i) => assert.ok(Math.abs(x - EXPECTED[i]) < 1e-5, `out[${i}] = ${x}`));
    await page.close();
    return { ...result, downloads };
  } finally {
    await server.close();
  }
}

const files = (folder) => readdirSync(folder, { recursive: true }).filter((f) => statSync(join(folder, f)).isFile());
// Each Emscripten glue has this message once.
const GLUE = 'both async and sync fetching of the wasm failed';

// The worker recipe of docs/api.md (consumer/worker-app), bundled by Vite with the worker format
// docs/api.md recommends ('es') and with Vite's default ('iife'). Both run the threaded relaxed
// build. With 'es' the worker's bundle holds no build's glue (each is a chunk of its own) and the
// page downloads the chosen one once: its threads import that same file. With 'iife' every build's
// glue is inside the worker's bundle (which cannot load chunks on demand), and the threads import
// the copy of theirs that Vite emitted as an asset: what the docs' figures compare.
const sizes = {};
for (const format of ['es', 'iife']) {
  test(`Vite, the worker recipe, worker format '${format}': ${format === 'es' ? 'no glue in the bundle, the chosen build\'s downloaded once' : 'every glue in the bundle'}`, async () => {
    const dir = join(app.dir, 'worker-app');
    writeFileSync(join(dir, 'vite.config.js'), `export default { worker: { format: '${format}' } };\n`);
    const out = `site-worker-${format}`;
    run(bin('vite'), ['build', '--logLevel', 'error', '--outDir', `../${out}`, '--emptyOutDir'], dir);
    const site = join(app.dir, out);
    const bundle = files(site).find((f) => /(^|\/)worker-[\w-]{8}\.js$/.test(f));
    const gluesIn = readFileSync(join(site, bundle), 'utf8').split(GLUE).length - 1;
    assert.equal(gluesIn, format === 'es' ? 0 : 4, `${bundle} holds ${gluesIn} glues`);
    const { info, downloads } = await resultOf(site);
    assert.deepEqual([info.simd, info.threads > 1], ['relaxed-simd', true], info.threadsReason);
    const name = (d) => d.file.replace(/^.*\//, '').replace(/-[\w-]{8}\./, '.');
    const glues = downloads.filter((d) => /^attn[\w-]*\.m?js$/.test(name(d)) && !name(d).includes('.worker'));
    assert.deepEqual(glues.map(name), format === 'es' ? ['attn-relaxed-mt.js'] : ['attn-relaxed-mt.mjs'],
      format === 'es' ? 'the chosen glue, once' : 'the threads\' copy of their glue, besides the bundle\'s');
    assert.equal(downloads.filter((d) => d.file.endsWith('.wasm')).length, 1, 'one .wasm');
    const js = downloads.filter((d) => /\.m?js$/.test(d.file));
    sizes[format] = js.reduce((n, d) => n + d.bytes, 0);
    console.log(`# worker recipe, worker format '${format}': ${js.length} scripts, ${(sizes[format] / 1000).toFixed(1)} KB of JavaScript downloaded`);
  });
}

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
  const result = await resultOf(out);
  assert.deepEqual([result.info.simd, result.info.threads > 1, result.info.layers], ['relaxed-simd', true, false], result.info.threadsReason);
  // The app's second load: the threaded layers build, with the layer's JavaScript a chunk of its own.
  assert.deepEqual([result.layers.info.simd, result.layers.info.threads > 1], ['relaxed-simd', true], result.layers.info.threadsReason);
  checkBundledLayers(result, out);
});
