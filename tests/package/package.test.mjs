// The package as users get it: `npm pack`, install the tarball into a scratch app, then use it
// from Node ESM and CommonJS (both entry points) and type-check TypeScript consumers. Bundlers:
// bundlers.test.mjs; the documented examples: examples.test.mjs.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { EXPECTED, makeApp, REPO, run } from './app.mjs';

function checkResult(json, simd = 'simd128') {
  const { info, out } = JSON.parse(json);
  assert.equal(info.simd, simd);
  out.forEach((x, i) => assert.ok(Math.abs(x - EXPECTED[i]) < 1e-5, `out[${i}] = ${x}`));
  return info;
}

let app;
before(() => { app = makeApp(); });
after(() => app?.remove());

test('the tarball holds the built files, the license, the documentation and the screenshot, each once', () => {
  const files = app.tarball.files.map((f) => f.path).sort();
  const jsSources = readdirSync(join(REPO, 'src', 'js')).filter((f) => /\.(mjs|cjs)$/.test(f)).map((f) => `dist/${f}`);
  const builds = ['attn', 'attn-relaxed', 'attn-mt', 'attn-relaxed-mt'];
  // Each build's glue also starts its layers twin, which ships only its .wasm.
  const built = [...builds.flatMap((b) => [`${b}.mjs`, `${b}.wasm`, `${b.replace(/^attn/, 'attn-layers')}.wasm`]),
    'attn-mt.worker.js', 'attn-relaxed-mt.worker.js',
    'fingerprints.mjs', 'index.d.ts', 'index.d.cts', 'node-mt/package.json',
    ...['attn-mt', 'attn-relaxed-mt'].flatMap((b) => [`node-mt/${b}-node.cjs`, `node-mt/${b}-node.worker.js`])];
  // The README links into docs/ and the changelog: they ship with it, so the links work in the package.
  const docs = readdirSync(join(REPO, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
  const expected = ['LICENSE', 'README.md', 'CHANGELOG.md', ...docs, 'package.json', 'web/screenshot.png', ...built.map((f) => `dist/${f}`), ...jsSources];
  assert.deepEqual(files, expected.sort());
  const pkg = JSON.parse(run('node', ['-p', 'JSON.stringify(require("attention-wasm/package.json"))'], app.dir));
  assert.equal(pkg.dependencies, undefined, 'no runtime dependencies');
  for (const hook of ['preinstall', 'install', 'postinstall']) assert.equal(pkg.scripts?.[hook], undefined, `no ${hook} script`);
  assert.equal(pkg.license, 'MIT');
  // Only fields that are true: there is no public repository, so no repository/homepage/bugs.
  for (const field of ['repository', 'homepage', 'bugs']) assert.equal(pkg[field], undefined, field);
});

test('Node ESM: import', () => {
  const info = checkResult(run('node', ['esm.mjs'], app.dir));
  assert.ok(info.threads >= 1);
});

test('Node CommonJS: require', () => checkResult(run('node', ['cjs.cjs'], app.dir)));

test("Node: with --experimental-wasm-relaxed-simd the relaxed build loads; 'attention-wasm/simd128' is the baseline", () => {
  checkResult(run('node', ['--experimental-wasm-relaxed-simd', 'esm.mjs'], app.dir), 'relaxed-simd');
  const script = `import { loadAttention } from 'attention-wasm/simd128';
    const lib = await loadAttention(); console.log(JSON.stringify([lib.info.simd, lib.info.threads]));`;
  writeFileSync(join(app.dir, 'simd128.mjs'), script);
  assert.deepEqual(JSON.parse(run('node', ['--experimental-wasm-relaxed-simd', 'simd128.mjs'], app.dir)), ['simd128', 1]);
});

// A Node project (with @types/node, taken from this repo) and a browser project.
const TSCONFIGS = {
  'tsconfig.node.json': {
    compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', lib: ['es2022'], types: ['node'],
      typeRoots: [join(REPO, 'node_modules', '@types')] },
    files: ['typed.mts', 'typed.cts'],
  },
  'tsconfig.bundler.json': {
    compilerOptions: { module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: [] },
    files: ['typed.mts'],
  },
};

// The TypeScript of the dev dependencies (by package path: both ship a `tsc` bin) and 5.9, the
// last release before TypeScript's native port (7), whose messages differ.
const TYPESCRIPTS = { 7: 'typescript', 5.9: 'typescript-5.9' };
const tsc = (version, args, cwd) => run('node', [join(REPO, 'node_modules', TYPESCRIPTS[version], 'bin', 'tsc'), ...args], cwd);

test('TypeScript consumers type-check with --strict (nodenext ESM + CJS, bundler)', () => {
  for (const [config, json] of Object.entries(TSCONFIGS)) {
    Object.assign(json.compilerOptions, { strict: true, noEmit: true, target: 'es2022' });
    writeFileSync(join(app.dir, config), JSON.stringify(json));
    for (const version of Object.keys(TYPESCRIPTS)) {
      try {
        tsc(version, ['-p', config], app.dir);
      } catch (e) {
        assert.fail(`TypeScript ${version}, tsc -p ${config}:\n${e.stdout}${e.stderr}`);
      }
    }
  }
});

// consumer/mistakes.mts: every line after an `// error: …` comment must fail with a message that
// contains that text (it names the mistake), and no other line may fail.
test('TypeScript names the mistake in a call (7 and 5.9): a misspelled option, a value array or a missing option with a cache', () => {
  const source = readFileSync(join(app.dir, 'mistakes.mts'), 'utf8').split('\n');
  const expected = new Map();
  source.forEach((line, i) => {
    const note = line.match(/^\/\/ error: (.*)$/);
    if (note) expected.set(i + 2, note[1]);  // 1-based number of the next line
  });
  assert.ok(expected.size >= 9, `${expected.size} mistakes`);
  const config = { ...TSCONFIGS['tsconfig.bundler.json'], files: ['mistakes.mts'] };
  config.compilerOptions = { ...config.compilerOptions, strict: true, noEmit: true, target: 'es2022' };
  writeFileSync(join(app.dir, 'tsconfig.mistakes.json'), JSON.stringify(config));
  for (const version of Object.keys(TYPESCRIPTS)) {
    let output = '';
    try {
      tsc(version, ['-p', 'tsconfig.mistakes.json'], app.dir);
    } catch (e) {
      output = e.stdout;
    }
    // "mistakes.mts(12,52): error TS2561: …" and its indented detail lines, by line number.
    const messages = new Map();
    let line;
    for (const text of output.split('\n')) {
      const start = text.match(/^mistakes\.mts\((\d+),\d+\): error TS\d+: (.*)$/);
      if (start) messages.set((line = Number(start[1])), `${messages.get(line) ?? ''}${start[2]}\n`);
      else if (text.startsWith(' ') && line) messages.set(line, `${messages.get(line)}${text.trim()}\n`);
      else if (text.trim()) assert.fail(`TypeScript ${version}: an error outside mistakes.mts:\n${output}`);
    }
    assert.deepEqual([...messages.keys()].sort((a, b) => a - b), [...expected.keys()], `TypeScript ${version}: the lines that fail:\n${output}`);
    for (const [at, fragment] of expected) {
      assert.ok(messages.get(at).includes(fragment), `TypeScript ${version}, line ${at} (${source[at - 1]}):\n${messages.get(at)}\nshould say: ${fragment}`);
      assert.doesNotMatch(messages.get(at), /missing the following properties from type 'Float32Array/, `TypeScript ${version}, line ${at}`);
    }
  }
});
