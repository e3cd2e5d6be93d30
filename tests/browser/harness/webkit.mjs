// The harness's WebKit driver: Debian's WebKitGTK (the WebKit/JavaScriptCore engine Safari uses)
// through WebKitWebDriver — classic W3C WebDriver over HTTP — under xvfb-run, since its
// MiniBrowser needs a display and has no headless mode. One WebDriver session (one MiniBrowser
// window) per page. WebDriver classic has no console events: the console, uncaught errors and
// failed loads of the page's main thread come from capture.js, which the harness's server puts
// first in every page (a worker's console is out of reach).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { stackPngs } from './png.mjs';

const DRIVER = process.env.WEBKIT_WEBDRIVER_PATH ?? '/usr/bin/WebKitWebDriver';
// A full-page screenshot is one window as tall as the page, up to TALLEST px: WebKitGTK paints a
// taller window black. A longer page is shot in windows of that height, scrolled down one after
// another, and stacked (an element that sticks to the top of the window shows in each of them).
// Xvfb's screen holds the tallest window and its toolbar.
const TALLEST = 16384;
const SCREEN = `1600x${TALLEST + 1000}x24`;
const CAPABILITIES = {
  capabilities: {
    alwaysMatch: {
      'webkitgtk:browserOptions': { args: ['--automation'] },
      // A Catch2 suite or a benchmark can keep a script waiting for minutes.
      timeouts: { script: 600000, pageLoad: 120000 },
    },
  },
};

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

async function freePort() {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  return port;
}

export async function launch() {
  const port = await freePort();
  // Its own process group, so that close() ends xvfb-run, Xvfb, the driver and its browsers.
  const child = spawn('xvfb-run', ['-a', '-s', `-screen 0 ${SCREEN}`, DRIVER, `--port=${port}`, '--host=127.0.0.1'],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = once(child, 'exit').then(([code]) => { throw new Error(`WebKitWebDriver exited (${code}): ${stderr.trim()}`); });
  exited.catch(() => {});
  const base = `http://127.0.0.1:${port}`;
  const stop = () => {
    process.off('exit', stop);
    try { process.kill(-child.pid, 'SIGTERM'); } catch { /* already gone */ }
  };
  process.on('exit', stop);  // a test process that ends without close() leaves nothing running

  async function call(method, path, body) {
    const response = await fetch(`${base}${path}`, {
      method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const { value } = await response.json();
    if (value?.error) throw new Error(`WebKitWebDriver ${method} ${path.replace(/^\/session\/[^/]+/, '')}: ${value.error}: ${value.message}`);
    return value;
  }

  try {
    const deadline = Date.now() + 30000;
    for (;;) {
      const ready = await Promise.race([exited, fetch(`${base}/status`).then((r) => r.json()).then((r) => r.value?.ready, () => false)]);
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`WebKitWebDriver did not start within 30 s: ${stderr.trim()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    stop();
    throw error;
  }

  const newSession = () => call('POST', '/session', CAPABILITIES);
  const first = await newSession();  // tells the version; the first page uses it
  const sid = first.sessionId;
  // The window cannot be narrower than its toolbar: the narrowest viewport it gives.
  const exec = (expression) => call('POST', `/session/${sid}/execute/sync`, { script: `return ${expression};`, args: [] });
  const wide = await exec('[innerWidth, innerHeight]');
  await call('POST', `/session/${sid}/window/rect`, { width: 200, height: 600 });
  const [minWidth] = await exec(settledSize(wide.join('x')));

  // The driver allows one session: pages are its windows. Commands go one at a time, each to
  // its page's window (switched to first), so pages may be used side by side. When the last
  // page closes, the session goes with it and the next page starts a fresh one.
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
    name: 'WebKitGTK',
    via: 'WebKitWebDriver, under Xvfb',
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
          throw new Error(`WebKitGTK: could not size the viewport to ${width}×${height} (its window gives at least ${minWidth} px): ${seen.join('; ')}`);
        }
      }
      await setViewport(viewport);
      await s('/url', { url });
      if (!await run('Array.isArray(window.__pageProblems)')) {
        throw new Error(`WebKitGTK: ${url} was not served by the harness's serve() (tests/browser/browsers.mjs), so its console is not captured`);
      }
      let size = viewport;
      return {
        run,
        problems: () => run('window.__pageProblems.slice()'),
        async screenshot(path, { fullPage }) {
          const total = fullPage ? await run('document.documentElement.scrollHeight') : size.height;
          const height = Math.min(total, TALLEST);
          const shot = async () => Buffer.from(await s('/screenshot'), 'base64');
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
            await call('DELETE', `/session/${own.id}`);
            if (session === own) session = null;
          }
        }),
      };
    },
    async close() {
      await queue;
      if (session) await call('DELETE', `/session/${session.id}`).catch(() => {});
      stop();
    },
  };
}
