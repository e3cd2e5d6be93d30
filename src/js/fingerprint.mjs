// A short name for what a compiled .wasm imports and exports — exactly what Emscripten's JS glue
// must match, so two modules with one fingerprint fit the same glue — and for its feature set (the
// custom section "attention-wasm" that scripts/mark-build.mjs appends: "inference" or "layers",
// whose modules import and export the same names). scripts/build.sh records each build's
// fingerprint in dist/fingerprints.mjs; the loader compares before instantiating.
export function fingerprint(module) {
  const names = (list) => list.map((e) => `${e.module ?? ''}.${e.name}:${e.kind}`).join(',');
  const features = WebAssembly.Module.customSections(module, 'attention-wasm').map((s) => new TextDecoder().decode(s));
  const text = `${names(WebAssembly.Module.imports(module))}|${names(WebAssembly.Module.exports(module))}|${features.join(',')}`;
  let hash = 0x811c9dc5;  // FNV-1a, 32 bits
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(16).padStart(8, '0');
}
