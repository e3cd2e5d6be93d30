// Replaces the generated part of README.md's Performance section: the text between
// <!-- bench:KIND --> and <!-- /bench:KIND --> (KIND: node or browser).
import { readFileSync, writeFileSync } from 'node:fs';

export function updateReadme(path, kind, block) {
  const text = readFileSync(path, 'utf8');
  const start = `<!-- bench:${kind} -->`, end = `<!-- /bench:${kind} -->`;
  const a = text.indexOf(start), b = text.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${path} has no ${start} … ${end} markers to replace`);
  writeFileSync(path, `${text.slice(0, a + start.length)}\n${block}${text.slice(b)}`);
}
