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
