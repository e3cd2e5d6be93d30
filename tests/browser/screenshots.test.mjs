// Screenshots of every section of the demo page — desktop and a phone, English and 中文 — after a playground
// run, a finished training with its weights exported, three decoding steps and a short benchmark
// run, so that a person can look at them. This test writes them (they are not committed):
// artifacts/demo-*.png for the whole page, artifacts/sections/<view>-<section>.png for each
// section. It fails on console errors or sideways overflow.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { benchPanel, openDemo, pageShot, PHONE, sectionShot, setLanguage, startDemo } from './demo.mjs';

const SECTIONS = ['search', 'walk', 's1', 's2', 's3', 's4', 's5', 'dk', 'words', 'learn', 'position', 'heads', 'decode', 'play', 'bench'];
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

test('screenshots of every section: desktop and phone, English and 中文', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  await page.fill('input[name="seqQ"]', '96');
  await page.fill('input[name="seqK"]', '160');
  await page.check('input[name="causal"]');
  await page.click('#playground button[type="submit"]');
  await page.selectOption('#learn-speed', '60');
  await page.click('#learn-start');
  await page.waitForSelector('#play-status[data-state="result"]', { timeout: 60000 });
  await page.waitForSelector('#learn-status[data-state="converged"]', { timeout: 90000 });
  await page.click('#learn-export');
  await page.waitForSelector('#learn-export-box:not([hidden])');
  for (let i = 0; i < 3; i++) await page.click('#decode-next');
  await benchPanel(page);
  await page.evaluate(() => window.attentionDemo.benchPanel.run({ label: '(1, 4, 64, 64, 32)', batch: 1, heads: 4, seqQ: 64, seqK: 64, headDim: 32 },
    { warmMs: 50, rounds: 3, turnMs: 50, settleMs: 10 }));
  for (const [name, lang, viewport] of [['desktop', 'en', { width: 1200, height: 900 }], ['zh', 'zh'], ['mobile-zh', 'zh', PHONE], ['mobile', 'en']]) {
    if (viewport) await page.setViewportSize(viewport);
    await setLanguage(page, lang);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `${name}: no horizontal scrolling (overflow ${overflow}px)`);
    await page.screenshot({ path: pageShot(`demo-${name}.png`), fullPage: true });
    for (const id of SECTIONS) {
      await page.locator(`section[aria-labelledby="${id}"]`).screenshot({ path: sectionShot(`${name}-${id}.png`) });
    }
  }
  assert.deepEqual(problems, []);
});
