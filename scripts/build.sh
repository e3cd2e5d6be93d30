#!/usr/bin/env bash
# Builds everything into build/ and assembles the npm package's files in dist/.
#   scripts/build.sh              native tests + wasm module + wasm tests + dist/
#   scripts/build.sh --wasm-only  wasm modules + dist/ (what `npm pack` needs)
# The modules come in eight builds (SIMD128 / relaxed SIMD × single-threaded / threaded × inference
# / with the layers); relaxed SIMD compiles with Debian's clang-19 (see CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=/usr/share/nodejs  # emcc's JS tools (acorn) live there on Debian
JOBS=$(nproc)

wasm_only=0
[ "${1:-}" = "--wasm-only" ] && wasm_only=1

configure() {  # dir, extra cmake args...
  local dir=$1; shift
  [ -f "$dir/build.ninja" ] || cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}

configure build/wasm -DCMAKE_TOOLCHAIN_FILE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake \
  -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)"
if [ $wasm_only = 1 ]; then
  cmake --build build/wasm --target attn_modules -j "$JOBS"
else
  configure build/native
  cmake --build build/native -j "$JOBS"
  cmake --build build/wasm -j "$JOBS"
fi

# dist/: the emcc output plus the hand-written JS entry points and types.
rm -rf dist && mkdir -p dist/node-mt
# The layers builds (attn-layers*.wasm) ship without glue of their own: the inference build's of
# the same SIMD level and threading starts them (scripts/share-glue.mjs checks that it can, and
# writes the shared glue; the worker scripts must be the same but for their names).
for name in attn attn-relaxed attn-mt attn-relaxed-mt; do
  cp "build/wasm/${name/#attn/attn-layers}.wasm" dist/
done
for name in attn attn-relaxed; do
  cp "build/wasm/$name.wasm" dist/
  node scripts/share-glue.mjs "build/wasm/$name.mjs" "build/wasm/${name/#attn/attn-layers}.mjs" "dist/$name.mjs"
done
# Threaded builds: ES6 glue for browsers, CommonJS glue for Node (its own folder, marked so inside
# a "type": "module" package). Both glues were linked from the same objects; the package ships
# their .wasm once, so check that it really is one file.
for name in attn-mt attn-relaxed-mt; do
  for wasm in $name ${name/#attn/attn-layers}; do
    if ! cmp -s "build/wasm/$wasm.wasm" "build/wasm/$wasm-node.wasm"; then
      echo "[build] $wasm.wasm and $wasm-node.wasm differ; the package cannot ship one for both" >&2
      exit 1
    fi
  done
  layers=${name/#attn/attn-layers}
  cp "build/wasm/$name.wasm" dist/
  node scripts/share-glue.mjs "build/wasm/$name.mjs" "build/wasm/$layers.mjs" "dist/$name.mjs"
  node scripts/share-glue.mjs "build/wasm/$name-node.cjs" "build/wasm/$layers-node.cjs" "dist/node-mt/$name-node.cjs"
  for worker in $name.worker.js $name-node.worker.js; do
    node scripts/share-glue.mjs "build/wasm/$worker" "build/wasm/${worker/#attn/attn-layers}"
  done
  node scripts/worker-import.mjs "build/wasm/$name.worker.js" "dist/$name.worker.js"
  cp "build/wasm/$name-node.worker.js" dist/node-mt/
done
echo '{ "type": "commonjs" }' > dist/node-mt/package.json
# A threaded build's browser glue says where it was loaded from, so that its workers can import the
# same file instead of a copy (src/js/browser.mjs, ownFile).
for name in attn-mt attn-relaxed-mt; do
  echo 'export const glueUrl = import.meta.url;' >> "dist/$name.mjs"
done
# The browsers' glue, minified (emcc only strips it; the relaxed builds' not even that).
node scripts/minify-glue.mjs dist/attn.mjs dist/attn-mt.mjs dist/attn-relaxed.mjs dist/attn-relaxed-mt.mjs
cp src/js/*.mjs src/js/*.cjs dist/
cp src/js/index.d.ts dist/index.d.ts
cp src/js/index.d.ts dist/index.d.cts
node --experimental-wasm-relaxed-simd scripts/mark-build.mjs dist/attn.wasm inference dist/attn-mt.wasm inference dist/attn-relaxed.wasm inference \
  dist/attn-relaxed-mt.wasm inference dist/attn-layers.wasm layers dist/attn-layers-mt.wasm layers \
  dist/attn-layers-relaxed.wasm layers dist/attn-layers-relaxed-mt.wasm layers
node --experimental-wasm-relaxed-simd scripts/fingerprints.mjs dist
echo "[build] dist/ ready: $(cd dist && ls | tr '\n' ' ')"
