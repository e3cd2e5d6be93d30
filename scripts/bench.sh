#!/usr/bin/env bash
# npm run bench [-- --browser [firefox|webkit]] [-- --quick] [-- --readme] …: set up, build the
# package and the native (SSE, unsanitized) benchmark binary, then run the benchmark
# (scripts/bench.mjs; --readme rewrites the generated tables of docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=/usr/share/nodejs
bash scripts/setup.sh >&2
bash scripts/build.sh --wasm-only >&2
[ -f build/bench/build.ninja ] || cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DATTN_BENCH_ONLY=ON -DATTN_SANITIZE=OFF >&2
cmake --build build/bench --target attn_bench_native >&2
exec node scripts/bench.mjs "$@"
