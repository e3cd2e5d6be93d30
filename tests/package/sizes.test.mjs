// What a page downloads: docs/api.md's table of the builds' sizes (scripts/sizes.mjs writes it)
// says what dist/ holds, within a small tolerance, so that growth cannot go unnoticed; each
// inference build's .wasm stays within the budget of 64 KB gzipped, and no layers build's grows
// past its regression guard.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BUILD_ROWS, buildSizes, DOCS, DOCS_TOLERANCE, WASM_GZIP_BUDGET, WASM_GZIP_GUARD } from '../../scripts/sizes.mjs';

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
  const layer = block.match(/imports the layer's (\d+) more, ([\d.]+) KB, ([\d.]+) KB gzipped/);
  return { rows, library: library && [Number(library[1]), kb(library[2]), kb(library[3])], layer: layer && [Number(layer[1]), kb(layer[2]), kb(layer[3])] };
}

const near = (doc, built) => Math.abs(doc - built) <= Math.max(DOCS_TOLERANCE.bytes, DOCS_TOLERANCE.share * built);
const REWRITE = 'run `node scripts/sizes.mjs --docs` after building (bash scripts/build.sh --wasm-only)';

test("docs/api.md's table of sizes is the build's (each figure within 2 KB or 5 %)", () => {
  const { rows, library, layer } = documented();
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
  assert.ok(layer, 'the sentence on the layer\'s JavaScript');
  assert.ok(near(layer[1], sizes.layer.bytes) && near(layer[2], sizes.layer.gzip),
    `the layer's JavaScript: the docs say ${layer[1]} (${layer[2]}) bytes, the build has ${sizes.layer.bytes} (${sizes.layer.gzip}); ${REWRITE}`);
});

test("the layer's JavaScript is not part of the default download: no module index.mjs imports reaches mha.mjs", () => {
  assert.ok(!sizes.library.files.some((m) => m.startsWith('mha')), `index.mjs imports ${sizes.library.files.join(', ')}`);
  assert.ok(sizes.layer.files.includes('mha.mjs') && sizes.layer.modules >= 5, `the layer's modules: ${sizes.layer.files.join(', ')}`);
});

test('budget: each inference build\'s .wasm is at most 64 KB gzipped; no layers build\'s grows more than 2 KB past its size', () => {
  const inference = sizes.builds.filter((b) => !b.layers);
  const layers = sizes.builds.filter((b) => b.layers);
  assert.equal(inference.length, 4, 'four inference builds');
  const over = inference.filter((b) => b.wasm.gzip > WASM_GZIP_BUDGET).map((b) => `${b.name}.wasm (${b.what}) is ` +
    `${b.wasm.gzip} bytes gzipped, over the budget of ${WASM_GZIP_BUDGET} (64 KB)`);
  assert.deepEqual(Object.keys(WASM_GZIP_GUARD), layers.map((b) => b.name), 'a guard for each layers build');
  over.push(...layers.filter((b) => b.wasm.gzip > WASM_GZIP_GUARD[b.name]).map((b) => `${b.name}.wasm (${b.what}) is ` +
    `${b.wasm.gzip} bytes gzipped, over its regression guard of ${WASM_GZIP_GUARD[b.name]} (its size when the guard was set + 2 KB)`));
  assert.deepEqual(over, [], 'gzip level 9; scripts/wasm-functions.mjs lists what grew (docs/development.md, Sizes)');
});
