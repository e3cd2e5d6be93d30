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
// Today's count + 1. A change that adds fills off the hot path may raise these.
const MAX_FILLS = { 'attn-mt.wasm': 35, 'attn-relaxed-mt.wasm': 30, 'attn-layers-mt.wasm': 64, 'attn-layers-relaxed-mt.wasm': 60 };

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
