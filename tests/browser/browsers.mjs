// The browser-test harness: one API over the three engines Debian ships — Chromium (Blink/V8,
// through playwright-core), Firefox ESR (Gecko/SpiderMonkey, headless, over Marionette) and
// WebKitGTK (WebKit/JavaScriptCore, Safari's engine, WebKitWebDriver under xvfb-run).
//
//   const server = await serve({ root: REPO });         // scripts/serve.mjs + the console capture
//   const browser = await launch('webkit');             // { engine, name, version, via, minWidth, open, close }
//   const page = await browser.open(`${server.url}x.html`, { viewport });
//   await page.waitFor(() => window.__result);          // polls in the page until truthy; returns it
//                                                       // (or throws, with the page's problems)
//   await page.evaluate((n) => n + 1, 41);              // 42
//   await page.problems();                              // ['error: …', 'pageerror: …', …] so far
//   await page.screenshot(path, { fullPage: true });
//   await page.setViewport({ width, height }); await page.close(); await browser.close();
//
// minWidth: the narrowest viewport the engine's window gives (WebKitGTK's toolbar keeps it wider
// than a phone). evaluate()'s function is sent as source text (no closures) and its argument as JSON; the value
// comes back the same way in every engine, with typed arrays as arrays and ±Infinity and NaN kept.
// ATTN_BROWSERS=chromium,firefox limits testedEngines() for a focused run; npm test runs all three.
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../scripts/serve.mjs';
import { ARTIFACTS } from './chromium.mjs';

export { ARTIFACTS };  // where tests leave screenshots (not committed)
export const ENGINES = ['chromium', 'firefox', 'webkit'];
const DRIVERS = { chromium: './harness/chromium.mjs', firefox: './harness/firefox.mjs', webkit: './harness/webkit.mjs' };

export function testedEngines() {
  const list = process.env.ATTN_BROWSERS?.split(',').map((e) => e.trim()).filter(Boolean) ?? ENGINES;
  const unknown = list.filter((e) => !ENGINES.includes(e));
  if (unknown.length) throw new Error(`ATTN_BROWSERS: unknown engine ${unknown.join(', ')} (known: ${ENGINES.join(', ')})`);
  return list;
}

// scripts/serve.mjs's server with capture.js first in every page (Firefox's and WebKitGTK's only console).
export const serve = (options = {}) => startServer({
  ...options,
  mounts: { ...options.mounts, '/__harness/': fileURLToPath(new URL('./harness/', import.meta.url)) },
  prelude: '<script src="/__harness/capture.js"></script>',
});

// In the page: the value as JSON, with what JSON cannot say tagged.
function encode(value) {
  return JSON.stringify(value, function (key, v) {
    const raw = this[key];
    if (typeof raw === 'number' && !Number.isFinite(raw)) return { __number: String(raw) };
    if (ArrayBuffer.isView(raw) && !(raw instanceof DataView)) return Array.from(raw);
    return v;
  }) ?? 'null';
}
const decode = (text) => JSON.parse(text, (key, v) => (v?.__number ? Number(v.__number) : v));
const call = (fn, arg) => `(async () => (${encode})(await (${fn})(${JSON.stringify(arg) ?? 'undefined'})))()`;

function wrapPage(raw) {
  const evaluate = async (fn, arg) => decode(await raw.run(call(fn, arg)));
  return {
    evaluate,
    // Polls fn(arg) in the page every 50 ms until it is truthy; resolves to that value.
    async waitFor(fn, arg, { timeout = 30000 } = {}) {
      const poll = `async ({ arg, timeout }) => {
        const fn = (${fn});
        const end = performance.now() + timeout;
        for (;;) {
          const value = await fn(arg);
          if (value) return { value };
          if (performance.now() > end) return { timedOut: true };
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }`;
      const result = await evaluate(poll, { arg, timeout });
      if (result.timedOut) {
        // What the page reported (in Chromium, its workers' errors too): often why it waited.
        const problems = await raw.problems().catch((error) => [`(could not read them: ${error.message})`]);
        throw new Error(`waitFor: ${String(fn).slice(0, 200)} was not true within ${timeout} ms; the page's problems: ${JSON.stringify(problems)}`);
      }
      return result.value;
    },
    problems: () => raw.problems(),
    screenshot: (path, { fullPage = false } = {}) => raw.screenshot(path, { fullPage }),
    setViewport: (size) => raw.setViewport(size),
    close: () => raw.close(),
  };
}

// engine: 'chromium' | 'firefox' | 'webkit'.
export async function launch(engine) {
  if (!DRIVERS[engine]) throw new Error(`launch: engine must be one of ${ENGINES.join(', ')}, got ${engine}`);
  mkdirSync(ARTIFACTS, { recursive: true });
  const driver = await (await import(DRIVERS[engine])).launch();
  return {
    engine, name: driver.name, version: driver.version, via: driver.via, minWidth: driver.minWidth,
    open: async (url, { viewport = { width: 1200, height: 900 } } = {}) => wrapPage(await driver.open(url, { viewport })),
    close: () => driver.close(),
  };
}
