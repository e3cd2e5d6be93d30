// The page `npm start` serves, in headless Chromium: loads without console errors, shows
// numbers that equal the JS reference, reacts to the causal toggle, and measures speed.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startServer } from '../../scripts/serve.mjs';
import { referenceAttention } from '../js/reference.mjs';
import { ARTIFACTS, launchBrowser, openPage } from './chromium.mjs';

let server, browser;
before(async () => {
  server = await startServer();
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
  await server?.close();
});

const demoState = (page) => page.evaluate(() => {
  const d = window.attentionDemo;
  return { query: [...d.query], key: [...d.key], value: [...d.value], options: d.options, weights: [...d.weights], output: [...d.output] };
});

function checkNumbers(state) {
  const f32 = (a) => new Float32Array(a);
  const want = referenceAttention(f32(state.query), f32(state.key), f32(state.value), state.options);
  state.weights.forEach((w, i) => assert.ok(Math.abs(w - want.weights[i]) < 1e-5, `weight ${i}: ${w} vs ${want.weights[i]}`));
  state.output.forEach((o, i) => assert.ok(Math.abs(o - want.out[i]) < 1e-5, `output ${i}: ${o} vs ${want.out[i]}`));
}

test('the demo page computes attention in the browser and shows it', async () => {
  const { page, problems } = await openPage(browser, `${server.url}web/`);
  await page.waitForSelector('body[data-ready]', { timeout: 20000 });
  assert.equal(await page.getAttribute('body', 'data-ready'), 'true', await page.textContent('#status'));
  assert.match(await page.textContent('#status'), /^Computed by attention-wasm \d+\.\d+\.\d+ \(simd128, 1 thread\)\.$/);

  const state = await demoState(page);
  checkNumbers(state);
  // The tables show the same numbers (3 decimals).
  const shown = await page.$$eval('#output td', (tds) => tds.map((td) => Number(td.textContent)));
  shown.forEach((x, i) => assert.ok(Math.abs(x - state.output[i]) <= 0.0005 + 1e-9, `shown output ${i}`));
  await page.screenshot({ path: new URL('page-desktop.png', ARTIFACTS).pathname, fullPage: true });

  await page.check('#causal');
  const causal = await demoState(page);
  assert.equal(causal.options.causal, true);
  checkNumbers(causal);
  for (let i = 0; i < 4; i++) {
    for (let j = i + 1; j < 4; j++) assert.equal(causal.weights[i * 4 + j], 0, `causal weight (${i}, ${j})`);
  }

  await page.click('#measure');
  await page.waitForFunction(() => /GFLOP\/s/.test(document.getElementById('speed').textContent), null, { timeout: 60000 });
  assert.match(await page.textContent('#speed'), /^median of 7 runs: [\d.]+ ms, [\d.]+ GFLOP\/s$/);
  assert.deepEqual(problems, []);
});

test('the page is readable on a narrow (mobile) viewport', async () => {
  const { page, problems } = await openPage(browser, `${server.url}web/`, { viewport: { width: 390, height: 844 } });
  await page.waitForSelector('body[data-ready="true"]', { timeout: 20000 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling (overflow ${overflow}px)`);
  await page.screenshot({ path: new URL('page-mobile.png', ARTIFACTS).pathname, fullPage: true });
  assert.deepEqual(problems, []);
});
