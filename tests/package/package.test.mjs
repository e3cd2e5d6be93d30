// The package as users get it: `npm pack`, install the tarball into a scratch app, then use it
// from Node ESM and CommonJS, type-check a TypeScript consumer, and bundle it with Vite for a
// page opened in headless Chromium.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser, openPage } from '../browser/chromium.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const bin = (name) => join(repo, 'node_modules', '.bin', name);
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// softmax([1/√2, 0]) · [[1, 2], [3, 4]] and its mirror, as the consumers compute it.
const EXPECTED = [1.6604769, 2.6604769, 2.3395231, 3.3395231];
function checkResult(json) {
  const { info, out } = JSON.parse(json);
  assert.equal(info.simd, 'simd128');
  out.forEach((x, i) => assert.ok(Math.abs(x - EXPECTED[i]) < 1e-5, `out[${i}] = ${x}`));
}

let app, tarball;
before(() => {
  app = mkdtempSync(join(tmpdir(), 'attention-wasm-app-'));
  // npm test has just built dist/; --ignore-scripts skips prepack, which would rebuild it while
  // other test files may be reading it.
  const packed = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', app], repo));
  tarball = packed[0];
  cpSync(fileURLToPath(new URL('./consumer', import.meta.url)), app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true }));
  run('npm', ['install', '--no-audit', '--no-fund', '--offline', join(app, tarball.filename)], app);
});
after(() => rmSync(app, { recursive: true, force: true }));

test('the tarball holds the built files and nothing else', () => {
  const files = tarball.files.map((f) => f.path).sort();
  const jsSources = readdirSync(join(repo, 'src', 'js')).filter((f) => /\.(mjs|cjs)$/.test(f)).map((f) => `dist/${f}`);
  const built = ['attn.mjs', 'attn.wasm', 'attn-mt.mjs', 'attn-mt.wasm', 'attn-mt.worker.js', 'index.d.ts', 'index.d.cts',
    'node-mt/attn-mt-node.cjs', 'node-mt/attn-mt-node.wasm', 'node-mt/attn-mt-node.worker.js', 'node-mt/package.json'];
  const expected = ['README.md', 'package.json', ...built.map((f) => `dist/${f}`), ...jsSources];
  assert.deepEqual(files, expected.sort());
  const pkg = JSON.parse(run('node', ['-p', 'JSON.stringify(require("attention-wasm/package.json"))'], app));
  assert.equal(pkg.dependencies, undefined, 'no runtime dependencies');
  for (const hook of ['preinstall', 'install', 'postinstall']) assert.equal(pkg.scripts?.[hook], undefined, `no ${hook} script`);
});

test('Node ESM: import', () => checkResult(run('node', ['esm.mjs'], app)));

test('Node CommonJS: require', () => checkResult(run('node', ['cjs.cjs'], app)));

// A Node project (with @types/node, taken from this repo) and a browser project.
const TSCONFIGS = {
  'tsconfig.node.json': {
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022'], types: ['node'],
      typeRoots: [join(repo, 'node_modules', '@types')] },
    files: ['typed.mts', 'typed.cts'],
  },
  'tsconfig.bundler.json': {
    compilerOptions: { module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: [] },
    files: ['typed.mts'],
  },
};

test('TypeScript consumers type-check with --strict (nodenext ESM + CJS, bundler)', () => {
  for (const [config, json] of Object.entries(TSCONFIGS)) {
    Object.assign(json.compilerOptions, { strict: true, noEmit: true, target: 'es2022' });
    writeFileSync(join(app, config), JSON.stringify(json));
    try {
      run(bin('tsc'), ['-p', config], app);
    } catch (e) {
      assert.fail(`tsc -p ${config}:\n${e.stdout}${e.stderr}`);
    }
  }
});

test('bundled by Vite, it runs in headless Chromium', async () => {
  run(bin('vite'), ['build', '--logLevel', 'error', '--outDir', 'site', '--emptyOutDir'], app);
  const assets = readdirSync(join(app, 'site', 'assets'));
  assert.ok(assets.some((f) => /^attn-.*\.wasm$/.test(f)), `vite emitted the wasm: ${assets}`);
  const server = await startServer({ root: join(app, 'site') });
  const browser = await launchBrowser();
  try {
    const { page, problems } = await openPage(browser, server.url);
    await page.waitForFunction(() => document.getElementById('result').textContent !== 'loading', null, { timeout: 20000 });
    checkResult(await page.textContent('#result'));
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    await server.close();
  }
});
