// The harness's Firefox driver: Debian's Firefox ESR through puppeteer-core over WebDriver BiDi
// (no browser download). Puppeteer reports the console, uncaught errors and failed requests.
// A BiDi session can hang a worker in `new Worker()` (a worker's own worker, e.g. a threaded build
// loaded in a module worker) now and then: see docs/development.md, "The browser engines".
import puppeteer from 'puppeteer-core';

export async function launch() {
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr',
    headless: true,
    // A closed network: no update checks, no telemetry.
    extraPrefsFirefox: { 'app.update.enabled': false, 'datareporting.policy.dataSubmissionEnabled': false },
  });
  return {
    name: 'Firefox',
    via: 'headless, puppeteer-core over WebDriver BiDi',
    minWidth: 1,
    version: (await browser.version()).replace(/^firefox\//i, ''),
    async open(url, { viewport }) {
      // A window of its own, as in WebKitGTK: a page in a background tab would have its timers slowed.
      const page = await browser.newPage({ type: 'window' });
      const problems = [];
      page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') problems.push(`${m.type() === 'warn' ? 'warning' : 'error'}: ${m.text()}`); });
      page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      page.on('requestfailed', (r) => problems.push(`requestfailed: ${r.url()}`));
      await page.setViewport(viewport);
      await page.goto(url);
      return {
        run: (expression) => page.evaluate(expression),
        problems: async () => [...problems],
        screenshot: (path, { fullPage }) => page.screenshot({ path, fullPage }),
        setViewport: (size) => page.setViewport(size),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}
