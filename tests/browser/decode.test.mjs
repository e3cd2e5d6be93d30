// The demo page's "Decoding with a KV cache" section in headless Chromium: words arrive one by
// one into a lib.createKVCache() cache (linear, and a sliding-window ring), each new query over
// the cache against tests/js/reference.mjs, hidden keys shown as such; and the pictures of the
// masks and score variants (causal both ways, window, sinks, ALiBi, softcap), each against the
// reference with the same options, greyed exactly where the reference hides keys.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { referenceAttention, referenceLinear, visibleByPosition } from '../js/reference.mjs';
import { demoState, near, openDemo, setLanguage, shownAs, startDemo, tableCells } from './demo.mjs';

const E = 4, WINDOW = 3;
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

const cellInfo = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => [...tr.cells].filter((c) => c.tagName === 'TD')
  .map((td) => ({ text: td.textContent, cls: td.className, title: td.title }))));

// Checks the state after `t` steps: step s's query over the cached positions 0..s (the last
// WINDOW with the ring) equals the reference, and so do the tables.
async function checkSteps(page, t, windowed) {
  const d = (await demoState(page)).decode;
  const n = d.tokens.length;
  assert.equal(d.windowed, windowed);
  assert.equal(d.steps.length, t);
  assert.equal(Number(await page.getAttribute('#decode-status', 'data-step')), t);
  const keys = d.embedding;  // W_k = W_v = I
  const queries = referenceLinear(keys, n, E, d.wq, null, E);
  d.steps.forEach((s, i) => {
    assert.equal(s.length, i + 1, 'cache.length counts every position appended');
    assert.equal(s.bytes, windowed ? 2 * WINDOW * E * 4 : 2 * n * E * 4, 'cache.bytes: room for maxSeq (or the ring)');
    near(s.query, queries.slice(i * E, (i + 1) * E), `step ${i + 1}: the query`);
    const want = referenceAttention(queries.slice(i * E, (i + 1) * E), keys.slice(0, (i + 1) * E), keys.slice(0, (i + 1) * E),
      { heads: 1, seqQ: 1, seqK: i + 1, headDim: E, causal: true, window: windowed ? [WINDOW - 1, 0] : undefined });
    near(s.weights, want.weights, `step ${i + 1}: α̂ over the cache`);
    near(s.out, want.out, `step ${i + 1}: b`);
  });
  const whole = referenceAttention(queries.slice(0, t * E), keys.slice(0, t * E), keys.slice(0, t * E),
    { heads: 1, seqQ: t, headDim: E, causal: true, window: windowed ? [WINDOW - 1, 0] : undefined });
  near(d.steps.flatMap((s) => s.out), whole.out, 'the steps give one causal call over the prefix');
  assert.ok(d.diff < 1e-6, `the page's own check: ${d.diff}`);
  // The weights table: a row per step; keys not yet arrived are blank, keys out of the window 0.
  const cells = await cellInfo(page, '#decode-weights');
  assert.equal(cells.length, t);
  cells.forEach((row, i) => row.forEach((c, j) => {
    if (j > i) assert.deepEqual([c.text, /masked-causal/.test(c.cls)], ['', true], `(${i}, ${j}) has not arrived`);
    else if (windowed && j <= i - WINDOW) assert.deepEqual([c.text, /masked-key/.test(c.cls)], ['0', true], `(${i}, ${j}) left the window`);
    else assert.ok(Math.abs(Number(c.text) - d.steps[i].weights[j]) <= 0.005, `(${i}, ${j}) shows its weight`);
  }));
  shownAs(await tableCells(page, '#decode-outputs'), d.steps.flatMap((s) => s.out), 2, 'shown b');
  const held = await page.$$eval('#decode-cache tbody tr', (trs) => trs.map((tr) => tr.classList.contains('dropped')));
  assert.deepEqual(held, Array.from({ length: t }, (_, j) => windowed && j <= t - 1 - WINDOW), 'the ring drops what left the window');
  shownAs((await tableCells(page, '#decode-cache')).map((r) => r.slice(0, E)), keys.slice(0, t * E), 0, 'shown cache');
  return d;
}

test('decoding with a KV cache: one word per step, each new query over the cache, as causal attention over the prefix', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  assert.equal(await page.isDisabled('#decode-reset'), true);
  assert.match(await page.textContent('#decode-status'), /Nothing decoded yet/);
  assert.equal(await page.isVisible('#decode-tables'), false, 'no header-only tables before the first step');
  for (let t = 1; t <= 6; t++) {
    await page.click('#decode-next');
    await checkSteps(page, t, false);
  }
  assert.equal(await page.isDisabled('#decode-next'), true, 'the sentence is done');
  const d = (await demoState(page)).decode;
  // sat, at step 3, cannot see mat yet: it finds the animal alone.
  assert.ok(d.steps[2].weights[1] > 0.8, `sat → cat: ${d.steps[2].weights}`);
  assert.match(await page.textContent('#decode-status'), /^Step 6: mat⁶ arrives\. .*cache\.length = 6.*cache\.bytes = 192: room for maxSeq = 6 positions\.$/);
  // A sliding-window ring of 3: the same steps again, each query seeing the last 3 positions.
  await page.check('#decode-window');
  await checkSteps(page, 6, true);
  assert.match(await page.textContent('#decode-status'), /^Step 6: mat⁶ arrives\. .*which now holds 3 positions \(24 numbers\), and its query attends to on⁴ the⁵ mat⁶\./,
    'the ring holds 3 positions, whatever cache.length counts');
  await page.click('#decode-reset');
  assert.equal(await page.isVisible('#decode-tables'), false, 'reset: the tables go');
  await checkSteps(page, 0, true);
  await page.click('#decode-next');
  await page.click('#decode-next');
  await checkSteps(page, 2, true);
  await page.click('#decode-all');
  await checkSteps(page, 6, true);
  assert.match(await page.textContent('#decode-check'), /window: \[2, 0\]: largest difference (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)\./);
  // The other language's sentence, decoded as far as it goes.
  await setLanguage(page, 'zh');
  const zh = await checkSteps(page, 5, true);
  assert.deepEqual(zh.tokens, ['小猫', '坐', '在', '垫子', '上']);
  assert.match(await page.textContent('#decode-status'), /^第 5 步：上⁵ 到来/);
  await page.uncheck('#decode-window');
  await checkSteps(page, 5, false);
  assert.deepEqual(problems, []);
});

test('mask pictures: each option against the reference, hidden keys greyed with the reason, controls live', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  async function checkPictures(what, lang = 'en') {
    const reasons = lang === 'en' ? [/causal mask/, /outside the window/] : [/因果遮罩/, /窗口之外/];
    const m = (await demoState(page)).masks;
    for (const key of ['lowerRight', 'upperLeft', 'window', 'sinks', 'alibi']) {
      const { seqQ, seqK, options, weights } = m[key];
      const opts = { ...options, sinks: options.sinks && Float32Array.from(options.sinks),
        alibiSlopes: options.alibiSlopes && Float32Array.from(options.alibiSlopes) };
      const want = referenceAttention(new Float32Array(seqQ), new Float32Array(seqK), null, opts);
      near(weights, want.weights, `${what} ${key}`);
      const cells = await cellInfo(page, `#mask-${key}`);
      cells.forEach((row, i) => row.slice(0, seqK).forEach((c, j) => {
        const visible = visibleByPosition(opts, seqQ, seqK, i, j);
        assert.equal(/masked/.test(c.cls), !visible, `${what} ${key} (${i}, ${j}) greyed exactly where hidden`);
        if (visible) assert.ok(Math.abs(Number(c.text) - want.weights[i * seqK + j]) <= 0.005 + 1e-9, `${key} (${i}, ${j}) shown`);
        else {
          assert.equal(want.weights[i * seqK + j], 0);
          assert.match(c.title, reasons[j > i + (opts.causal === 'upper-left' ? 0 : seqK - seqQ) ? 0 : 1]);
        }
      }));
      if (key === 'sinks') {
        cells.forEach((row, i) => assert.ok(Math.abs(Number(row[seqK].text) - want.sinkWeights[i]) <= 0.005 + 1e-9, `the sink's share, row ${i}`));
        assert.ok(want.sinkWeights.every((w) => w > 0), 'every row gives the sink a share');
      }
    }
    // Softcap: the capped scores and both rows of weights.
    const s = m.softcap;
    near(s.capped, s.scores.map((x) => s.c * Math.tanh(x / s.c)), `${what} capped scores`);
    const options = { heads: 1, seqQ: 1, seqK: s.scores.length, headDim: 1, scale: 1 };
    near(s.plain, referenceAttention([1], s.scores, null, options).weights, 'softmax without the cap');
    near(s.weights, referenceAttention([1], s.scores, null, { ...options, softcap: s.c }).weights, 'softmax with the cap');
    assert.ok(s.weights.at(-1) < s.plain.at(-1), 'the cap spreads the weight');
    shownAs(await tableCells(page, '#softcap-weights'), [...s.plain, ...s.weights], 2, 'shown softcap weights');
    shownAs(await tableCells(page, '#softcap-scores'), [...s.scores, ...s.capped], 2, 'shown softcap scores');
    return m;
  }
  let m = await checkPictures('defaults');
  assert.deepEqual([m.window.options.window, m.sinks.options.sinks, m.alibi.options.alibiSlopes, m.softcap.c], [[2, 0], [1], [Math.fround(0.7)], 5]);
  // Row labels say where each query sits: lower-right at the end of the keys, upper-left at the start.
  const labels = (sel) => page.$$eval(`${sel} tbody th`, (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(await labels('#mask-lowerRight'), ['q⁴', 'q⁵', 'q⁶']);
  assert.deepEqual(await labels('#mask-upperLeft'), ['q¹', 'q²', 'q³']);
  // ALiBi: nearer keys weigh more.
  const last = m.alibi.weights.slice(30, 36);
  assert.ok(last.every((w, j) => j === 0 || w > last[j - 1]), `ALiBi favours near keys: ${last}`);
  await page.fill('#mask-window-value', '4');
  await page.fill('#mask-sinks-value', '-2');
  await page.fill('#mask-alibi-value', '1.5');
  await page.fill('#mask-softcap-value', '12');
  m = await checkPictures('moved');
  assert.deepEqual([m.window.options.window, m.sinks.options.sinks, m.alibi.options.alibiSlopes, m.softcap.c], [[4, 0], [-2], [1.5], 12]);
  assert.match(await page.textContent('#mask-pictures'), /window: \[4, 0\]/);
  await setLanguage(page, 'zh');
  await checkPictures('zh', 'zh');
  assert.match(await page.getAttribute('#mask-window tbody tr:nth-child(6) td:nth-child(2)', 'title'), /窗口之外/);
  assert.deepEqual(problems, []);
});
