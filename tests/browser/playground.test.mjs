// The demo page's playground in headless Chromium: a run in a Web Worker against plain
// JavaScript, skipping plain JavaScript, Cancel, GFLOP/s from the exact count of visible pairs
// under the (bottom-right aligned) causal mask, a heatmap that shows the position pattern (at
// most 512 px and at least 48 px either way, whatever the shape), an error that goes once the
// form is fixed, and what loads when: the playground's code and the worker's threaded build once the
// playground comes near (the page's own build is the single-threaded one), and a Run from afar
// before that.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openDemo, sectionShot, setLanguage, startDemo } from './demo.mjs';

let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

async function run(page, shape, { plain = true, pattern = 'positions' } = {}) {
  for (const [name, value] of Object.entries(shape)) {
    if (name === 'causal') await page.setChecked('input[name="causal"]', value);
    else await page.fill(`input[name="${name}"]`, String(value));
  }
  await page.setChecked('input[name="plain"]', plain);
  await page.selectOption('select[name="pattern"]', pattern);
  await page.click('#playground button[type="submit"]');
  await page.waitForSelector('#play-status:is([data-state="result"], [data-state="error"])', { timeout: 60000 });
  assert.equal(await page.getAttribute('#play-status', 'data-state'), 'result', await page.textContent('#play-status'));
  return page.evaluate(() => { const r = window.playgroundResult; return r && { ...r, weights: r.weights && [...r.weights], pixels: undefined }; });
}

// Query i sees key j iff j ≤ i + seqK − seqQ (the library's causal rule), counted one by one.
function countVisible(seqQ, seqK) {
  let pairs = 0;
  for (let i = 0; i < seqQ; i++) for (let j = 0; j < seqK; j++) if (j <= i + seqK - seqQ) pairs++;
  return pairs;
}

test('a run in a Web Worker: the library against plain JavaScript, and the heatmap of the position pattern', async () => {
  const wasm = [];
  const { page, problems } = await openDemo(demo.browser, demo.server.url, { onResponse: (r) => { if (r.url().endsWith('.wasm')) wasm.push(r.url().split('/').pop()); } });
  assert.deepEqual(wasm, ['attn-layers-relaxed.wasm'], 'the page loads the single-threaded layers build');
  // Near the playground its worker loads the build for an isolated page, threaded, before any Run.
  await page.locator('#playground').scrollIntoViewIfNeeded();
  for (const t0 = Date.now(); wasm.length < 2 && Date.now() - t0 < 20000;) await page.waitForTimeout(50);
  assert.deepEqual(wasm, ['attn-layers-relaxed.wasm', 'attn-relaxed-mt.wasm'], 'the playground needs no layer: the inference build');
  const r = await run(page, { heads: 2, kvHeads: 1, seqQ: 64, seqK: 96, headDim: 16, causal: false });
  assert.ok(r.library.threads > 1, `the playground's worker has threads: ${r.library.threadsReason}`);
  assert.match(await page.textContent('#play-status'), new RegExp(`^attention-wasm [\\d.]+ ms \\(${r.library.threads} threads; median of [1-5]; [\\d.]+ GFLOP/s over 12,288 visible query–key pairs\\) · plain JavaScript [\\d.]+ ms · speed-up [\\d.]+× · largest difference`));
  assert.ok(r.maxDiff < 1e-5, `the library agrees with plain JS: ${r.maxDiff}`);
  assert.equal(r.flops, 4 * 16 * 2 * 64 * 96);
  assert.equal(await page.isVisible('#heatmap'), true);
  // Position codes: every query's largest weight is on the key at its own position.
  for (let i = 0; i < 64; i++) {
    const row = r.weights.slice(i * 96, i * 96 + 96);
    assert.equal(row.indexOf(Math.max(...row)), i + 32, `row ${i}`);
  }
  await run(page, { seqQ: 40, seqK: 40 }, { pattern: 'random' });
  assert.equal(wasm.length, 2, 'the worker is reused');
  assert.match(await page.textContent('#heatmap-caption'), /Random inputs have no pattern/);
  assert.deepEqual(problems, []);
});

test('one thread in a page that is not cross-origin isolated: the reason in the page\'s language', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.plainServer.url);
  await setLanguage(page, 'zh');
  await page.locator('#playground').scrollIntoViewIfNeeded();
  const r = await run(page, { heads: 2, kvHeads: 1, seqQ: 16, seqK: 16, headDim: 8, causal: false }, { plain: false });
  assert.deepEqual([r.library.threads, r.library.threadsReason], [1, 'not cross-origin isolated (no SharedArrayBuffer)']);
  const zh = await page.textContent('#play-status');
  assert.match(zh, /^attention-wasm [\d.]+ 毫秒（1 个线程：页面未跨源隔离（没有 SharedArrayBuffer）；/);
  assert.doesNotMatch(zh, /isolated/);
  await page.locator('#play-status').screenshot({ path: sectionShot('playground-zh-one-thread.png') });
  await setLanguage(page, 'en');
  assert.match(await page.textContent('#play-status'), /^attention-wasm [\d.]+ ms \(1 thread: not cross-origin isolated \(no SharedArrayBuffer\); median of/);
  assert.deepEqual(problems, []);
});

test('the playground\'s code loads when it comes near; a Run from afar, before that, waits for it and runs once', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const loaded = () => page.evaluate(() => performance.getEntriesByType('resource').map((e) => e.name.split('/').pop())
    .filter((name) => name.startsWith('playground')));
  assert.deepEqual(await loaded(), [], 'not with the page');
  // Submitted without scrolling there (as a script or an assistive tool may): no navigation away.
  await page.evaluate(() => {
    window.runs = 0;
    document.getElementById('playground').addEventListener('submit', () => { window.runs += 1; });
    document.querySelector('#playground button[type="submit"]').click();
  });
  await page.waitForSelector('#play-status[data-state="result"]', { timeout: 60000 });
  assert.deepEqual((await loaded()).sort(), ['playground-worker.mjs', 'playground.mjs']);
  assert.equal(await page.evaluate(() => window.runs), 2, 'the click, then the Run once the code was in');
  assert.equal(new URL(page.url()).search, '', 'the page did not navigate');
  assert.deepEqual(problems, []);
});

test('causal runs count the visible pairs exactly, also when the lengths differ', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const [seqQ, seqK] of [[64, 96], [96, 64], [50, 50]]) {
    const r = await run(page, { batch: 2, heads: 2, kvHeads: 2, seqQ, seqK, headDim: 8, causal: true }, { plain: seqQ === 96 });
    const pairs = countVisible(seqQ, seqK);
    assert.equal(r.pairs, 2 * 2 * pairs, `${seqQ}×${seqK}`);
    assert.equal(r.flops, 4 * 8 * 2 * 2 * pairs);
    assert.ok(Math.abs(r.gflops - r.flops / (r.ms * 1e6)) < 1e-9 * r.gflops);
    // Hidden keys have weight 0, and with position codes the last visible key is the largest.
    for (let i = 0; i < seqQ; i++) {
      const row = r.weights.slice(i * seqK, (i + 1) * seqK);
      const visible = Math.max(0, Math.min(seqK, i + 1 + seqK - seqQ));
      assert.ok(row.slice(visible).every((w) => w === 0), `${seqQ}×${seqK} row ${i}: hidden keys`);
      if (visible > 0) assert.equal(row.indexOf(Math.max(...row)), visible - 1, `${seqQ}×${seqK} row ${i}: peak`);
    }
    if (seqQ === 96) assert.ok(r.maxDiff < 1e-5);
  }
  assert.deepEqual(problems, []);
});

test('plain JavaScript can be skipped, and Cancel stops a long run at once', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const r = await run(page, { seqQ: 128, seqK: 128 }, { plain: false });
  assert.equal(r.plainMs, null);
  assert.match(await page.textContent('#play-status'), /· plain JavaScript skipped$/);
  assert.equal(await page.getAttribute('#play-status', 'data-speedup'), '');

  // 16 heads × 2048² × 64 with plain JavaScript takes tens of seconds: cancel it while it runs.
  for (const [name, value] of Object.entries({ heads: 16, kvHeads: 16, seqQ: 2048, seqK: 2048, headDim: 64 })) {
    await page.fill(`input[name="${name}"]`, String(value));
  }
  await page.check('input[name="plain"]');
  await page.click('#playground button[type="submit"]');
  assert.equal(await page.getAttribute('#play-status', 'data-state'), 'running');
  assert.equal(await page.isDisabled('#playground button[type="submit"]'), true);
  await page.waitForTimeout(500);
  const t0 = Date.now();
  await page.click('#play-cancel');
  assert.equal(await page.getAttribute('#play-status', 'data-state'), 'cancelled');
  assert.equal(await page.textContent('#play-status'), 'Cancelled.');
  assert.ok(Date.now() - t0 < 2000, 'cancelled at once');
  assert.equal(await page.isDisabled('#play-cancel'), true);
  assert.equal(await page.isDisabled('#playground button[type="submit"]'), false);
  // The page stayed responsive, and the next run works (in a new worker).
  assert.equal(await page.evaluate(() => 1 + 1), 2);
  const next = await run(page, { heads: 1, kvHeads: 1, seqQ: 16, seqK: 16, headDim: 8 });
  assert.ok(next.maxDiff < 1e-5);
  assert.deepEqual(problems, []);
});

test('a shape the heads cannot share is refused before it runs, in the page\'s language, and the error goes once the form is fixed', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  await setLanguage(page, 'zh');
  await page.fill('input[name="heads"]', '8');
  await page.fill('input[name="kvHeads"]', '3');
  await page.click('#playground button[type="submit"]');
  assert.equal(await page.getAttribute('#play-status', 'data-state'), 'invalid');
  assert.equal(await page.textContent('#play-status'), '各个头按相等的组共用 K/V 头，所以头数必须是 K/V 头数的倍数：8 个头不能平分 3 个 K/V 头。');
  assert.equal(await page.isDisabled('#playground button[type="submit"]'), false, 'nothing started');
  await setLanguage(page, 'en');
  assert.match(await page.textContent('#play-status'), /^The heads share the kv heads in equal groups.*8 heads cannot share 3 kv heads\.$/);
  await page.fill('input[name="heads"]', '10');  // still wrong: the message follows the form
  assert.match(await page.textContent('#play-status'), /10 heads cannot share 3 kv heads\.$/);
  await page.fill('input[name="kvHeads"]', '5');  // fixed: the error goes at once, before any run
  assert.equal(await page.textContent('#play-status'), '');
  assert.equal(await page.getAttribute('#play-status', 'data-state'), '');
  assert.equal(await page.$eval('#play-status', (s) => s.classList.contains('error')), false);
  await page.fill('input[name="seqQ"]', '16');
  await page.fill('input[name="seqK"]', '16');
  await page.click('#playground button[type="submit"]');
  await page.waitForSelector('#play-status[data-state="result"]', { timeout: 60000 });
  assert.deepEqual(problems, []);
});

// The heatmap has a pixel per weight, drawn at most 512 px and at least 48 px along each side: a
// 512 × 1 run is a column, 1 × 512 a band (not 262,144 px tall, not a 3 px strip); on a phone it
// keeps its shape within the screen, and it has an accessible name.
test('the heatmap\'s size is capped both ways: 512 × 1, 1 × 512, 200 × 100, on a desktop and a phone', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const box = () => page.$eval('#heatmap', (c) => { const b = c.getBoundingClientRect(); return { w: b.width, h: b.height, name: c.getAttribute('aria-label') }; });
  for (const [seqQ, seqK, w, h] of [[512, 1, 48, 512], [1, 512, 512, 48], [200, 100, 256, 512], [64, 64, 512, 512]]) {
    await run(page, { heads: 1, kvHeads: 1, seqQ, seqK, headDim: 8 }, { plain: false });
    const b = await box();
    assert.ok(Math.abs(b.w - 2 - w) < 1.5 && Math.abs(b.h - 2 - h) < 1.5, `${seqQ} × ${seqK}: ${b.w} × ${b.h} px (with its border)`);
    assert.match(b.name, /^Attention weights of batch 1, head 1/);
  }
  await page.setViewportSize({ width: 390, height: 844 });
  const phone = await box();
  assert.ok(phone.w <= 390 && Math.abs(phone.w / phone.h - 1) < 0.02, `a phone: ${phone.w} × ${phone.h}`);
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), 0);
  assert.deepEqual(problems, []);
});
