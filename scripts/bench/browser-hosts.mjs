// Benchmark hosts as pages of a browser — Chromium, Firefox or WebKitGTK, through the browser-test
// harness (tests/browser/browsers.mjs) — one page per thread count, each served by its own
// scripts/serve.mjs server: cross-origin isolated (COOP + COEP) where threads are wanted, else
// not, as most pages are. Each page loads scripts/bench/page.html and exposes the scheduler's
// interface { label, engines, call, close }. An isolated page in a browser that gives it no
// SharedArrayBuffer (WebKitGTK) has no threads to measure: it is left out, with the reason.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, serve } from '../../tests/browser/browsers.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MOUNTS = {
  '/bench/': join(REPO, 'scripts', 'bench'),
  '/vendor/tfjs-core/': join(REPO, 'node_modules', '@tensorflow', 'tfjs-core', 'dist'),
  '/vendor/tfjs-backend-wasm/': join(REPO, 'node_modules', '@tensorflow', 'tfjs-backend-wasm', 'dist'),
};

// The browser as the benchmark starts it: engine 'chromium' | 'firefox' | 'webkit'.
export const launchBenchBrowser = (engine) => launch(engine);

// pages: [{ label, isolated, specs }] → { hosts, failed, browserName, browserVersion, problems, close() };
// in `browser` (from launchBenchBrowser, left open by close()) or in one of its own of `engine`.
export async function startBrowserHosts(pages, { browser: shared, engine = 'chromium' } = {}) {
  const servers = {};
  const browser = shared ?? await launchBenchBrowser(engine);
  const opened = [];
  const problems = [];
  const hosts = [];
  const failed = [];
  for (const { label, isolated, specs } of pages) {
    servers[isolated] ??= await serve({ isolated, mounts: MOUNTS });
    const page = await browser.open(`${servers[isolated].url}bench/page.html?specs=${encodeURIComponent(JSON.stringify(specs))}`);
    opened.push({ label, page });
    await page.waitFor(() => window.benchReady, undefined, { timeout: 180000 });
    const call = (method, ...args) => page.evaluate(({ m, a }) => window.benchHost[m](...a), { m: method, a: args });
    const about = await call('about');
    if (about.crossOriginIsolated !== isolated) throw new Error(`${label}: crossOriginIsolated is ${about.crossOriginIsolated}`);
    if (isolated && !about.sharedMemory) {
      failed.push({ label, reason: `${browser.name} gives this cross-origin-isolated page no SharedArrayBuffer, so no threads` });
      continue;
    }
    failed.push(...(await call('failed')).map((f) => ({ label: `${label}: ${f.label}`, reason: f.reason })));
    hosts.push({ label, engines: await call('engines'), call, about, close: () => page.close() });
  }
  return {
    hosts, failed, problems, browserName: browser.name, browserVersion: browser.version, via: browser.via,
    close: async () => {
      for (const { label, page } of opened) {
        problems.push(...(await page.problems()).map((p) => `${label}: ${p}`));
        await page.close();
      }
      if (!shared) await browser.close();
      for (const s of Object.values(servers)) await s.close();
    },
  };
}
