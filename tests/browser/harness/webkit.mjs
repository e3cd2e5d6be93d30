// The harness's WebKit driver: Debian's WebKitGTK (the WebKit/JavaScriptCore engine Safari uses)
// through WebKitWebDriver — classic W3C WebDriver over HTTP (webdriver.mjs) — under xvfb-run, since
// its MiniBrowser needs a display and has no headless mode. One WebDriver session, its MiniBrowser
// windows the pages; problems come from capture.js (a worker's console is out of reach).
import { createServer } from 'node:net';
import { once } from 'node:events';
import { startGroup } from './process.mjs';
import { classicSession } from './webdriver.mjs';

const DRIVER = process.env.WEBKIT_WEBDRIVER_PATH ?? '/usr/bin/WebKitWebDriver';
// A full-page screenshot is one window as tall as the page, up to TALLEST px: WebKitGTK paints a
// taller window black. A longer page is shot in windows of that height, scrolled down one after
// another, and stacked (an element that sticks to the top of the window shows in each of them).
// Xvfb's screen holds the tallest window and its toolbar.
const TALLEST = 16384;
const SCREEN = `1600x${TALLEST + 1000}x24`;

async function freePort() {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  server.close();
  return port;
}

export async function launch() {
  const port = await freePort();
  // xvfb-run, Xvfb, the driver and its browsers, in one process group.
  const driver = startGroup('WebKitWebDriver', 'xvfb-run', ['-a', '-s', `-screen 0 ${SCREEN}`, DRIVER, `--port=${port}`, '--host=127.0.0.1']);
  const base = `http://127.0.0.1:${port}`;
  await driver.started(() => fetch(`${base}/status`).then((r) => r.json()).then((r) => r.value?.ready, () => false));

  async function call(method, path, body) {
    const response = await fetch(`${base}${path}`, {
      method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const { value } = await response.json();
    if (value?.error) throw new Error(`WebKitWebDriver ${method} ${path.replace(/^\/session\/[^/]+/, '')}: ${value.error}: ${value.message}`);
    return value;
  }

  const session = await classicSession({
    name: 'WebKitGTK', call, capabilities: { 'webkitgtk:browserOptions': { args: ['--automation'] } }, tallest: TALLEST,
  }).catch((error) => { driver.stop(); throw error; });
  return {
    name: 'WebKitGTK',
    via: 'WebKitWebDriver, under Xvfb',
    version: session.version,
    minWidth: session.minWidth,
    open: session.open,
    async close() {
      await session.close();
      driver.stop();
    },
  };
}
