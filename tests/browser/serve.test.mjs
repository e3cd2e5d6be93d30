// `npm start`'s server, as a user runs it: prints its URL, serves the page and the package with
// the right MIME types, onnxruntime-web's browser files under /vendor/ (for the benchmark panel),
// and nothing else.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

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
