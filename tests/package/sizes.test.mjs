// What a page downloads: docs/api.md's table of the builds' sizes (scripts/sizes.mjs writes it)
// says what dist/ holds, within a small tolerance, so that growth cannot go unnoticed.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BUILD_ROWS, buildSizes, DOCS, DOCS_TOLERANCE } from '../../scripts/sizes.mjs';

const sizes = buildSizes();

// docs/api.md's table between its sizes markers: { what → [wasm, wasm gzip, glue, glue gzip] } in
// bytes, and the sentence on the library's modules.
function documented() {
  const text = readFileSync(DOCS, 'utf8');
  const block = text.slice(text.indexOf('<!-- sizes:builds -->'), text.indexOf('<!-- /sizes:builds -->'));
  const kb = (s) => Math.round(Number(s) * 1000);
  const rows = {};
  for (const [, what, wasm, wasmGzip, glue, glueGzip] of block.matchAll(/^\| ([^|]+) \| [^|]+ \| ([\d.]+) KB \(([\d.]+) KB\) \| ([\d.]+) KB \(([\d.]+) KB\)/gm)) {
    rows[what.trim()] = [wasm, wasmGzip, glue, glueGzip].map(kb);
  }
  const library = block.match(/the (\d+) modules `index\.mjs` imports, ([\d.]+) KB, ([\d.]+) KB gzipped together/);
  return { rows, library: library && [Number(library[1]), kb(library[2]), kb(library[3])] };
}

const near = (doc, built) => Math.abs(doc - built) <= Math.max(DOCS_TOLERANCE.bytes, DOCS_TOLERANCE.share * built);
const REWRITE = 'run `node scripts/sizes.mjs --docs` after building (bash scripts/build.sh --wasm-only)';

test("docs/api.md's table of sizes is the build's (each figure within 2 KB or 5 %)", () => {
  const { rows, library } = documented();
  assert.deepEqual(Object.keys(rows), BUILD_ROWS.map((r) => r.what), 'a row for each build, in order');
  for (const b of sizes.builds) {
    const built = [b.wasm.bytes, b.wasm.gzip, b.glue.bytes, b.glue.gzip];
    rows[b.what].forEach((doc, i) => {
      assert.ok(near(doc, built[i]), `${b.what}, ${['.wasm', '.wasm gzipped', 'glue', 'glue gzipped'][i]}: the docs say ${doc} bytes, ` +
        `the build has ${built[i]}; ${REWRITE}`);
    });
  }
  assert.ok(library, 'the sentence on the library\'s own JavaScript');
  assert.ok(near(library[1], sizes.library.bytes) && near(library[2], sizes.library.gzip),
    `the library's JavaScript: the docs say ${library[1]} (${library[2]}) bytes, the build has ${sizes.library.bytes} (${sizes.library.gzip}); ${REWRITE}`);
});
