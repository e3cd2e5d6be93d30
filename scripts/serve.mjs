// A tiny static server for the demo page and the browser tests: by default serves web/ and dist/
// from the repository root ('/' redirects to '/web/'), with the right MIME types for .mjs and .wasm.
//   node scripts/serve.mjs [--port 8080] [--no-isolation]
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.ts': 'text/plain; charset=utf-8',
};

// The headers that make a page cross-origin isolated, which browsers require before they give
// WebAssembly threads (SharedArrayBuffer) to it.
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// Starts the server; resolves to { url, close() }. Responses carry ISOLATION_HEADERS unless
// `isolated` is false, plus `headers`. `root` serves one whole folder instead (e.g. a bundler's
// output), with '/' as its index.html.
export function startServer({ port = 0, host = '127.0.0.1', headers: extra = {}, root, isolated = true } = {}) {
  const headers = { ...(isolated ? ISOLATION_HEADERS : {}), ...extra };
  const base = root ?? REPO;
  const served = root ? [''] : ['web', 'dist'];
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    if (path === '/' && !root) {
      res.writeHead(302, { Location: '/web/' }).end();
      return;
    }
    let file = normalize(join(base, path));
    const allowed = served.some((dir) => file.startsWith(join(base, dir, sep)));
    try {
      if (!allowed) throw new Error('not served');
      if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
      await stat(file);
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain', ...headers }).end('not found');
      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Cache-Control': 'no-cache', ...headers });
    createReadStream(file).pipe(res);
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
