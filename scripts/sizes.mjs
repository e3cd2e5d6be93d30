// What a page downloads of each build the package ships, from dist/: the .wasm, the Emscripten
// glue (one for both feature sets of a SIMD level and threading) and a threaded build's worker
// script, raw and gzipped (level 9), and the library's own
// JavaScript (the modules index.mjs imports, and those the loader imports for a layers build:
// mha.mjs and the modules only it imports). The table of docs/api.md (between its
// <!-- sizes:builds --> markers) is written from it, and tests/package/sizes.test.mjs holds the
// table to the build (within DOCS_TOLERANCE).
//   node scripts/sizes.mjs           prints the table
//   node scripts/sizes.mjs --docs    rewrites it in docs/api.md
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { writeTable } from './bench/write-table.mjs';

export const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
export const DOCS = fileURLToPath(new URL('../docs/api.md', import.meta.url));

// How far a size in the docs may be from the build's before the table must be written again:
// small changes pass, growth like 115 → 172 KB does not.
export const DOCS_TOLERANCE = { bytes: 2000, share: 0.05 };

// The size budget: each inference build's .wasm (what loadAttention() loads by default) at most
// 64 KB (65,536 bytes) gzipped (level 9, as below); tests/package/sizes.test.mjs fails past it.
export const WASM_GZIP_BUDGET = 65_536;
// The layers builds (loadAttention({ layers: true })) are over it; a regression guard holds each
// of their .wasm, gzipped, to the bytes of the build it was last set from plus 2 KB.
export const WASM_GZIP_GUARD = { 'attn-layers': 71_965 + 2048, 'attn-layers-mt': 81_220 + 2048,
  'attn-layers-relaxed': 71_002 + 2048, 'attn-layers-relaxed-mt': 79_754 + 2048 };

// Each build: its .wasm's name, its glue's (a layers build's is its inference twin's), and whether
// it has a worker script.
export const BUILD_ROWS = [
  { name: 'attn', what: 'single-threaded, SIMD128' },
  { name: 'attn-mt', what: 'threaded, SIMD128', worker: true },
  { name: 'attn-relaxed', what: 'single-threaded, relaxed SIMD' },
  { name: 'attn-relaxed-mt', what: 'threaded, relaxed SIMD', worker: true },
].flatMap((b) => [{ ...b, glue: b.name, layers: false },
  { ...b, name: b.name.replace(/^attn/, 'attn-layers'), glue: b.name, what: `${b.what}, layers`, layers: true }]);

const measure = (bytes) => ({ bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length });
const read = (dist, file) => readFileSync(`${dist}${file}`);

// The modules `entry` imports statically, itself included, in the order first reached (the glue
// each build loads on demand with import() is counted with its build).
function staticImports(dist, entry, seen = new Set()) {
  if (seen.has(entry)) return seen;
  seen.add(entry);
  for (const [, path] of read(dist, entry).toString().matchAll(/^(?:import|export)\s[^;]*?from\s+'\.\/([\w.-]+)'/gm)) {
    staticImports(dist, path, seen);
  }
  return seen;
}

// { builds: [{ name, what, files, wasm, glue, worker? }], library: { modules, files, bytes, gzip },
// layer: the same for the layer's modules }, in bytes; `dist` ends with '/'.
export function buildSizes(dist = DIST) {
  if (!existsSync(`${dist}index.mjs`)) throw new Error(`${dist} has no index.mjs: build it first (bash scripts/build.sh --wasm-only)`);
  const builds = BUILD_ROWS.map(({ name, glue, what, worker, layers }) => ({
    name, what, layers,
    files: [`${glue}.mjs`, `${name}.wasm`, ...(worker ? [`${glue}.worker.js`] : [])],
    wasm: measure(read(dist, `${name}.wasm`)),
    glue: measure(read(dist, `${glue}.mjs`)),
    ...(worker ? { worker: measure(read(dist, `${glue}.worker.js`)) } : {}),
  }));
  const javascript = (files) => ({ modules: files.length, files, ...measure(Buffer.concat(files.map((m) => read(dist, m)))) });
  const library = javascript([...staticImports(dist, 'index.mjs')]);
  const layer = javascript([...staticImports(dist, 'mha.mjs')].filter((m) => !library.files.includes(m)));
  return { builds, library, layer };
}

const kb = (bytes) => `${(bytes / 1000).toFixed(1)} KB`;
const both = ({ bytes, gzip }) => `${kb(bytes)} (${kb(gzip)})`;

// The table and the sentence after it, as docs/api.md has them.
export function sizesBlock({ builds, library, layer }) {
  const rows = builds.map((b) => `| ${b.what} | ${b.files.map((f) => `\`${f}\``).join(', ')} | ${both(b.wasm)} | ` +
    `${both(b.glue)}${b.worker ? ` + ${kb(b.worker.bytes)} worker` : ''} |`);
  return ['| build | files | `.wasm` (gzipped) | JS glue (gzipped) |', '|---|---|---|---|', ...rows, '',
    `Plus the library's own JavaScript (the ${library.modules} modules \`index.mjs\` imports, ${kb(library.bytes)}, ` +
    `${kb(library.gzip)} gzipped together; with \`layers: true\` the loader imports the layer's ${layer.modules} more, ` +
    `${kb(layer.bytes)}, ${kb(layer.gzip)} gzipped, which bundlers put in a chunk of their own; bundlers minify all of it). KB = 1000 bytes, gzip level 9; \`node scripts/sizes.mjs\` ` +
    'prints this table for the current build.', ''].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const block = sizesBlock(buildSizes());
  if (process.argv.includes('--docs')) {
    writeTable(DOCS, 'builds', block, 'sizes');
    console.log(`docs/api.md: the table of sizes rewritten`);
  } else {
    console.log(block);
  }
}
