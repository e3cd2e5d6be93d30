// The benchmark panel (web/bench/panel.mjs) embedded in the demo page, in headless Chromium: in
// both languages (its strings and shape labels follow the page's switch, results included), a
// short run with onnxruntime-web served as `npm start` serves it, and a phone-sized screen with
// the results table inside the page. Times are never asserted.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TEXT } from '../../web/bench/panel.mjs';
import { EN } from '../../web/i18n-en.mjs';
import { ZH } from '../../web/i18n-zh.mjs';
import { benchPanel, openDemo, PHONE, setLanguage, startDemo } from './demo.mjs';

const SMALL = { label: 'small (1, 2, 32, 32, 16)', batch: 1, heads: 2, seqQ: 32, seqK: 32, headDim: 16 };
const SHORT = { warmMs: 50, rounds: 3, turnMs: 50, settleMs: 10 };
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

const texts = (page, sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent));

test('the panel on the page: both languages, a run, results re-labelled on a switch, and it fits a phone', async () => {
  assert.deepEqual(Object.keys(ZH.benchPanel).sort(), Object.keys(TEXT).sort(), 'every string of the panel in Chinese');
  assert.deepEqual(EN.benchPanel, {}, 'English is the panel\'s own');
  const { page, problems } = await openDemo(demo.browser, demo.server.url, { viewport: PHONE });
  assert.equal(await page.evaluate(() => window.attentionDemo.benchPanel), undefined, 'not loaded with the page');
  await benchPanel(page);
  const panel = 'section[aria-labelledby="bench"] .bench-panel';
  assert.equal(await page.getAttribute(panel, 'data-state'), 'idle');
  assert.deepEqual(await texts(page, `${panel} option`), EN.benchShapes);
  assert.equal(await page.textContent(`${panel} button`), TEXT.run);
  await setLanguage(page, 'zh');
  assert.deepEqual(await texts(page, `${panel} option`), ZH.benchShapes);
  assert.equal(await page.textContent(`${panel} button`), '运行基准测试');
  await page.selectOption(`${panel} select`, '2');

  await benchPanel(page);

  const results = await page.evaluate(([shape, timing]) => window.attentionDemo.benchPanel.run(shape, timing), [SMALL, SHORT]);
  assert.equal(await page.getAttribute(panel, 'data-state'), 'done');
  assert.ok(results.threads >= 2 && results.ort, `isolated, with onnxruntime-web: ${JSON.stringify(results)}`);
  for (const r of results.rows) assert.ok(r.median > 0 && r.maxDiff < 1e-5, `${r.name}: ${JSON.stringify(r)}`);
  assert.equal(await page.textContent('.bench-panel-status'), '完成：small (1, 2, 32, 32, 16)，本设备上 3 轮的中位数。');
  const zhNames = await texts(page, `${panel} tbody th`);
  assert.ok(zhNames.includes('attention-wasm, 1 个线程') && zhNames.includes(`attention-wasm, ${results.threads} 个线程`), zhNames.join(' | '));
  assert.equal(await page.inputValue(`${panel} select`), '2', 'the pick survives a switch');
  assert.match(await page.textContent('.bench-panel-note'), /^每个引擎在自己的 Web Worker 里运行/);

  // The phone: no sideways scrolling, the table inside its section.
  const fits = () => page.evaluate((sel) => {
    const section = document.querySelector('section[aria-labelledby="bench"]').getBoundingClientRect();
    const table = document.querySelector(`${sel} table`).getBoundingClientRect();
    return { page: document.documentElement.scrollWidth - document.documentElement.clientWidth, right: table.right - section.right };
  }, panel);
  for (const lang of ['zh', 'en']) {
    await setLanguage(page, lang);
    const { page: overflow, right } = await fits();
    assert.ok(overflow <= 0 && right <= 0.5, `${lang}: the page ${overflow}px, the table ${right}px past its section`);
  }
  assert.equal(await page.textContent('.bench-panel-status'), 'Done: small (1, 2, 32, 32, 16), medians of 3 rounds on this device.');
  const names = await texts(page, `${panel} tbody th`);
  assert.ok(names.includes('attention-wasm, 1 thread') && names.includes('onnxruntime-web MHA, 1 thread'), names.join(' | '));
  assert.deepEqual(await texts(page, `${panel} option`), EN.benchShapes);
  assert.deepEqual(problems, []);
});

test('the panel\'s Cancel stops a run at once, in the page\'s language; the bars\' column says what they show', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  await benchPanel(page);
  const panel = 'section[aria-labelledby="bench"] .bench-panel';
  await setLanguage(page, 'zh');
  const [run, cancel] = await page.$$(`${panel} button`);
  assert.equal(await cancel.textContent(), '取消');
  assert.equal(await cancel.isDisabled(), true, 'nothing to cancel yet');
  await run.click();  // the BERT-base shape: far longer than this test waits
  await page.waitForSelector(`${panel}[data-state="running"]`);
  await page.waitForFunction((sel) => /测量中|正在加载/.test(document.querySelector(`${sel} .bench-panel-status`).textContent), panel);
  await cancel.click();
  await page.waitForSelector(`${panel}[data-state="cancelled"]`, { timeout: 5000 });
  assert.equal(await page.textContent('.bench-panel-status'), '已取消。');
  assert.equal(await run.isDisabled(), false);
  assert.equal(await cancel.isDisabled(), true);
  // A run afterwards works, and its bars have a column header.
  await page.evaluate(([shape, timing]) => window.attentionDemo.benchPanel.run(shape, timing), [SMALL, SHORT]);
  assert.equal(await page.getAttribute(panel, 'data-state'), 'done');
  assert.equal(await page.textContent(`${panel} thead th.bench-panel-bar-cell`), '相对速度（最快 = 满格）');
  await setLanguage(page, 'en');
  assert.equal(await page.textContent(`${panel} thead th.bench-panel-bar-cell`), 'relative speed (fastest = full bar)');
  assert.deepEqual(problems, []);
});
