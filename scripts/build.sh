#!/usr/bin/env bash
# Builds everything into build/ and assembles the npm package's files in dist/.
#   scripts/build.sh              native tests + wasm module + wasm tests + dist/
#   scripts/build.sh --wasm-only  wasm module + dist/ (what `npm pack` needs)
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
  cmake --build build/wasm --target attn_wasm attn_mt_web attn_mt_node -j "$JOBS"
else
  configure build/native
  cmake --build build/native -j "$JOBS"
  cmake --build build/wasm -j "$JOBS"
fi

# dist/: the emcc output plus the hand-written JS entry points and types.
rm -rf dist && mkdir -p dist
cp build/wasm/attn.mjs build/wasm/attn.wasm dist/
cp build/wasm/attn-mt.mjs build/wasm/attn-mt.wasm build/wasm/attn-mt.worker.js dist/
# Node's threaded build is CommonJS: its own folder, marked so, inside a "type": "module" package.
mkdir -p dist/node-mt
cp build/wasm/attn-mt-node.cjs build/wasm/attn-mt-node.wasm build/wasm/attn-mt-node.worker.js dist/node-mt/
echo '{ "type": "commonjs" }' > dist/node-mt/package.json
cp src/js/*.mjs src/js/*.cjs dist/
cp src/js/index.d.ts dist/index.d.ts
cp src/js/index.d.ts dist/index.d.cts
echo "[build] dist/ ready: $(cd dist && ls | tr '\n' ' ')"
