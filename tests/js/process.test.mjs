// The library leaves its host process alone: after loading any build (SIMD128 or relaxed SIMD,
// one thread or several), an error the program throws, or a promise it leaves rejected, is
// reported by Node as usual (the program's own stack first, a short report, exit code 1), and a
// program that is done exits by itself. Each case runs in a child process.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const ENTRY = new URL('../../dist/node.mjs', import.meta.url).href;
const dir = mkdtempSync(join(tmpdir(), 'attn-process-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// Relaxed SIMD needs this flag in Node 20 (strict: true makes a build that cannot run fail).
const relaxedFlag = '--experimental-wasm-relaxed-simd';
const BUILDS = [
  { simd: 'simd128', threads: 1 }, { simd: 'simd128', threads: 2 },
  { simd: 'relaxed', threads: 1 }, { simd: 'relaxed', threads: 2 },
];

// A program that loads the build, runs one call, then ends as `ending` says.
function program(build, ending) {
  const load = `const lib = await loadAttention({ simd: '${build.simd}', threads: ${build.threads}, strict: true });\n` +
    'const q = new Float32Array(2 * 8 * 16).fill(0.5);\n' +
    "if (lib.attention(q, q, q, { heads: 2, seqQ: 8, headDim: 16 }).length !== 256) throw new Error('wrong length');\n" +
    `if (lib.info.threads !== ${build.threads}) throw new Error('threads ' + lib.info.threads);\n`;
  const endings = {
    throw: "function usersOwnCode() { throw new Error('the program failed'); }\nusersOwnCode();\n",
    reject: "Promise.reject(new Error('the program failed'));\n",
    done: "console.log('done');\n",
  };
  return `import { loadAttention } from '${ENTRY}';\n${load}${endings[ending]}`;
}

function run(build, ending) {
  const file = join(dir, `${build.simd}-${build.threads}-${ending}.mjs`);
  writeFileSync(file, program(build, ending));
  const flags = build.simd === 'relaxed' ? [relaxedFlag] : [];
  const child = spawnSync(process.execPath, [...flags, file], { encoding: 'utf8', timeout: 60000 });
  return { file, ...child };
}

for (const build of BUILDS) {
  const name = `${build.simd}, ${build.threads} thread${build.threads > 1 ? 's' : ''}`;

  test(`${name}: an error thrown after loading is Node's own report, exit code 1`, () => {
    const { file, status, signal, stderr } = run(build, 'throw');
    assert.equal(signal, null, 'ended by itself');
    assert.equal(status, 1, stderr);
    assert.ok(Buffer.byteLength(stderr) < 2048, `stderr is ${Buffer.byteLength(stderr)} bytes:\n${stderr.slice(0, 600)}`);
    const lines = stderr.split('\n');
    assert.ok(lines[0].includes(file.split('/').pop()), `the first line names the program: ${lines[0]}`);
    const stack = lines.filter((line) => /^\s+at /.test(line));
    assert.match(stack[0], /usersOwnCode/, 'the stack starts in the program');
    assert.ok(lines.includes('Error: the program failed'), stderr);
    assert.doesNotMatch(stderr, /attn-(relaxed-)?mt-node|\.cjs:|ExitStatus/, 'nothing of the glue');
  });

  test(`${name}: an unhandled rejection is Node's own report, exit code 1`, () => {
    const { file, status, signal, stderr } = run(build, 'reject');
    assert.equal(signal, null, 'ended by itself');
    assert.equal(status, 1, stderr);
    assert.ok(Buffer.byteLength(stderr) < 2048, `stderr is ${Buffer.byteLength(stderr)} bytes:\n${stderr.slice(0, 600)}`);
    assert.ok(stderr.split('\n')[0].includes(file.split('/').pop()), `the first line names the program: ${stderr.split('\n')[0]}`);
    assert.ok(stderr.includes('Error: the program failed'), stderr);
    assert.doesNotMatch(stderr, /attn-(relaxed-)?mt-node|\.cjs:/, 'nothing of the glue');
  });

  test(`${name}: a program that is done exits by itself, code 0`, () => {
    const { status, signal, stdout, stderr } = run(build, 'done');
    assert.equal(signal, null, 'not killed by the timeout');
    assert.equal(status, 0, stderr);
    assert.equal(stdout, 'done\n');
    assert.equal(stderr, '');
  });
}

// What the Node glue (Emscripten 3.1.6, CommonJS for the threaded builds) could do to the process:
// install handlers (NODEJS_CATCH_EXIT / NODEJS_CATCH_REJECTION, linked off), and call
// process.exit or set process.exitCode from its quit_ (reached only by a C++ exit(); the loader
// replaces it with Module.quit, which throws).
test('the Node glue installs no process handlers', () => {
  const dir = new URL('../../dist/node-mt/', import.meta.url);
  const glue = readdirSync(dir).filter((f) => f.endsWith('.cjs') || f.endsWith('.js'));
  assert.equal(glue.length, 4, `both threaded builds' glue and worker: ${glue}`);
  for (const file of glue) {
    const text = readFileSync(new URL(file, dir), 'utf8');
    assert.doesNotMatch(text, /process\[["']on["']\]|process\.on\(|["'](uncaughtException|unhandledRejection)["']/, `${file} touches process handlers`);
  }
});
