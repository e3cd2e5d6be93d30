#!/usr/bin/env bash
# Fuzzes the C++ entry points (tests/fuzz/fuzz_attention.cpp) with libFuzzer, ASan and UBSan.
#   scripts/fuzz.sh [seconds]      default 60; `npm run fuzz -- 3600` for a long run
# Starts from the committed seed corpus (tests/fuzz/corpus, read only); new inputs and any crash
# go to build/fuzz/work/. Exits non-zero on a crash, a sanitizer report or a failed property.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ -f build/fuzz/build.ninja ] || cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=clang++-14 -DATTN_FUZZ=ON >/dev/null
cmake --build build/fuzz --target attn_fuzz
mkdir -p build/fuzz/work
echo "[fuzz] ${seconds} s on the attention kernel, the packed GEMM and validate()"
status=0
build/fuzz/attn_fuzz -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix=build/fuzz/work/ \
  build/fuzz/work tests/fuzz/corpus > build/fuzz/last-run.log 2>&1 || status=$?
# The progress lines stay in the log; show the summary, and the report if it failed.
grep -E '^(Done|stat::(number_of_executed_units|average_exec_per_sec|new_units_added))' build/fuzz/last-run.log || true
if [ "$status" -ne 0 ]; then
  grep -E -A25 'ERROR|runtime error|deadly signal' build/fuzz/last-run.log | head -60
  echo "[fuzz] FAILED (exit $status); the input is in build/fuzz/work/"
fi
exit "$status"
