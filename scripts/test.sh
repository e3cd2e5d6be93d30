#!/usr/bin/env bash
# npm test: set up, build, then run every suite.
#   1. Catch2 through ctest: native SIMD (ASan + UBSan), native scalar, the threaded tests under
#      ThreadSanitizer (attn_tests_tsan), wasm SIMD under Node;
#      then 60 s of libFuzzer on the C++ entry points (ATTN_FUZZ_SECONDS to change it)
#   2. node --test: the JS API, the demo page in headless Chromium, the packed package, and a
#      run of the quick benchmark (times are never asserted)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh

echo "[test] C++ suites (ctest)"
ctest --test-dir build/native -j "$(nproc)" --output-on-failure
ctest --test-dir build/wasm -j "$(nproc)" --output-on-failure

echo "[test] fuzzing the C++ entry points (libFuzzer + ASan + UBSan)"
bash scripts/fuzz.sh "${ATTN_FUZZ_SECONDS:-60}"

echo "[test] JavaScript suites (node --test)"
node --test tests/js/ tests/browser/ tests/package/ tests/bench/
