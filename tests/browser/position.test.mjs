// The demo page's "Position" section in headless Chromium: shuffling the words shuffles the
// outputs (each row of B′ is its word's row of B, against tests/js/reference.mjs); position
// vectors eⁱ added to the inputs (sinusoids from position 1, or a learned table) break that; and
// rotary embeddings — the rotated rows against referenceRotary, the drawing at their coordinates, the
// weights before and after, the query turned back one position picking the word before it, and
// the shuffled sentence then giving other outputs. Both languages.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { referenceAttention, referenceLinear, referenceRotary } from '../js/reference.mjs';
import { demoState, near, openDemo, setLanguage, shownAs, startDemo, tableCells } from './demo.mjs';

const E = 4, D = 4;
const identity = Array.from({ length: E * E }, (_, e) => (e % (E + 1) === 0 ? 1 : 0));
const WQ = [0, 5, 0, 0, 5, 0, 0, 0, 0, 5, 0, 5, 0, 0, 5, 0];  // words.mjs: what each word looks for
const rows = (m, width) => Array.from({ length: m.length / width }, (_, i) => [...m.slice(i * width, (i + 1) * width)]);
const withoutLast = (table) => table.map((r) => r.slice(0, -1));
const lastColumn = (page, sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => tr.cells[tr.cells.length - 1].textContent));

let demo;
before(async () => { demo = await startDemo(); });
after(async () => { await demo?.close(); });

// The head of "Real words as tokens" on the embedding a [n, E], from the definition.
function contentHead(a, n) {
  const q = referenceLinear(a, n, E, WQ, null, E);
  const k = referenceLinear(a, n, E, identity, null, E);
  return referenceAttention(q, k, k, { heads: 1, seqQ: n, headDim: E });
}

test('shuffle the words: each word keeps its output, the rows of B move with it', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const lang of ['en', 'zh']) {
    await setLanguage(page, lang);
    for (const kind of ['swap', 'reverse', 'shuffle', 'shuffle', 'original']) {
      await page.click(`#pos-orders button[data-order="${kind}"]`);
      const p = (await demoState(page)).position;
      const n = p.tokens.length;
      assert.equal(p.kind, kind);
      assert.deepEqual([...p.order].sort(), [...Array(n).keys()], `${lang} ${kind}: a permutation`);
      if (kind === 'shuffle') assert.ok(p.order.some((v, i) => v !== i), 'a shuffle moves something');
      assert.deepEqual(p.movedTokens, p.order.map((i) => p.tokens[i]));
      near(p.moved, p.order.flatMap((i) => p.embedding.slice(i * E, (i + 1) * E)), `${lang} ${kind}: the moved inputs`);
      const b = contentHead(p.embedding, n).out;
      const moved = contentHead(p.moved, n).out;
      near(p.outputs, b, `${lang} B`);
      near(p.movedOutputs, moved, `${lang} ${kind} B′`);
      // The permutation demonstration: B′ is B with its rows permuted, in the library's numbers.
      near(p.movedOutputs, p.order.flatMap((i) => p.outputs.slice(i * E, (i + 1) * E)), `${lang} ${kind}: B′ = P·B`, 1e-6);
      assert.ok(Math.max(...p.diffs) < 1e-6, `${lang} ${kind}: differences ${p.diffs}`);
      shownAs(await tableCells(page, '#pos-outputs'), p.outputs, 2, 'shown B');
      shownAs(withoutLast(await tableCells(page, '#pos-moved-outputs')), p.movedOutputs, 2, 'shown B′');
      assert.deepEqual(await lastColumn(page, '#pos-moved-outputs'), p.diffs.map(() => '0.00'), 'the differences, to two decimals');
      assert.match(await page.textContent('#pos-shuffle-reading'), lang === 'en' ? /^Largest difference over all words: 0\.00 \(exactly (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0): float32 rounding\)\./ : /^所有词的最大差异：0\.00（精确值 (\d\.\d\u00a0×\u00a010⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+|0)：/);
      assert.deepEqual(await page.$$eval('#pos-moved-outputs tbody th', (ths) => ths.map((th) => th.textContent)), p.movedTokens);
      assert.equal(await page.getAttribute(`#pos-orders button[data-order="${kind}"]`, 'aria-pressed'), 'true');
    }
  }
  // The default order swaps the animal and the place: another meaning, the same outputs.
  await page.click('#pos-orders button[data-order="swap"]');
  assert.deepEqual((await demoState(page)).position.movedTokens, ['垫子', '坐', '在', '小猫', '上']);
  await setLanguage(page, 'en');
  assert.deepEqual((await demoState(page)).position.movedTokens, ['the', 'mat', 'sat', 'on', 'the', 'cat']);
  assert.equal(await page.textContent('#pos-moved-caption'), 'B′: “the mat sat on the cat”');
  assert.deepEqual(problems, []);
});

test('position vectors added to the inputs: sinusoids counted from position 1, or a learned table; the shuffle test breaks', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const lang of ['en', 'zh']) {
    await setLanguage(page, lang);
    for (const vectors of ['sinusoidal', 'learned']) {
      await page.click(`#pos-kind button[data-kind="${vectors}"]`);
      for (const kind of ['swap', 'reverse', 'original']) {
        await page.click(`#pos-orders button[data-order="${kind}"]`);
        const p = (await demoState(page)).position;
        const n = p.tokens.length;
        assert.equal(p.vectors, vectors);
        if (vectors === 'sinusoidal') {
          // eⁱ for positions i = 1 … n: e_{2c−1} = sin(i·ω_c), e_{2c} = cos(i·ω_c), ω_c = 10000^(−2(c−1)/d).
          const want = Array.from({ length: n * E }, (_, e) => {
            const i = Math.floor(e / E) + 1, c = Math.floor((e % E) / 2), angle = i * 10000 ** (-2 * c / E);
            return e % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
          });
          near(p.e, want, `${lang}: the sinusoids`, 1e-6);
        }
        const plus = (a) => a.map((x, k) => x + p.e[k]);
        near(p.added, contentHead(plus(p.embedding), n).out, `${lang} ${vectors}: B with eⁱ`);
        near(p.addedMoved, contentHead(plus(p.moved), n).out, `${lang} ${vectors} ${kind}: B′ with eⁱ (the vectors stay with the positions)`);
        const moved = Math.max(...p.addedDiffs);
        if (kind === 'original') assert.ok(moved < 1e-6, 'nothing moved');
        else assert.ok(moved > 0.1, `${lang} ${vectors} ${kind}: the outputs no longer just move with their words (${p.addedDiffs})`);
        shownAs(await tableCells(page, '#pos-e'), p.e, 2, 'shown e');
        shownAs(await tableCells(page, '#pos-sum'), plus(p.embedding), 2, 'shown A + E');
        shownAs(await tableCells(page, '#pos-add-outputs'), p.added, 2, 'shown B with eⁱ');
        shownAs(withoutLast(await tableCells(page, '#pos-add-moved')), p.addedMoved, 2, 'shown B′ with eⁱ');
        assert.deepEqual(await page.$$eval('#pos-e tbody th', (ths) => ths.map((th) => th.textContent)), Array.from({ length: n }, (_, k) => `e${'¹²³⁴⁵⁶'[k]}`));
        assert.equal(await page.getAttribute(`#pos-kind button[data-kind="${vectors}"]`, 'aria-pressed'), 'true');
      }
    }
  }
  await setLanguage(page, 'en');
  await page.click('#pos-orders button[data-order="swap"]');
  assert.match(await page.textContent('#pos-add-reading'), /^In “the mat sat on the cat” the words’ outputs differ .* the shuffle test breaks/);
  assert.deepEqual(problems, []);
});

test('rotary: rows against referenceRotary, drawn where they point, the weights before and after, order now counts', async () => {
  const { page, problems } = await openDemo(demo.browser, demo.server.url);
  for (const lang of ['en', 'zh']) {
    await setLanguage(page, lang);
    const p = (await demoState(page)).position;
    const n = p.tokens.length;
    assert.deepEqual(p.rope, { heads: 1, headDim: D, base: 10, interleaved: true, positionOffset: 1, seq: n });  // a¹ at position 1
    const rq = referenceRotary(p.query, p.rope), rk = referenceRotary(p.key, p.rope);
    near(p.rq, rq, `${lang} q̃`, 2e-6);
    near(p.rk, rk, `${lang} k̃`, 2e-6);
    // Every word has the same q and k before the rotation; the query is the key turned back by one
    // position, so q̃ at position i is k̃ at position i − 1.
    for (let i = 0; i < n; i++) {
      assert.deepEqual(p.query.slice(i * D, (i + 1) * D), p.query.slice(0, D));
      assert.deepEqual(p.key.slice(i * D, (i + 1) * D), p.key.slice(0, D));
      if (i > 0) near(p.rq.slice(i * D, (i + 1) * D), [...rk.slice((i - 1) * D, i * D)], `${lang} q̃${i} = k̃${i - 1}`, 1e-5);
    }
    const scores = referenceLinear(rq, n, D, rk, null, n);
    near(p.scores, scores, `${lang} q̃·k̃`, 1e-4);
    for (let i = 1; i < n; i++) {
      for (let j = 1; j < n; j++) assert.ok(Math.abs(scores[i * n + j] - scores[(i - 1) * n + j - 1]) < 1e-9, 'a score depends on j − i only');
    }
    const options = { heads: 1, seqQ: n, headDim: D };
    near(p.before, referenceAttention(p.query, p.key, null, options).weights, `${lang} α̂ before`);
    near(p.before, new Array(n * n).fill(1 / n), `${lang} α̂ before is even`);
    near(p.after, referenceAttention(rq, rk, null, options).weights, `${lang} α̂ after`);
    rows(p.after, n).forEach((row, i) => assert.equal(row.indexOf(Math.max(...row)), Math.max(0, i - 1), `${lang}: row ${i} picks the word before it`));
    near(p.rotOutputs, referenceAttention(rq, rk, p.embedding, options).out, `${lang} B with rotary`);
    near(p.rotMoved, referenceAttention(rq, rk, p.moved, options).out, `${lang} B′ with rotary`);
    assert.ok(Math.max(...p.rotDiffs) > 0.5, `${lang}: with rotary the swapped sentence gives other outputs (${p.rotDiffs})`);
    for (const [id, m, digits] of [['pos-rq', p.rq, 3], ['pos-rk', p.rk, 3], ['pos-scores', p.scores, 2], ['pos-before', p.before, 2],
      ['pos-after', p.after, 2], ['pos-rot-outputs', p.rotOutputs, 2]]) {
      shownAs(await tableCells(page, `#${id}`), m, digits, `${lang} shown ${id}`);
    }
    shownAs(withoutLast(await tableCells(page, '#pos-rot-moved')), p.rotMoved, 2, `${lang} shown B′ with rotary`);
    assert.deepEqual(await lastColumn(page, '#pos-rot-moved'), p.rotDiffs.map((d) => d.toFixed(2)));
    // The outlined cells are the words before.
    const outlined = await page.$$eval('#pos-after tbody tr', (trs) => trs.map((tr) => [...tr.cells].findIndex((c) => c.classList.contains('target')) - 1));
    assert.deepEqual(outlined, [-2, ...Array.from({ length: n - 1 }, (_, i) => i)]);

    // The drawing: each pair's arrows at the angles of the library's rotated pairs; the chosen
    // query (the action word by default) on the key of the word before it.
    assert.equal(p.chosen, lang === 'en' ? 2 : 1);
    await checkDrawing(page, p, n);
    await page.check(`#pos-picker input[value="${n - 1}"]`);
    const last = (await demoState(page)).position;
    assert.equal(last.chosen, n - 1);
    await checkDrawing(page, last, n);
    assert.ok((await page.textContent('#pos-rotation-caption')).includes(`${p.tokens[n - 2]}`));
    await page.check('#pos-picker input[value="0"]');
    assert.match(await page.textContent('#pos-rotation-caption'), lang === 'en' ? /is the first word/ : /是第一个词/);
  }
  await setLanguage(page, 'en');
  assert.match(await page.textContent('#pos-order-reading'), /^In “the mat sat on the cat”, sat now takes its features from mat, in the original sentence from cat/);
  assert.deepEqual(problems, []);
});

// Angles of the drawn arrows (SVG y points down) against those of the rotated pairs.
async function checkDrawing(page, p, n) {
  const pairs = await page.$$eval('#pos-rotation g.pair', (gs) => gs.map((g) => {
    const orbit = g.querySelector('circle.orbit');
    const [cx, cy] = ['cx', 'cy'].map((a) => Number(orbit.getAttribute(a)));
    const angle = (line) => Math.atan2(cy - Number(line.getAttribute('y2')), Number(line.getAttribute('x2')) - cx);
    return { keys: [...g.querySelectorAll('line.key')].map(angle), query: angle(g.querySelector('line.query')),
      labels: [...g.querySelectorAll('text.key-label')].map((t) => t.textContent),
      boxes: [...g.querySelectorAll('text.key-label')].map((t) => { const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; }) };
  }));
  assert.equal(pairs.length, 2);
  const same = (a, b) => Math.abs(Math.atan2(Math.sin(a - b), Math.cos(a - b))) < 1e-3;
  pairs.forEach((pair, c) => {
    assert.equal(pair.keys.length, n);
    pair.keys.forEach((a, j) => assert.ok(same(a, Math.atan2(p.rk[j * D + 2 * c + 1], p.rk[j * D + 2 * c])), `pair ${c}, key ${j}`));
    const i = p.chosen;
    assert.ok(same(pair.query, Math.atan2(p.rq[i * D + 2 * c + 1], p.rq[i * D + 2 * c])), `pair ${c}: the query`);
    if (i > 0) assert.ok(same(pair.query, pair.keys[i - 1]), `pair ${c}: the query points at the key of the word before`);
    assert.equal(pair.labels[0].startsWith(p.tokens[0]), true);
    // Every word can be read: no two labels overlap, and each lies inside the drawing.
    pair.boxes.forEach((a, j) => {
      assert.ok(a[0] >= 0 && a[2] <= 200 * pairs.length && a[1] >= 0 && a[3] <= 220, `pair ${c}: ${pair.labels[j]} inside the drawing`);
      pair.boxes.slice(j + 1).forEach((b, k) => assert.ok(a[2] <= b[0] || b[2] <= a[0] || a[3] <= b[1] || b[3] <= a[1],
        `pair ${c}: the labels ${pair.labels[j]} and ${pair.labels[j + 1 + k]} overlap`));
    });
  });
}
