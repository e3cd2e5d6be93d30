// Where a module's code bytes go, function by function: the code section's body of each function,
// named from the module's name section (link with -DATTN_WASM_NAMES=ON, which keeps it; see
// docs/development.md). With a second module, what each function gained or lost against it.
//   node scripts/wasm-functions.mjs build/names/attn.wasm [--top 40]
//   node scripts/wasm-functions.mjs build/names/attn.wasm base.wasm
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// An unsigned LEB128 number at bytes[at]: [value, the index after it].
export function leb(bytes, at) {
  let value = 0, shift = 0, byte;
  do {
    byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return [value, at];
}

const SECTIONS = ['custom', 'type', 'import', 'function', 'table', 'memory', 'global', 'export', 'start', 'element', 'code', 'data',
  'datacount'];

// { sections: { name: bytes }, functions: Map(name → code bytes) } (functions without a name are
// called by their index; several of one name, as templates can give, are added up).
export function functionSizes(file) {
  const bytes = readFileSync(file);
  const sections = {}, bodies = [], names = new Map();
  let imported = 0;
  for (let at = 8; at < bytes.length;) {
    const id = bytes[at++];
    let size;
    [size, at] = leb(bytes, at);
    const end = at + size;
    let name = SECTIONS[id];
    if (id === 0) {
      let length, p;
      [length, p] = leb(bytes, at);
      name = `custom:${bytes.subarray(p, p + length)}`;
      if (name === 'custom:name') readNames(bytes, p + length, end, names);
    } else if (id === 2) {
      imported = countFunctionImports(bytes, at);
    } else if (id === 10) {
      let count, p;
      [count, p] = leb(bytes, at);
      for (let i = 0; i < count; i++) {
        let body;
        [body, p] = leb(bytes, p);
        bodies.push(body);
        p += body;
      }
    }
    sections[name] = (sections[name] ?? 0) + size;
    at = end;
  }
  const functions = new Map();
  bodies.forEach((body, i) => {
    const name = names.get(imported + i) ?? `function ${imported + i}`;
    functions.set(name, (functions.get(name) ?? 0) + body);
  });
  return { sections, functions };
}

// The name section's function names (subsection 1) into `names` (index → name).
function readNames(bytes, at, end, names) {
  while (at < end) {
    const kind = bytes[at++];
    let size;
    [size, at] = leb(bytes, at);
    if (kind === 1) {
      let count, p = at;
      [count, p] = leb(bytes, p);
      for (let i = 0; i < count; i++) {
        let index, length;
        [index, p] = leb(bytes, p);
        [length, p] = leb(bytes, p);
        names.set(index, bytes.subarray(p, p + length).toString());
        p += length;
      }
    }
    at += size;
  }
}

// Imported functions come first in the function index space.
function countFunctionImports(bytes, at) {
  let count, functions = 0;
  [count, at] = leb(bytes, at);
  for (let i = 0; i < count; i++) {
    for (let field = 0; field < 2; field++) {  // module and name
      let length;
      [length, at] = leb(bytes, at);
      at += length;
    }
    const kind = bytes[at++];
    if (kind === 0) {  // function: its type index
      functions++;
      [, at] = leb(bytes, at);
    } else if (kind === 1) {  // table: element type, limits
      at++;
      at = skipLimits(bytes, at);
    } else if (kind === 2) {  // memory: limits
      at = skipLimits(bytes, at);
    } else {  // global: value type, mutability
      at += 2;
    }
  }
  return functions;
}

function skipLimits(bytes, at) {
  const flags = bytes[at++];
  [, at] = leb(bytes, at);
  if (flags & 1) [, at] = leb(bytes, at);
  return at;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const top = args.includes('--top') ? Number(args[args.indexOf('--top') + 1]) : 40;
  const [file, base] = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--top');
  if (!file) throw new Error('usage: node scripts/wasm-functions.mjs MODULE.wasm [BASE.wasm] [--top N]');
  const sum = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  const a = functionSizes(file);
  if (![...a.functions.keys()].some((n) => !n.startsWith('function '))) {
    console.warn(`${file} has no function names: link it with -DATTN_WASM_NAMES=ON (docs/development.md)`);
  }
  const row = (cells, name) => `${cells.map((c) => String(c).padStart(8)).join('')}  ${name}`;
  if (!base) {
    console.log(`${file}: ${sum(a.functions)} bytes of code in ${a.functions.size} functions; sections ${JSON.stringify(a.sections)}`);
    for (const [name, size] of [...a.functions].sort((x, y) => y[1] - x[1]).slice(0, top)) console.log(row([size], name));
  } else {
    const b = functionSizes(base);
    console.log(`code: ${sum(b.functions)} bytes in ${base} → ${sum(a.functions)} in ${file}`);
    const names = new Set([...a.functions.keys(), ...b.functions.keys()]);
    const rows = [...names].map((n) => [n, b.functions.get(n) ?? 0, a.functions.get(n) ?? 0]).sort((x, y) => (y[2] - y[1]) - (x[2] - x[1]));
    console.log(row(['base', 'now', 'change'], 'function'));
    for (const [name, was, now] of rows.filter(([, was, now]) => was !== now).slice(0, top)) console.log(row([was, now, now - was], name));
  }
}
