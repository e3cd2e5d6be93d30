// The browser suites in each engine Debian ships — Chromium, Firefox ESR and WebKitGTK (Safari's
// engine), through tests/browser/browsers.mjs — sharing one build, one pair of servers (cross-origin
// isolated and not) and one Vite bundle of the packed package:
//   - the build each engine loads by default, isolated and not (expected.mjs), and what a request
//     for threads is told where they cannot run;
//   - the JS API on every build the engine runs, against the JS reference, bit-identical across
//     thread counts, and SIMD128 results bit-identical across engines;
//   - the Catch2 suite of each SIMD level the engine runs;
//   - the demo page: every section computed, the walk-through against the reference, every sum it
//     writes out adding up as shown and in the same digits in every engine, the lesson on one
//     thread and a playground run in its Web Worker on the default build, the console clean, no
//     sideways scrolling (desktop and phone, English and 中文);
//   - the packed package bundled by Vite, and docs/api.md's worker recipe bundled by Vite;
//   - the package under docs/api.md's Content-Security-Policies (from this origin and from a CDN,
//     on the page and in a module worker), and a policy that refuses the threaded build's workers,
//     said at once;
//   - a disposed instance lets go of its wasm memory and ends its workers, on each thread count;
//   - wasm memory past 2 GiB on each thread count the engine runs (when 4 GiB are free).
// At the end it prints what it measured per engine (the README's support table).
// ATTN_BROWSERS=webkit node --test tests/browser/engines.test.mjs runs one engine.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { freemem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { referenceAttention, referenceLinear } from '../js/reference.mjs';
import { bin, checkBundledLayers, EXPECTED as BUNDLE_OUT, makeApp, run } from '../package/app.mjs';
import { ARTIFACTS, launch, serve, testedEngines } from './browsers.mjs';
import { checkSums } from './demo.mjs';
import { checkDefaultBuild, EXPECTED, levelsIn } from './expected.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const GiB = 2 ** 30;
const SHOTS = new URL('engines/', ARTIFACTS);
const memoryLacking = freemem() < 4 * GiB &&
  `needs 4 GiB of free memory for a 4 GiB wasm memory; the host has ${(freemem() / GiB).toFixed(1)} GiB free`;

let isolated, plain, site, workerSite, app, cdn;
const measured = {};   // engine → what the support table says
const digests = {};    // engine → { simd128, 'relaxed-simd' }: the API page's outputs, bit for bit
const written = {};    // engine → the walk-through's numbers as the demo page writes them
before(async () => {
  isolated = await serve({ root: REPO });  // the pages need build/, dist/, web/ and tests/
  plain = await serve({ root: REPO, isolated: false });
  app = makeApp();
  run(bin('vite'), ['build', '--logLevel', 'error', '--outDir', 'site', '--emptyOutDir'], app.dir);
  site = await serve({ root: join(app.dir, 'site') });
  // docs/api.md's worker recipe (tests/package/consumer/worker-app), bundled by Vite as it is.
  run(bin('vite'), ['build', 'worker-app', '--logLevel', 'error', '--outDir', '../worker-site', '--emptyOutDir'], app.dir);
  workerSite = await serve({ root: join(app.dir, 'worker-site') });
  // Another origin that serves the package as a CDN does (CORS, and resources for isolated pages).
  cdn = await serve({ root: REPO, headers: { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' } });
  mkdirSync(SHOTS, { recursive: true });
});
after(async () => {
  for (const server of [isolated, plain, site, workerSite, cdn]) await server?.close();
  app?.remove();
  const rows = Object.values(measured).map((m) => `| ${m.browser} | ${m.build} | ${m.threads} | ${m.memory ?? 'not measured'} |`);
  console.log(['# measured per engine:', '| engine | build (isolated page) | threads | past 2 GiB |', '|---|---|---|---|', ...rows].join('\n# '));
});

// Opens `path` on `server`, waits for window.__result and returns it with the page's problems.
async function result(browser, server, path, timeout = 60000) {
  const page = await browser.open(`${server.url}${path}`);
  try {
    const value = await page.waitFor(() => window.__result, undefined, { timeout });
    return { ...value, problems: await page.problems(), cores: await page.evaluate(() => navigator.hardwareConcurrency) };
  } finally {
    await page.close();
  }
}
// docs/api.md's Content-Security-Policies ('same-origin', 'cdn'), as the page gives them.
const POLICIES = Object.fromEntries([...readFileSync(join(REPO, 'docs', 'api.md'), 'utf8')
  .matchAll(/<!-- csp: ([a-z-]+) -->\s*```text\n(.*)\n\s*```/g)].map(([, name, policy]) => [name, policy.trim()]));

// Opens tests/browser/engine-pages/csp.html on a server that sends `policy` (its https://cdn.example
// taken to be the `cdn` server), loading the package from `from` ('self' or 'cdn') with
// `options`, on the page or `inWorker`; returns window.__result with the page's problems.
async function underPolicy(browser, policy, { from, inWorker, options }) {
  const origin = cdn.url.slice(0, -1);
  const server = await serve({ root: REPO, headers: { 'Content-Security-Policy': policy.replaceAll('https://cdn.example', origin) } });
  try {
    const query = new URLSearchParams({ base: from === 'cdn' ? `${origin}/dist/` : '/dist/', options: JSON.stringify(options) });
    if (inWorker) query.set('in', 'worker');
    return await result(browser, server, `tests/browser/engine-pages/csp.html?${query}`);
  } finally {
    await server.close();
  }
}

const NOT_FOUND = /Failed to load resource: the server responded with a status of 404/;
const apiPage = (runs) => `tests/browser/engine-pages/api.html?runs=${encodeURIComponent(JSON.stringify(runs))}`;
const simdOption = (level) => (level === 'relaxed-simd' ? 'relaxed' : 'simd128');

// Catch2 lists its test cases (and exits with their count) in Node.
function catch2Count(level) {
  const relaxed = level === 'relaxed-simd';
  const listed = spawnSync(process.execPath, [...(relaxed ? ['--experimental-wasm-relaxed-simd'] : []),
    `build/wasm/attn_tests_wasm${relaxed ? '_relaxed' : ''}.cjs`, '--list-test-names-only'], { cwd: REPO, encoding: 'utf8' });
  const count = listed.stdout.split('\n').filter((line) => line.trim()).length;
  assert.ok(count > 0 && listed.status === count, `node lists ${count} test cases (exit ${listed.status})`);
  return count;
}

test('Vite emits all eight builds of the packed package', () => {
  const wasm = readdirSync(join(app.dir, 'site'), { recursive: true }).filter((f) => f.endsWith('.wasm'));
  for (const build of ['attn', 'attn-mt', 'attn-relaxed', 'attn-relaxed-mt'].flatMap((b) => [b, b.replace(/^attn/, 'attn-layers')])) {
    assert.ok(wasm.some((f) => new RegExp(`(^|/)${build}-[^/]*\\.wasm$`).test(f)), `vite emitted ${build}.wasm: ${wasm}`);
  }
});

for (const engine of testedEngines()) {
  const want = EXPECTED[engine];
  describe(engine, () => {
    let browser;
    before(async () => {
      browser = await launch(engine);
      measured[engine] = { browser: `${browser.name} ${browser.version}` };
    });
    after(async () => { await browser?.close(); });

    test(`the default build: ${want.simd}, ${want.threads ? 'threads when cross-origin isolated' : 'one thread'}`, async () => {
      const inIsolated = await result(browser, isolated, apiPage([{}]));
      assert.equal(inIsolated.error, undefined, inIsolated.error);
      assert.deepEqual(inIsolated.problems, []);
      const { info } = inIsolated.runs[0];
      checkDefaultBuild(engine, info, { isolated: true, cores: inIsolated.cores });
      assert.equal(info.layers, false, 'the default build is the inference build');
      for (const [fn, ratio] of Object.entries(inIsolated.runs[0].errors)) assert.ok(ratio <= 1, `${fn}: ${ratio.toFixed(2)}× the tolerance`);
      Object.assign(measured[engine], { build: info.simd, threads: `${info.threads} (${info.threadsReason})` });
      // Not isolated: one thread, and a request for two is told to add the headers.
      const inPlain = await result(browser, plain, apiPage([{}, { threads: 2 }]));
      assert.equal(inPlain.error, undefined, inPlain.error);
      checkDefaultBuild(engine, inPlain.runs[0].info, { isolated: false, cores: inPlain.cores });
      assert.equal(inPlain.runs[1].info.threads, 1);
      assert.deepEqual(inPlain.problems, ['warning: attention-wasm: 2 threads were requested, but this page is not cross-origin ' +
        'isolated (no SharedArrayBuffer); using 1 thread. Serve it with Cross-Origin-Opener-Policy: same-origin and ' +
        'Cross-Origin-Embedder-Policy: require-corp.']);
    });

    if (!want.threads) {
      test('threads asked for in an isolated page without SharedArrayBuffer: one thread, and the reason (no header advice)', async () => {
        const r = await result(browser, isolated, apiPage([{ threads: 2 }]));
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual([r.runs[0].info.threads, r.runs[0].info.threadsReason], [1, want.noThreadsReason]);
        assert.deepEqual(r.problems, ['warning: attention-wasm: 2 threads were requested, but this browser gives pages no ' +
          'SharedArrayBuffer, not even cross-origin-isolated ones (WebKitGTK is one such browser); using 1 thread. The page ' +
          'already sends the isolation headers; no header changes this.']);
      });
    }

    test(`the JS API on every build it runs (${levelsIn(engine).join(', ')}${want.threads ? ', 1 and 2 threads' : ''}) against the reference`, async () => {
      const threadCounts = want.threads ? [1, 2] : [1];
      const runs = levelsIn(engine).flatMap((level) => threadCounts.map((threads) => ({ simd: simdOption(level), threads, layers: true })));
      const r = await result(browser, isolated, apiPage(runs));
      assert.equal(r.error, undefined, r.error);
      assert.deepEqual(r.problems, []);
      assert.deepEqual(r.runs.map((x) => [x.info.simd, x.info.threads]),
        levelsIn(engine).flatMap((level) => threadCounts.map((threads) => [level, threads])), 'each run got the build it asked for');
      for (const { options, errors } of r.runs) {
        for (const [fn, ratio] of Object.entries(errors)) assert.ok(ratio <= 1, `${JSON.stringify(options)} ${fn}: ${ratio.toFixed(2)}× the tolerance`);
      }
      digests[engine] = {};
      for (const level of levelsIn(engine)) {
        const of = r.runs.filter((x) => x.info.simd === level).map((x) => x.digest);
        assert.equal(new Set(of).size, 1, `${level}: bit-identical across thread counts (${of})`);
        digests[engine][level] = of[0];
      }
      if (digests[engine]['relaxed-simd']) {
        assert.notEqual(digests[engine]['relaxed-simd'], digests[engine].simd128, 'relaxed SIMD (fused multiply-add) really ran');
      }
    });

    for (const level of levelsIn(engine)) {
      test(`the Catch2 suite (${level}) passes, every test case of it`, async () => {
        const expected = catch2Count(level);
        const suite = level === 'relaxed-simd' ? 'attn_tests_wasm_relaxed_web' : 'attn_tests_wasm_web';
        const { code, output, problems } = await result(browser, isolated, `tests/browser/engine-pages/catch2.html?suite=${suite}`, 240000);
        assert.equal(code, 0, output);
        const summary = output.match(/All tests passed \((\d+) assertions? in (\d+) test cases?\)/);
        assert.ok(summary, output.slice(-2000));
        assert.equal(Number(summary[2]), expected, 'test cases run');
        assert.deepEqual(problems, []);
      });
    }

    test('the demo page: every section computed, the walk-through against the reference, a playground run, no sideways scrolling', async () => {
      const page = await browser.open(`${isolated.url}web/`);
      try {
        await page.waitFor(() => document.body.dataset.ready, undefined, { timeout: 60000 });
        const { ready, status, state, cores } = await page.evaluate(() => ({
          ready: document.body.dataset.ready, status: document.getElementById('status').textContent,
          state: window.attentionDemo, cores: navigator.hardwareConcurrency,
        }));
        assert.equal(ready, 'true', status);
        // The lesson on one thread (its calls are a few tokens wide); the playground's worker below
        // loads the engine's default build.
        assert.deepEqual([state.info.simd, state.info.threads, state.info.threadsReason],
          [EXPECTED[engine].simd, 1, 'requested 1 thread'], 'the lesson\'s build');
        for (const part of ['walk', 'words', 'heads', 'position', 'decode', 'masks']) assert.ok(state[part], `the ${part} section computed`);
        const { inputs, wq, wk, wv, options, weights, outputs } = state.walk;
        const [q, k, v] = [wq, wk, wv].map((w) => referenceLinear(inputs, 4, 4, w, null, 4));
        const wanted = referenceAttention(q, k, v, { ...options, attendMask: new Uint8Array(options.attendMask) });
        for (const [name, got, exp] of [['weights', weights, wanted.weights], ['outputs', outputs, wanted.out]]) {
          got.forEach((x, i) => assert.ok(Math.abs(x - exp[i]) <= 2e-5 + 1e-4 * Math.abs(exp[i]), `walk-through ${name}[${i}]: ${x} vs ${exp[i]}`));
        }
        // Every table of every section shows numbers, none of them NaN, and no section an error.
        const sections = await page.evaluate(() => [...document.querySelectorAll('section[aria-labelledby]')].map((s) => ({
          id: s.getAttribute('aria-labelledby'), errors: s.querySelectorAll('.error').length,
          nan: [...s.querySelectorAll('td')].filter((td) => /NaN/.test(td.textContent)).length,
        })));
        assert.ok(sections.length >= 10, `${sections.length} sections`);
        for (const s of sections) assert.deepEqual([s.id, s.errors, s.nan], [s.id, 0, 0], `section ${s.id}`);
        // English text is set in a Latin font, not the CJK font further down the stack (which
        // WebKitGTK fell to when it skipped system-ui): the same words differ in width.
        const widths = await page.evaluate(() => ['', '"WenQuanYi Micro Hei"'].map((font) => {
          const span = document.createElement('span');
          span.textContent = 'The lecture’s “transpose” step, in Latin letters';
          span.style.fontFamily = font;
          document.body.append(span);
          const width = span.getBoundingClientRect().width;
          span.remove();
          return width;
        }));
        assert.notEqual(widths[0], widths[1], `English text is not set in WenQuanYi Micro Hei (${widths[0]} px)`);
        // Every sum written out adds up as shown, and the walk-through's numbers are written in the
        // same digits as in the other engines (the page rounds them itself).
        const shown = await page.evaluate(() => {
          const text = (el) => el.textContent.trim();
          const sums = [...document.querySelectorAll('[data-sum]')].flatMap((el) => {
            if (el.dataset.sum === 'line') return [{ where: 'line', parts: [...el.querySelectorAll('.part')].map(text), total: text(el.querySelector('.total')) }];
            if (el.dataset.sum === 'row') { const c = [...el.cells].slice(1).map(text); return [{ where: 'row', parts: c.slice(0, -1), total: c.at(-1) }]; }
            const rows = [...el.tBodies[0].rows].map((tr) => [...tr.cells].slice(1).map(text));
            return rows[0].slice(1).map((_, c) => ({ where: el.id, parts: rows.slice(0, -1).map((r) => r[c + 1]), total: rows.at(-1)[c + 1] }));
          });
          const tables = ['search-scores', 'search-result', 'query', 'scores', 'scaled', 'softmax-row', 'weights', 'weighted-sum', 'outputs']
            .map((id) => [...document.querySelectorAll(`#${id} td`)].map(text).join(' '));
          return { sums, tables, worked: text(document.getElementById('component-worked')) };
        });
        assert.ok(shown.sums.length >= 10, `${shown.sums.length} sums`);
        checkSums(shown.sums);
        written[engine] = shown;
        // The playground computes in a Web Worker of its own.
        await page.evaluate(() => document.querySelector('#playground button[type="submit"]').click());
        const played = await page.waitFor(() => {
          const s = document.getElementById('play-status');
          return ['result', 'error'].includes(s.dataset.state) && { state: s.dataset.state, text: s.textContent };
        }, undefined, { timeout: 60000 });
        assert.equal(played.state, 'result', played.text);
        checkDefaultBuild(engine, await page.evaluate(() => window.playgroundResult.library), { isolated: true, cores });
        // A phone's width, or the narrowest the engine's window gives (WebKitGTK's: about 450 px).
        const phone = { width: Math.max(390, browser.minWidth), height: 844 };
        for (const [name, lang, viewport] of [['desktop', 'en', { width: 1200, height: 900 }], ['zh', 'zh'], ['phone-zh', 'zh', phone], ['phone', 'en']]) {
          if (viewport) await page.setViewport(viewport);
          await page.evaluate((l) => document.querySelector(`button[data-lang="${l}"]`).click(), lang);
          await page.waitFor((l) => document.body.dataset.lang === l, lang);
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
          assert.ok(overflow <= 0, `${name}${viewport ? ` (${viewport.width} px)` : ''}: no horizontal scrolling (overflow ${overflow}px)`);
          await page.screenshot(new URL(`${engine}-demo-${name}.png`, SHOTS).pathname, { fullPage: true });
        }
        assert.deepEqual(await page.problems(), []);
      } finally {
        await page.close();
      }
    });

    // The Vite pages wait 60 s, as result() does: longer than the library's own 30 s for a threaded
    // build's workers (counted from when its module is ready), so that its error, which says what
    // hung, is what a failure reports.
    test('the packed package bundled by Vite loads the expected build and computes, then the layers build (its JavaScript a chunk of its own)', async () => {
      const page = await browser.open(site.url);
      try {
        const text = await page.waitFor(() => document.getElementById('result').textContent !== 'loading' &&
          document.getElementById('result').textContent, undefined, { timeout: 60000 });
        assert.doesNotMatch(text, /^error/, `${text}; the page's problems: ${JSON.stringify(await page.problems())}`);
        const result = JSON.parse(text);
        result.out.forEach((x, i) => assert.ok(Math.abs(x - BUNDLE_OUT[i]) < 1e-5, `out[${i}] = ${x}`));
        const cores = await page.evaluate(() => navigator.hardwareConcurrency);
        checkDefaultBuild(engine, result.info, { isolated: true, cores });
        // Then the layers build (threaded, as the default one, where the engine can), its layer's
        // JavaScript not among the scripts the default build fetched.
        assert.deepEqual([result.layers.info.simd, result.layers.info.threads], [result.info.simd, result.info.threads]);
        checkBundledLayers(result, join(app.dir, 'site'));
        assert.deepEqual(await page.problems(), []);
      } finally {
        await page.close();
      }
    });

    test('the worker recipe, bundled by Vite: the main entry in a module worker loads the expected build and computes', async () => {
      const page = await browser.open(workerSite.url);
      try {
        const text = await page.waitFor(() => document.getElementById('result').textContent !== 'loading' &&
          document.getElementById('result').textContent, undefined, { timeout: 60000 });
        assert.doesNotMatch(text, /^error/, `${text}; the page's problems: ${JSON.stringify(await page.problems())}`);
        const { info, out } = JSON.parse(text);
        out.forEach((x, i) => assert.ok(Math.abs(x - BUNDLE_OUT[i]) < 1e-5, `out[${i}] = ${x}`));
        checkDefaultBuild(engine, info, { isolated: true, cores: await page.evaluate(() => navigator.hardwareConcurrency) });
        assert.deepEqual(await page.problems(), []);
      } finally {
        await page.close();
      }
    });

    test(`the documented Content-Security-Policies: the package from this origin and from a CDN, on the page and in a module worker${want.threads ? ', 2 threads' : ''}`, async () => {
      assert.deepEqual(Object.keys(POLICIES), ['same-origin', 'cdn'], 'docs/api.md gives both policies');
      const options = want.threads ? { threads: 2 } : {};
      for (const [name, from] of [['same-origin', 'self'], ['cdn', 'cdn']]) {
        for (const inWorker of [false, true]) {
          const r = await underPolicy(browser, POLICIES[name], { from, inWorker, options });
          const what = `${name} policy, ${inWorker ? 'in a module worker' : 'on the page'}`;
          assert.equal(r.error, undefined, `${what}: ${r.error}`);
          assert.deepEqual([r.info.threads, r.out], [want.threads ? 2 : 1, 0.5], what);
          assert.deepEqual(r.problems, [], what);
        }
      }
    });

    if (want.threads) {
      test('a policy that refuses the threaded build\'s workers is said at once, naming the directive, and nothing else is thrown', async () => {
        const noBlob = POLICIES.cdn.replace(' blob:', '');
        assert.notEqual(noBlob, POLICIES.cdn);
        for (const inWorker of [false, true]) {
          // Three pool workers: each fails alike, and none of their errors may go uncaught.
          const r = await underPolicy(browser, noBlob, { from: 'cdn', inWorker, options: { threads: 4 } });
          const what = `${inWorker ? 'in a module worker' : 'on the page'}: ${JSON.stringify(r)}`;
          assert.match(r.error ?? '', new RegExp(`^Error: attention-wasm: the threaded ${want.simd} build's worker threads cannot start: .*Content-Security-Policy.*add blob: to worker-src, or load with threads: 1$`), what);
          if (!inWorker) assert.match(r.error, /refused their script \(worker-src, blob:\)/, `the page has the policy's report; ${what}`);
          assert.ok(r.ms < 10000, `said after ${Math.round(r.ms)} ms (not at the loader's 30 s timeout); ${what}`);
          // The browser's own report of the refusal may be on the console; no uncaught error is.
          assert.deepEqual(r.problems.filter((p) => !/Content.Security.Policy/i.test(p)), [], what);
        }
      });
    }

    if (want.threads) {
      test('a threaded build\'s worker that cannot import its glue is said at once, naming the URL and the browser\'s reason', async () => {
        // baseUrl: a folder with the .wasm files and the workers' script, but not the glue they import.
        const folder = mkdtempSync(join(tmpdir(), 'attention-wasm-glueless-'));
        for (const file of readdirSync(join(REPO, 'dist')).filter((f) => /\.(wasm|worker\.js)$/.test(f))) {
          copyFileSync(join(REPO, 'dist', file), join(folder, file));
        }
        const server = await serve({ root: REPO, mounts: { '/glueless/': folder } });
        try {
          const glue = `${server.url}glueless/${want.simd === 'relaxed-simd' ? 'attn-relaxed-mt' : 'attn-mt'}.mjs`;
          for (const inWorker of [false, true]) {
            // Three pool workers: each fails alike, and none of their errors may go uncaught.
            const query = new URLSearchParams({ base: '/dist/', options: JSON.stringify({ baseUrl: '/glueless/', threads: 4 }) });
            if (inWorker) query.set('in', 'worker');
            const r = await result(browser, server, `tests/browser/engine-pages/csp.html?${query}`);
            const what = `${inWorker ? 'in a module worker' : 'on the page'}: ${JSON.stringify(r)}`;
            const said = `Error: attention-wasm: the threaded ${want.simd} build's worker threads cannot start: ` +
              `a worker could not import or run ${glue} (TypeError: `;
            assert.ok(r.error?.startsWith(said), `an error that starts ${said}; ${what}`);
            assert.ok(r.error.endsWith('the server answers HTTP 404 Not Found: is the file there?'), what);
            assert.ok(r.ms < 10000, `said after ${Math.round(r.ms)} ms (not at the loader's 30 s timeout); ${what}`);
            // The browser's own report of the failed requests may be there; nothing else is.
            assert.deepEqual(r.problems.filter((p) => !p.includes(glue) && !NOT_FOUND.test(p)), [], what);
          }
        } finally {
          await server.close();
          rmSync(folder, { recursive: true, force: true });
        }
      });
    }

    // The package from this origin, its builds from another (baseUrl, a CDN) that lacks a file,
    // refuses it by policy, or sends no CORS or Cross-Origin-Resource-Policy headers. A browser
    // says only that a fetch or an import failed (or, for a script from another origin, may mute
    // the error to "Script error."): the message says what it found, and never blames a blob: the
    // policy allowed.
    test(`a build from another origin that cannot load says why: no CORS header${want.threads ? '; a worker\'s file missing, refused by the policy, or without Cross-Origin-Resource-Policy' : ''}`, async () => {
      const folder = mkdtempSync(join(tmpdir(), 'attention-wasm-glueless-'));
      for (const file of readdirSync(join(REPO, 'dist')).filter((f) => /\.(wasm|worker\.js)$/.test(f))) {
        copyFileSync(join(REPO, 'dist', file), join(folder, file));
      }
      const cors = { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' };
      const servers = {
        cdn: await serve({ root: REPO, headers: cors, mounts: { '/glueless/': folder } }),
        noCors: await serve({ root: REPO, headers: { 'Cross-Origin-Resource-Policy': 'cross-origin' } }),
        noCorp: await serve({ root: REPO, headers: { 'Access-Control-Allow-Origin': '*' } }),
      };
      const name = want.simd === 'relaxed-simd' ? 'attn-relaxed-mt' : 'attn-mt';
      const cdn = servers.cdn.url.slice(0, -1);
      const refused = `the server sends it (HTTP 200), so the browser refused it or it failed to run: a Content-Security-Policy ` +
        'whose script-src does not allow it (in a worker, Firefox checks worker-src), or, in a cross-origin-isolated page, a ' +
        'script from another origin sent without Cross-Origin-Resource-Policy: cross-origin';
      const cases = [
        { what: 'no CORS header', base: `${servers.noCors.url}dist/`, file: 'wasm',
          ends: '(a file from another origin: a network error, a server that sends no Access-Control-Allow-Origin header (CORS), ' +
            'or a Content-Security-Policy whose connect-src does not allow it)' },
        ...want.threads ? [
          { what: 'the glue missing', base: `${cdn}/glueless/`, file: `${cdn}/glueless/${name}.mjs`,
            ends: 'the server answers HTTP 404 Not Found: is the file there?' },
          { what: 'the glue refused by script-src', base: `${cdn}/dist/`, file: `${cdn}/dist/${name}.mjs`, ends: refused,
            policy: `default-src 'self'; script-src 'self' ${cdn}/dist/${name}.worker.js 'wasm-unsafe-eval'; connect-src 'self' ${cdn}; worker-src 'self' ${cdn} blob:` },
          { what: 'the worker script refused by script-src', base: `${cdn}/dist/`, file: `${cdn}/dist/${name}.worker.js`, ends: refused,
            policy: `default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self' ${cdn}; worker-src 'self' ${cdn} blob:` },
          { what: 'the worker script without Cross-Origin-Resource-Policy', base: `${servers.noCorp.url}dist/`,
            file: `${servers.noCorp.url}dist/${name}.worker.js`, ends: refused },
        ] : [],
      ];
      try {
        for (const c of cases) {
          const page = await serve({ root: REPO, headers: c.policy ? { 'Content-Security-Policy': c.policy } : {} });
          try {
            for (const inWorker of [false, true]) {
              const options = { baseUrl: c.base, ...want.threads && c.file !== 'wasm' ? { threads: 4 } : {} };  // (4: three pool workers)
              const query = new URLSearchParams({ base: '/dist/', options: JSON.stringify(options) });
              if (inWorker) query.set('in', 'worker');
              const r = await result(browser, page, `tests/browser/engine-pages/csp.html?${query}`);
              const what = `${c.what}, ${inWorker ? 'in a module worker' : 'on the page'}: ${JSON.stringify(r)}`;
              const start = c.file === 'wasm' ? new RegExp(`^Error: attention-wasm: could not load (attn[-a-z]*\\.wasm) \\(the [^)]*\\) from ${c.base}\\1: TypeError: `)
                : `Error: attention-wasm: the threaded ${want.simd} build's worker threads cannot start: a worker could not import or run ${c.file} (`;
              assert.ok(c.file === 'wasm' ? start.test(r.error) : r.error?.startsWith(start), `starts ${start}; ${what}`);
              assert.ok(r.error.endsWith(c.ends), `ends ${c.ends}; ${what}`);
              assert.doesNotMatch(r.error, /add blob:/, what);
              assert.ok(r.ms < 10000, `said after ${Math.round(r.ms)} ms; ${what}`);
              // The browser's own reports of the failed requests (and of the policy) may be there; nothing else is.
              const own = (p) => /Failed to load resource|requestfailed|CORS|Content.Security.Policy/i.test(p);
              assert.deepEqual(r.problems.filter((p) => !own(p)), [], what);
            }
          } finally {
            await page.close();
          }
        }
      } finally {
        for (const server of Object.values(servers)) await server.close();
        rmSync(folder, { recursive: true, force: true });
      }
    });

    if (want.threads) {
      test('the pool\'s job cost, read on the page\'s coarse clock, is not 0, and a large call goes to the pool', async () => {
        const r = await result(browser, isolated, 'tests/browser/engine-pages/pool.html');
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual(r.problems, []);
        for (const [i, load] of r.loads.entries()) {
          assert.equal(load.threads, 2, `load ${i}`);
          // (0 before the fix; now at least 1,250 ns, what a sizing takes whose every reading was 0,
          // which some Firefox pools still read: their workers answered within a microsecond or so.
          // The dither itself is checked on a made-up clock, tests/cpp/test_parallel.cpp.)
          assert.ok(load.jobNs > 0 && load.jobNs < 1e6, `load ${i}: the job's cost ${load.jobNs} ns`);
          assert.equal(load.poolJobs, 1, `load ${i}: a prefill of 256 positions went to the pool`);
        }
      });
    }

    for (const threads of want.threads ? [1, 2] : [1]) {
      test(`a disposed instance lets go of its memory (${threads} thread${threads > 1 ? 's' : ''}), though the page holds its objects; its workers end`, async () => {
        const r = await result(browser, isolated, `tests/browser/engine-pages/release.html?options=${encodeURIComponent(JSON.stringify({ threads, layers: true }))}`, 120000);
        assert.equal(r.error, undefined, r.error);
        assert.deepEqual(r.problems, []);
        assert.equal(r.info.threads, threads, r.info.threadsReason);
        assert.deepEqual(r.held, [threads, true, true], 'the page still holds the disposed instance, cache and layer');
        assert.equal(r.made, 1, 'one wasm memory made (and watched)');
        assert.ok(r.collected, `the instance's wasm memory was collected (gave up after ${r.seconds?.toFixed(0)} s of garbage)`);
        assert.deepEqual([r.workers, r.ended], [threads - 1, threads - 1], 'every worker the instance started was ended');
      });

      test(`memory past 2 GiB (${threads} thread${threads > 1 ? 's' : ''}): 3 GiB of caches, attention past 2 GiB, out of memory near 4 GiB`,
        { skip: memoryLacking }, async () => {
          const r = await result(browser, isolated, `tests/browser/memory4g/page.html?options=${encodeURIComponent(JSON.stringify({ threads }))}`, 120000);
          assert.equal(r.error, undefined, r.error);
          assert.deepEqual(r.problems, []);
          assert.equal(r.info.simd, want.simd, `${engine}: the SIMD level of the build the memory page loaded`);
          assert.equal(r.info.threads, threads, `${engine}: threads (${r.info.threadsReason})`);
          assert.equal(r.filled.wasmMemoryLimit, 2 ** 32 - 2 ** 16);
          assert.ok(r.filled.heapInUse > 3 * GiB - 2 ** 25, `about 3 GiB in use: ${r.filled.heapInUse}`);
          assert.ok(r.address >= 2 ** 31, `the last cache's keys past 2 GiB: ${r.address}`);
          assert.ok(r.maxError < 1e-5, `attention over it matches the reference (error ${r.maxError})`);
          assert.match(r.oom, /^attention-wasm: kv cache: out of memory \(asked for 512\.0 MiB; [0-9.]+ GiB in use, wasm memory [0-9.]+ GiB of at most 4\.00 GiB\); /);
          assert.ok(r.full.wasmMemory > 3.5 * GiB, `memory grew to ${r.full.wasmMemory}`);
          assert.ok(r.same, 'after freeing a cache the same attention gives the same result');
          const figure = `${threads}T: out of memory at ${(r.full.heapInUse / GiB).toFixed(2)} GiB in use (wasm memory ${(r.full.wasmMemory / GiB).toFixed(2)} GiB)`;
          measured[engine].memory = [measured[engine].memory, figure].filter(Boolean).join('; ');
        });
    }
  });
}

test('the demo page writes the walk-through\'s numbers in the same digits in every engine', { skip: testedEngines().length < 2 && 'one engine tested' }, () => {
  const [first, ...others] = Object.entries(written);
  assert.equal(others.length + 1, testedEngines().length, 'every engine ran the demo page');
  for (const [engine, shown] of others) assert.deepEqual(shown, first[1], `${engine} as ${first[0]}`);
});

test('SIMD128 results are bit-identical in every engine', { skip: testedEngines().length < 2 && 'one engine tested' }, () => {
  const of = Object.entries(digests).map(([engine, d]) => [engine, d.simd128]);
  assert.equal(of.length, testedEngines().length, 'every engine ran the API page');
  assert.equal(new Set(of.map(([, d]) => d)).size, 1, JSON.stringify(of));
  const relaxed = Object.entries(digests).filter(([, d]) => d['relaxed-simd']).map(([engine, d]) => `${engine} ${d['relaxed-simd']}`);
  console.log(`# digests: simd128 ${of[0][1]} in ${of.map(([e]) => e).join(', ')}; relaxed-simd: ${relaxed.join(', ')}`);
});
