// The demo page `npm start` serves, in headless Chromium: no console errors, every number of the
// walk-through equal to a plain JS reference, the masks, the language switch, the highlights,
// the playground, a strict Content-Security-Policy, and a narrow screen. Screenshots go to
// artifacts/ (not committed).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { referenceAttention, referenceLinear } from '../js/reference.mjs';
import { ARTIFACTS, launchBrowser, openPage } from './chromium.mjs';

const STRICT_CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; object-src 'none'; base-uri 'none'";
let server, strictServer, plainServer, browser;
before(async () => {
  server = await startServer();  // cross-origin isolated, as `npm start` serves it
  strictServer = await startServer({ headers: { 'Content-Security-Policy': STRICT_CSP } });
  plainServer = await startServer({ isolated: false });
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.close();
  await strictServer?.close();
  await plainServer?.close();
});

async function openDemo(url = server.url, viewport) {
  const opened = await openPage(browser, `${url}web/`, viewport ? { viewport } : undefined);
  await opened.page.waitForSelector('body[data-ready]', { timeout: 20000 });
  assert.equal(await opened.page.getAttribute('body', 'data-ready'), 'true', await opened.page.textContent('#status'));
  return opened;
}

const demoState = (page) => page.evaluate(() => window.attentionDemo);
const near = (got, want, what, tol = 2e-5) => {
  assert.equal(got.length, want.length, what);
  got.forEach((x, i) => assert.ok(Math.abs(x - want[i]) <= tol + 1e-4 * Math.abs(want[i]), `${what}[${i}]: ${x} vs ${want[i]}`));
};

// Recomputes every matrix of the walk-through from the page's inputs and weights.
function checkWalkthrough(s) {
  const f32 = (a) => new Float32Array(a);
  const q = referenceLinear(s.inputs, 4, 4, s.wq, null, 4);
  const k = referenceLinear(s.inputs, 4, 4, s.wk, null, 4);
  const v = referenceLinear(s.inputs, 4, 4, s.wv, null, 4);
  near(s.query, q, 'Q');
  near(s.key, k, 'K');
  near(s.value, v, 'V');
  near(s.scores, referenceLinear(q, 4, 4, k, null, 4), 'Q·Kᵀ');
  near(s.scaled, s.scores.map((x) => x / 2), 'Q·Kᵀ/√d');
  const want = referenceAttention(f32(s.query), f32(s.key), f32(s.value), { ...s.options, mask: new Uint8Array(s.options.mask) });
  near(s.weights, want.weights, 'weights');
  near(s.outputs, want.out, 'outputs');
  near(s.fromLayer, want.out, 'the layer\'s outputs');
}

test('the walk-through shows the library\'s numbers, equal to a JS reference', async () => {
  const { page, problems } = await openDemo();
  const s = await demoState(page);
  assert.ok(s.info.threads > 1, `an isolated page gets threads (${s.info.threadsReason})`);
  assert.match(await page.textContent('#status'), new RegExp(`^Computed by attention-wasm \\d+\\.\\d+\\.\\d+ \\(simd128, ${s.info.threads} threads\\)\\.$`));
  checkWalkthrough(s);
  // The tables show the same numbers (3 decimals).
  const shown = await page.$$eval('#outputs td', (tds) => tds.map((td) => Number(td.textContent)));
  shown.forEach((x, i) => assert.ok(Math.abs(x - s.outputs[i]) <= 0.0005 + 1e-9, `shown output ${i}`));
  const sums = await page.$$eval('#weights tbody tr', (rows) => rows.map((r) => r.cells[r.cells.length - 1].textContent));
  assert.deepEqual(sums, ['1.000', '1.000', '1.000', '1.000']);
  assert.match(await page.textContent('#layer-check'), /largest difference \d\.\de[-+]\d+/);

  // Editing an input recomputes everything from it.
  await page.fill('#inputs tbody tr:nth-child(2) td:nth-child(3) input', '1.5');
  await page.press('#inputs tbody tr:nth-child(2) td:nth-child(3) input', 'Enter');
  const edited = await demoState(page);
  assert.equal(edited.inputs[1 * 4 + 1], 1.5);
  checkWalkthrough(edited);
  await page.click('#reset');
  assert.deepEqual((await demoState(page)).inputs, s.inputs);
  await page.screenshot({ path: new URL('demo-desktop.png', ARTIFACTS).pathname, fullPage: true });
  assert.deepEqual(problems, []);
});

test('the causal mask and key masks change the weights as expected', async () => {
  const { page, problems } = await openDemo();
  await page.check('#causal');
  let s = await demoState(page);
  assert.equal(s.options.causal, true);
  checkWalkthrough(s);
  for (let i = 0; i < 4; i++) {
    for (let j = i + 1; j < 4; j++) assert.equal(s.weights[i * 4 + j], 0, `causal weight (${i}, ${j})`);
  }
  assert.equal(s.weights[0], 1, 'the first token attends only to itself');
  await page.uncheck('#causal');
  await page.check('#key-masks input[data-key="2"]');
  s = await demoState(page);
  checkWalkthrough(s);
  for (let i = 0; i < 4; i++) assert.equal(s.weights[i * 4 + 2], 0, `masked key 3 in row ${i}`);
  // Causal plus masking k¹ leaves the first row with no key: zeros, not NaN.
  await page.check('#causal');
  await page.check('#key-masks input[data-key="0"]');
  s = await demoState(page);
  checkWalkthrough(s);
  assert.deepEqual(s.outputs.slice(0, 4), [0, 0, 0, 0]);
  assert.deepEqual(problems, []);
});

test('the language switch, and highlights by mouse and keyboard', async () => {
  const { page, problems } = await openDemo();
  const english = await page.textContent('h2');
  await page.click('button[data-lang="zh"]');
  assert.equal(await page.getAttribute('html', 'lang'), 'zh-CN');
  assert.equal(await page.getAttribute('button[data-lang="zh"]', 'aria-pressed'), 'true');
  assert.equal(await page.textContent('h2'), '注意力机制，一步一步');
  assert.match(await page.textContent('#status'), /^由 attention-wasm .* 计算/);
  await page.hover('#outputs tbody tr:nth-child(2)');
  assert.equal(await page.getAttribute('#weights tbody tr:nth-child(2)', 'class'), 'highlight');
  await page.screenshot({ path: new URL('demo-zh.png', ARTIFACTS).pathname, fullPage: true });
  await page.focus('#outputs tbody tr:nth-child(3)');
  assert.equal(await page.getAttribute('#weights tbody tr:nth-child(3)', 'class'), 'highlight');
  assert.equal(await page.getAttribute('#weights tbody tr:nth-child(2)', 'class'), '');
  await page.click('button[data-lang="en"]');
  assert.equal(await page.textContent('h2'), english);
  assert.deepEqual(problems, []);
});

async function runPlayground(page) {
  await page.fill('input[name="heads"]', '2');
  await page.fill('input[name="kvHeads"]', '1');
  await page.fill('input[name="seqQ"]', '64');
  await page.fill('input[name="seqK"]', '96');
  await page.fill('input[name="headDim"]', '16');
  await page.click('#playground button[type="submit"]');
  await page.waitForSelector('#play-status[data-speedup]', { timeout: 60000 });
  assert.match(await page.textContent('#play-status'), /^attention-wasm [\d.]+ ms \([\d.]+ GFLOP\/s\) · plain JavaScript [\d.]+ ms · speed-up [\d.]+× · largest difference/);
  assert.ok(Number(await page.getAttribute('#play-status', 'data-speedup')) > 0);
  assert.ok(Number(await page.getAttribute('#play-status', 'data-max-diff')) < 1e-5, 'the library agrees with plain JS');
  assert.equal(await page.isVisible('#heatmap'), true);
}

test('the playground runs a shape in a Web Worker and reports a speed-up', async () => {
  const { page, problems } = await openDemo();
  await runPlayground(page);
  assert.deepEqual(problems, []);
});

test('under a strict Content-Security-Policy everything still works', async () => {
  const { page, problems } = await openDemo(strictServer.url);
  checkWalkthrough(await demoState(page));
  await runPlayground(page);
  assert.deepEqual(problems, []);
});

test('without cross-origin isolation: one thread, the reason shown, the same numbers', async () => {
  const { page, problems } = await openDemo(plainServer.url);
  const s = await demoState(page);
  assert.deepEqual([s.info.threads, s.info.threadsReason], [1, 'not cross-origin isolated (no SharedArrayBuffer)']);
  assert.match(await page.textContent('#status'), /\(simd128, 1 thread: not cross-origin isolated \(no SharedArrayBuffer\)\)\.$/);
  checkWalkthrough(s);
  await runPlayground(page);
  assert.deepEqual(problems, []);
});

test('a narrow (mobile) screen: readable, no horizontal scrolling', async () => {
  const { page, problems } = await openDemo(server.url, { width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling (overflow ${overflow}px)`);
  await page.screenshot({ path: new URL('demo-mobile.png', ARTIFACTS).pathname, fullPage: true });
  assert.deepEqual(problems, []);
});

test('watch it learn: training in a Web Worker lowers the loss and sharpens the weights', async () => {
  const { page, problems } = await openDemo(strictServer.url);  // strict CSP, isolated
  await page.click('#learn-start');
  await page.waitForFunction(() => Number(document.getElementById('learn-status').dataset.step) >= 150, null, { timeout: 60000 });
  await page.click('#learn-stop');
  const first = Number(await page.getAttribute('#learn-status', 'data-first-loss'));
  const last = Number(await page.getAttribute('#learn-status', 'data-loss'));
  assert.ok(last < first / 3, `loss ${first} → ${last}`);
  const rows = await page.$$eval('#learn-weights tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((c) => Number(c.textContent))));
  assert.equal(rows.length, 6);
  for (const row of rows) assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 0.05, `row sums to 1: ${row}`);
  assert.match(await page.textContent('#learn-status'), /^step \d+, loss \d\.\d\de[-+]\d+$/);
  await page.screenshot({ path: new URL('demo-learn.png', ARTIFACTS).pathname, fullPage: true });
  assert.deepEqual(problems, []);
});
