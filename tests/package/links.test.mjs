// Every relative link and image of the README, the changelog and docs/ points at a file that
// exists and, with a #fragment, at a heading of that file (as GitHub names its anchors), so moving
// or renaming a section cannot leave a dead link behind; and the README stays short.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const LINKED = ['README.md', 'CHANGELOG.md', ...readdirSync(join(REPO, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const read = (doc) => readFileSync(join(REPO, doc), 'utf8');

// The prose of a markdown document: fenced blocks and code spans blanked out.
const prose = (markdown) => markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').replace(/`[^`\n]*`/g, '``');

// GitHub's heading anchors: the heading's text, lower case, without punctuation, spaces as '-';
// a repeated anchor gets -1, -2, ….
function anchors(markdown) {
  const seen = new Map();
  const out = new Set();
  for (const [, text] of markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    // HTML tags (<sub>) drop out of the text, except inside code spans, where they are text.
    const visible = text.split('`').map((part, i) => (i % 2 ? part : part.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, ''))).join('');
    const base = visible.toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

test('every relative link points at a file and a heading that exist', () => {
  assert.ok(LINKED.length >= 6, `the README, the changelog and docs/: ${LINKED}`);
  const broken = [];
  for (const doc of LINKED) {
    for (const [, target] of prose(read(doc)).matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;  // https:, mailto:
      const [path, fragment] = target.split('#');
      const file = path ? join(dirname(join(REPO, doc)), path) : join(REPO, doc);
      if (!existsSync(file)) broken.push(`${doc}: ${target} (no file ${relative(REPO, file)})`);
      else if (fragment !== undefined && !anchors(readFileSync(file, 'utf8')).has(fragment)) broken.push(`${doc}: ${target} (no heading #${fragment})`);
    }
  }
  assert.deepEqual(broken, []);
});

test('the anchors are GitHub\'s', () => {
  const md = '# `lib.attention(query, key, value, options) → Float32Array`\n## Threads in the browser\n## Threads in the browser\n' +
    '### `mha.forward`, `backward` — training\n## `loadAttention(options?) → Promise<AttentionLibrary>`\n## d<sub>k</sub> and [a link](x.md)\n';
  assert.deepEqual([...anchors(md)], ['libattentionquery-key-value-options--float32array', 'threads-in-the-browser',
    'threads-in-the-browser-1', 'mhaforward-backward--training', 'loadattentionoptions--promiseattentionlibrary', 'dk-and-a-link']);
});

test('the README stays a page read in minutes: at most 300 lines, the rest in docs/', () => {
  const lines = read('README.md').split('\n').length;
  assert.ok(lines <= 300, `README.md has ${lines} lines; move the detail to docs/ and link it`);
});
