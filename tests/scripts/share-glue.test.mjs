// scripts/share-glue.mjs: an inference glue and its layers twin that differ only in the file names
// and the baked address of _emscripten_allow_main_runtime_queued_calls share one glue, which reads
// the flag from the started module's exports; anything else, or a module that does not export the
// flag as a global, fails the build. And the shipped threaded glues read it so.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { FLAG, shareGlue, wasmExports } from '../../scripts/share-glue.mjs';

const dist = new URL('../../dist/', import.meta.url);

// A module exporting one i32 global (or, with kind 'function', a function) under `name`.
function moduleExporting(name, kind = 'global') {
  const utf8 = [...new TextEncoder().encode(name)];
  const section = (id, body) => [id, body.length, ...body];
  const exported = section(7, [1, utf8.length, ...utf8, kind === 'global' ? 3 : 0, 0]);
  const sections = kind === 'global' ? [...section(6, [1, 0x7f, 0, 0x41, 0, 0x0b]), ...exported]
    : [...section(1, [1, 0x60, 0, 0]), ...section(3, [1, 0]), ...exported, ...section(10, [1, 2, 0, 0x0b])];
  const bytes = Uint8Array.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, ...sections]);
  assert.ok(WebAssembly.validate(bytes), 'the fixture module is valid');
  return bytes;
}

// A threaded glue as Emscripten 3.1.6 writes it: the flag's address declared once, used in the
// pool's bookkeeping; `extra` is appended.
const glue = (address, name, extra = '') => `var wasmBinaryFile="${name}.wasm";` +
  `runWithoutMainThreadQueuedCalls:function(func){HEAP32[_${FLAG}>>>2]=0;try{func()}finally{HEAP32[_${FLAG}>>2]=1}}` +
  `var _${FLAG}=Module["_${FLAG}"]=${address};${extra}`;
const pair = (inference, layers, wasm = moduleExporting(FLAG)) => [
  { path: 'attn-mt.mjs', text: inference, wasm: () => wasm },
  { path: 'attn-layers-mt.mjs', text: layers, wasm: () => wasm },
];

test('share-glue: glues that differ in the flag\'s address and the file names share one, which reads the flag from the module', () => {
  const out = shareGlue(...pair(glue(9360, 'attn-mt'), glue(11200, 'attn-layers-mt')));
  assert.doesNotMatch(out, /queued_calls\s*=\s*\d/);
  assert.equal(out.split(FLAG).length - 1, 2, 'both uses are left, and nothing else');
  assert.equal(out.split(`Module["asm"]["${FLAG}"].value>>`).length - 1, 2);
  assert.match(out, /"attn-mt\.wasm"/);
});

test('share-glue: glues that differ elsewhere, a module without the global, or an address left unrewritten fail', () => {
  assert.throws(() => shareGlue(...pair(glue(9360, 'attn-mt'), glue(11200, 'attn-layers-mt', 'x=1;'))),
    /attn-layers-mt\.mjs differs from attn-mt\.mjs beyond the file names/);
  assert.throws(() => shareGlue(...pair(glue(9360, 'attn-mt'), glue(9360, 'attn-layers-mt'), moduleExporting('other'))),
    new RegExp(`exports ${FLAG} not at all, not as a global`));
  assert.throws(() => shareGlue(...pair(glue(9360, 'attn-mt'), glue(9360, 'attn-layers-mt'), moduleExporting(FLAG, 'function'))),
    new RegExp(`exports ${FLAG} as a function, not as a global`));
  // A third form of the address (here, an offset from it) that the rewrite would leave baked in.
  const offset = `HEAP8[_${FLAG}+4]=0;`;
  assert.throws(() => shareGlue(...pair(glue(9360, 'attn-mt', offset), glue(11200, 'attn-layers-mt', offset))),
    /1 mention\(s\) of _emscripten_allow_main_runtime_queued_calls left besides/);
  assert.throws(() => shareGlue(...pair(`x=_${FLAG};`, `x=_${FLAG};`)), /mentions .* without declaring it/);
});

test('share-glue: the shipped threaded glues read the flag from the module, and every threaded .wasm exports it as a global', () => {
  const glues = ['attn-mt.mjs', 'attn-relaxed-mt.mjs', ...readdirSync(new URL('node-mt/', dist)).filter((name) => name.endsWith('.cjs'))
    .map((name) => `node-mt/${name}`)];
  assert.equal(glues.length, 4);
  for (const name of glues) {
    const text = readFileSync(new URL(name, dist), 'utf8');
    assert.doesNotMatch(text, /queued_calls\s*=\s*\d/, `${name} bakes in an address`);
    assert.match(text, new RegExp(`asm(\\.|"\\]\\[")${FLAG}("\\])?\\.value`), `${name} reads the flag from the module`);
  }
  const threaded = readdirSync(dist).filter((name) => /-mt\.wasm$/.test(name));
  assert.deepEqual(threaded.sort(), ['attn-layers-mt.wasm', 'attn-layers-relaxed-mt.wasm', 'attn-mt.wasm', 'attn-relaxed-mt.wasm']);
  for (const name of threaded) assert.equal(wasmExports(readFileSync(new URL(name, dist))).get(FLAG), 'global', name);
});
