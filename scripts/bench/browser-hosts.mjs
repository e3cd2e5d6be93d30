// Benchmark hosts as pages of headless Chromium (Debian's, through playwright-core): one page per
// thread count, each served by its own scripts/serve.mjs server — cross-origin isolated (COOP +
// COEP) where threads are wanted, else not, as most pages are. Each page loads
// scripts/bench/page.html and exposes the scheduler's interface { label, engines, call, close }.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../serve.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MOUNTS = {
  '/bench/': join(REPO, 'scripts', 'bench'),
  '/vendor/tfjs-core/': join(REPO, 'node_modules', '@tensorflow', 'tfjs-core', 'dist'),
  '/vendor/tfjs-backend-wasm/': join(REPO, 'node_modules', '@tensorflow', 'tfjs-backend-wasm', 'dist'),
};

// Headless Chromium as the benchmark starts it.
export const launchBenchBrowser = () => chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync',
      // Pages that are not in front must not be slowed down.
      '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'],
});

// pages: [{ label, isolated, specs }] → { hosts, failed, browserVersion, problems, close() }; in
// `browser` (from launchBenchBrowser, left open by close()) or in a browser of its own.
export async function startBrowserHosts(pages, { browser: shared } = {}) {
  const servers = {};
  const browser = shared ?? await launchBenchBrowser();
  const opened = [];
  const problems = [];
  const hosts = [];
  const failed = [];
  for (const { label, isolated, specs } of pages) {
    servers[isolated] ??= await startServer({ isolated, mounts: MOUNTS });
    const page = await browser.newPage();
    opened.push(page);
    await page.route('**/favicon.ico', (route) => route.fulfill({ status: 204 }));
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${label}: ${m.type()}: ${m.text()}`); });
    page.on('pageerror', (e) => problems.push(`${label}: pageerror: ${e.message}`));
    await page.goto(`${servers[isolated].url}bench/page.html?specs=${encodeURIComponent(JSON.stringify(specs))}`);
    await page.waitForFunction(() => window.benchReady, null, { timeout: 180000 });
    const call = (method, ...args) => page.evaluate(([m, a]) => window.benchHost[m](...a), [method, args]);
    const about = await call('about');
    if (about.crossOriginIsolated !== isolated) throw new Error(`${label}: crossOriginIsolated is ${about.crossOriginIsolated}`);
    failed.push(...(await call('failed')).map((f) => ({ label: `${label}: ${f.label}`, reason: f.reason })));
    hosts.push({ label, engines: await call('engines'), call, about, close: () => page.close() });
  }
  return {
    hosts, failed, problems, browserVersion: browser.version(),
    close: async () => {
      if (shared) for (const page of opened) await page.close();
      else await browser.close();
      for (const s of Object.values(servers)) await s.close();
    },
  };
}
