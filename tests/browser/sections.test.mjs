// The demo page's sections after the walk-through, in headless Chromium: real words as tokens
// and multi-head attention (every matrix against tests/js/reference.mjs, the layer against
// referenceMha), and "Watch it learn" (a worker trains W_q and W_k on the words; one step, pause,
// speed; the weights shown are the layer's by referenceMha and end where the hand-made head
// looks; training stops by itself; the exported weights make a layer of one's own that has learned).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { loadAttention } from '../../dist/node.mjs';
import { CONFIG, MAX_STEPS, STOP_LOSS, initialWeights, makeTask } from '../../web/learn-task.mjs';
import { WQ } from '../../web/sentences.mjs';
import { referenceAttention, referenceLinear, referenceMha } from '../js/reference.mjs';
import { demoState, near, openDemo, setLanguage, shownAs, startDemo, tableCells } from './demo.mjs';

const E = 4;
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

test('real words: the sentence of each language, its named features and weights, equal to a JS reference', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const [lang, tokens, features] of [['en', ['the', 'cat', 'sat', 'on', 'the', 'mat'], ['animal', 'action', 'place', 'relation']],
    ['zh', ['小猫', '坐', '在', '垫子', '上'], ['动物', '动作', '地点', '关系词']]]) {
    await setLanguage(page, lang);
    const w = (await demoState(page)).words;
    const n = tokens.length;
    assert.deepEqual(w.tokens, tokens);
    const rowHeaders = await page.$$eval('#words-weights tbody th', (ths) => ths.map((th) => th.textContent));
    assert.deepEqual(rowHeaders, tokens, `${lang}: the weights are labelled with the words`);
    assert.deepEqual(await page.$$eval('#words-embedding thead th', (ths) => ths.slice(1).map((th) => th.textContent)), features);
    const identity = Array.from({ length: E * E }, (_, e) => (e % (E + 1) === 0 ? 1 : 0));
    const q = referenceLinear(w.embedding, n, E, w.wq, null, E);
    const k = referenceLinear(w.embedding, n, E, identity, null, E);
    near(w.query, q, `${lang} Q`);
    near(w.key, k, `${lang} K`);
    near(w.value, k, `${lang} V`);
    const want = referenceAttention(q, k, k, { heads: 1, seqQ: n, headDim: E });
    near(w.weights, want.weights, `${lang} weights`);
    near(w.outputs, want.out, `${lang} outputs`);
    shownAs(await tableCells(page, '#words-embedding'), w.embedding, 0, `${lang} shown A`);
    shownAs(await tableCells(page, '#words-wq'), w.wq, 0, `${lang} shown W_q`);
    shownAs(await tableCells(page, '#words-weights'), w.weights, 2, `${lang} shown α̂`);
    shownAs(await tableCells(page, '#words-outputs'), w.outputs, 2, `${lang} shown B`);
    // The weights mean what the text says: the action splits between the animal and the place,
    // the animal finds the action, a relation word finds the place.
    const at = (from, to) => w.weights[tokens.indexOf(from) * n + tokens.indexOf(to)];
    const [animal, action, relation, place] = lang === 'en' ? ['cat', 'sat', 'on', 'mat'] : ['小猫', '坐', '在', '垫子'];
    assert.ok(Math.abs(at(action, animal) - at(action, place)) < 1e-6 && at(action, animal) > 0.4, 'the action splits');
    assert.ok(at(animal, action) > 0.65, 'the animal finds its action');
    assert.ok(at(relation, place) > 0.6, 'the relation word finds the place');
    assert.ok((await page.textContent('#words-reading')).includes(at(action, animal).toFixed(2)), 'the text quotes the live weight');
  }
  assert.deepEqual(problems, []);
});

test('multi-head attention: two heads side by side, concatenated and through W_o, by MultiHeadAttention and checked', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const lang of ['en', 'zh']) {
    await setLanguage(page, lang);
    const h = (await demoState(page)).heads;
    const n = h.tokens.length;
    assert.deepEqual([h.config.embedDim, h.config.numHeads, h.config.headDim, h.config.bias], [E, 2, 2, false]);
    const want = referenceMha(h.config, h.weights, h.embedding, null, null);
    near(h.out, want.out, `${lang} the layer's output`);
    near(h.headWeights, want.weights, `${lang} the heads' weights`);
    // The heads' outputs: attention of each head on its slice of the projections (bshd).
    const project = (w) => referenceLinear(h.embedding, n, E, w, null, E);
    const concat = referenceAttention(project(h.weights.wq), project(h.weights.wk), project(h.weights.wv),
      { heads: 2, seqQ: n, headDim: 2, layout: 'bshd' }).out;
    near(h.concat, concat, `${lang} concat`);
    near(referenceLinear(concat, n, E, h.weights.wo, null, E), want.out, `${lang} concat·W_oᵀ is the output`);
    assert.ok(h.diff < 1e-6, `the page's own check: ${h.diff}`);
    for (const head of [0, 1]) {
      shownAs(await tableCells(page, `#head${head + 1}-weights`), h.headWeights.slice(head * n * n, (head + 1) * n * n), 2, `${lang} shown α̂ of head ${head + 1}`);
      const own = Array.from({ length: n * 2 }, (_, e) => h.concat[Math.floor(e / 2) * E + head * 2 + (e % 2)]);
      shownAs(await tableCells(page, `#head${head + 1}-output`), own, 2, `${lang} shown output of head ${head + 1}`);
    }
    shownAs(await tableCells(page, '#heads-concat'), h.concat, 2, `${lang} shown concat`);
    shownAs(await tableCells(page, '#heads-wo'), h.weights.wo, 0, `${lang} shown W_o`);
    shownAs(await tableCells(page, '#heads-output'), h.out, 2, `${lang} shown output`);
    // Two heads let the action attend fully to both the animal (head 1) and the place (head 2).
    const [animal, action, place] = lang === 'en' ? [1, 2, 5] : [0, 1, 3];
    assert.ok(h.headWeights[action * n + animal] > 0.8 && h.headWeights[n * n + action * n + place] > 0.8);
    assert.match(await page.textContent('#heads-check'), /(largest difference|最大差异) (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)[.。]/);
  }
  assert.deepEqual(problems, []);
});

test('watch it learn: in a worker, W_q and W_k learn the words\' weights; pause, one step, speed; it stops by itself', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const looks = (sel) => page.$eval(sel, (b) => ({ disabled: b.disabled, background: getComputedStyle(b).backgroundColor, cursor: getComputedStyle(b).cursor }));
  const state = () => page.evaluate(() => window.attentionDemo.learn);
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'idle');
  // The untrained layer: the weights of the page's sentence, W_q and W_k from the seeded start.
  const lib = await loadAttention({ threads: 1, layers: true });
  const task = makeTask(lib);
  const en = task.sentences.find((x) => x.lang === 'en');
  const untrained = await state();
  near(untrained.wq, initialWeights().wq, 'W_q starts from the seeded weights');
  const check = async (st, what) => {
    const want = referenceMha(CONFIG, { wq: st.wq, wk: st.wk, wv: initialWeights().wv, wo: initialWeights().wo }, [...en.embedding], null, null);
    near(st.weights, want.weights, `${what}: α̂ is the layer's, by the reference`);
    // W_qᵀW_k: entry (a, b) = Σ_r W_q(r, a)·W_k(r, b), shown beside them.
    const product = Array.from({ length: E * E }, (_, e) => [...Array(E).keys()].reduce((sum, r) => sum + st.wq[r * E + Math.floor(e / E)] * st.wk[r * E + (e % E)], 0));
    near(st.product, product, `${what}: W_qᵀW_k`);
    shownAs(await tableCells(page, '#learn-wqk'), product, 1, `${what}: W_qᵀW_k shown`);
  };
  await check(untrained, 'untrained');
  // The chart has its axes: powers of ten up, steps across, titles, and the stopping line.
  const ticks = await page.$$eval('#learn-loss text.tick', (ts) => ts.map((t) => t.textContent));
  for (const t of ['10⁰', '10⁻¹', '10⁻⁴', '10⁻⁵', '0', '100']) assert.ok(ticks.includes(t), `tick ${t} in ${ticks}`);
  assert.deepEqual(await page.$$eval('#learn-loss text.title', (ts) => ts.map((t) => t.textContent)), ['training step', 'loss (log scale)']);
  assert.equal(await page.locator('#learn-loss line.stop').count(), 1);
  // The glosses of loss and Adam are there for a learner.
  assert.deepEqual(await page.$$eval('.glosses dt', (dts) => dts.map((d) => d.textContent)), ['loss', 'Adam']);

  // One step at a time: the step count moves by one and W_q changes.
  await page.click('#learn-step');
  await page.waitForSelector('#learn-status[data-step="1"]');
  await page.click('#learn-step');
  await page.waitForSelector('#learn-status[data-step="2"]');
  const two = await state();
  assert.equal(two.phase, 'paused');
  assert.equal(two.losses.length, 2);
  assert.notDeepEqual(two.wq, untrained.wq, 'W_q learns');
  assert.notDeepEqual(two.wk, untrained.wk, 'W_k learns');
  await check(two, 'after two steps');
  // Start, then Pause: nothing runs while paused.
  await page.selectOption('#learn-speed', '60');
  await page.click('#learn-start');
  // The label follows the worker's report that it runs, which arrives after the click.
  await page.waitForFunction(() => document.getElementById('learn-start').textContent === 'Pause', null, { timeout: 10000 });
  await page.waitForFunction(() => Number(document.getElementById('learn-status').dataset.step) >= 20, null, { timeout: 30000 });
  await page.click('#learn-start');
  await page.waitForSelector('#learn-status[data-state="paused"]');
  assert.match(await page.textContent('#learn-status'), /^Paused at step \d+, loss \d\.\d\d\u00a0×\u00a010⁻[¹²³⁴]: Start continues\.$/);
  const paused = Number(await page.getAttribute('#learn-status', 'data-step'));
  await page.waitForTimeout(300);
  assert.equal(Number(await page.getAttribute('#learn-status', 'data-step')), paused, 'nothing runs while paused');
  // Chinese while paused: the worker shows the Chinese sentence with the same weights.
  await setLanguage(page, 'zh');
  await page.waitForFunction(() => window.attentionDemo.learn.lang === 'zh');
  assert.deepEqual(await page.$$eval('#learn-weights tbody th', (ths) => ths.map((th) => th.textContent)), ['小猫¹', '坐²', '在³', '垫子⁴', '上⁵']);
  await setLanguage(page, 'en');
  await page.waitForFunction(() => window.attentionDemo.learn.lang === 'en');
  await page.click('#learn-start');
  await page.waitForSelector('#learn-status:is([data-state="converged"], [data-state="limit"])', { timeout: 90000 });
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'converged');
  const steps = Number(await page.getAttribute('#learn-status', 'data-step'));
  const first = Number(await page.getAttribute('#learn-status', 'data-first-loss'));
  const last = Number(await page.getAttribute('#learn-status', 'data-loss'));
  assert.ok(first > 1e-2 && last < STOP_LOSS, `loss ${first} → ${last}`);
  assert.ok(steps > paused && steps < MAX_STEPS, `converged after ${steps} steps`);
  assert.match(await page.textContent('#learn-status'), /^Learned at step \d+: the loss \d\.\d\d\u00a0×\u00a010⁻⁵ is below 10⁻⁴, so training stopped by itself\.$/);
  await page.waitForTimeout(300);
  assert.equal(Number(await page.getAttribute('#learn-status', 'data-step')), steps, 'it stays stopped');
  assert.equal((await looks('#learn-start')).disabled, true);
  assert.equal((await looks('#learn-step')).disabled, true);
  assert.equal((await looks('#learn-start')).cursor, 'not-allowed');
  assert.equal(await page.$eval('#learn-loss polyline', (p) => p.getAttribute('points').split(' ').length), steps);
  // The learned weights put each word's weight where the hand-made head does (the outlined cells).
  const learned = await state();
  await check(learned, 'learned');
  // W_qᵀW_k has learned the hand-made head's pattern: each row's largest entry is on an outlined
  // cell, where the hand-made W_qᵀ·I is largest.
  const targets = await page.$$eval('#learn-wqk tbody tr', (trs) => trs.map((tr) => [...tr.cells].slice(1).map((c) => c.classList.contains('target'))));
  targets.forEach((row, a) => {
    assert.deepEqual(row, row.map((_, b) => WQ[b * E + a] > 0), `row ${a + 1}: the hand-made head's cells outlined`);
    const r = learned.product.slice(a * E, (a + 1) * E);
    assert.ok(row[r.indexOf(Math.max(...r))], `row ${a + 1}: its largest (${r}) on an outlined cell`);
  });
  const n = en.n;
  const want = referenceAttention(referenceLinear(en.embedding, n, E, WQ, null, E), [...en.embedding], [...en.embedding], { heads: 1, seqQ: n, headDim: E }).weights;
  near(learned.weights, want, 'α̂ close to the hand-made head\'s', 0.03);
  const outlined = await page.$$eval('#learn-weights tbody tr', (trs) => trs.map((tr) => [...tr.cells].slice(1).map((c) => c.classList.contains('target'))));
  outlined.forEach((row, i) => row.forEach((on, j) => assert.equal(on, want[i * n + j] >= 0.3, `(${i + 1}, ${j + 1}) outlined where the hand-made head looks`)));

  // Export: the weights as JSON, shown and as a download, from which a layer of one's own (made
  // as its "load" line says, in Node) has learned the task too.
  assert.equal(await page.isHidden('#learn-export-box'), true);
  await page.click('#learn-export');
  await page.waitForSelector('#learn-export-box:not([hidden])');
  const text = await page.inputValue('#learn-export-text');
  const json = JSON.parse(text);
  assert.equal(json.step, steps);
  assert.match(await page.textContent('#learn-export-note'), new RegExp(`at step ${steps} `));
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#learn-download')]);
  assert.equal(download.suggestedFilename(), 'attention-weights.json');
  assert.equal(readFileSync(await download.path(), 'utf8'), text);
  assert.deepEqual(Object.keys(json.weights).sort(), ['wk', 'wo', 'wq', 'wv']);
  for (const [name, values] of Object.entries(json.weights)) {
    assert.equal(values.length, 16);
    // Nine significant digits: each number is a float32 written exactly (it reads back as itself).
    for (const v of values) assert.equal(Number(Math.fround(v).toPrecision(9)), v, `${name}: ${v}`);
  }
  assert.deepEqual(json.weights.wv, [...initialWeights().wv], 'W_v stayed fixed');
  const layer = new Function('lib', 'json', `${json.load}; return layer;`)(lib, json);
  assert.deepEqual(json.config, { embedDim: 4, numHeads: 1, numKvHeads: 1, kdim: 4, vdim: 4, bias: false });
  let loss = 0;
  for (const s of task.sentences) {
    const y = layer.forward(s.embedding, null, null);
    loss += y.reduce((sum, v, e) => sum + (v - s.target[e]) ** 2, 0);
  }
  assert.ok(loss / task.size < STOP_LOSS, `the exported layer has learned: loss ${loss / task.size}`);
  layer.dispose();

  await page.click('#learn-reset');
  await page.waitForSelector('#learn-status[data-state="idle"]');
  assert.equal(await page.isHidden('#learn-export-box'), true);
  assert.equal((await looks('#learn-start')).disabled, false);
  near((await state()).wq, initialWeights().wq, 'reset: back to the seeded weights');
  assert.deepEqual(problems, []);
});

// The stopping line's label ("stop", 停止线) is drawn where the curve never goes: no point or
// segment of the curve within 2 units of it, for a run like the page's (it ends on the line at
// the right), one that hugs the line for 300 steps, and one that stops after 8 steps; and it
// stays next to its line, inside the chart.
test('the loss chart: the stopping line\'s label never touches the curve, in both languages', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const runs = {
    'like the page\'s': Array.from({ length: 197 }, (_, s) => 0.07 * (9.9e-5 / 0.07) ** (s / 196)),
    'hugging the line': [...Array(299).fill(1.05e-4), 9.9e-5],
    'stopping at once': Array.from({ length: 8 }, (_, s) => (s === 7 ? 9e-5 : 1e-2 / (s + 1))),
  };
  for (const [run, losses] of Object.entries(runs)) {
    for (const stop of ['stop', '停止线']) {
      const found = await page.evaluate(async ({ losses, stop }) => {
        const { drawLossChart } = await import('./loss-chart.mjs');
        const chart = document.getElementById('learn-loss');
        drawLossChart(chart, losses, { labels: { step: 'step', loss: 'loss', stop }, stopAt: 1e-4 });
        const box = chart.querySelector('.stop-label').getBBox();
        const line = chart.querySelector('line.stop');
        const points = chart.querySelector('polyline').getAttribute('points').split(' ').map((p) => p.split(',').map(Number));
        const near = (px, py) => px > box.x - 2 && px < box.x + box.width + 2 && py > box.y - 2 && py < box.y + box.height + 2;
        const hits = [];
        points.slice(1).forEach(([x2, y2], k) => {
          const [x1, y1] = points[k];
          for (let t = 0; t <= 1; t += 0.05) if (near(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t)) { hits.push(k); break; }
        });
        return { hits, box: { x: box.x, y: box.y, width: box.width, height: box.height }, lineY: Number(line.getAttribute('y1')),
          lineX: [Number(line.getAttribute('x1')), Number(line.getAttribute('x2'))] };
      }, { losses, stop });
      assert.deepEqual(found.hits, [], `${run}, “${stop}”: curve segments under the label ${JSON.stringify(found.box)}`);
      const gap = found.box.y - found.lineY;
      assert.ok(gap > 0 && gap < 8, `${run}, “${stop}”: the label just under its line (${gap})`);
      assert.ok(found.box.x >= found.lineX[0] && found.box.x + found.box.width <= found.lineX[1], `${run}, “${stop}”: within the line's length`);
    }
  }
  assert.deepEqual(problems, []);
});
