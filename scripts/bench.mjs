// npm run bench: attention-wasm against its peers on the same float32 inputs — onnxruntime-web
// (wasm backend; a standard-ops graph and the com.microsoft MultiHeadAttention op), TensorFlow.js's
// wasm backend, plain JavaScript, and (in Node) this kernel compiled natively for 128-bit SSE.
// Each engine and thread count runs in its own Node process (--browser: its own page per thread
// count, in Chromium, or with --browser firefox / webkit in Firefox ESR or WebKitGTK), configured
// as its documentation recommends; engines take turns of many calls in
// rotated rounds (web/bench/schedule.mjs); the report says how each was configured, the
// machine and its load. Then five sections (scripts/bench/sections.mjs): the shapes encoders and
// prompts run (prefill), each held to the multiply-add peak timed in the same rounds; a decode
// step over KV caches against onnxruntime-web (with the wasm read bandwidth and multiply-add peak
// they are held to), the score variants against plain attention, small calls on 1 and 2 threads
// (2 never slower), and a token step as a model runs it (every layer's cache from memory, against
// the read and the peak on as many threads). Results go to artifacts/bench/ as JSON; --readme
// rewrites the generated tables of docs/performance.md for the sections that ran, from full runs
// of them.
//   node scripts/bench.mjs [--browser [chromium|firefox|webkit]] [--quick] [--section shapes,prefill,decode,variants,threads,model]
//                          [--shape B,H,Sq,Sk,D[,1]] [--json FILE] [--readme]
//   (npm run bench builds what it needs first; --section picks sections, default all; --shape
//   replaces the main table's shapes)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, type } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { measurePeak } from './bench/peak.mjs';
import { figuresOfMerit, performanceBlock, printReport } from './bench/report.mjs';
import { writeTable } from './bench/write-table.mjs';
import { decodeBlock, modelBlock, prefillBlock, printSections, sectionFigures, threadsBlock, variantsBlock } from './bench/section-report.mjs';
import { needsSharedMemory } from './bench/load-ours.mjs';
import { SECTION_NAMES, runSections } from './bench/sections.mjs';
import { measureShape, TIMING } from '../web/bench/schedule.mjs';
import { FULL_SHAPES, QUICK_SHAPES, flops, label, parseShape } from './bench/shapes.mjs';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const browser = args.includes('--browser');
const ENGINES = ['chromium', 'firefox', 'webkit'];
const afterBrowser = browser ? args[args.indexOf('--browser') + 1] : undefined;
const engine = afterBrowser && !afterBrowser.startsWith('--') ? afterBrowser : 'chromium';
if (!ENGINES.includes(engine)) throw new Error(`--browser: unknown engine ${engine} (known: ${ENGINES.join(', ')})`);
const quick = args.includes('--quick');
const shapes = option('--shape') ? [parseShape(option('--shape'))] : quick ? QUICK_SHAPES : FULL_SHAPES;
const full = !quick && !option('--shape');
if (args.includes('--readme') && !full) throw new Error('--readme needs a full run (no --quick, no --shape)');
const ALL_SECTIONS = ['shapes', ...SECTION_NAMES];
const sections = option('--section')?.split(',') ?? ALL_SECTIONS;
const unknown = sections.filter((x) => !ALL_SECTIONS.includes(x));
if (unknown.length) throw new Error(`--section: unknown ${unknown.join(', ')} (known: ${ALL_SECTIONS.join(', ')})`);
// Chromium's tables keep the plain 'browser' name (docs/performance.md's markers, the JSON file).
const kind = !browser ? 'node' : engine === 'chromium' ? 'browser' : `browser-${engine}`;
const partial = sections.length === ALL_SECTIONS.length ? '' : `-${sections.join('-')}`;
const jsonPath = option('--json') ?? here(`../artifacts/bench/${kind}${partial}${full ? '' : '-quick'}.json`);
const timing = quick ? TIMING.quick : TIMING.full;
const load = () => loadavg().map((x) => Number(x.toFixed(2)));
const log = (s) => process.stderr.write(`[bench] ${s}\n`);

const ours = (threads, simd) => ({ kind: 'ours', threads, ...(simd ? { simd } : {}) });
const NODE_HOSTS = [
  { label: 'process: ours 1T', spec: ours(1) },
  { label: 'process: ours 2T', spec: ours(2) },
  { label: 'process: ours 1T relaxed (node --experimental-wasm-relaxed-simd)', spec: ours(1, 'relaxed'), execArgv: ['--experimental-wasm-relaxed-simd'] },
  { label: 'process: ORT 1T', spec: { kind: 'ort', threads: 1 } },
  { label: 'process: ORT 2T', spec: { kind: 'ort', threads: 2 } },
  { label: 'process: tfjs', spec: { kind: 'tfjs', threads: 1 } },
  { label: 'process: plain JS', spec: { kind: 'plain' } },
];
// Our default ('auto') build and, where the library has the option, the SIMD128 one beside it.
const BROWSER_PAGES = [
  { label: 'page 1T (not isolated)', isolated: false, specs: [ours(1), ours(1, 'simd128'), { kind: 'ort', threads: 1 }, { kind: 'tfjs', threads: 1 }, { kind: 'plain' }] },
  { label: 'page 2T (cross-origin isolated)', isolated: true, specs: [ours(2), ours(2, 'simd128'), { kind: 'ort', threads: 2 }] },
];
// (tfjs-wasm is not on the 2-thread page: its threaded build still reports getThreadsCount() 1
// there after setThreadsCount(2).)

const loadStart = load();
const date = new Date().toISOString();
log(`load average ${loadStart.join(' ')} at start`);
let hosts = [], hostsFailed = [], where = browser ? engine : `Node ${process.version}`, peak = {}, closeAll = async () => {}, problems = [];
const results = [];
if (!sections.includes('shapes')) {
  // only the sections below
} else if (browser) {
  const { startBrowserHosts } = await import('./bench/browser-hosts.mjs');
  log(`starting ${engine} pages`);
  const b = await startBrowserHosts(BROWSER_PAGES, { engine });
  ({ hosts, failed: hostsFailed, problems } = b);
  where = `${b.browserName} ${b.browserVersion} (${b.via})`;
  const peakOf = (level) => hosts[0].call('peak', level, quick ? { warmMs: 400 } : {}).catch(() => null);  // no relaxed SIMD: null
  peak = { simd128: await peakOf('simd128'), relaxed: await peakOf('relaxed') };
  closeAll = b.close;
} else {
  const { startNativeHost, startNodeHosts } = await import('./bench/node-hosts.mjs');
  log(`starting ${NODE_HOSTS.map((h) => h.label).join(', ')}`);
  ({ hosts, failed: hostsFailed } = await startNodeHosts(NODE_HOSTS));
  const native = here('../build/bench/attn_bench_native');
  if (existsSync(native)) hosts.push(await startNativeHost(native));
  else hostsFailed.push({ label: 'native SSE', reason: 'not built (npm run bench builds build/bench/attn_bench_native)' });
  const { execFileSync } = await import('node:child_process');
  // The FMA peak needs relaxed SIMD, which Node 20 has only behind a flag.
  const relaxedPeak = execFileSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--input-type=module', '-e',
    `const { measurePeak } = await import(${JSON.stringify(new URL('./bench/peak.mjs', import.meta.url).href)}); ` +
    `console.log(JSON.stringify(await measurePeak('relaxed', ${quick ? '{ warmMs: 400 }' : '{}'})))`], { encoding: 'utf8' });
  peak = { simd128: await measurePeak('simd128', quick ? { warmMs: 400 } : {}), relaxed: JSON.parse(relaxedPeak) };
  closeAll = async () => { for (const h of hosts) await h.close(); };
}

const engines = {};
for (const h of hosts) {
  for (const e of h.engines) {
    if (engines[e.name]) throw new Error(`two engines are called ${e.name} (${engines[e.name].host}, ${h.label})`);
    engines[e.name] = { host: h.label, config: e.config };
  }
}
for (const shape of sections.includes('shapes') ? shapes : []) {
  log(`measuring ${label(shape)}`);
  const r = await measureShape(hosts, shape, timing, { log: (s) => log(`  ${label(shape)}: ${s}`), load });
  results.push({ shape: label(shape), flops: flops(shape), ...r });
}
await closeAll();

const notes = [];
let extras = {};
if (!sections.includes('shapes')) {
  // no main table, nothing to add to it
} else if (!browser) {
  const x = await import('./bench/node-extras.mjs');
  log('cold start, sizes, backward');
  extras = { coldStart: x.coldStart(), wasmSizes: x.wasmSizes(), backward: x.backwardRatio({ quick }), ...(full ? { memory: x.memoryAtSeq8192() } : {}) };
  const { coldStart: c, backward: b, memory: m } = extras;
  const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  for (const [what, x] of [['', c], [' with warmUp: false', c.withoutWarmUp]].filter(([, y]) => y)) {
    notes.push(`${what ? '' : '\n'}fresh process: import ${x.importMs.toFixed(1)} ms + createAttention({ threads: 1${what ? ', warmUp: false' : ''} }) ${x.createMs.toFixed(1)} ms; ` +
      `first call on (1,8,128,128,64) ${x.firstCallMs.toFixed(1)} ms, the next ones (median of 20) ${x.laterCallMs.toFixed(2)} ms`);
  }
  notes.push(`.wasm sizes (bytes, gzip -9): ${Object.entries(extras.wasmSizes).map(([f, s]) => `${f} ${s.bytes.toLocaleString('en-US')} (${s.gzip.toLocaleString('en-US')})`).join('; ')}`);
  notes.push(`backward ${b.shape}, 1 thread, from the forward's saved lse and out: ${b.backwardMs.toFixed(1)} ms vs forward ${b.forwardMs.toFixed(1)} ms (${b.ratio.toFixed(2)}×); recomputing them: ${b.recomputeMs.toFixed(1)} ms`);
  if (m) notes.push(`fresh module, one (1,1,8192,8192,64) call: wasm memory ${mib(m.before)} → ${mib(m.after)} (inputs + output 8 MiB; a score matrix would be 256 MiB)`);
} else if (problems.length) {
  notes.push(`\nbrowser console: ${[...new Set(problems)].join(' | ')}`);
}

// The sections, each host started for its part and closed after it.
const sectionNames = SECTION_NAMES.filter((n) => sections.includes(n));
let sectionResults = {}, sectionExtras = {};
const sectionProblems = [];
if (sectionNames.length) {
  // In a browser: one page per part (1 thread, not isolated), all in one browser.
  const { launchBenchBrowser, startBrowserHosts } = browser ? await import('./bench/browser-hosts.mjs') : {};
  const shared = browser ? await launchBenchBrowser(engine) : null;
  // In a browser: the single-threaded hosts of a part share a page (not isolated), those with
  // threads get a cross-origin-isolated one, and the threaded build on 1 thread another; hosts
  // that are instances of one build (the threads section) each get pages of their own.
  const startHosts = browser
    ? async (list) => {
      const pagesOf = (hosts, mark) => [
        { label: `page 1T (not isolated)${mark}`, isolated: false, specs: hosts.filter((h) => !needsSharedMemory(h.spec)).map((h) => h.spec) },
        { label: `page 2T (cross-origin isolated)${mark}`, isolated: true, specs: hosts.filter((h) => h.spec.threads > 1).map((h) => h.spec) },
        // (a page of its own: the threaded build on 1 thread never shares a page with a pool)
        { label: `page 1T, threaded build (cross-origin isolated)${mark}`, isolated: true, specs: hosts.filter((h) => needsSharedMemory(h.spec) && !(h.spec.threads > 1)).map((h) => h.spec) },
      ];
      const instances = [...new Set(list.map((h) => h.spec.instance ?? 0))];
      const pages = instances.flatMap((i) => pagesOf(list.filter((h) => (h.spec.instance ?? 0) === i), i ? `, instance ${i}` : ''))
        .filter((page) => page.specs.length);
      const b = await startBrowserHosts(pages, { browser: shared });
      where = `${b.browserName} ${b.browserVersion} (${b.via})`;
      return { ...b, close: async () => { await b.close(); sectionProblems.push(...b.problems); } };
    }
    : async (list) => (await import('./bench/node-hosts.mjs')).startNodeHosts(list);
  try {
    sectionResults = await runSections(sectionNames, { quick, browser, startHosts, log, load });
  } finally {
    await shared?.close();
  }
  if (sectionResults.decode) {
    const { kvCacheBytes } = await import('./bench/node-extras.mjs');
    // the bytes do not depend on seqQ: one entry per shape of cache
    const shapes = sectionResults.decode.flatMap((p) => p.results.map((r) => ({ ...r.shape, seqQ: 1 })));
    sectionExtras.kvBytes = kvCacheBytes(shapes.filter((s, i) => shapes.findIndex((t) => JSON.stringify(t) === JSON.stringify(s)) === i));
  }
}

const os = (() => {
  try {
    return readFileSync('/etc/os-release', 'utf8').match(/PRETTY_NAME="([^"]+)"/)[1];
  } catch {
    return `${type()} ${release()}`;
  }
})();
const run = {
  version: JSON.parse(readFileSync(here('../package.json'), 'utf8')).version,
  where, command: ['npm run bench', ...(args.some((a) => a !== '--readme') ? ['--', ...args.filter((a) => a !== '--readme')] : [])].join(' '), date,
  machine: { cpu: cpus()[0].model, cores: cpus().length, os },
  loadavg: { start: loadStart, end: load() }, timing, peak, engines, hostsFailed, results, extras, notes,
  sections: sectionResults, sectionExtras,
};
if (results.length) printReport(run);
else console.log(`attention-wasm ${run.version} in ${run.where}; ${run.date.slice(0, 16).replace('T', ' ')} UTC; ${run.machine.cpu}, ${run.machine.cores} cores; load average ${run.loadavg.start.join(' ')} at start, ${run.loadavg.end.join(' ')} at end`);
printSections(run);
if (sectionProblems.length) console.log(`\nbrowser console (sections): ${[...new Set(sectionProblems)].join(' | ')}`);
console.log(`\nload average (1/5/15 min) ${run.loadavg.start.join(' ')} at start, ${run.loadavg.end.join(' ')} at end`);
mkdirSync(dirname(jsonPath), { recursive: true });
writeFileSync(jsonPath, JSON.stringify({ ...run, figuresOfMerit: [...(results.length ? figuresOfMerit(run) : []), ...sectionFigures(run)] }, null, 2));
console.log(`\nresults: ${jsonPath}`);
if (args.includes('--readme')) {
  const blocks = [...(results.length ? [[kind, performanceBlock(run)]] : []),
    ...(run.sections.prefill ? [[`${kind}-prefill`, prefillBlock(run)]] : []),
    ...(run.sections.decode ? [[`${kind}-decode`, decodeBlock(run)]] : []),
    ...(run.sections.variants ? [[`${kind}-variants`, variantsBlock(run)]] : []),
    ...(run.sections.threads ? [[`${kind}-threads`, threadsBlock(run)]] : []),
    ...(run.sections.model ? [[`${kind}-model`, modelBlock(run)]] : [])];
  for (const [marker, block] of blocks) writeTable(here('../docs/performance.md'), marker, block);
  console.log(`docs/performance.md: regenerated from this run: ${blocks.map(([m]) => m).join(', ')}`);
}
process.exit(0);
