// Replaces one generated table of docs/performance.md: the text between <!-- bench:MARKER --> and
// <!-- /bench:MARKER --> (MARKER: node, browser, node-decode, …), leaving the rest of the page as is.
import { readFileSync, writeFileSync } from 'node:fs';

export function writeTable(path, marker, block) {
  const text = readFileSync(path, 'utf8');
  const start = `<!-- bench:${marker} -->`, end = `<!-- /bench:${marker} -->`;
  const a = text.indexOf(start), b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${path} has no ${start} … ${end} markers to replace`);
  writeFileSync(path, `${text.slice(0, a + start.length)}\n${block}${text.slice(b)}`);
}
