// Helpers shared by the demo page's Chromium tests: servers (isolated as `npm start` serves it,
// under a strict CSP, not isolated), opening the page, reading tables, comparing numbers.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { startServer } from '../../scripts/serve.mjs';
import { ARTIFACTS, launchBrowser, openPage } from './chromium.mjs';

export const STRICT_CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; object-src 'none'; base-uri 'none'";
export const PHONE = { width: 390, height: 844 };

// Starts what a test file needs; returns { server, strictServer, plainServer, browser, close() }.
export async function startDemo() {
  const servers = {
    server: await startServer(),
    strictServer: await startServer({ headers: { 'Content-Security-Policy': STRICT_CSP } }),
    plainServer: await startServer({ isolated: false }),
  };
  const browser = await launchBrowser();
  return {
    ...servers, browser,
    async close() {
      await browser.close();
      for (const s of Object.values(servers)) await s.close();
    },
  };
}

// Opens the page and waits until the library has loaded; `onResponse` sees every response,
// workers' included.
export async function openDemo(browser, url, { viewport, onResponse } = {}) {
  const opened = await openPage(browser, `${url}web/`, { viewport, onResponse });
  await opened.page.waitForSelector('body[data-ready]', { timeout: 20000 });
  assert.equal(await opened.page.getAttribute('body', 'data-ready'), 'true', await opened.page.textContent('#status'));
  return opened;
}

export const demoState = (page) => page.evaluate(() => window.attentionDemo);

// Presses English or 中文 and waits until the page shows it (a language's strings load on its
// first showing).
export async function setLanguage(page, lang) {
  await page.click(`button[data-lang="${lang}"]`);
  await page.waitForSelector(`body[data-lang="${lang}"]`);
}

// The benchmark panel, which loads when its section comes near the screen.
export async function benchPanel(page) {
  await page.locator('#bench-panel').scrollIntoViewIfNeeded();
  await page.waitForFunction(() => window.attentionDemo.benchPanel);
}

// The numbers a table shows, row by row (a typographic minus and −∞ read as numbers).
export const tableCells = (page, selector) => page.$$eval(`${selector} tbody tr`, (rows) => rows.map((r) => [...r.cells]
  .filter((c) => c.tagName === 'TD').map((c) => c.querySelector('input')?.value ?? c.textContent)))
  .then((rows) => rows.map((r) => r.map((t) => Number(t.replace('−∞', '-Infinity').replace('−', '-')))));

// got ≈ want elementwise (absolute tol plus 1e-4 relative); -Infinity must match exactly.
export function near(got, want, what, tol = 2e-5) {
  assert.equal(got.length, want.length, `${what}: length`);
  got.forEach((x, i) => {
    if (want[i] === -Infinity || x === -Infinity) assert.equal(x, want[i], `${what}[${i}]`);
    else assert.ok(Math.abs(x - want[i]) <= tol + 1e-4 * Math.abs(want[i]), `${what}[${i}]: ${x} vs ${want[i]}`);
  });
}

// Shown with `digits` decimals: within half a unit of the last digit.
export function shownAs(shown, values, digits, what) {
  near(shown.flat(), [...values], what, 0.5 * 10 ** -digits + 1e-9);
}

// Where screenshots go: artifacts/<name> for whole pages, artifacts/sections/<name> for sections.
export const pageShot = (name) => new URL(name, ARTIFACTS).pathname;
export function sectionShot(name) {
  mkdirSync(new URL('sections/', ARTIFACTS), { recursive: true });
  return new URL(`sections/${name}`, ARTIFACTS).pathname;
}

// Every sum the page writes out, as shown (data-sum): a line of parts and a total, a table row
// whose last cell is the sum of the others, or a table whose last row is the sum of the rows above
// it (column by column, the first column, the weights, aside). → [{ where, parts: [text], total }]
export const shownSums = (page) => page.$$eval('[data-sum]', (els) => els.filter((el) => el.checkVisibility()).flatMap((el) => {
  const text = (node) => node.textContent.trim();
  const where = `${el.closest('[id]')?.id}: ${el.dataset.sum}`;
  if (el.dataset.sum === 'line') return [{ where, parts: [...el.querySelectorAll('.part')].map(text), total: text(el.querySelector('.total')) }];
  if (el.dataset.sum === 'row') {
    const cells = [...el.cells].slice(1).map(text);
    return [{ where, parts: cells.slice(0, -1), total: cells.at(-1) }];
  }
  const rows = [...el.tBodies[0].rows].map((tr) => [...tr.cells].slice(1).map(text));
  return rows[0].slice(1).map((_, c) => ({ where: `${where} ${c + 1}`, parts: rows.slice(0, -1).map((r) => r[c + 1]), total: rows.at(-1)[c + 1] }));
}));

// A number as the page writes it ("−0.052"), exactly: [BigInt units, decimals].
function decimal(text) {
  const m = /^(−?)(\d+)(?:\.(\d+))?$/.exec(text);
  assert.ok(m, `“${text}” is a number written out in full`);
  return [BigInt(`${m[1] ? '-' : ''}${m[2]}${m[3] ?? ''}`), (m[3] ?? '').length];
}

// Each shown sum is the sum of its shown parts, exactly (what a pencil gets).
export function checkSums(sums) {
  for (const { where, parts, total } of sums) {
    const numbers = [...parts, total].map(decimal);
    const digits = Math.max(...numbers.map(([, d]) => d));
    const scaled = numbers.map(([n, d]) => n * 10n ** BigInt(digits - d));
    const sum = scaled.slice(0, -1).reduce((a, b) => a + b, 0n);
    assert.equal(sum, scaled.at(-1), `${where}: ${parts.join(' + ')} = ${total}`);
  }
}
