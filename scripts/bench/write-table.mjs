// Replaces one generated table of a page: the text between <!-- PREFIX:MARKER --> and
// <!-- /PREFIX:MARKER --> (docs/performance.md's: prefix bench, MARKER node, browser,
// node-decode, …; docs/api.md's sizes:builds, scripts/sizes.mjs), leaving the rest of the page as is.
import { readFileSync, writeFileSync } from 'node:fs';

export function writeTable(path, marker, block, prefix = 'bench') {
  const text = readFileSync(path, 'utf8');
  const start = `<!-- ${prefix}:${marker} -->`, end = `<!-- /${prefix}:${marker} -->`;
  const a = text.indexOf(start), b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${path} has no ${start} … ${end} markers to replace`);
  writeFileSync(path, `${text.slice(0, a + start.length)}\n${block}${text.slice(b)}`);
}
