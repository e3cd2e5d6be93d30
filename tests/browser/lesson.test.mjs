// The lesson's first part in headless Chromium: the search analogy (the keys, values and the
// four own queries are K, V and Q of the walk-through at its starting numbers; weights and result
// against tests/js/reference.mjs), one query followed through every step — q¹ at first, as in the
// lecture — (the rows outlined in every table, column i of K·Qᵀ, the worked query and its
// component, the alignment drawing at the true angles and lengths, its softmax worked out), every
// sum written out adding up as shown, Q, K and V in one colour each, the d_k experiment, a word
// followed in "Real words" (its rows, and the column of W_q that is its query), and the
// "for developers" switch (cross-checks and library calls hidden until it is on; the ✓ badges).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { DEFAULTS } from '../../web/walkthrough.mjs';
import { SIZES, TOKENS, uniform } from '../../web/dk-experiment.mjs';
import { ZH } from '../../web/i18n-zh.mjs';
import { referenceAttention, referenceLinear } from '../js/reference.mjs';
import { checkSums, demoState, near, openDemo, PHONE, setLanguage, shownAs, shownSums, startDemo, tableCells } from './demo.mjs';

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
  assert.deepEqual(steps, ['s1', 's2', 's3', 's4', 's5', 'dk'], 'the five steps in order, then the lecture\'s question');
  // The lecture's matrix steps in the path: K·Qᵀ and Q·Kᵀ in step 3 before the softmax, Â in step 4,
  // B = Â·V and Output = softmax(QKᵀ/√d_k)V in step 5.
  const inStep = (sel) => page.$eval(sel, (el) => el.closest('section[aria-labelledby^="s"]').getAttribute('aria-labelledby'));
  assert.deepEqual(await Promise.all(['#stacked', '#scores', '#scaled', '#softmax-row', '#weights', '#weighted-sum'].map(inStep)),
    ['s3', 's3', 's3', 's4', 's4', 's5']);
  assert.match(await page.textContent('section[aria-labelledby="s5"]'), /B = Â·V.*Output=\s*softmax\u2061?\(QKTdk\)V/s);
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
    shownAs(shown.map((r) => r[0]), scores, 2, `${what}: shown q·kʲ`);
    assert.deepEqual(shown.map((r) => r[1]), shown.map((r) => Number((r[0] / 2).toFixed(3))), `${what}: ÷ √4 of q·kʲ as shown, exactly`);
    shownAs(shown.map((r) => r[2]), want.weights, 3, `${what}: shown weights`);
    const result = await tableCells(page, '#search-result');
    shownAs(result.slice(0, N).map((r) => r[0]), want.weights, 3, `${what}: the weights beside the values`);
    near(result.slice(0, N).flatMap((r) => r.slice(1)), Array.from({ length: N * D }, (_, e) => want.weights[Math.floor(e / D)] * values[e]), `${what}: α̂ʲ·vʲ`, 1e-3 + 1e-9);
    checkSums((await shownSums(page)).filter((x) => x.where.startsWith('search-result')));
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
  await setLanguage(page, 'zh');
  assert.deepEqual(await page.$$eval('#search-keys tbody th', (ths) => ths.map((th) => th.textContent)),
    ZH.searchArticles.map((t, j) => `${j + 1}. ${t}`));
  assert.match(await page.textContent('#search-reading'), /第 4 步权重 α̂ 的第 4 行/);
  assert.deepEqual(problems, []);
});

test('one query followed through every step, q¹ at first: rows outlined, the worked query, its softmax, the products, the drawing', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const outlined = (id, cls = 'highlight') => page.$$eval(`#${id} tbody tr`, (trs, c) => trs.map((tr) => tr.classList.contains(c)), cls);
  async function check(i) {
    const w = (await demoState(page)).walk;
    assert.equal(w.selected, i);
    assert.equal(await page.isChecked(`#follow input[value="${i}"]`), true, 'the picker shows it');
    const only = Array.from({ length: N }, (_, k) => k === i);
    for (const id of ['inputs', 'query', 'scores', 'scaled', 'weights', 'outputs']) assert.deepEqual(await outlined(id), only, `${id}: row ${i + 1} outlined`);
    assert.deepEqual(await outlined('key', 'compared'), [true, true, true, true], 'every key it is compared with');
    // K·Qᵀ: column i is query i's, outlined.
    const columns = await page.$$eval('#stacked tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.classList.contains('used'))));
    columns.forEach((cells) => assert.deepEqual(cells, cells.map((_, k) => k === i + 1), `column ${i + 1} of K·Qᵀ outlined`));
    // One component of qⁱ worked out: row c of W_q times aⁱ, exactly, and the number Q shows.
    const c = w.component;
    const component = await page.textContent('#component-worked');
    const exact = DEFAULTS.wq.slice(c * D, c * D + D).reduce((sum, x, m) => sum + x * w.inputs[i * D + m], 0);
    assert.ok(component.includes(`Its component ${c + 1} is row ${c + 1} of Wq`), component);
    assert.match(component, new RegExp(`= ${exact.toFixed(2).replace('-', '−')}; Q shows it as ${w.query[i * D + c].toFixed(3).replace('-', '−')}\\.$`));
    assert.deepEqual(await page.$$eval('#wq tbody tr', (trs) => trs.map((tr) => tr.classList.contains('used-row'))), Array.from({ length: D }, (_, r) => r === c));
    // Its softmax: α′ as step 3 shows it, the exps, their sum, and each exp ÷ the sum as Â shows it.
    const soft = await page.$$eval('#softmax-row tbody tr', (trs) => trs.map((tr) => [...tr.cells].slice(1).map((td) => td.textContent)));
    const scaled = await page.$$eval(`#scaled tbody tr:nth-child(${i + 1}) td`, (tds) => tds.map((td) => td.textContent));
    const weights = await page.$$eval(`#weights tbody tr:nth-child(${i + 1}) td`, (tds) => tds.map((td) => td.textContent));
    assert.deepEqual(soft[0].slice(0, N), scaled, 'the scores α′ of row i as step 3 shows them');
    assert.deepEqual(soft[2].slice(0, N), weights, 'the weights of row i as Â shows them');
    const [exps, total] = [soft[1].slice(0, N).map(Number), Number(soft[1][N])];
    exps.forEach((e, j) => {
      const a = Number(scaled[j].replace('−∞', '-Infinity').replace('−', '-'));
      assert.ok(Math.abs(e - Math.exp(a)) <= 0.5 * 10 ** -(soft[1][j].split('.')[1] ?? '').length + 1e-12, `exp(${scaled[j]}) = ${soft[1][j]}`);
      if (weights[j] !== '0') assert.equal((e / total).toFixed(3), weights[j], `${soft[1][j]} ÷ ${soft[1][N]} = ${weights[j]}`);
    });
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
  await check(0);
  for (const i of [3, 1, 2]) {
    await page.check(`#follow input[value="${i}"]`);
    await check(i);
  }
  await page.click('#scores tbody tr:nth-child(2)');  // a click on a row of the scores
  await check(1);
  await page.click('#weights tbody tr:nth-child(4)');
  await check(3);
  await page.click('#query tbody tr:nth-child(3) td:nth-child(4)');  // a number of Q: its query and component
  assert.deepEqual([(await demoState(page)).walk.selected, (await demoState(page)).walk.component], [2, 2]);
  await check(2);
  await page.click('#component-picker button:nth-of-type(4)');
  await check(2);
  await page.click('#stacked tbody tr:nth-child(1) td:nth-child(2)');  // column 1 of K·Qᵀ: q¹'s
  await check(0);
  // The causal mask keeps the followed query and shows its hidden products as such.
  await page.check('#causal');
  await page.check('#follow input[value="0"]');
  await check(0);
  const hidden = await page.$$eval('#weighted-sum tbody tr', (trs) => trs.slice(0, 4).map((tr) => tr.cells[1].classList.contains('masked')));
  assert.deepEqual(hidden, [false, true, true, true], 'q¹ sees only k¹');
  assert.deepEqual(problems, []);
});

// Every sum the page writes out — a component of qⁱ, the exps of a softmax row and their Σ, the
// columns of products that make bⁱ and the search's result — is the sum of its parts as shown,
// exactly: for every query followed, with masks, another scale, random weights, in both languages.
test('every sum written out adds up exactly as shown: any query followed, masks, scales, random weights, both languages', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  let checked = 0;
  async function all(what) {
    for (let i = 0; i < N; i++) {
      await page.check(`#follow input[value="${i}"]`);
      for (let c = 0; c < D; c += 3) {
        await page.click(`#component-picker button:nth-of-type(${c + 1})`);
        const sums = await shownSums(page);
        assert.ok(sums.some((x) => x.where.startsWith('component-worked')) && sums.some((x) => x.where.startsWith('softmax-row')) &&
          sums.filter((x) => x.where.startsWith('weighted-sum')).length === D, `${what}, q${i + 1}: the sums are marked`);
        checkSums(sums.map((x) => ({ ...x, where: `${what}, q${i + 1}, ${x.where}` })));
        checked += sums.length;
      }
    }
  }
  await all('defaults');
  await page.check('input[name="scale"][value="one"]');
  await all('s = 1');
  await page.fill('#scale-slider', '2.35');
  await all('s = 2.35');
  await page.check('input[name="scale"][value="sqrt"]');
  await page.check('#causal');
  await page.check('#key-masks input[data-key="1"]');
  await all('causal, k² hidden');
  await page.uncheck('#causal');
  await page.uncheck('#key-masks input[data-key="1"]');
  for (let k = 0; k < 3; k++) {
    await page.click('#random-weights');
    await page.click('#random-inputs');
    await all(`random ${k + 1}`);
  }
  await setLanguage(page, 'zh');
  await all('中文');
  for (let i = 0; i < N; i++) {
    await page.click(`#search-own-queries button:nth-of-type(${i + 1})`);
    checkSums((await shownSums(page)).filter((x) => x.where.startsWith('search')));
  }
  assert.ok(checked > 500, `${checked} sums checked`);
  assert.deepEqual(problems, []);
});

// Q, K and V have one colour each, from the header's formula through every step: the letters,
// the tables' headers, the drawing, the last formula.
test('Q, K and V keep one colour each, from the formula at the top through every step', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  const colours = await page.evaluate(() => {
    const of = (sel, property = 'color') => [...document.querySelectorAll(sel)].map((el) => getComputedStyle(el)[property]);
    return {
      q: [...of('header math .q'), ...of('#query-caption .q, #query tbody th'), ...of('#scores tbody th, #stacked thead th:not(.corner)'),
        ...of('#weights tbody th'), ...of('#alignment .query', 'stroke'), ...of('#s5 ~ .formula .q, section[aria-labelledby="s5"] math .q')],
      k: [...of('header math .k'), ...of('#key-caption .k, #key tbody th'), ...of('#scores thead th:not(.corner), #stacked tbody th'),
        ...of('#alignment .key', 'stroke'), ...of('section[aria-labelledby="s5"] math .k')],
      v: [...of('header math .v'), ...of('#value-caption .v, #value tbody th'), ...of('#weighted-sum tbody tr:not(:last-child) th'),
        ...of('section[aria-labelledby="s5"] math .v')],
    };
  });
  for (const [name, list] of Object.entries(colours)) {
    assert.ok(list.length >= 10, `${name}: ${list.length} places`);
    assert.equal(new Set(list).size, 1, `${name} in one colour: ${[...new Set(list)]}`);
  }
  assert.equal(new Set(Object.values(colours).map((l) => l[0])).size, 3, 'three colours');
  assert.deepEqual(problems, []);
});

// The lecture's question tried: the page's numbers against the reference on the same random
// numbers, and what they show — scores spreading like √d_k, the softmax saturating without the
// scale and not with it.
test('the d_k experiment: the spread of the scores and the largest weight at d_k = 4, 64, 512, by the reference', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  async function check() {
    const { seed, results } = (await demoState(page)).dk;
    const random = uniform(seed);
    results.forEach((r, n) => {
      const d = SIZES[n];
      assert.equal(r.d, d);
      const q = Array.from({ length: TOKENS * d }, random), k = Array.from({ length: TOKENS * d }, random);
      const scores = referenceLinear(q, TOKENS, d, k, null, TOKENS);
      const mean = scores.reduce((a, b) => a + b, 0) / scores.length;
      const spread = Math.sqrt(scores.reduce((a, x) => a + (x - mean) ** 2, 0) / scores.length);
      assert.ok(Math.abs(r.spread - spread) < 1e-4 * spread, `d_k ${d}: spread ${r.spread} vs ${spread}`);
      for (const [kind, scale] of [['one', 1], ['scaled', 1 / Math.sqrt(d)]]) {
        const w = referenceAttention(q, k, k, { heads: 1, seqQ: TOKENS, headDim: d, scale }).weights;
        const largest = Array.from({ length: TOKENS }, (_, i) => Math.max(...w.slice(i * TOKENS, (i + 1) * TOKENS))).reduce((a, b) => a + b) / TOKENS;
        assert.ok(Math.abs(r.largest[kind] - largest) < 1e-5, `d_k ${d}, ${kind}: largest weight ${r.largest[kind]} vs ${largest}`);
        near(r.rows[kind], w.slice(0, TOKENS), `d_k ${d}, ${kind}: q¹'s weights`);
      }
      // What the page says it shows.
      assert.ok(Math.abs(r.spread / Math.sqrt(d) - 1) < 0.3, `d_k ${d}: the spread is about √d_k (${r.spread})`);
      assert.ok(r.largest.scaled < 0.6, `d_k ${d}: with 1/√d_k no key takes everything (${r.largest.scaled})`);
    });
    assert.ok(results[2].largest.one > 0.95, `d_k 512 without the scale saturates (${results[2].largest.one})`);
    const shown = await tableCells(page, '#dk-table');
    results.forEach((r, n) => shownAs([shown[n]], [r.spread, Math.sqrt(r.d), r.spread / Math.sqrt(r.d), r.largest.one, r.largest.scaled]
      .map((x, c) => Number(x.toFixed(c < 3 ? 1 : 3))), 3, 'shown'));
    assert.match(await page.textContent('#dk-reading'), new RegExp(`at dk = 512 a row’s largest weight is ${results[2].largest.one.toFixed(3)}`));
    return seed;
  }
  const first = await check();
  await page.click('#dk-again');
  assert.notEqual(await check(), first, 'new random numbers');
  assert.deepEqual(problems, []);
});

// "Randomise weights" draws them as an untrained layer starts (PyTorch's nn.Linear: uniform in
// ±1/√4), and the page says what that gives: weights near the even 1/4, as the text promises.
test('Randomise weights: an untrained layer\'s weights, and attention spread almost evenly, as the page says', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  assert.equal(await page.isHidden('#random-reading'), true);
  for (let k = 0; k < 6; k++) {
    await page.click('#random-weights');
    const w = (await demoState(page)).walk;
    for (const m of [w.wq, w.wk, w.wv]) assert.ok(m.every((x) => Math.abs(x) <= 0.5), `within ±1/√4: ${m}`);
    const [lo, hi] = [Math.min(...w.weights), Math.max(...w.weights)];
    assert.ok(lo > 0.15 && hi < 0.4, `almost evenly: ${lo}–${hi}`);
    assert.equal(await page.textContent('#random-reading'),
      `Random weights: every weight of α̂ in step 4 lies between ${lo.toFixed(2)} and ${hi.toFixed(2)}, near the even 0.25 each.`);
  }
  await page.click('#reset');
  assert.equal(await page.isHidden('#random-reading'), true);
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
  await setLanguage(page, 'zh');
  const { w } = await check(1, 'zh');  // 坐, the action of the Chinese sentence
  assert.deepEqual(await page.$$eval('#words-follow label', (ls) => ls.map((l) => l.textContent.trim())), w.tokens.map((t, i) => `${t}${'¹²³⁴⁵⁶'[i]}`));
  await page.check('#words-follow input[value="3"]');
  ({ reading } = await check(3, 'zh'));
  assert.match(reading, /垫子是地点.*在和上（各 0\.45）/);
  await setLanguage(page, 'en');
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
  assert.match(await page.textContent('#layer-check'), /largest difference (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)\./);
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
