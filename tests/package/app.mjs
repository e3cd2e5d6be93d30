// A scratch app with the package installed from its `npm pack` tarball, as users get it; shared
// by the tests in this folder (each makes its own, in a temp dir).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const bin = (name) => join(REPO, 'node_modules', '.bin', name);
export const run = (cmd, args, cwd, options = {}) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, ...options });

// softmax([1/√2, 0]) · [[1, 2], [3, 4]] and its mirror, as the consumers compute it.
export const EXPECTED = [1.6604769, 2.6604769, 2.3395231, 3.3395231];

// What the bundled app (consumer/web.mjs) reports besides the default build's result: the layers
// build, whose layer (identity projections over [[1, 0], [0, 1]]) gives [p, 1 − p, 1 − p, p] with
// p = softmax([1/√2, 0])[0]; and the scripts fetched before it (firstLoad, paths in `site`), none
// of which may hold the layer's JavaScript (a message only mha.mjs has; the site must have it).
const p = 1 / (1 + Math.exp(-Math.SQRT1_2));
export function checkBundledLayers({ firstLoad, layers }, site) {
  assert.equal(layers.info.layers, true, 'loadAttention({ layers: true }) loads the layers build');
  assert.deepEqual(layers.out.map((x) => Number(x.toFixed(5))), [p, 1 - p, 1 - p, p].map((x) => Number(x.toFixed(5))), 'the layer\'s forward');
  const LAYER_CODE = 'call setWeights() first';
  const scripts = readdirSync(site, { recursive: true }).filter((f) => /\.m?js$/.test(f));
  assert.ok(scripts.some((f) => readFileSync(join(site, f), 'utf8').includes(LAYER_CODE)), 'the site has the layer\'s JavaScript');
  // (The engines' harness adds a script of its own, which is not the site's.)
  const fromSite = firstLoad.filter((path) => existsSync(join(site, path)));
  assert.ok(fromSite.length > 0, `the page lists the scripts it fetched: ${firstLoad}`);
  for (const path of fromSite) {
    assert.ok(!readFileSync(join(site, path), 'utf8').includes(LAYER_CODE), `${path}, fetched for the default build, holds the layer's JavaScript`);
  }
}

// Packs the repository (dist/ must be built), installs the tarball into a new temp folder with
// the files of consumer/; returns { dir, tarball (npm pack --json's entry), remove() }.
export function makeApp() {
  const dir = mkdtempSync(join(tmpdir(), 'attention-wasm-app-'));
  // npm test has just built dist/; --ignore-scripts skips prepack, which would rebuild it while
  // other test files may be reading it.
  const [tarball] = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], REPO));
  cpSync(fileURLToPath(new URL('./consumer', import.meta.url)), dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true }));
  run('npm', ['install', '--no-audit', '--no-fund', '--offline', join(dir, tarball.filename)], dir);
  return { dir, tarball, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
