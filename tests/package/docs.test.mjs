// What a new user needs from the documents, each said once where they look for it: that the
// examples are ES modules (by the README's first example, and that the reason is true), which
// calls are causal by themselves and which take a cache (one table in the reference), how Hugging
// Face's sliding_window maps to the options, and what the cache accuracy figures mean.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const read = (doc) => readFileSync(join(REPO, doc), 'utf8');
const api = read('docs/api.md');

// Prose with its line breaks as spaces.
const flat = (text) => text.replace(/\s+/g, ' ');

// The text of section `heading` (up to the next heading of the same or a higher level).
function section(markdown, heading) {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.replace(/^#+ /, '') === heading);
  assert.ok(start >= 0, `a section "${heading}"`);
  const level = lines[start].match(/^#+/)[0].length;
  const end = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && line.match(/^#+/)[0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

test("the README's first example is an ES module, and the note beside it says why and what to do", () => {
  const readme = read('README.md');
  const example = section(readme, 'Example');
  const code = example.match(/```js\n([\s\S]*?)```/)[1];
  assert.match(code, /^import .* from 'attention-wasm';$/m);
  assert.match(code, /^const lib = await loadAttention\(\)/m);
  const after = flat(example.slice(example.indexOf(code) + code.length));
  for (const needed of ['`.mjs`', '`"type": "module"`', '`npm init -y`', '`"type": "commonjs"`', '"Cannot use import statement outside a module"', "`require('attention-wasm')`"]) {
    assert.ok(after.includes(needed), `the note after the first example mentions ${needed}`);
  }
  // The reason holds: in a package that npm init -y made, the example as a .js file is a SyntaxError.
  const dir = mkdtempSync(join(tmpdir(), 'attn-docs-'));
  try {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', type: 'commonjs' }));
    writeFileSync(join(dir, 'example.js'), code);
    const run = spawnSync(process.execPath, [join(dir, 'example.js')], { encoding: 'utf8', cwd: dir });
    assert.notEqual(run.status, 0);
    assert.match(run.stderr, /SyntaxError: Cannot use import statement outside a module/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('one table in the reference says which calls are causal by themselves and which take a cache', () => {
  const text = section(api, 'Causal, windows and caches: what each call does');
  const rows = [...text.matchAll(/^\| `([^`]+)`[^|]*\| ([^|]+) \| ([^|]+) \|$/gm)].map(([, call, cache, causal]) => ({ call, cache, causal }));
  const row = (call) => rows.find((r) => r.call === call) ?? assert.fail(`a row for ${call} (rows: ${rows.map((r) => r.call)})`);
  for (const call of ['lib.attention(query, key, value, options)', 'lib.attentionWeights(query, key, options)',
    'lib.attentionBackward(query, key, value, dOut, options)', 'mha.forward(query, key, value, options)']) {
    assert.match(row(call).cache, /^no\b/, `${call} takes no cache`);
    assert.match(row(call).causal, /^only with `causal`/, `${call} is causal only when asked`);
  }
  assert.match(row('lib.attention(query, cache, null, options)').cache, /^yes/);
  assert.match(row('lib.attention(query, cache, null, options)').causal, /^only with `causal`.*over a ring `window` is required/);
  assert.match(row('mha.forward(query, null, null, { cache })').cache, /^yes/);
  assert.match(row('mha.forward(query, null, null, { cache })').causal, /^always, lower-right/);
  assert.match(text, /```js\n[\s\S]*lib\.attention\(q, cache, null, \{ heads, seqQ: n \}\)[\s\S]*```/, 'with an example of both kinds of cache');
});

test("Hugging Face's sliding_window is mapped once, for attention, the layer and the ring", () => {
  const said = api.split('\n\n').map(flat).filter((p) => p.includes('sliding_window = W') && p.includes('window: [W − 1, 0]') && p.includes('`window: W`'));
  assert.equal(said.length, 1, 'one paragraph says it');
  assert.match(said[0], /must agree: a ring narrower than the call's window is a `RangeError`/);
});

test('the cache accuracy table defines its figures and gives the float16 range', () => {
  const text = flat(section(api, '`lib.createKVCache(options) → KVCache` — a KV cache for your own projections'));
  assert.match(text, /NMSE = Σ \(out − ref\)² \/ Σ ref²/);
  assert.match(text, /max \|Δ\| = max \|out − ref\|/);
  assert.match(text, /float16 holds magnitudes up to 65504/);
});

test('the porting guide maps each PyTorch and Hugging Face mask to its option, beams to reorder, and says what is not supported', () => {
  const guide = section(api, 'Porting from PyTorch and Hugging Face');
  const masks = section(guide, 'Masks and their polarities');
  const rows = [...masks.matchAll(/^\| (.+) \| (.+) \| `(\w+)`[^|]*\|$/gm)].map(([, what, means, option]) => ({ what, means, option }));
  const row = (option) => rows.find((r) => r.option === option) ?? assert.fail(`a row for ${option} (rows: ${rows.map((r) => r.option)})`);
  assert.match(row('attendMask').what, /scaled_dot_product_attention`'s boolean `attn_mask`/);
  assert.equal(row('attendMask').means, 'may attend');
  assert.match(row('blockMask').what, /`nn\.MultiheadAttention`'s .*boolean `attn_mask`/);
  assert.equal(row('blockMask').means, 'masked');
  assert.match(row('keyPaddingMask').what, /`key_padding_mask`/);
  assert.equal(row('keyPaddingMask').means, 'padding');
  assert.match(row('attentionMask').what, /Hugging Face's `attention_mask`/);
  assert.equal(row('attentionMask').means, 'a real token');
  assert.match(flat(masks), /a length that fits two shapes is refused with a `RangeError` that names both and asks for `maskShape`/);
  assert.match(flat(section(guide, 'Beam search: `cache.reorder(indices)`')), /Hugging Face's `reorder_cache\(beam_idx\)`/);
  const differs = flat(section(guide, 'What differs, and what is not supported'));
  for (const name of ['`bias_k`', '`bias_v`', '`add_zero_attn`']) assert.ok(differs.includes(name), `it says ${name} is not in the layer`);
  assert.match(section(guide, 'What differs, and what is not supported'), /```js\n[\s\S]*lib\.linear\([\s\S]*lib\.attention\([\s\S]*seqK: L \+ 1[\s\S]*```/,
    'with the recipe built from linear and attention');
  // Each part has an example (examples.test.mjs runs them all): the state_dict, the masks, the
  // encoder-decoder caches, beams.
  const examples = {
    'Masks and their polarities': /attentionMask[\s\S]*maskShape: \[heads, seq, seq\][\s\S]*blockMask/,
    'Layers as wide as current models, from a `state_dict`': /setWeights\([\s\S]*\.forward\(/,
    "Cross-attention over an encoder's output (Whisper, T5, BART)": /createCrossCache\([\s\S]*\{ batch: beams, cache: crossCache \}/,
    'Beam search: `cache.reorder(indices)`': /cache\.reorder\(\[/,
  };
  for (const [part, code] of Object.entries(examples)) {
    const block = section(guide, part).match(/```js\n([\s\S]*?)```/)?.[1] ?? assert.fail(`${part}: an example`);
    assert.match(block, code, `${part}: its example`);
  }
});
