// A tiny static server for the demo page and the browser tests: by default serves web/ and dist/
// from the repository root ('/' redirects to '/web/'), and onnxruntime-web's browser files (a dev
// dependency, for the demo's benchmark panel) under /vendor/onnxruntime-web/ when they are
// installed; with the right MIME types for .mjs and .wasm. Text and .wasm go out compressed
// (brotli or gzip, from node:zlib, as the browser accepts), and every response carries an ETag,
// so a page's workers that fetch the same file again get a 304.
//   node scripts/serve.mjs [--port 8080] [--no-isolation]
import { createReadStream, existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.woff2': 'font/woff2', '.ts': 'text/plain; charset=utf-8',
};

// What is worth compressing (fonts and images are compressed already).
const COMPRESSIBLE = new Set(['.html', '.mjs', '.js', '.css', '.wasm', '.json', '.svg', '.ts']);
const ENCODERS = {
  // Quality 11 for the page's own files; a quicker 5 for the large ones (onnxruntime-web's .wasm),
  // compressed once on their first request.
  br: (data) => promisify(brotliCompress)(data, { params: {
    [constants.BROTLI_PARAM_QUALITY]: data.length > 1 << 20 ? 5 : 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length } }),
  gzip: (data) => promisify(gzip)(data, { level: 9 }),
};

// The encoding to send for an Accept-Encoding header: brotli, then gzip (q=0 refuses one).
export function chooseEncoding(accept = '') {
  const offered = new Map(accept.split(',').map((part) => {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return [name, q ? Number(q.slice(2)) : 1];
  }));
  const wildcard = offered.get('*');
  return ['br', 'gzip'].find((e) => (offered.get(e) ?? wildcard ?? 0) > 0) ?? null;
}

// Compressed bodies, by file, modification time and encoding (computed once each).
const compressed = new Map();
function compressedBody(file, info, encoding) {
  const key = `${encoding}:${file}:${info.mtimeMs}:${info.size}`;
  if (!compressed.has(key)) compressed.set(key, readFile(file).then(ENCODERS[encoding]));
  return compressed.get(key);
}

// The headers that make a page cross-origin isolated, which browsers require before they give
// WebAssembly threads (SharedArrayBuffer) to it.
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// URL prefix → folder, for what the server serves by default.
function defaultMounts() {
  const mounts = { '/web/': join(REPO, 'web'), '/dist/': join(REPO, 'dist') };
  const ort = join(REPO, 'node_modules', 'onnxruntime-web', 'dist');
  if (existsSync(ort)) mounts['/vendor/onnxruntime-web/'] = ort;
  return mounts;
}

// Puts `prelude` at the start of a page's <head> (after its doctype when it has no <head>).
function withPrelude(html, prelude) {
  const head = html.match(/<head(\s[^>]*)?>/i) ?? html.match(/^\s*<!doctype[^>]*>/i);
  const at = head ? head.index + head[0].length : 0;
  return html.slice(0, at) + prelude + html.slice(at);
}

// Starts the server; resolves to { url, close() }. Responses carry ISOLATION_HEADERS unless
// `isolated` is false, plus `headers`. `mounts` adds URL prefixes (ending in '/') → folders (null
// takes a default one away). `root` serves one whole folder instead (e.g. a bundler's output),
// with '/' as its index.html, beside `mounts`. `prelude`, if given, is put at the start of every
// HTML page's <head> (the browser tests' console capture). `onServed(path, status)`, if given, hears
// of every response (what a page and its workers really fetched, not what a cache gave them).
export function startServer({ port = 0, host = '127.0.0.1', headers: extra = {}, root, isolated = true, mounts = {}, prelude, onServed } = {}) {
  const headers = { ...(isolated ? ISOLATION_HEADERS : {}), ...extra };
  const served = Object.entries(root ? { ...mounts, '/': root } : { ...defaultMounts(), ...mounts })
    .filter(([, dir]) => dir).sort(([a], [b]) => b.length - a.length);  // the longest prefix wins
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (onServed) res.on('finish', () => onServed(path, res.statusCode));
    if (path === '/' && !root) {
      res.writeHead(302, { Location: '/web/' }).end();
      return;
    }
    const mount = served.find(([prefix]) => path.startsWith(prefix));
    let file = mount ? normalize(join(mount[1], path.slice(mount[0].length))) : null;
    let info;
    try {
      // Nothing outside the mounted folder, whatever '..' the path holds.
      if (!file || !(file === normalize(mount[1]) || file.startsWith(join(mount[1], sep)))) throw new Error('not served');
      if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
      info = await stat(file);
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain', ...headers }).end('not found');
      return;
    }
    const page = prelude && extname(file) === '.html' ? Buffer.from(withPrelude(await readFile(file, 'utf8'), prelude)) : null;
    const encoding = COMPRESSIBLE.has(extname(file)) ? chooseEncoding(req.headers['accept-encoding']) : null;
    const etag = `"${info.size.toString(36)}-${Math.round(info.mtimeMs).toString(36)}${page ? `-p${page.length.toString(36)}` : ''}${encoding ? `-${encoding}` : ''}"`;
    const common = { 'Cache-Control': 'no-cache', ETag: etag, Vary: 'Accept-Encoding', ...headers };
    if (req.headers['if-none-match'] === etag) {
      res.writeHead(304, common).end();
      return;
    }
    const type = { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' };
    if (encoding) {
      const body = page ? await ENCODERS[encoding](page) : await compressedBody(file, info, encoding);
      res.writeHead(200, { ...type, 'Content-Encoding': encoding, 'Content-Length': body.length, ...common });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    res.writeHead(200, { ...type, 'Content-Length': page ? page.length : info.size, ...common });
    if (req.method === 'HEAD') res.end();
    else if (page) res.end(page);
    else createReadStream(file).pipe(res);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const url = `http://${host}:${server.address().port}/`;
      resolve({ url, close: () => new Promise((done) => server.close(done)) });
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--port');
  const port = i > 0 ? Number(process.argv[i + 1]) : Number(process.env.PORT ?? 8080);
  const isolated = !process.argv.includes('--no-isolation');
  const { url } = await startServer({ port, isolated });
  console.log(`attention-wasm demo: ${url}web/  (${isolated ? 'cross-origin isolated: threads on' : 'not isolated: 1 thread'}; Ctrl+C to stop)`);
}
