// The demo page `npm start` serves, in headless Chromium — the walk-through: every matrix equal
// to a plain JS reference (tests/js/reference.mjs) and shown as such, live recomputation while
// typing (what a cell shows is what it computes with), the scale control, the masks shown as −∞
// where the reference masks (with the reason and the all-masked row explained), the weighted sum
// beside the outputs, both languages and the one the page opens in, a strict
// Content-Security-Policy, no cross-origin isolation, and a phone-sized screen. Screenshots go to
// artifacts/ (not committed).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EN } from '../../web/i18n-en.mjs';
import { ZH } from '../../web/i18n-zh.mjs';
import { referenceAttention, referenceLinear } from '../js/reference.mjs';
import { checkSums, demoState, near, openDemo, PHONE, sectionShot, setLanguage, shownAs, shownSums, startDemo, tableCells } from './demo.mjs';

const N = 4, D = 4;
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

// Which keys the reference hides from each query: the causal rule and the mask, as documented.
const hidden = (o) => Array.from({ length: N * N }, (_, e) => (o.causal && e % N > Math.floor(e / N)) || !o.attendMask[e]);

// Recomputes every matrix of the walk-through from the page's inputs and weights.
function checkWalkthrough(s) {
  const q = referenceLinear(s.inputs, N, D, s.wq, null, D);
  const k = referenceLinear(s.inputs, N, D, s.wk, null, D);
  const v = referenceLinear(s.inputs, N, D, s.wv, null, D);
  near(s.query, q, 'Q');
  near(s.key, k, 'K');
  near(s.value, v, 'V');
  const scores = referenceLinear(q, N, D, k, null, N);
  near(s.scores, scores, 'Q·Kᵀ');
  const masked = hidden(s.options);
  near(s.scaled, [...scores].map((x, e) => (masked[e] ? -Infinity : x * s.options.scale)), 's·Q·Kᵀ + mask');
  const want = referenceAttention(q, k, v, { ...s.options, attendMask: new Uint8Array(s.options.attendMask) });
  near(s.weights, want.weights, 'weights');
  near(s.outputs, want.out, 'outputs');
  near(s.fromLayer, want.out, 'the layer\'s outputs');
  return { want, masked };
}

// The tables show the state's numbers: the inputs exactly as typed, the scores with the decimals
// the page chose (at least 3), α′ = s·α from the scores as shown, exactly (what a pencil gets).
async function checkShown(page, s) {
  for (const id of ['inputs', 'wq', 'wk', 'wv']) assert.deepEqual((await tableCells(page, `#${id}`)).flat().map(Math.fround), s[id], `shown ${id}`);
  for (const id of ['query', 'key', 'value', 'outputs', 'weights']) shownAs(await tableCells(page, `#${id}`), s[id], 3, `shown ${id}`);
  const texts = (id) => page.$$eval(`#${id} tbody td`, (tds) => tds.map((td) => td.textContent));
  const scores = await texts('scores');
  const digits = scores[0].split('.')[1].length;
  assert.ok(digits >= 3, `the scores with ${digits} decimals`);
  shownAs(await tableCells(page, '#scores'), s.scores, digits, 'shown Q·Kᵀ');
  shownAs(await tableCells(page, '#stacked'), s.stacked, digits, 'shown K·Qᵀ');
  near(s.stacked, Array.from({ length: N * N }, (_, e) => s.scores[(e % N) * N + Math.floor(e / N)]), 'K·Qᵀ is Q·Kᵀ transposed');
  const scale = s.options.scale;
  (await texts('scaled')).forEach((text, e) => {
    if (text === '−∞') return;
    const [whole, part = ''] = String(scale).split('.');
    const product = BigInt(scores[e].replace('−', '-').replace('.', '')) * BigInt(whole + part);
    const want = (product < 0n ? '−' : '') + String(product < 0n ? -product : product).padStart(digits + part.length + 1, '0')
      .replace(new RegExp(`(\\d{${digits + part.length}})$`), '.$1');
    assert.equal(text, want, `α′ ${e}: ${scale} × ${scores[e]}`);
  });
}

const argmaxRows = (w) => Array.from({ length: N }, (_, i) => { const r = w.slice(i * N, i * N + N); return r.indexOf(Math.max(...r)); });

test('the walk-through shows the library\'s numbers, equal to a JS reference, recomputed while typing', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const { info, walk: s } = await demoState(page);
  // The lesson's calls are a few tokens wide: one thread, the smaller single-threaded build
  // (the playground's worker has threads: playground.test.mjs).
  assert.deepEqual([info.threads, info.threadsReason], [1, 'requested 1 thread']);
  assert.match(await page.textContent('#status'), /^Computed by attention-wasm \d+\.\d+\.\d+ \(relaxed-simd, one thread\)\.$/);
  checkWalkthrough(s);
  await checkShown(page, s);
  assert.equal(s.options.scale, 0.5);
  // The defaults make each query pick one key clearly: q¹→k³, q²→k¹, q³→k², q⁴→k⁴.
  assert.deepEqual(argmaxRows(s.weights), [2, 0, 1, 3]);
  for (let i = 0; i < N; i++) assert.ok(Math.max(...s.weights.slice(i * N, i * N + N)) > 0.65, `row ${i} picks a key: ${s.weights.slice(i * N, i * N + N)}`);
  assert.match(await page.textContent('#layer-check'), /largest difference (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)\./);
  // The weight tables say what their rows and columns are.
  // (rows: components of q, columns: of a; tokens have superscripts, components plain numbers).
  assert.deepEqual(await page.$$eval('#wq th', (ths) => ths.map((th) => th.textContent)),
    ['q ╲ a', '1', '2', '3', '4', '1', '2', '3', '4']);
  assert.deepEqual(await page.$$eval('#inputs th', (ths) => ths.map((th) => th.textContent)),
    ['token ╲ component', '1', '2', '3', '4', 'a¹', 'a²', 'a³', 'a⁴']);

  // Typing recomputes everything at once (no Enter, no blur), and the focus stays in the cell.
  const cell = '#inputs tbody tr:nth-child(2) td:nth-child(3) input';
  await page.click(cell, { clickCount: 3 });
  await page.keyboard.type('1.5');
  const typed = (await demoState(page)).walk;
  assert.equal(typed.inputs[1 * D + 1], 1.5);
  assert.equal(await page.evaluate((sel) => document.activeElement === document.querySelector(sel), cell), true, 'focus kept');
  checkWalkthrough(typed);
  await checkShown(page, typed);
  const value = async () => (await demoState(page)).walk.inputs[1 * D + 1];
  const invalid = () => page.getAttribute(cell, 'aria-invalid');
  await page.keyboard.press('Backspace');  // "1." is still 1: recomputed, no error
  assert.equal(await value(), 1);
  await page.keyboard.press('Backspace');
  await page.keyboard.press('Backspace');  // "": an emptied cell is 0, as its placeholder shows
  assert.equal(await value(), 0);
  assert.equal(await page.getAttribute(cell, 'placeholder'), '0');
  checkWalkthrough((await demoState(page)).walk);
  await page.keyboard.type('−');  // not a number yet: marked, and nothing changes
  assert.equal(await invalid(), 'true');
  assert.equal(await value(), 0);
  await page.keyboard.type('0.25');
  assert.deepEqual([await invalid(), await value()], ['false', Math.fround(-0.25)]);
  await page.keyboard.press('Tab');  // written as the page writes numbers
  assert.equal(await page.inputValue(cell), '−0.25');
  await page.click(cell, { clickCount: 3 });
  await page.keyboard.type('-1e30');  // beyond ±1000: marked, −1000 used, and shown on leaving the cell
  assert.deepEqual([await invalid(), await value()], ['true', -1000]);
  await page.keyboard.press('Tab');
  assert.deepEqual([await page.inputValue(cell), await invalid()], ['−1000.00', 'false']);
  checkWalkthrough((await demoState(page)).walk);
  await page.click(cell, { clickCount: 3 });
  await page.keyboard.type('-0.25');
  await page.focus(cell);
  await page.keyboard.press('ArrowUp');  // steps of 0.1
  assert.deepEqual([await page.inputValue(cell), await value()], ['−0.15', Math.fround(-0.15)]);
  await checkShown(page, (await demoState(page)).walk);
  await page.click('#random-weights');
  checkWalkthrough((await demoState(page)).walk);
  await page.click('#reset');
  assert.deepEqual((await demoState(page)).walk.inputs, s.inputs);
  assert.deepEqual((await demoState(page)).walk.wq, s.wq);
  assert.deepEqual(problems, []);
});

test('the scale: 1/√d_k, 1, and a slider that saturates the softmax', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const rowMax = (w) => Math.min(...Array.from({ length: N }, (_, i) => Math.max(...w.slice(i * N, i * N + N))));
  const base = (await demoState(page)).walk;
  await page.check('input[name="scale"][value="one"]');
  const one = (await demoState(page)).walk;
  assert.equal(one.options.scale, 1);
  checkWalkthrough(one);
  await checkShown(page, one);
  assert.ok(rowMax(one.weights) > rowMax(base.weights) + 0.1, `s = 1 sharpens every row: ${rowMax(base.weights)} → ${rowMax(one.weights)}`);
  assert.equal(await page.textContent('#scale-shown'), '1.00');
  await page.fill('#scale-slider', '3');
  const three = (await demoState(page)).walk;
  assert.equal(three.options.scale, 3);
  assert.equal(await page.isChecked('input[name="scale"][value="custom"]'), true);
  checkWalkthrough(three);
  assert.ok(rowMax(three.weights) > 0.99, 'saturated: one key takes all');
  await page.fill('#scale-slider', '0');
  const zero = (await demoState(page)).walk;
  checkWalkthrough(zero);
  near(zero.weights, new Array(N * N).fill(0.25), 's = 0: even weights');
  await page.check('input[name="scale"][value="sqrt"]');
  assert.equal((await demoState(page)).walk.options.scale, 0.5);
  assert.deepEqual(problems, []);
});

test('masks: −∞ scores and greyed zero weights where the reference masks, with the reason; an empty row explained', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const cellInfo = (id) => page.$$eval(`#${id} tbody td`, (tds) => tds.map((td) => ({ text: td.textContent, cls: td.className, title: td.title })));
  async function checkMasks(what) {
    const s = (await demoState(page)).walk;
    const { want, masked } = checkWalkthrough(s);
    await checkShown(page, s);
    const scaled = await cellInfo('scaled');
    const weights = await cellInfo('weights');
    for (let e = 0; e < N * N; e++) {
      const where = `${what}: (q${Math.floor(e / N) + 1}, k${e % N + 1})`;
      assert.equal(scaled[e].text === '−∞', masked[e], `${where} shows −∞ exactly where masked`);
      assert.equal(weights[e].cls.includes('masked'), masked[e], `${where} is greyed exactly where masked`);
      if (masked[e]) {
        assert.equal(want.weights[e], 0, `${where}: the reference gives weight 0`);
        assert.equal(weights[e].text, '0');
        const causal = s.options.causal && e % N > Math.floor(e / N);
        assert.match(scaled[e].cls, causal ? /masked-causal/ : /masked-key/);
        assert.match(scaled[e].title, causal ? /causal mask/ : /hidden from every query/);
      }
    }
    return s;
  }
  await page.check('#causal');
  let s = await checkMasks('causal');
  assert.equal(s.weights[0], 1, 'the first token attends only to itself');
  assert.equal(await page.isHidden('#empty-row-note'), true);
  await page.uncheck('#causal');
  await page.check('#key-masks input[data-key="2"]');
  s = await checkMasks('k³ masked');
  for (let i = 0; i < N; i++) assert.equal(s.weights[i * N + 2], 0);
  // Causal plus k¹ masked leaves q¹ with no key: zeros, not NaN, and the page says why its sum is 0.
  await page.check('#causal');
  await page.check('#key-masks input[data-key="0"]');
  s = await checkMasks('causal, k¹ and k³ masked');
  assert.deepEqual(s.outputs.slice(0, D), [0, 0, 0, 0]);
  assert.equal(await page.isVisible('#empty-row-note'), true);
  assert.match(await page.textContent('#empty-row-note'), /^Row q¹ has no visible key: .* its weights add up to 0, not 1\.$/);
  // The followed row, q¹'s, worked out: −∞ scores, exps and weights 0.
  assert.deepEqual((await tableCells(page, '#softmax-row')).map((r) => r.slice(0, N)), [Array(N).fill(-Infinity), [0, 0, 0, 0], [0, 0, 0, 0]]);
  // The mask controls sit with the score tables they change.
  const [controls, scaled] = await Promise.all(['#score-controls', '#scaled'].map((sel) => page.locator(sel).boundingBox()));
  assert.ok(scaled.y - (controls.y + controls.height) < 200, 'the controls are right above the scores');
  await page.locator('section[aria-labelledby="s3"]').screenshot({ path: sectionShot('desktop-masks-scores.png') });
  await page.locator('section[aria-labelledby="s4"]').screenshot({ path: sectionShot('desktop-masks-weights.png') });
  assert.deepEqual(problems, []);
});

test('the products α̂(i, j)·vʲ beside B add up to bⁱ exactly as shown; the query followed changes on a click, not a hover', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  async function checkSum(i) {
    const s = (await demoState(page)).walk;
    assert.equal(s.selected, i);
    assert.equal(await page.textContent('#sum-caption'), `b${i + 1} = Σj α̂(${i + 1}, j)·vj: each column adds up to b${i + 1}`);
    const rows = await tableCells(page, '#weighted-sum');
    const w = s.weights.slice(i * N, i * N + N);
    shownAs(rows.slice(0, N).map((r) => r[0]), w, 3, 'the weights of row i');
    const products = Array.from({ length: N * D }, (_, e) => w[Math.floor(e / D)] * s.value[e]);
    // Each product within one unit of its last digit (rounded so that its column adds up as shown).
    near(rows.slice(0, N).flatMap((r) => r.slice(1)), products, 'α̂(i, j)·vʲ', 1e-3 + 1e-9);
    // The Σ row is row i of B as B shows it, and each column of products adds up to it exactly.
    const bRow = await page.$$eval(`#outputs tbody tr:nth-child(${i + 1}) td`, (tds) => tds.map((td) => td.textContent));
    assert.deepEqual(await page.$$eval('#weighted-sum tbody tr:last-child td', (tds) => tds.slice(1).map((td) => td.textContent)), bRow);
    checkSums((await shownSums(page)).filter((x) => x.where.startsWith('weighted-sum')));
    const outlined = (id) => page.$$eval(`#${id} tbody tr`, (trs) => trs.map((r) => r.classList.contains('highlight')));
    const only = Array.from({ length: N }, (_, k) => k === i);
    assert.deepEqual(await outlined('weights'), only, 'only the chosen weights row is outlined');
    assert.deepEqual(await outlined('outputs'), only, 'only the chosen output row is outlined');
  }
  await checkSum(0);  // the lecture's q¹
  await page.hover('#outputs tbody tr:nth-child(4)');  // passing over a row changes nothing
  await page.hover('#scores tbody tr:nth-child(3)');
  await checkSum(0);
  await page.click('#outputs tbody tr:nth-child(3)');
  await checkSum(2);
  await page.focus('#follow input[value="2"]');  // the keyboard: the picker's radio buttons
  await page.keyboard.press('ArrowDown');
  await checkSum(3);
  await page.click('#weights tbody tr:nth-child(2)');
  await checkSum(1);
  assert.deepEqual(problems, []);
});

test('both languages: every string in both, the page switches and re-renders', async () => {
  assert.deepEqual(Object.keys(ZH).sort(), Object.keys(EN).sort(), 'the same keys in both languages');
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const empty = () => page.$$eval('[data-i18n]', (els) => els.filter((el) => el.textContent.trim() === '').map((el) => el.dataset.i18n));
  assert.deepEqual(await empty(), []);
  await setLanguage(page, 'zh');
  assert.deepEqual(await empty(), []);
  assert.equal(await page.getAttribute('html', 'lang'), 'zh-CN');
  assert.equal(await page.getAttribute('button[data-lang="zh"]', 'aria-pressed'), 'true');
  assert.equal(await page.textContent('h3'), '注意力从搜索说起');
  assert.match(await page.textContent('#status'), /^由 attention-wasm .* 计算/);
  assert.match(await page.textContent('#layer-check'), /最大差异 (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)。/);
  assert.equal(await page.textContent('#sentence'), '小猫 · 坐 · 在 · 垫子 · 上');
  assert.match(await page.textContent('#learn-status'), /还没有训练/);
  await page.check('#causal');
  await page.check('#key-masks input[data-key="0"]');
  assert.match(await page.textContent('#empty-row-note'), /^第 q¹ 行没有看得见的键/);
  assert.match(await page.getAttribute('#scaled tbody tr:nth-child(1) td:nth-child(3)', 'title'), /被因果遮罩遮住/);
  checkWalkthrough((await demoState(page)).walk);
  await setLanguage(page, 'en');
  assert.equal(await page.textContent('h3'), 'Attention starts with search');
  assert.equal(await page.textContent('#sentence'), 'the cat sat on the mat');
  assert.match(await page.textContent('#empty-row-note'), /^Row q¹ has no visible key/);
  assert.deepEqual(problems, []);
});

// The language the page opens in: the browser's (navigator.languages), unless the address asks
// for one (?lang=) or the visitor chose one before (kept in localStorage); only that language's
// strings are downloaded.
test('the language it opens in: the browser\'s, ?lang=, or the visitor\'s last choice; only that one downloaded', async () => {
  async function open({ locale, query = '', context }) {
    const ctx = context ?? await demo.browser.newContext({ locale, viewport: { width: 1200, height: 900 } });
    const page = await ctx.newPage();
    const loaded = [];
    page.on('response', (r) => { if (/i18n-(en|zh)\.mjs$/.test(r.url())) loaded.push(r.url().match(/i18n-(\w+)/)[1]); });
    await page.goto(`${demo.server.url}web/${query}`);
    await page.waitForSelector('body[data-ready="true"]');
    return { ctx, page, loaded, lang: await page.getAttribute('body', 'data-lang'), h1: await page.textContent('h1') };
  }
  for (const [locale, query, want] of [['zh-CN', '', 'zh'], ['zh-TW', '', 'zh'], ['en-US', '', 'en'], ['de-DE', '', 'en'],
    ['zh-CN', '?lang=en', 'en'], ['en-GB', '?lang=zh', 'zh']]) {
    const { ctx, loaded, lang, h1, page } = await open({ locale, query });
    assert.equal(lang, want, `${locale}${query}`);
    assert.equal(h1, want === 'zh' ? ZH.heading : EN.heading);
    assert.equal(await page.getAttribute('html', 'lang'), want === 'zh' ? 'zh-CN' : 'en');
    assert.deepEqual(loaded, [want], `${locale}${query}: the strings downloaded`);
    await ctx.close();
  }
  // A choice is remembered on this site, and written into the address where it names a language.
  const first = await open({ locale: 'en-US' });
  await setLanguage(first.page, 'zh');
  await first.page.close();
  const again = await open({ locale: 'en-US', context: first.ctx });
  assert.equal(again.lang, 'zh', 'the visitor chose 中文 last time');
  await setLanguage(again.page, 'en');
  await again.page.close();
  const asked = await open({ locale: 'en-US', query: '?lang=zh', context: first.ctx });
  assert.equal(asked.lang, 'zh', 'the address wins over the last choice');
  await setLanguage(asked.page, 'en');
  assert.equal(new URL(asked.page.url()).searchParams.get('lang'), 'en', 'the address follows the choice');
  await asked.page.reload();
  await asked.page.waitForSelector('body[data-ready="true"]');
  assert.equal(await asked.page.getAttribute('body', 'data-lang'), 'en', 'a reload keeps it');
  await first.ctx.close();
});

test('under a strict Content-Security-Policy every section works', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.strictServer.url);
  const s = await demoState(page);
  checkWalkthrough(s.walk);
  assert.ok(s.words && s.heads && s.position && s.decode && s.masks, 'every section rendered');
  await page.click('#decode-next');
  assert.equal((await demoState(page)).decode.steps.length, 1, 'the KV cache decodes');
  await page.click('#learn-export');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#learn-download')]);
  assert.equal(download.suggestedFilename(), 'attention-weights.json');
  await page.fill('input[name="seqQ"]', '32');
  await page.fill('input[name="seqK"]', '48');
  await page.click('#playground button[type="submit"]');
  await page.waitForSelector('#play-status[data-state="result"]', { timeout: 60000 });
  await page.click('#learn-start');
  await page.waitForFunction(() => Number(document.getElementById('learn-status').dataset.step) >= 20, null, { timeout: 60000 });
  await page.click('#learn-start');  // Pause
  await page.waitForSelector('#learn-status[data-state="paused"]');
  assert.deepEqual(problems, []);
});

test('without cross-origin isolation: the same numbers, and the playground says why it has one thread', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.plainServer.url);
  const s = await demoState(page);
  assert.match(await page.textContent('#status'), /\(relaxed-simd, one thread\)\.$/);
  checkWalkthrough(s.walk);
  await page.fill('input[name="seqQ"]', '16');
  await page.fill('input[name="seqK"]', '16');
  await page.click('#playground button[type="submit"]');
  await page.waitForSelector('#play-status[data-state="result"]', { timeout: 60000 });
  assert.match(await page.textContent('#play-status'), /^attention-wasm [\d.]+ ms \(1 thread: not cross-origin isolated \(no SharedArrayBuffer\); median of/);
  assert.deepEqual(problems, []);
});

test('a phone-sized screen: no sideways scrolling of the page, a table or a formula, in both languages', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url, { viewport: PHONE });
  await page.click('#decode-all');
  await page.click('#learn-export');
  for (const lang of ['en', 'zh']) {
    await setLanguage(page, lang);
    await page.check('#causal');  // the widest state: −∞ cells, the empty-row note, every word decoded
    await page.check('#key-masks input[data-key="0"]');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `${lang}: no horizontal scrolling (overflow ${overflow}px)`);
    const wide = await page.$$eval('figure, .wide-table', (boxes) => boxes.filter((b) => !b.hidden && b.scrollWidth > b.clientWidth)
      .map((b) => `${b.querySelector('table, canvas, svg')?.id || b.className}: ${b.scrollWidth} > ${b.clientWidth}`));
    assert.deepEqual(wide, [], `${lang}: every table fits its box`);
    const cut = await page.$$eval('.formula', (fs) => fs.filter((f) => f.checkVisibility() && f.scrollWidth > f.clientWidth)
      .map((f) => `${f.closest('section')?.getAttribute('aria-labelledby') ?? 'the header'}: ${f.scrollWidth} > ${f.clientWidth}`));
    assert.deepEqual(cut, [], `${lang}: every formula fits without scrolling`);
    // The followed query's picker stays on one line, so that it hides little of what scrolls under it.
    const picker = await page.$eval('#follow', (f) => [f.getBoundingClientRect().height, parseFloat(getComputedStyle(f).lineHeight) || 24]);
    assert.ok(picker[0] < 2 * picker[1] + 12, `${lang}: the follow picker is ${picker[0]} px tall`);
    await page.uncheck('#causal');
    await page.uncheck('#key-masks input[data-key="0"]');
  }
  assert.deepEqual(problems, []);
});
