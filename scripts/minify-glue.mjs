// Minifies Emscripten glue in place with terser: about half the bytes of the browsers' glue (emcc
// without Closure, which Debian's emcc cannot run, only strips whitespace at -O2, and the
// relaxed-SIMD builds link at -O1, where it does not even do that: see CMakeLists.txt). Names
// that other code reads stay: terser renames only locals and keeps property names, and
// `new URL("….wasm", import.meta.url)` (what bundlers look for) is left as it is. Run by
// scripts/build.sh.
//   node scripts/minify-glue.mjs dist/attn.mjs dist/attn-mt.mjs dist/attn-relaxed.mjs dist/attn-relaxed-mt.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { minify } from 'terser';

for (const file of process.argv.slice(2)) {
  const source = readFileSync(file, 'utf8');
  const { code } = await minify(source, { module: true, ecma: 2020, compress: { passes: 2 }, mangle: true, format: { comments: false } });
  for (const needed of source.match(/new URL\("[^"]+", import\.meta\.url\)/g) ?? []) {
    if (!code.includes(needed.replace(', ', ','))) throw new Error(`${file}: the minified glue lost ${needed}`);
  }
  writeFileSync(file, code);
  console.log(`[build] ${file}: glue minified, ${source.length} → ${code.length} bytes`);
}
