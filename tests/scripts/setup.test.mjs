// scripts/setup.sh on a machine whose network fails now and then: its apt-get and npm steps are
// retried (and it says so), and it gives up, failing, after the last try. The script runs on a
// copy of itself in a scratch folder, with stand-ins for dpkg-query, apt-get, sudo and npm first
// on PATH that fail a given number of times before they succeed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const SETUP = new URL('../../scripts/setup.sh', import.meta.url);
const scratch = mkdtempSync(join(tmpdir(), 'attn-setup-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

// A checkout with only the script and a lock file; `fails` says how often each stand-in fails first.
function machine(name, fails) {
  const root = join(scratch, name), bin = join(root, 'bin');
  mkdirSync(join(root, 'scripts'), { recursive: true });
  mkdirSync(bin);
  copyFileSync(SETUP, join(root, 'scripts', 'setup.sh'));
  writeFileSync(join(root, 'package-lock.json'), '{}\n');
  // Each stand-in counts its calls per subcommand in <name>-<subcommand>.calls and fails while the
  // count is ≤ its failures.
  const standIn = (file, failures, message, onSuccess = '') => {
    writeFileSync(join(bin, file), `#!/bin/sh
n=$(( $(cat "${root}/${file}-$1.calls" 2>/dev/null || echo 0) + 1 )); echo $n > "${root}/${file}-$1.calls"
if [ $n -le ${failures} ]; then echo "${message}" >&2; exit 1; fi
${onSuccess}
exit 0
`);
    chmodSync(join(bin, file), 0o755);
  };
  writeFileSync(join(bin, 'dpkg-query'), '#!/bin/sh\nexit 1\n');  // nothing installed
  writeFileSync(join(bin, 'sudo'), '#!/bin/sh\nexec "$@"\n');
  chmodSync(join(bin, 'dpkg-query'), 0o755);
  chmodSync(join(bin, 'sudo'), 0o755);
  standIn('apt-get', fails.apt, "Temporary failure resolving 'deb.debian.org'");
  standIn('npm', fails.npm, 'npm error code EIDLETIMEOUT', `mkdir -p node_modules && touch node_modules/.package-lock.json`);
  const result = spawnSync('bash', [join(root, 'scripts', 'setup.sh')], {
    encoding: 'utf8', cwd: root, env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, ATTN_SETUP_PAUSE: '0' },
  });
  const calls = (file) => Number(existsSync(join(root, `${file}.calls`)) ? readFileSync(join(root, `${file}.calls`), 'utf8') : 0);
  return { ...result, calls, root };
}

test('apt-get and npm ci that fail a few times are retried, saying so, and setup succeeds', () => {
  const m = machine('flaky', { apt: 2, npm: 1 });
  assert.equal(m.status, 0, m.stdout + m.stderr);
  assert.match(m.stdout, /\[setup\] apt-get update failed \(try 1 of 4\); trying again in 0 s\n/);
  assert.match(m.stdout, /\[setup\] apt-get update failed \(try 2 of 4\); trying again in 0 s\n/);
  assert.match(m.stdout, /\[setup\] apt-get install failed \(try 2 of 4\); trying again in 0 s\n/);
  assert.match(m.stdout, /\[setup\] npm ci failed \(try 1 of 4\); trying again in 0 s\n/);
  assert.match(m.stdout, /\[setup\] ready\n$/);
  assert.equal(m.calls('apt-get-update'), 3);
  assert.equal(m.calls('apt-get-install'), 3);
  assert.equal(m.calls('npm-ci'), 2);
  assert.ok(existsSync(join(m.root, 'node_modules', '.package-lock.json')));
});

test('a step that keeps failing ends setup with an error after the last try', () => {
  const m = machine('offline', { apt: 0, npm: 99 });
  assert.notEqual(m.status, 0);
  assert.equal(m.calls('npm-ci'), 4);
  assert.match(m.stdout, /\[setup\] npm ci failed \(try 3 of 4\); trying again in 0 s\n\[setup\] npm ci failed 4 times; giving up\n$/);
  assert.match(m.stderr, /EIDLETIMEOUT/);
});
