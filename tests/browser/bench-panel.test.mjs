// The "Benchmark in your browser" panel (web/bench/panel.mjs) in headless Chromium, mounted by a
// test page (bench-panel/) under a strict Content-Security-Policy: on a cross-origin-isolated page
// whose server serves onnxruntime-web (as `npm start` does) it times ours, plain JS and ORT at 1
// and at all threads, with results that agree, and update() relabels them; without isolation and
// without ORT's files it compares ours with plain JS on 1 thread and says why. Times are never
// asserted.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../scripts/serve.mjs';
import { ARTIFACTS, launchBrowser, openPage } from './chromium.mjs';

const STRICT_CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; object-src 'none'; base-uri 'none'";
const mounts = { '/test/': fileURLToPath(new URL('./bench-panel/', import.meta.url)) };
let full, bare, browser;
before(async () => {
  full = await startServer({ mounts, headers: { 'Content-Security-Policy': STRICT_CSP } });
  bare = await startServer({ isolated: false, mounts: { ...mounts, '/vendor/onnxruntime-web/': null } });
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await full?.close();
  await bare?.close();
});

async function runPanel(server, shapeIndex = 0) {
  const opened = await openPage(browser, `${server.url}test/`);
  const { page } = opened;
  await page.waitForSelector('.bench-panel[data-state="idle"]');
  await page.selectOption('.bench-panel select', String(shapeIndex));
  await page.click('.bench-panel button');
  assert.equal(await page.getAttribute('.bench-panel button', 'disabled'), '', 'the button is disabled while it runs');
  await page.waitForSelector('.bench-panel[data-state="done"], .bench-panel[data-state="error"]', { timeout: 90000 });
  assert.equal(await page.getAttribute('#panel', 'data-state'), 'done', await page.textContent('.bench-panel-status'));
  const results = await page.evaluate(() => window.panel.results);
  const shown = await page.$$eval('.bench-panel-results tbody tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  return { ...opened, results, shown };
}

function checkTimed(rows) {
  for (const r of rows) {
    assert.ok(r.median > 0 && r.gflops > 0, `${r.name} was timed: ${JSON.stringify(r)}`);
    assert.ok(r.maxDiff < 1e-5, `${r.name} agrees with attention-wasm (max |Δ| ${r.maxDiff})`);
  }
}

test('isolated, with onnxruntime-web served: ours, plain JS and ORT at 1 and all threads, results agreeing', async () => {
  const { page, problems, results, shown } = await runPanel(full, 1);
  const threads = results.threads;
  assert.ok(threads >= 2, `a cross-origin-isolated page uses the cores (${threads})`);
  assert.equal(results.ort, true);
  assert.equal(results.shape.causal, true, 'the chosen shape ran');
  const names = results.rows.map((r) => r.name);
  assert.deepEqual(names.sort(), ['attention-wasm 1T', `attention-wasm ${threads}T`, 'onnxruntime-web MHA 1T', `onnxruntime-web MHA ${threads}T`,
    'onnxruntime-web ops 1T', `onnxruntime-web ops ${threads}T`, 'plain JS'].sort());
  checkTimed(results.rows);
  assert.equal(shown.length, results.rows.length);
  assert.ok(shown.some(([name]) => name === `attention-wasm, ${threads} threads`), JSON.stringify(shown));
  assert.ok(shown.some(([name]) => name === 'onnxruntime-web MHA, 1 thread'), JSON.stringify(shown));
  for (const [, time, gflops, relative] of shown) {
    assert.match(time, /^\d+(\.\d+)? ms \[\d+(\.\d+)?–\d+(\.\d+)?\]$/);
    assert.match(gflops, /^\d+\.\d$/);
    assert.match(relative, /^\d+\.\d\d×$/);
  }
  assert.equal(await page.textContent('.bench-panel-status'), 'Done: small causal (1, 4, 64, 64, 32), medians of 3 rounds on this device.');
  await page.screenshot({ path: new URL('bench-panel.png', ARTIFACTS).pathname, fullPage: true });
  // update(): other strings and shape labels (a page's language switch), the results kept.
  const shapes = await page.evaluate(() => [...document.querySelectorAll('.bench-panel option')].map((o) => o.textContent));
  await page.evaluate(() => window.panel.update({
    text: { done: 'Fertig: {shape}, {rounds} Runden.', oneThread: '1 Thread', engine: 'Engine' },
    shapes: [{ label: 'A' }, { label: 'B' }].map((s, i) => ({ batch: 1, heads: 4, seqQ: 64, seqK: 64, headDim: 32, causal: i === 1, ...s })),
  }));
  assert.equal(await page.textContent('.bench-panel-status'), 'Fertig: B, 3 Runden.');
  assert.deepEqual(await page.evaluate(() => [...document.querySelectorAll('.bench-panel option')].map((o) => o.textContent)), ['A', 'B']);
  assert.equal(await page.inputValue('.bench-panel select'), '1', 'the pick stays');
  assert.ok((await page.textContent('.bench-panel-results')).includes('attention-wasm, 1 Thread'));
  assert.equal(await page.textContent('.bench-panel-results thead th'), 'Engine');
  assert.equal(await page.textContent('.bench-panel button'), 'Run benchmark', 'strings not given stay English');
  assert.equal(shapes.length, 2);
  const wrong = await page.evaluate(() => { try { window.panel.update({ shapes: [] }); } catch (e) { return e.message; } return null; });
  assert.equal(wrong, 'mountBenchPanel: update({ shapes }) needs 2 shapes, got 0');
  assert.deepEqual(problems, []);
});

test('not isolated, no onnxruntime-web files: ours and plain JS on 1 thread, and the note says why', async () => {
  const { page, problems, results, shown } = await runPanel(bare);
  assert.equal(results.threads, 1);
  assert.equal(results.ort, false);
  assert.deepEqual(results.rows.map((r) => r.name), ['attention-wasm 1T', 'plain JS']);
  checkTimed(results.rows);
  assert.equal(shown.length, 2);
  const note = await page.textContent('.bench-panel-note');
  assert.match(note, /not cross-origin isolated/);
  assert.match(note, /onnxruntime-web is not served here \(http:\/\/127\.0\.0\.1:\d+\/vendor\/onnxruntime-web\/\)/);
  // The HEAD probe for ORT's files is the one expected 404.
  assert.deepEqual(problems.filter((p) => !/status of 404/.test(p)), []);
});

test('mountBenchPanel checks its element, and destroy() empties it', async () => {
  const { page } = await openPage(browser, `${bare.url}test/`);
  await page.waitForSelector('.bench-panel[data-state="idle"]');
  const error = await page.evaluate(async () => {
    const { mountBenchPanel } = await import('/web/bench/panel.mjs');
    try {
      mountBenchPanel(null);
      return null;
    } catch (e) {
      return `${e.name}: ${e.message}`;
    }
  });
  assert.equal(error, 'TypeError: mountBenchPanel: element must be an HTMLElement, got null');
  // The figures are medians of rounds: an even number of rounds (a median of 2 is no round's) is refused.
  const even = await page.evaluate(async () => {
    const { mountBenchPanel } = await import('/web/bench/panel.mjs');
    const said = [];
    for (const timing of [{ rounds: 2 }, { slowRounds: 2 }]) {
      try { mountBenchPanel(document.createElement('div'), { timing }); said.push(null); } catch (e) { said.push(`${e.name}: ${e.message}`); }
    }
    try { await window.panel.run(undefined, { rounds: 4 }); said.push(null); } catch (e) { said.push(`${e.name}: ${e.message}`); }
    return said;
  });
  assert.deepEqual(even, [['rounds', 2], ['slowRounds', 2], ['rounds', 4]].map(([key, v]) =>
    `RangeError: mountBenchPanel: timing.${key} must be an odd whole number (the figures are medians of the rounds), got ${v}`));
  assert.equal(await page.getAttribute('#panel', 'data-state'), 'idle', 'a refused run does not start');
  await page.evaluate(() => window.panel.destroy());
  assert.equal(await page.$('.bench-panel'), null);
  assert.equal(await page.innerHTML('#panel'), '');
});
