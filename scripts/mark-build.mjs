// Appends to each .wasm named a custom section "attention-wasm" that says which feature set the
// build has ("inference" or "layers"): the two builds of one SIMD level and threading import and
// export the same names (the layer's calls are registered at run time, through Embind), so this is
// what tells them apart in src/js/fingerprint.mjs. Run by scripts/build.sh on dist/.
//   node scripts/mark-build.mjs dist/attn.wasm inference dist/attn-layers.wasm layers …
import { readFileSync, writeFileSync } from 'node:fs';

const leb = (n) => {
  const out = [];
  do {
    out.push((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
    n >>>= 7;
  } while (n);
  return out;
};
const utf8 = (text) => [...new TextEncoder().encode(text)];

const args = process.argv.slice(2);
for (let i = 0; i < args.length; i += 2) {
  const [file, features] = [args[i], args[i + 1]];
  if (!['inference', 'layers'].includes(features)) throw new Error(`mark-build: ${file}: features must be inference or layers, got ${features}`);
  const bytes = readFileSync(file);
  const module = new WebAssembly.Module(bytes);
  if (WebAssembly.Module.customSections(module, 'attention-wasm').length) throw new Error(`mark-build: ${file} is marked already`);
  const name = utf8('attention-wasm');
  const body = [...leb(name.length), ...name, ...utf8(features)];
  writeFileSync(file, Buffer.concat([bytes, Buffer.from([0, ...leb(body.length), ...body])]));
}
