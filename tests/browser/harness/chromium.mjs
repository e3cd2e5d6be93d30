// The harness's Chromium driver: Debian's Chromium through playwright-core (../chromium.mjs, which
// the tests that click and type use directly). Playwright reports the console, uncaught errors and
// failed requests of the page and its workers.
import { launchBrowser, openPage } from '../chromium.mjs';

export async function launch() {
  const browser = await launchBrowser();
  return {
    name: 'Chromium',
    via: 'headless, playwright-core',
    minWidth: 1,
    version: browser.version(),
    async open(url, { viewport }) {
      const { page, problems } = await openPage(browser, url, { viewport });
      return {
        run: (expression) => page.evaluate(expression),
        problems: async () => [...problems],
        screenshot: (path, { fullPage }) => page.screenshot({ path, fullPage }),
        setViewport: (size) => page.setViewportSize(size),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}
