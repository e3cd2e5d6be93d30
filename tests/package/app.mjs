// A scratch app with the package installed from its `npm pack` tarball, as users get it; shared
// by the tests in this folder (each makes its own, in a temp dir).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const bin = (name) => join(REPO, 'node_modules', '.bin', name);
export const run = (cmd, args, cwd, options = {}) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120000, ...options });

// softmax([1/√2, 0]) · [[1, 2], [3, 4]] and its mirror, as the consumers compute it.
export const EXPECTED = [1.6604769, 2.6604769, 2.3395231, 3.3395231];

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
