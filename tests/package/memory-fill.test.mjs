// The threaded builds keep the kernel's per-item and per-row-block zeroings as plain loops, not
// memory.fill (ATTN_LOOP_ZEROING in src/kernel/attention_blocks.h): -pthread enables bulk memory,
// and Firefox takes 10-16 ns per small memory.fill of shared memory, enough to slow its
// one-position prefills. Counted in each threaded .wasm of dist/ by npm's Binaryen (wasm-opt
// --metrics): the builds from before had 22 more (attn-mt.wasm 56, attn-relaxed-mt.wasm 51,
// attn-layers-mt.wasm 85, attn-layers-relaxed-mt.wasm 81), and either function alone back to
// memory.fill adds at least 2.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Today's count + 1. A change that adds fills off the hot path may raise these: the pool's sizing
// on a coarse clock added statics that split the zeroed data __wasm_init_memory fills once, at
// start-up (attn-mt.wasm 34 → 38, attn-layers-mt.wasm 63 → 67; the relaxed builds 29 → 28, 59 → 58).
const MAX_FILLS = { 'attn-mt.wasm': 39, 'attn-relaxed-mt.wasm': 29, 'attn-layers-mt.wasm': 68, 'attn-layers-relaxed-mt.wasm': 59 };

function memoryFills(wasm) {
  const metrics = execFileSync(`${root}node_modules/.bin/wasm-opt`, [`${root}dist/${wasm}`, '--all-features', '--metrics'],
    { encoding: 'utf8', maxBuffer: 1 << 26 });
  const line = metrics.match(/^\s*MemoryFill\s*:\s*(\d+)/m);
  return line ? Number(line[1]) : 0;
}

test('the threaded builds zero row blocks with loops, not memory.fill (a call into the engine)', () => {
  const over = Object.entries(MAX_FILLS).map(([wasm, max]) => [wasm, memoryFills(wasm), max])
    .filter(([, fills, max]) => fills > max).map(([wasm, fills, max]) => `${wasm} has ${fills} memory.fill, more than ${max}`);
  assert.deepEqual(over, [], 'see ATTN_LOOP_ZEROING in src/kernel/attention_blocks.h');
});
