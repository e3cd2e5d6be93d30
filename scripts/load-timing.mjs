// How long loading takes and how fast the first call is, each run in a fresh Node process (or a
// fresh Chromium page with --browser): import, load (createAttention), the first and second call
// on (1, 8, 128, 128, 64), and the steady time of that call. Prints medians over the runs.
//   node scripts/load-timing.mjs [--runs 9] [--threads 1] [--simd auto|relaxed|simd128] [--browser]
//     [--ab]   alternate runs with the default warm-up and with warmUp: false, and print both
//   node --experimental-wasm-relaxed-simd scripts/load-timing.mjs ...   (Node children get the flag)
// Times on a shared machine are noisy: the script prints the load average, and medians.
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const arg = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const runs = Number(arg('--runs', 9));
const options = {};
if (arg('--threads')) options.threads = arg('--threads') === 'auto' ? 'auto' : Number(arg('--threads'));
if (arg('--simd')) options.simd = arg('--simd');
const browser = args.includes('--browser');
const variants = args.includes('--ab') ? [{ ...options }, { ...options, warmUp: false }] : [options];
const REPO = fileURLToPath(new URL('..', import.meta.url));

async function inNode(options) {
  const measure = new URL('./load-timing/measure.mjs', import.meta.url).href;
  const entry = new URL('../dist/node.mjs', import.meta.url).href;
  const script = `const { measure } = await import(${JSON.stringify(measure)});
    console.log(JSON.stringify(await measure(${JSON.stringify(entry)}, ${JSON.stringify(options)})));`;
  const out = execFileSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out);
}

// Chromium: one fresh context (nothing cached from the run before) per measurement; the page is
// cross-origin isolated, so threads load too.
let chromium, server;
async function inChromium(options) {
  if (!chromium) {
    server = await (await import('./serve.mjs')).startServer({ root: REPO });
    chromium = await (await import('../tests/browser/chromium.mjs')).launchBrowser();
  }
  const context = await chromium.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}scripts/load-timing/page.html?options=${encodeURIComponent(JSON.stringify(options))}`);
  await page.waitForFunction(() => window.__result, null, { timeout: 60000 });
  const result = await page.evaluate(() => window.__result);
  await context.close();
  if (result.error) throw new Error(result.error);
  return result;
}

const before = loadavg()[0];
const results = variants.map(() => []);
try {
  for (let i = 0; i < runs; i++) {
    for (const [v, options] of variants.entries()) results[v].push(await (browser ? inChromium(options) : inNode(options)));
  }
} finally {
  await chromium?.close();
  await server?.close();
}
const median = (list, key) => {
  const v = list.map((r) => r[key]).sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
const where = browser ? 'Chromium' : `Node ${process.version}${process.execArgv.length ? ` ${process.execArgv.join(' ')}` : ''}`;
console.log(`${where}, ${runs} runs each, load average ${before.toFixed(1)} → ${loadavg()[0].toFixed(1)}`);
for (const [v, list] of results.entries()) {
  const { simd, threads } = list[0].info;
  console.log(`${JSON.stringify(variants[v])} → ${simd}, ${threads} thread(s); median ms:`,
    ['import', 'load', 'first', 'second', 'steady'].map((k) => `${k} ${median(list, k).toFixed(1)}`).join(', '));
  console.log('  first calls:', list.map((r) => r.first.toFixed(1)).join(' '), '| loads:', list.map((r) => r.load.toFixed(1)).join(' '));
}
