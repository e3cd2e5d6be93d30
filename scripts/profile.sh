#!/usr/bin/env bash
# Where one attention call spends its time, per build — packing, Q·Kᵀ, mask/max/exp/sum, P·V,
# the rows' finish, and the JS API's copies in and out — for tuning the kernel:
#   wasm SIMD128 and wasm relaxed SIMD (FMA; needs clang-19): V8's sampling profiler through the
#     library's JS API (scripts/bench/profile-wasm.mjs), after a warm-up;
#   native SSE (g++): callgrind instruction counts (exact and repeatable on a noisy machine).
# The profiled builds keep the kernel's phases apart as functions: in wasm, the shipped flags plus
# function names (--profiling-funcs) and a forced-include prelude that marks the kernel's blocks
# noinline (scripts/bench/profile-prelude.h); natively, g++ inlining only small functions. They
# run a little slower than the shipped builds; the report prints both (time, or instructions).
# Nothing here changes src/.
#   bash scripts/profile.sh [B,H,Sq,Sk,D[,1]] [--kv-heads N] [--cache DTYPE]
#     (default 1,12,512,512,64; --cache: a decode step over a KV cache of that dtype) → artifacts/profile/
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=/usr/share/nodejs
SHAPE=1,12,512,512,64
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then SHAPE=$1; shift; fi
EXTRA=("$@")  # --kv-heads N, --cache DTYPE: passed to both drivers
OUT=artifacts/profile
mkdir -p "$OUT"
EMSDK_CMAKE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake
KEEP_PHASES_GCC="-fno-inline-functions -fno-inline-small-functions -fno-inline-functions-called-once --param max-inline-insns-single=20"

# The single-threaded SIMD128 module target (attn_wasm), compiled as the package's is (clang-19,
# set by CMakeLists.txt; -O2 -fno-unroll-loops) plus `cflags`, linked with `lflags` after the
# package's own flags.
wasm_build() {  # dir, extra compile flags, link flags
  local dir=$1 cflags=$2 lflags=$3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$EMSDK_CMAKE" \
    -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)" -DCMAKE_BUILD_TYPE=Profile \
    -DCMAKE_CXX_FLAGS="-O2 -fno-unroll-loops -DNDEBUG -include $PWD/scripts/bench/profile-prelude.h $cflags" \
    -DCMAKE_EXE_LINKER_FLAGS="$lflags" >/dev/null
  cmake --build "$dir" --target attn_wasm >&2
}

load() { node -e 'console.log(JSON.stringify(require("os").loadavg().map((x) => +x.toFixed(2))))'; }
LOAD_BEFORE=$(load)
bash scripts/build.sh --wasm-only >&2  # the shipped module, for its own time

echo "[profile] wasm SIMD128" >&2
# Binaryen (emcc's wasm-opt at -O2) knows nothing of LLVM's noinline and inlines every function
# with one call site whatever its size: the few-rows loops (score_row, value_row, stage_key …,
# each called once per dtype) ended up inside run_few_rows's lambda, K and V time as one.
wasm_build build/profile/wasm-simd128 "" "--profiling-funcs -sBINARYEN_EXTRA_PASSES=--one-caller-inline-max-function-size=0"
node scripts/bench/profile-wasm.mjs build/profile/wasm-simd128 "$SHAPE" "${EXTRA[@]}" > "$OUT/wasm-simd128.json"
node scripts/bench/profile-wasm.mjs dist "$SHAPE" "${EXTRA[@]}" --seconds 3 > "$OUT/wasm-shipped.json"

# Relaxed SIMD: the same target with -mrelaxed-simd, linked at -O1 without wasm-opt (Binaryen 108
# cannot read relaxed opcodes; the package's relaxed modules get npm binaryen's wasm-opt after
# linking, which also strips the function names this profile needs).
echo "[profile] wasm relaxed SIMD" >&2
wasm_build build/profile/wasm-relaxed "-mrelaxed-simd" "-O1 -sWASM_BIGINT=1 --profiling-funcs"
node --experimental-wasm-relaxed-simd scripts/bench/profile-wasm.mjs build/profile/wasm-relaxed "$SHAPE" "${EXTRA[@]}" > "$OUT/wasm-relaxed.json"
node --experimental-wasm-relaxed-simd scripts/bench/profile-wasm.mjs dist "$SHAPE" "${EXTRA[@]}" --seconds 3 --build attn-relaxed > "$OUT/wasm-relaxed-shipped.json"

echo "[profile] native SSE under callgrind" >&2
cmake -S . -B build/profile/native -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DATTN_BENCH_ONLY=ON -DATTN_SANITIZE=OFF \
  -DCMAKE_CXX_FLAGS="-g $KEEP_PHASES_GCC" >/dev/null
cmake --build build/profile/native --target attn_bench_native >&2
build/profile/native/attn_bench_native --warm-ms 1000 --budget-ms 3000 "${EXTRA[@]}" "$SHAPE" > "$OUT/native-time.json"
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
  build/profile/native/attn_bench_native --warm-ms 0 --budget-ms 0 "${EXTRA[@]}" "$SHAPE" > "$OUT/native-callgrind-run.json" 2>/dev/null
callgrind_annotate --inclusive=no --threshold=100 "$OUT/callgrind.out" > "$OUT/callgrind.txt"
if [ -x build/bench/attn_bench_native ]; then  # the benchmark's own (inlined) build, for its instruction count
  valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind-shipped.out" \
    build/bench/attn_bench_native --warm-ms 0 --budget-ms 0 "${EXTRA[@]}" "$SHAPE" > "$OUT/native-shipped-run.json" 2>/dev/null
  callgrind_annotate --inclusive=no --threshold=100 "$OUT/callgrind-shipped.out" > "$OUT/callgrind-shipped.txt"
fi
echo "{\"before\": $LOAD_BEFORE, \"after\": $(load)}" > "$OUT/load.json"

node scripts/bench/profile-report.mjs "$OUT" "$SHAPE${EXTRA[*]:+ ${EXTRA[*]}}"
