// The harness's pages over classic W3C WebDriver, for an engine whose driver gives one session:
// the session's windows are the pages. `call(method, path, body)` sends one WebDriver request (over
// HTTP to WebKitWebDriver, or mapped to Firefox's Marionette) and resolves to its value. Classic
// WebDriver has no console events: the console, uncaught errors and failed loads of the page's main
// thread come from capture.js, which the harness's server puts first in every page (a worker's
// console is out of reach).
import { writeFile } from 'node:fs/promises';
import { stackPngs } from './png.mjs';

// In the page: [innerWidth, innerHeight] once a resize has reached it. The window's rect is set at
// once, the page hears of it later (under load, after the next command has read the old size):
// waits up to 5 s for a size other than `before` ('WxH'; '' for none), then until three readings agree.
const settledSize = (before) => `new Promise((resolve) => {
  const end = performance.now() + 5000;
  let last = '', same = 0;
  const tick = () => {
    const now = innerWidth + 'x' + innerHeight;
    same = now === last ? same + 1 : 0;
    last = now;
    if ((now !== ${JSON.stringify(before)} && same >= 2) || performance.now() > end) resolve([innerWidth, innerHeight]);
    else setTimeout(tick, 50);
  };
  tick();
})`;

// name: the engine's name, for errors. capabilities: the engine's own, beside the timeouts.
// Full-page screenshots: fullShot, a GET path giving the whole document, or else windows up to
// `tallest` px tall, scrolled down one after another and stacked.
export async function classicSession({ name, call, capabilities = {}, fullShot, tallest }) {
  // A Catch2 suite or a benchmark can keep a script waiting for minutes.
  const alwaysMatch = { ...capabilities, timeouts: { script: 600000, pageLoad: 120000 } };
  const newSession = () => call('POST', '/session', { capabilities: { alwaysMatch } });
  const first = await newSession();  // tells the version; the first page uses it
  const sid = first.sessionId;
  // The window cannot be narrower than its toolbar: the narrowest viewport it gives.
  const exec = (expression) => call('POST', `/session/${sid}/execute/sync`, { script: `return ${expression};`, args: [] });
  const wide = await exec('[innerWidth, innerHeight]');
  await call('POST', `/session/${sid}/window/rect`, { width: 200, height: 600 });
  const [minWidth] = await exec(settledSize(wide.join('x')));

  // Commands go one at a time, each to its page's window (switched to first), so pages may be
  // used side by side. When the last page closes, the session goes with it (its window left
  // blank) and the next page starts a fresh one.
  let session = { id: sid, windows: new Set(), current: await call('GET', `/session/${sid}/window`), unused: true };
  let queue = Promise.resolve();
  const serial = (fn) => {
    const done = queue.then(fn);
    queue = done.catch(() => {});
    return done;
  };
  async function newWindow() {
    if (!session) session = { id: (await newSession()).sessionId, windows: new Set(), unused: true };
    let handle;
    if (session.unused) {
      session.unused = false;
      handle = session.current ??= await call('GET', `/session/${session.id}/window`);
    } else {
      // (a new window is not switched to: the page's first command does that)
      handle = (await call('POST', `/session/${session.id}/window/new`, { type: 'window' })).handle;
    }
    session.windows.add(handle);
    return { own: session, handle };
  }

  return {
    version: first.capabilities.browserVersion,
    minWidth,
    async open(url, { viewport }) {
      const { own, handle } = await serial(newWindow);
      // A command in this page's window: `path` under its session.
      const raw = async (path, body, method = body === undefined ? 'GET' : 'POST') => {
        if (own.current !== handle) {
          await call('POST', `/session/${own.id}/window`, { handle });
          own.current = handle;
        }
        return call(method, `/session/${own.id}${path}`, body);
      };
      const s = (...args) => serial(() => raw(...args));
      const run = (expression) => s('/execute/sync', { script: `return ${expression};`, args: [] });
      // The window's rect includes its toolbar: resize until the page's viewport is `size`.
      async function setViewport({ width, height }) {
        const seen = [];
        let [w, h] = await run('[innerWidth, innerHeight]');
        for (let i = 0; i < 6 && (w !== width || h !== height); i++) {
          const rect = await s('/window/rect');
          const next = { width: rect.width + width - w, height: rect.height + height - h };
          await s('/window/rect', next);
          [w, h] = await run(settledSize(next.width === rect.width && next.height === rect.height ? '' : `${w}x${h}`));
          seen.push(`window ${next.width}×${next.height} gave ${w}×${h}`);
        }
        if (w !== width || h !== height) {
          throw new Error(`${name}: could not size the viewport to ${width}×${height} (its window gives at least ${minWidth} px): ${seen.join('; ')}`);
        }
      }
      await setViewport(viewport);
      await s('/url', { url });
      if (!await run('Array.isArray(window.__pageProblems)')) {
        throw new Error(`${name}: ${url} was not served by the harness's serve() (tests/browser/browsers.mjs), so its console is not captured`);
      }
      let size = viewport;
      const shot = async (path = '/screenshot') => Buffer.from(await s(path), 'base64');
      // The whole page in windows of `tallest` px at most (see classicSession).
      async function stacked(path) {
        const total = await run('document.documentElement.scrollHeight');
        const height = Math.min(total, tallest);
        if (height > size.height) await setViewport({ width: size.width, height });
        try {
          if (total <= height) return await writeFile(path, await shot());
          const parts = [];
          const was = await run('scrollY');
          for (let y = 0; y < total; y += height) {
            // Scrolled, and painted: two animation frames later. The last window scrolls less
            // far than asked; its top rows repeat the one before it.
            const at = await run(`new Promise((resolve) => { scrollTo(0, ${y}); requestAnimationFrame(() => requestAnimationFrame(() => resolve(scrollY))); })`);
            parts.push({ png: await shot(), skip: y - at });
          }
          await run(`scrollTo(0, ${was})`);
          await writeFile(path, stackPngs(parts));
        } finally {
          if (height > size.height) await setViewport(size);
        }
      }
      return {
        run,
        problems: () => run('window.__pageProblems.slice()'),
        async screenshot(path, { fullPage }) {
          if (!fullPage) return writeFile(path, await shot());
          return fullShot ? writeFile(path, await shot(fullShot)) : stacked(path);
        },
        async setViewport(next) {
          await setViewport(next);
          size = next;
        },
        close: () => serial(async () => {
          own.windows.delete(handle);
          if (own.windows.size > 0) {
            await raw('/window', undefined, 'DELETE');
            own.current = null;
          } else {
            // (a driver that keeps the browser open after the session keeps the window: blank,
            // it runs nothing more)
            await raw('/url', { url: 'about:blank' });
            await call('DELETE', `/session/${own.id}`);
            if (session === own) session = null;
          }
        }),
      };
    },
    async close() {
      await queue;
      if (session) await call('DELETE', `/session/${session.id}`).catch(() => {});
    },
  };
}
