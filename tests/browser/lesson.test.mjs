// The lesson's first part in headless Chromium: the search analogy (the keys, values and the
// four own queries are K, V and Q of the walk-through at its starting numbers; weights and result
// against tests/js/reference.mjs), one query followed through every step (the rows outlined in
// every table, the worked query, the alignment drawing at the true angles and lengths), a word
// followed in "Real words" (its rows, and the column of W_q that is its query), and the
// "for developers" switch (cross-checks and library calls hidden until it is on; the ✓ badges).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DEFAULTS } from '../../web/walkthrough.mjs';
import { STRINGS } from '../../web/i18n.mjs';
import { referenceAttention, referenceLinear } from '../js/reference.mjs';
import { PHONE, demoState, near, openDemo, shownAs, startDemo, tableCells } from './demo.mjs';

const N = 4, D = 4;
let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

const project = (w) => referenceLinear(DEFAULTS.inputs, N, D, w, null, D);
const row = (m, i, width = D) => [...m.slice(i * width, (i + 1) * width)];

test('the lesson first, in the lecture\'s order, then "Beyond the lecture"; the search is the first section', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  // The page's sections and part titles in document order, each part with the sections after it.
  const outline = await page.$$eval('main h2.part-title, main section[aria-labelledby]', (els) => els
    .filter((el) => el.matches('h2') || !el.parentElement.closest('section'))
    .map((el) => (el.matches('h2') ? `# ${el.textContent}` : el.getAttribute('aria-labelledby'))));
  assert.deepEqual(outline, ['# The lecture', 'search', 'walk', 'words', 'learn',
    '# Beyond the lecture', 'position', 'heads', 'decode', 'play', 'bench']);
  const steps = await page.$$eval('section[aria-labelledby="walk"] section', (ss) => ss.map((s) => s.getAttribute('aria-labelledby')));
  assert.deepEqual(steps, ['s1', 's2', 's3', 's4', 's5'], 'the five steps in order');
  // The notation table is no longer ahead of the numbers: nothing but the header before the search.
  const before = await page.evaluate(() => {
    const first = document.querySelector('section[aria-labelledby="search"]');
    return [...document.querySelectorAll('main table')].filter((t) => t.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING).length;
  });
  assert.equal(before, 0, 'no table before the search');
  assert.deepEqual(problems, []);
});

test('the search: keys, values and queries are K, V and Q of the steps; weights and result by the reference', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const keys = project(DEFAULTS.wk), values = project(DEFAULTS.wv), queries = project(DEFAULTS.wq);
  const { search, walk } = await demoState(page);
  near(search.keys, keys, 'keys');
  near(search.values, values, 'values');
  near(search.queries, queries, 'queries');
  near(search.keys, walk.key, 'the keys are K of step 2');
  near(search.values, walk.value, 'the values are V of step 2');
  near(search.queries, walk.query, 'the own queries are Q of step 2');
  shownAs(await tableCells(page, '#search-keys'), keys, 2, 'shown keys');
  shownAs(await tableCells(page, '#search-values'), values, 2, 'shown values');
  async function check(query, what) {
    const s = (await demoState(page)).search;
    near(s.query, query, `${what}: the query`);
    const want = referenceAttention(query, keys, values, { heads: 1, seqQ: 1, seqK: N, headDim: D });
    const scores = referenceLinear(query, 1, D, keys, null, N);
    near(s.scores, scores, `${what}: q·kʲ`);
    near(s.weights, want.weights, `${what}: the weights`);
    near(s.result, want.out, `${what}: the result`);
    const shown = await tableCells(page, '#search-scores');
    shownAs(shown, Array.from({ length: N * 3 }, (_, e) => [scores[Math.floor(e / 3)], scores[Math.floor(e / 3)] / 2, want.weights[Math.floor(e / 3)]][e % 3]), 2, `${what}: shown scores`);
    const result = await tableCells(page, '#search-result');
    shownAs(result.slice(0, N).map((r) => r[0]), want.weights, 3, `${what}: the weights beside the values`);
    shownAs(result.slice(0, N).map((r) => r.slice(1)), Array.from({ length: N * D }, (_, e) => want.weights[Math.floor(e / D)] * values[e]), 3, `${what}: α̂ʲ·vʲ`);
    shownAs(result[N].slice(1), want.out, 3, `${what}: the result row`);
    return s;
  }
  // It starts by looking for travel: the Kyoto article wins.
  assert.equal(await page.getAttribute('#search-tags button:nth-of-type(3)', 'aria-pressed'), 'true');
  let s = await check([0, 0, 3, 0], 'travel');
  assert.equal(s.weights.indexOf(Math.max(...s.weights)), 2);
  assert.match(await page.textContent('#search-reading'), /A week in Kyoto/);
  await page.click('#search-tags button:nth-of-type(1)');  // and cats
  await check([3, 0, 3, 0], 'travel and cats');
  await page.click('#search-tags button:nth-of-type(1)');
  await page.click('#search-tags button:nth-of-type(3)');  // nothing pressed
  s = await check([0, 0, 0, 0], 'empty');
  near(s.weights, [0.25, 0.25, 0.25, 0.25], 'an empty query weighs every article alike');
  assert.match(await page.textContent('#search-reading'), /^An empty query/);
  // The own queries: each runs the search its input makes, row i of α̂ in step 4.
  for (let i = 0; i < N; i++) {
    await page.click(`#search-own-queries button:nth-of-type(${i + 1})`);
    s = await check(row(queries, i), `q${i + 1}`);
    near(s.weights, row(walk.weights, i, N), `q${i + 1}: row ${i + 1} of α̂`);
    assert.equal(await page.getAttribute(`#search-own-queries button:nth-of-type(${i + 1})`, 'aria-pressed'), 'true');
    assert.match(await page.textContent('#search-reading'), new RegExp(`row ${i + 1} of the weights α̂ in step 4`));
  }
  await page.click('button[data-lang="zh"]');
  assert.deepEqual(await page.$$eval('#search-keys tbody th', (ths) => ths.map((th) => th.textContent)),
    STRINGS.zh.searchArticles.map((t, j) => `${j + 1}. ${t}`));
  assert.match(await page.textContent('#search-reading'), /第 4 步权重 α̂ 的第 4 行/);
  assert.deepEqual(problems, []);
});

test('one query followed through every step: rows outlined, the worked query, the products, the alignment drawing', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const outlined = (id, cls = 'highlight') => page.$$eval(`#${id} tbody tr`, (trs, c) => trs.map((tr) => tr.classList.contains(c)), cls);
  async function check(i) {
    const w = (await demoState(page)).walk;
    assert.equal(w.selected, i);
    assert.equal(await page.isChecked(`#follow input[value="${i}"]`), true, 'the picker shows it');
    const only = Array.from({ length: N }, (_, k) => k === i);
    for (const id of ['inputs', 'query', 'scores', 'scaled', 'weights', 'outputs']) assert.deepEqual(await outlined(id), only, `${id}: row ${i + 1} outlined`);
    assert.deepEqual(await outlined('key', 'compared'), [true, true, true, true], 'every key it is compared with');
    const q = row(w.query, i);
    const shownQ = (await tableCells(page, '#query'))[i];
    shownAs([shownQ], q, 3, 'the outlined row is qⁱ');
    const worked = await page.textContent('#query-worked');
    assert.ok(worked.startsWith(`The query followed: q${i + 1} = Wqa${i + 1} = Wq·(`), worked);
    for (const x of q) assert.ok(worked.includes(x.toFixed(2).replace(/^-/, '−').replace(/^−0\.00$/, '0.00')), `${worked} shows ${x}`);
    // The drawing: each key at its true length and angle to qⁱ.
    const qLen = Math.hypot(...q);
    w.alignment.forEach(({ along, across }, j) => {
      const k = row(w.key, j);
      const dot = q.reduce((sum, x, c) => sum + x * k[c], 0);
      assert.ok(Math.abs(along - dot / qLen) < 1e-4, `k${j + 1}: how far it reaches along q${i + 1}`);
      assert.ok(Math.abs(Math.hypot(along, across) - Math.hypot(...k)) < 1e-4, `k${j + 1}: its length`);
      assert.ok(across >= 0);
    });
    const drawn = await page.$$eval('#alignment line.key', (ls) => ls.map((l) => ['x1', 'y1', 'x2', 'y2'].map((a) => Number(l.getAttribute(a)))));
    const [qx1, , qx2] = await page.$eval('#alignment line.query', (l) => ['x1', 'y1', 'x2', 'y2'].map((a) => Number(l.getAttribute(a))));
    drawn.forEach(([x1, y1, x2, y2], j) => {
      const k = row(w.key, j);
      const cos = q.reduce((sum, x, c) => sum + x * k[c], 0) / (qLen * Math.hypot(...k));
      const angle = Math.atan2(y1 - y2, x2 - x1);  // SVG's y points down
      assert.ok(Math.abs(Math.cos(angle) - cos) < 1e-3, `k${j + 1} drawn at its angle to q${i + 1}`);
      assert.ok(Math.abs(Math.hypot(x2 - x1, y2 - y1) / (qx2 - qx1) - Math.hypot(...k) / qLen) < 1e-3, `k${j + 1} drawn at its length`);
    });
    const best = row(w.scores, i, N).indexOf(Math.max(...row(w.scores, i, N)));
    assert.match(await page.textContent('#alignment-caption'), new RegExp(`k${best + 1} reaches furthest`));
    // Step 5: the products of row i add up to bⁱ.
    const rows = await tableCells(page, '#weighted-sum');
    shownAs(rows.slice(0, N).map((r) => r[0]), row(w.weights, i, N), 3, 'α̂(i, j)');
    shownAs(rows[N].slice(1), row(w.outputs, i), 3, 'bⁱ');
  }
  await check(1);
  for (const i of [3, 0, 2]) {
    await page.check(`#follow input[value="${i}"]`);
    await check(i);
  }
  await page.click('#scores tbody tr:nth-child(2)');  // a click on a row of the scores
  await check(1);
  await page.click('#weights tbody tr:nth-child(4)');
  await check(3);
  // The causal mask keeps the followed query and shows its hidden products as such.
  await page.check('#causal');
  await page.check('#follow input[value="0"]');
  await check(0);
  const hidden = await page.$$eval('#weighted-sum tbody tr', (trs) => trs.slice(0, 4).map((tr) => tr.cells[1].classList.contains('masked')));
  assert.deepEqual(hidden, [false, true, true, true], 'q¹ sees only k¹');
  assert.deepEqual(problems, []);
});

// The drawing's key labels (k¹…k⁴) stay readable: for every query followed, on a desktop and a
// phone, no two labels closer than 2 units, none covering a key's tip or crossing a key's or the
// query's line (its own key's: only not covered), all inside the picture.
test('the alignment drawing: key labels apart from each other and from the keys, for every query, desktop and phone', async () => {
  for (const viewport of [undefined, PHONE]) {
    const { page, problems } = await openDemo(demo.browser, demo.server.url, { viewport });
    for (let i = 0; i < N; i++) {
      await page.check(`#follow input[value="${i}"]`);
      const clashes = await page.$eval('#alignment', (svg) => {
        const num = (el, ...names) => names.map((n) => Number(el.getAttribute(n)));
        const labels = [...svg.querySelectorAll('.key-label')].map((t) => ({ name: t.textContent, box: t.getBBox() }));
        const tips = [...svg.querySelectorAll('.key-tip')].map((c) => num(c, 'cx', 'cy'));
        const lines = [...svg.querySelectorAll('line.key, line.query')].map((l) => num(l, 'x1', 'y1', 'x2', 'y2'));
        const [, , w, h] = svg.getAttribute('viewBox').split(' ').map(Number);
        const within = (b, x, y, pad) => x > b.x - pad && x < b.x + b.width + pad && y > b.y - pad && y < b.y + b.height + pad;
        const found = [];
        labels.forEach(({ name, box }, j) => {
          labels.slice(j + 1).forEach((o) => {
            const apart = Math.max(o.box.x - (box.x + box.width), box.x - (o.box.x + o.box.width), o.box.y - (box.y + box.height), box.y - (o.box.y + o.box.height));
            if (apart < 2) found.push(`${name} and ${o.name} ${apart.toFixed(1)} apart`);
          });
          tips.forEach(([x, y], k) => { if (within(box, x, y, k === j ? 0 : 2)) found.push(`${name} covers the tip of key ${k + 1}`); });
          lines.forEach(([x1, y1, x2, y2], k) => {
            for (let t = 0; t <= 1; t += 0.01) {
              if (within(box, x1 + (x2 - x1) * t, y1 + (y2 - y1) * t, 0)) { found.push(`${name} crosses ${k < labels.length ? `key ${k + 1}` : 'the query'}`); break; }
            }
          });
          if (box.x < 0 || box.y < 0 || box.x + box.width > w || box.y + box.height > h) found.push(`${name} outside the picture`);
        });
        return found;
      });
      assert.deepEqual(clashes, [], `q${i + 1}${viewport ? ' on a phone' : ''}`);
    }
    assert.deepEqual(problems, []);
    await page.close();
  }
});

test('a word followed in Real words: its rows of A, α̂ and B outlined, and the column of W_q that is its query, in both languages', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const E = 4;
  async function check(i, lang) {
    const w = (await demoState(page)).words;
    const n = w.tokens.length;
    assert.equal(w.selected, i, `${lang}: the word followed`);
    assert.equal(await page.isChecked(`#words-follow input[value="${i}"]`), true, 'the picker shows it');
    for (const id of ['words-embedding', 'words-weights', 'words-outputs']) {
      assert.deepEqual(await page.$$eval(`#${id} tbody tr`, (trs) => trs.map((tr) => tr.classList.contains('highlight'))),
        Array.from({ length: n }, (_, k) => k === i), `${lang} ${id}: row ${i + 1} outlined`);
    }
    // The outlined column c of W_q is the word's query: its embedding is the one-hot of feature c.
    const feature = w.embedding.slice(i * E, (i + 1) * E).indexOf(1);
    const used = await page.$$eval('#words-wq tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.classList.contains('used'))));
    used.forEach((cells) => assert.deepEqual(cells, cells.map((_, c) => feature >= 0 && c === feature + 1), `${lang}: column ${feature + 1} of W_q outlined`));
    const query = w.query.slice(i * E, (i + 1) * E);
    if (feature >= 0) near(query, Array.from({ length: E }, (_, r) => w.wq[r * E + feature]), `${lang}: the query is that column`);
    else near(query, [0, 0, 0, 0], `${lang}: a word without features has the query 0`);
    // The sentence under the picker names the words the row gives the most weight to.
    const row = w.weights.slice(i * n, (i + 1) * n);
    const top = Math.max(...row);
    const reading = await page.textContent('#words-followed');
    assert.ok(reading.includes(w.tokens[i]), reading);
    if (feature >= 0) {
      for (let j = 0; j < n; j++) if (top - row[j] < 1e-3) assert.ok(reading.includes(w.tokens[j]), `${reading} names ${w.tokens[j]}`);
      assert.ok(reading.includes(top.toFixed(2)), `${reading} gives ${top.toFixed(2)}`);
    }
    return { w, reading };
  }
  let { reading } = await check(2, 'en');  // sat, the action, at first
  assert.match(reading, /sat is an action, so its query is the “action” column of Wq \(outlined\): it looks for animal and place\. Its row of α̂ gives the most weight to cat and mat \(0\.43 each\)/);
  await page.click('#words-weights tbody tr:nth-child(1)');  // a click on a row: the, no features
  ({ reading } = await check(0, 'en'));
  assert.match(reading, /has none of the four features/);
  await page.click('#words-outputs tbody tr:nth-child(4)');
  await check(3, 'en');
  await page.click('button[data-lang="zh"]');
  const { w } = await check(1, 'zh');  // 坐, the action of the Chinese sentence
  assert.deepEqual(await page.$$eval('#words-follow label', (ls) => ls.map((l) => l.textContent.trim())), w.tokens.map((t, i) => `${t}${'¹²³⁴⁵⁶'[i]}`));
  await page.check('#words-follow input[value="3"]');
  ({ reading } = await check(3, 'zh'));
  assert.match(reading, /垫子是地点.*在和上（各 0\.45）/);
  await page.click('button[data-lang="en"]');
  await check(3, 'en');  // each language keeps its own word
  assert.deepEqual(problems, []);
});

test('for developers: cross-checks and library calls hidden from the lesson until the switch is on; ✓ badges', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const visibleCode = () => page.$$eval('section', (sections) => sections
    .filter((s) => !['play', 'bench'].includes(s.getAttribute('aria-labelledby')))
    .flatMap((s) => [...s.querySelectorAll('code')]).filter((c) => c.checkVisibility()).map((c) => c.textContent));
  const visibleText = () => page.evaluate(() => document.body.innerText);
  // The exported weights' note too: it speaks of the layer's weights, the call is for developers.
  await page.click('#learn-export');
  await page.waitForSelector('#learn-export-box:not([hidden])');
  assert.match(await page.evaluate(() => document.getElementById('learn-export-note').innerText), /^the layer’s weights at step 0; the “load” line/);
  assert.deepEqual(await visibleCode(), [], 'no library call in sight outside the playground and benchmark');
  assert.doesNotMatch(await visibleText(), /largest difference \d|MultiHeadAttention|lib\.|getWeights/);
  for (const id of ['layer-badge', 'heads-badge']) assert.equal(await page.textContent(`#${id}`), '✓ checked');
  assert.equal(await page.isVisible('#layer-check'), false);
  await page.check('#dev-mode');
  assert.equal(await page.isVisible('#layer-check'), true);
  assert.match(await page.textContent('#layer-check'), /largest difference (\d\.\d × 10⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)\./);
  assert.ok((await visibleCode()).some((c) => c.startsWith('lib.attentionWeights(')), 'the calls show');
  assert.ok((await visibleCode()).includes('mha.getWeights()'), 'the export\'s call shows');
  assert.match(await visibleText(), /MultiHeadAttention/);
  // The decode badge appears with the first step.
  assert.equal(await page.isVisible('#decode-badge'), false);
  await page.click('#decode-next');
  assert.equal(await page.textContent('#decode-badge'), '✓ checked');
  await page.uncheck('#dev-mode');
  assert.equal(await page.isVisible('#layer-check'), false);
  assert.deepEqual(await visibleCode(), []);
  assert.deepEqual(problems, []);
});
