// Headless Debian Chromium through playwright-core, with the flags a test host needs
// (no sandbox as root, no background networking on a closed network): the Chromium driver of the
// harness (browsers.mjs, for tests that run in every engine), and Playwright's own page for the
// Chromium tests that click and type.
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const ARTIFACTS = new URL('../../artifacts/', import.meta.url);

export async function launchBrowser() {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
      // Pages that are not in front must not be slowed down (the benchmark keeps several open).
      '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'],
  });
}

// Opens url in a new page and collects console errors/warnings and page errors into `problems`.
// onResponse, if given, sees every response (those of the page's workers too) from the start.
export async function openPage(browser, url, { viewport = { width: 1200, height: 900 }, onResponse } = {}) {
  const page = await browser.newPage({ viewport });
  if (onResponse) page.on('response', onResponse);
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`requestfailed: ${r.url()}`));
  await page.goto(url);
  return { page, problems };
}
