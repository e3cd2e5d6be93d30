// Firefox's Marionette protocol (what geckodriver speaks to Firefox) behind the harness's classic
// WebDriver transport, call(method, path, body) → the reply's value: the W3C paths the harness
// uses, mapped to their Marionette commands. Over TCP, each message is `<byte length>:<json>`;
// Firefox first sends a hello, then answers each command [0, id, name, params] with
// [1, id, error, result].
import { connect } from 'node:net';
import { once } from 'node:events';

const COMMANDS = {
  'POST /session': ['WebDriver:NewSession'],
  'DELETE ': ['WebDriver:DeleteSession'],
  'POST /url': ['WebDriver:Navigate'],
  'POST /execute/sync': ['WebDriver:ExecuteScript'],
  'GET /window': ['WebDriver:GetWindowHandle'],
  'POST /window': ['WebDriver:SwitchToWindow'],
  'DELETE /window': ['WebDriver:CloseWindow'],
  'POST /window/new': ['WebDriver:NewWindow'],
  'GET /window/rect': ['WebDriver:GetWindowRect'],
  'POST /window/rect': ['WebDriver:SetWindowRect'],
  'GET /screenshot': ['WebDriver:TakeScreenshot', { full: false }],
  // geckodriver's extension: the whole document.
  'GET /moz/screenshot/full': ['WebDriver:TakeScreenshot', { full: true }],
};
// Commands whose result is the reply itself rather than its `value` (server.sys.mjs).
const UNWRAPPED = new Set(['WebDriver:NewSession', 'WebDriver:NewWindow', 'WebDriver:GetWindowRect',
  'WebDriver:SetWindowRect', 'WebDriver:CloseWindow']);

export async function marionette(port) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const pending = new Map();
  let nextId = 0;
  let buffer = Buffer.alloc(0);
  let closed = null;
  const hello = new Promise((resolve, reject) => pending.set('hello', { resolve, reject }));
  socket.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const colon = buffer.indexOf(':');
      if (colon < 0) return;
      const end = colon + 1 + Number(buffer.subarray(0, colon).toString());
      if (buffer.length < end) return;
      const message = JSON.parse(buffer.subarray(colon + 1, end).toString());
      buffer = buffer.subarray(end);
      const [, id, error, result] = Array.isArray(message) ? message : [1, 'hello', null, message];
      const waiting = pending.get(id);
      pending.delete(id);
      waiting?.resolve({ error, result });
    }
  });
  const fail = (error) => {
    closed ??= error ?? new Error('Firefox closed its Marionette connection');
    for (const waiting of pending.values()) waiting.reject(closed);
    pending.clear();
  };
  socket.on('error', fail);
  socket.on('close', () => fail());
  const { result: greeting } = await hello;
  if (greeting.marionetteProtocol !== 3) throw new Error(`Firefox speaks Marionette protocol ${greeting.marionetteProtocol}, not 3`);

  async function send(name, params) {
    if (closed) throw closed;
    const id = nextId++;
    const reply = new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
    const json = Buffer.from(JSON.stringify([0, id, name, params]));
    socket.write(Buffer.concat([Buffer.from(`${json.length}:`), json]));
    const { error, result } = await reply;
    if (error) throw new Error(`Firefox ${name}: ${error.error}: ${error.message}`);
    return UNWRAPPED.has(name) ? result : result?.value;
  }

  return {
    // A W3C WebDriver request: the session id in the path is implied (one session per connection).
    async call(method, path, body = {}) {
      const key = path === '/session' ? `${method} /session` : `${method} ${path.replace(/^\/session\/[^/]+/, '')}`;
      if (!COMMANDS[key]) throw new Error(`marionette: no command for ${method} ${path}`);
      const [name, params] = COMMANDS[key];
      // A new session's capabilities are flat in Marionette (geckodriver merges alwaysMatch in).
      return send(name, name === 'WebDriver:NewSession' ? body.capabilities.alwaysMatch : { ...body, ...params });
    },
    close: () => socket.destroy(),
  };
}
