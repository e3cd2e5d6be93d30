// The demo page's sections after the walk-through, in headless Chromium: real words as tokens
// and multi-head attention (every matrix against tests/js/reference.mjs, the layer against
// referenceMha), and "Watch it learn" (training stops by itself, disabled buttons look disabled,
// the chart has its axes, the exported weights make a layer of one's own that has learned).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { loadAttention } from '../../dist/node.mjs';
import { BATCH, makeTask } from '../../web/learn.mjs';
import { referenceAttention, referenceLinear, referenceMha } from '../js/reference.mjs';
import { demoState, near, openDemo, shownAs, startDemo, tableCells } from './demo.mjs';

const E = 4;
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

test('real words: the sentence of each language, its named features and weights, equal to a JS reference', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const [lang, tokens, features] of [['en', ['the', 'cat', 'sat', 'on', 'the', 'mat'], ['animal', 'action', 'place', 'relation']],
    ['zh', ['小猫', '坐', '在', '垫子', '上'], ['动物', '动作', '地点', '关系词']]]) {
    await page.click(`button[data-lang="${lang}"]`);
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
    await page.click(`button[data-lang="${lang}"]`);
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
    assert.match(await page.textContent('#heads-check'), /(largest difference|最大差异) \d\.\de[-+]\d+/);
  }
  assert.deepEqual(problems, []);
});

test('watch it learn: training stops by itself at convergence, with the weights a permutation', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const looks = (sel) => page.$eval(sel, (b) => ({ disabled: b.disabled, background: getComputedStyle(b).backgroundColor, cursor: getComputedStyle(b).cursor }));
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'idle');
  const [start, stop] = [await looks('#learn-start'), await looks('#learn-stop')];
  assert.equal(start.disabled, false);
  assert.equal(stop.disabled, true);
  assert.notEqual(stop.background, start.background, 'a disabled button looks different');
  assert.equal(stop.cursor, 'not-allowed');
  // The chart has its axes: powers of ten up, steps across, titles, and the stopping line.
  const ticks = await page.$$eval('#learn-loss text.tick', (ts) => ts.map((t) => t.textContent));
  for (const t of ['10⁰', '10⁻¹', '10⁻⁴', '10⁻⁵', '0', '100']) assert.ok(ticks.includes(t), `tick ${t} in ${ticks}`);
  assert.deepEqual(await page.$$eval('#learn-loss text.title', (ts) => ts.map((t) => t.textContent)), ['training step', 'loss (log scale)']);
  assert.equal(await page.locator('#learn-loss line.stop').count(), 1);

  // Pause and continue.
  await page.click('#learn-start');
  await page.waitForFunction(() => Number(document.getElementById('learn-status').dataset.step) >= 10, null, { timeout: 30000 });
  await page.click('#learn-stop');
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'stopped');
  assert.match(await page.textContent('#learn-status'), /^Paused at step \d+, loss \d\.\d\de-\d+: Start continues\.$/);
  const paused = Number(await page.getAttribute('#learn-status', 'data-step'));
  await page.waitForTimeout(200);
  assert.equal(Number(await page.getAttribute('#learn-status', 'data-step')), paused, 'nothing runs while paused');
  await page.click('#learn-start');
  await page.waitForSelector('#learn-status:is([data-state="converged"], [data-state="limit"])', { timeout: 90000 });
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'converged');
  const steps = Number(await page.getAttribute('#learn-status', 'data-step'));
  const first = Number(await page.getAttribute('#learn-status', 'data-first-loss'));
  const last = Number(await page.getAttribute('#learn-status', 'data-loss'));
  assert.ok(first > 0.1 && last < 1e-4, `loss ${first} → ${last}`);
  assert.ok(steps > paused && steps < 3000, `converged after ${steps} steps`);
  assert.match(await page.textContent('#learn-status'), /^Converged at step \d+: the loss \d\.\d\de-5 is below 1e-4, so training stopped by itself\.$/);
  await page.waitForTimeout(200);
  assert.equal(Number(await page.getAttribute('#learn-status', 'data-step')), steps, 'it stays stopped');
  assert.equal((await looks('#learn-start')).disabled, true);
  assert.equal((await looks('#learn-stop')).disabled, true);
  assert.equal(await page.$eval('#learn-loss polyline', (p) => p.getAttribute('points').split(' ').length), steps);
  // Every query now gives nearly all its weight to the outlined key.
  const rows = await tableCells(page, '#learn-weights');
  const targets = await page.$$eval('#learn-weights tbody tr', (trs) => trs.map((tr) => [...tr.cells].findIndex((c) => c.classList.contains('target')) - 1));
  assert.equal(rows.length, 6);
  rows.forEach((row, i) => {
    assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 0.05, `row sums to 1: ${row}`);
    assert.ok(row[targets[i]] >= 0.9, `query ${i + 1} picks its key ${targets[i] + 1}: ${row}`);
  });

  // Export: the weights as JSON, shown and as a download, from which a layer of one's own (made
  // as its "load" line says, in Node) has learned the task too.
  assert.equal(await page.isHidden('#learn-export-box'), true);
  await page.click('#learn-export');
  const text = await page.inputValue('#learn-export-text');
  const json = JSON.parse(text);
  assert.equal(json.step, steps);
  assert.match(await page.textContent('#learn-export-note'), new RegExp(`at step ${steps} `));
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#learn-download')]);
  assert.equal(download.suggestedFilename(), 'attention-weights.json');
  assert.equal(readFileSync(await download.path(), 'utf8'), text);
  assert.deepEqual(Object.keys(json.weights).sort(), ['bk', 'bo', 'bq', 'bv', 'wk', 'wo', 'wq', 'wv']);
  for (const [name, values] of Object.entries(json.weights)) {
    assert.equal(values.length, name.startsWith('w') ? 64 : 8);
    // Nine significant digits: each number is a float32 written exactly (it reads back as itself).
    for (const v of values) assert.equal(Number(Math.fround(v).toPrecision(9)), v, `${name}: ${v}`);
  }
  const lib = await loadAttention({ threads: 1 });
  const layer = new Function('lib', 'json', `${json.load}; return layer;`)(lib, json);
  assert.deepEqual(json.config, { embedDim: 8, numHeads: 1, numKvHeads: 1, kdim: 8, vdim: 8, bias: true });
  for (const [key, value] of Object.entries(json.config)) assert.equal(layer.config[key], value, key);
  for (const [name, w] of Object.entries(layer.getWeights())) assert.deepEqual([...w], json.weights[name].map(Math.fround), name);
  const task = makeTask();
  const y = layer.forward(task.queries, task.keys, task.values, { batch: BATCH });
  const loss = y.reduce((s, v, i) => s + (v - task.targets[i]) ** 2, 0) / y.length;
  assert.ok(loss < 1e-4, `the exported layer has learned: loss ${loss}`);
  layer.dispose();

  await page.click('#learn-reset');
  assert.equal(await page.getAttribute('#learn-status', 'data-state'), 'idle');
  assert.equal(await page.isHidden('#learn-export-box'), true);
  assert.equal((await looks('#learn-start')).disabled, false);
  assert.deepEqual(problems, []);
});
