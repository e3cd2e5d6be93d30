// The report of scripts/profile.sh: per build, the share and ms per call of each phase of one
// attention call (wasm: V8's samples; native: callgrind's instruction counts, shown as shares of
// the kernel's instructions and scaled to the native build's measured time), beside the shipped
// build's time. Writes DIR/summary.json.
//   node scripts/bench/profile-report.mjs DIR SHAPE
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PHASES } from './phases.mjs';

const [dir, shape] = process.argv.slice(2);
const read = (f) => (existsSync(join(dir, f)) ? JSON.parse(readFileSync(join(dir, f), 'utf8')) : null);
const pct = (x) => `${(100 * x).toFixed(1)}%`.padStart(6);

// callgrind_annotate --inclusive=no: "  1,234,567 (12.34%)  file:function [object]" per function.
function callgrindPhases(text) {
  const phases = {};
  let kernel = 0;
  for (const line of text.split('\n')) {
    const m = line.match(/^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?\S*?:(.+?)(?:\s+\[[^\]]*\])?\s*$/);
    if (!m) continue;
    const ir = Number(m[1].replace(/,/g, ''));
    const fn = m[2];
    // The driver's own work (filling inputs with sin/cos, the loader) is not the kernel's.
    if (/^main\b|sinf|cosf|_dl_|__libc_start|^_start|std::vector|operator new/.test(fn)) continue;
    const phase = PHASES.find(([name, re]) => !/embind/.test(name) && re.test(fn))?.[0] ?? 'other (libc, runtime)';
    phases[phase] = (phases[phase] ?? 0) + ir;
    kernel += ir;
  }
  return { phases, kernel };
}

// 'void attn::(anonymous namespace)::f<…>(int, float*) [clone .constprop.0]' → 'f<…>'
const shortName = (fn) => fn.replace(/\s*\[clone[^\]]*\]$/, '').replace(/\([^()]*\)$/, '').replace(/^void /, '')
  .replace(/^(\w+::|\(anonymous namespace\)::)+/, '');

const summary = { shape, load: read('load.json'), builds: {} };
const wasm = [['wasm SIMD128', 'wasm-simd128.json', 'wasm-shipped.json'], ['wasm relaxed SIMD', 'wasm-relaxed.json', 'wasm-relaxed-shipped.json']];
console.log(`Where one (${shape}) call spends its time (1 thread), in builds that keep the kernel's phases apart.`);
if (summary.load) console.log(`load average (1/5/15 min): ${summary.load.before.join(' ')} before, ${summary.load.after.join(' ')} after`);
for (const [title, file, shippedFile] of wasm) {
  const r = read(file);
  const shipped = read(shippedFile);
  if (!r) continue;
  console.log(`\n${title}: profiled build ${r.medianMs.toFixed(2)} ms/call (median of ${r.calls})` +
    `${shipped ? `, shipped build ${shipped.medianMs.toFixed(2)} ms/call` : ''}; share of V8's samples (every 100 µs) × the median call`);
  for (const [phase, { share, msPerCall }] of Object.entries(r.phases)) console.log(`  ${pct(share)} ${msPerCall.toFixed(2).padStart(7)} ms  ${phase}`);
  console.log(`  top functions: ${r.top.slice(0, 6).map((t) => `${shortName(t.fn)} ${pct(t.share).trim()}`).join('; ')}`);
  summary.builds[title] = { ...r, shippedMs: shipped?.medianMs };
}
if (existsSync(join(dir, 'callgrind.txt'))) {
  const { phases, kernel } = callgrindPhases(readFileSync(join(dir, 'callgrind.txt'), 'utf8'));
  const calls = read('native-callgrind-run.json')?.calls ?? 1;
  const ms = read('native-time.json')?.ms;
  const shippedIr = existsSync(join(dir, 'callgrind-shipped.txt'))
    ? callgrindPhases(readFileSync(join(dir, 'callgrind-shipped.txt'), 'utf8')).kernel / (read('native-shipped-run.json')?.calls ?? 1) : null;
  console.log(`\nnative SSE (g++, callgrind): ${(kernel / calls / 1e6).toFixed(1)} M instructions per call` +
    `${shippedIr ? ` (the benchmark's inlined build: ${(shippedIr / 1e6).toFixed(1)} M)` : ''}; profiled build ${ms?.toFixed(2)} ms/call`);
  const rows = Object.entries(phases).sort((a, b) => b[1] - a[1]);
  for (const [phase, ir] of rows) {
    console.log(`  ${pct(ir / kernel)} ${(ir / calls / 1e6).toFixed(1).padStart(7)} M instr  ~${(ms * ir / kernel).toFixed(2).padStart(6)} ms  ${phase}`);
  }
  summary.builds['native SSE'] = { msPerCall: ms, instructionsPerCall: kernel / calls, shippedInstructionsPerCall: shippedIr, phases: Object.fromEntries(rows.map(([p, ir]) => [p, { share: ir / kernel }])) };
}
writeFileSync(join(dir, 'summary.json'), JSON.stringify(summary, null, 2));
console.log(`\nfiles: ${dir}/ (summary.json, wasm-*.json, callgrind.out for kcachegrind / callgrind_annotate)`);
