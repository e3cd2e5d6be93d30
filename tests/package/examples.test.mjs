// Every `js` code block of README.md and docs/api.md runs, verbatim, against the packed package
// installed in a scratch app (the convention, described in docs/development.md#tests):
//   - a block runs as an ES module in Node;
//   - a block whose first line is `// CommonJS` runs as CommonJS;
//   - a block whose first line is `// Browser: FILE …` is file FILE of a small web app made of the
//     browser blocks of its section (the page runs `main.js`); the app is bundled by Vite and run
//     in headless Chromium, cross-origin isolated, and must log to the console without errors.
// A block passes when it exits 0 (or, in the browser, logs) with nothing on stderr / no errors.
// (links.test.mjs checks the documents' links.)
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { launchBrowser } from '../browser/chromium.mjs';
import { bin, makeApp, REPO, run } from './app.mjs';

// The documents whose examples run.
const EXAMPLES = ['README.md', 'docs/api.md'];
const read = (doc) => readFileSync(join(REPO, doc), 'utf8');

// A document's js blocks: { doc, section, line, code, kind: 'esm' | 'cjs' | 'browser', file? }.
function blocks(doc) {
  const found = [];
  let section = '';
  const lines = read(doc).split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (/^#{1,4} /.test(lines[i])) section = lines[i].replace(/^#+ /, '');
    if (lines[i] !== '```js') continue;
    const start = i + 1;
    while (lines[++i] !== '```') assert.ok(i < lines.length, `unclosed block at ${doc}:${start}`);
    const code = lines.slice(start, i).join('\n') + '\n';
    const first = lines[start];
    const browser = first.match(/^\/\/ Browser: (\S+)/);
    found.push({ doc, section, line: start, code, kind: browser ? 'browser' : first === '// CommonJS' ? 'cjs' : 'esm', file: browser?.[1] });
  }
  return found;
}

const all = EXAMPLES.flatMap(blocks);
const name = (b) => `${b.doc}:${b.line}`;
let app;
before(() => { app = makeApp(); });
after(() => app?.remove());

test('the examples have every kind', () => {
  const kinds = new Set(all.map((b) => b.kind));
  assert.deepEqual([...kinds].sort(), ['browser', 'cjs', 'esm']);
});

describe('examples in Node', () => {
  for (const block of all.filter((b) => b.kind !== 'browser')) {
    test(`${name(block)} (${block.section}, ${block.kind})`, () => {
      const file = join(app.dir, `example-${block.doc.replace(/\W/g, '-')}-${block.line}.${block.kind === 'cjs' ? 'cjs' : 'mjs'}`);
      writeFileSync(file, block.code);
      let output;
      try {
        output = run(process.execPath, [file], app.dir, { stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (e) {
        assert.fail(`${name(block)} failed (exit ${e.status}):\n${e.stdout}${e.stderr}`);
      }
      assert.ok(typeof output === 'string');
    });
  }
});

describe('examples in Chromium', () => {
  const sections = [...new Set(all.filter((b) => b.kind === 'browser').map((b) => `${b.doc}: ${b.section}`))];
  for (const section of sections) {
    test(`${section} (browser)`, async () => {
      const dir = join(app.dir, `example-browser-${sections.indexOf(section)}`);
      mkdirSync(dir, { recursive: true });
      const files = all.filter((b) => b.kind === 'browser' && `${b.doc}: ${b.section}` === section);
      assert.ok(files.some((b) => b.file === 'main.js'), `the section's app has a main.js (${files.map((b) => b.file)})`);
      for (const b of files) writeFileSync(join(dir, b.file), b.code);
      writeFileSync(join(dir, 'index.html'), '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>example</title>' +
        '<link rel="icon" href="data:,"></head><body><script type="module" src="./main.js"></script></body></html>');
      run(bin('vite'), ['build', dir, '--logLevel', 'error', '--outDir', join(dir, 'site'), '--emptyOutDir'], app.dir);
      const server = await startServer({ root: join(dir, 'site') });
      const browser = await launchBrowser();
      try {
        const page = await browser.newPage();
        const logs = [];
        const problems = [];
        page.on('console', (m) => (m.type() === 'log' ? logs : m.type() === 'error' || m.type() === 'warning' ? problems : []).push(m.text()));
        page.on('pageerror', (e) => problems.push(e.message));
        await page.goto(server.url);
        const deadline = Date.now() + 30000;
        while (logs.length === 0 && problems.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(problems, []);
        assert.ok(logs.length > 0, 'the example logged its result');
      } finally {
        await browser.close();
        await server.close();
      }
    });
  }
});
