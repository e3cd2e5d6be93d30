// `npm start`'s server, as a user runs it: prints its URL, serves the page and the package with
// the right MIME types, onnxruntime-web's browser files under /vendor/ (for the benchmark panel),
// and nothing else.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { get } from 'node:http';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { chooseEncoding, startServer } from '../../scripts/serve.mjs';

test('scripts/serve.mjs prints its URL and serves web/, dist/ and /vendor/onnxruntime-web/ only', async () => {
  const server = spawn(process.execPath, [fileURLToPath(new URL('../../scripts/serve.mjs', import.meta.url)), '--port', '0']);
  try {
    const [line] = await once(server.stdout, 'data');
    const url = String(line).match(/(http:\/\/127\.0\.0\.1:\d+\/web\/)/)?.[1];
    assert.ok(url, `printed a URL: ${line}`);
    const page = await fetch(url);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /^text\/html/);
    assert.match(await page.text(), /<title>attention-wasm/);
    const origin = new URL(url).origin;
    assert.equal((await fetch(`${origin}/dist/attn.wasm`)).headers.get('content-type'), 'application/wasm');
    assert.equal((await fetch(`${origin}/dist/index.mjs`)).headers.get('content-type'), 'text/javascript');
    assert.equal((await fetch(`${origin}/`, { redirect: 'manual' })).headers.get('location'), '/web/');
    const ort = await fetch(`${origin}/vendor/onnxruntime-web/ort.wasm.min.mjs`);
    assert.equal(ort.status, 200);
    assert.equal(ort.headers.get('content-type'), 'text/javascript');
    assert.equal(ort.headers.get('cross-origin-embedder-policy'), 'require-corp');
    for (const path of ['/package.json', '/src/attention.cpp', '/web/../package.json', '/web/%2e%2e/package.json',
      '/vendor/onnxruntime-web/%2e%2e/package.json', '/vendor/onnxruntime-web/..%2f..%2fpackage.json', '/vendor/', '/node_modules/onnxruntime-web/package.json']) {
      assert.equal((await fetch(`${origin}${path}`)).status, 404, path);
    }
  } finally {
    server.kill();
  }
});

// A raw GET (no automatic decompression): { status, headers, body }.
const raw = (url, headers = {}) => new Promise((resolve, reject) => {
  get(url, { headers }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
  }).on('error', reject);
});

test('scripts/serve.mjs compresses text and .wasm (brotli, else gzip) and answers a repeat with 304', async () => {
  assert.deepEqual(['gzip, deflate, br, zstd', 'gzip, deflate', 'br;q=0, gzip', 'identity', '', '*', 'GZIP;q=0.5'].map(chooseEncoding),
    ['br', 'gzip', 'gzip', null, null, 'br', 'gzip']);
  const server = await startServer();
  try {
    for (const [path, file] of [['web/index.html', '../../web/index.html'], ['dist/attn-relaxed-mt.wasm', '../../dist/attn-relaxed-mt.wasm']]) {
      const original = readFileSync(new URL(file, import.meta.url));
      const br = await raw(server.url + path, { 'accept-encoding': 'gzip, deflate, br' });
      assert.equal(br.headers['content-encoding'], 'br', path);
      assert.equal(br.headers.vary, 'Accept-Encoding');
      assert.equal(Number(br.headers['content-length']), br.body.length);
      assert.ok(br.body.length < 0.7 * original.length, `${path}: ${original.length} → ${br.body.length} bytes`);
      assert.deepEqual(brotliDecompressSync(br.body), original, `${path}: brotli gives the file back`);
      const gz = await raw(server.url + path, { 'accept-encoding': 'gzip' });
      assert.equal(gz.headers['content-encoding'], 'gzip');
      assert.deepEqual(gunzipSync(gz.body), original, `${path}: gzip gives the file back`);
      const plain = await raw(server.url + path);
      assert.equal(plain.headers['content-encoding'], undefined);
      assert.deepEqual(plain.body, original);
      assert.equal(plain.headers['cross-origin-embedder-policy'], 'require-corp', 'the isolation headers stay');
      // The same file again, as the page's workers fetch it: 304, no body.
      const again = await raw(server.url + path, { 'accept-encoding': 'gzip, deflate, br', 'if-none-match': br.headers.etag });
      assert.equal(again.status, 304);
      assert.equal(again.body.length, 0);
      assert.notEqual(gz.headers.etag, br.headers.etag, 'each encoding has its own ETag');
    }
    // Already compressed: sent as it is.
    const font = await raw(`${server.url}web/fonts/math.woff2`, { 'accept-encoding': 'br' });
    assert.equal(font.headers['content-encoding'], undefined);
    assert.equal(font.headers['content-type'], 'font/woff2');
  } finally {
    await server.close();
  }
});
