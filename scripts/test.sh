#!/usr/bin/env bash
# npm test: set up, check formatting and lint (scripts/lint.sh, seconds), build, then run every suite.
#   1. Catch2 through ctest: native SIMD (ASan + UBSan) and native scalar, both also replaying the
#      fuzz corpus; the threaded tests under ThreadSanitizer (attn_tests_tsan), wasm SIMD128 and
#      wasm relaxed SIMD under Node; then
#      60 s of libFuzzer on the C++ entry points (ATTN_FUZZ_SECONDS to change it)
#   2. node --test: the JS API (on SIMD128, then again on relaxed SIMD under
#      node --experimental-wasm-relaxed-simd), the demo page in headless Chromium, the browser
#      suites (builds, Catch2, demo, Vite bundle, memory past 2 GiB) in Chromium, Firefox ESR and
#      WebKitGTK, the packed package, scripts/setup.sh on a flaky network, and a run of the quick
#      benchmark (times are never asserted)
# A suite that runs no test fails: a Catch2 binary built by clang >= 15 can silently run nothing
# (its main is never called), and a runner that finds nothing exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] format and lint (C++: clang-format; JavaScript: ESLint)"
bash scripts/lint.sh
bash scripts/build.sh

# ctest, then: every Catch2 binary of the build dir has tests; binaries joined by '=' were built
# from the same sources and must have as many (e.g. attn_tests_simd=attn_tests_scalar).
ctest_suite() {  # dir groups...
  local dir=$1; shift
  ctest --test-dir "$dir" -j "$(nproc)" --output-on-failure --no-tests=error
  for group in "$@"; do
    local first=""
    for binary in ${group//=/ }; do
      local count
      count=$(ctest --test-dir "$dir" -N -R "^$binary:" | sed -n 's/^Total Tests: //p')
      echo "[test] $binary: ${count:-0} tests"
      if [ "${count:-0}" -eq 0 ] || { [ -n "$first" ] && [ "$count" -ne "$first" ]; }; then
        echo "[test] $binary ran ${count:-0} tests (expected ${first:-more than 0})" >&2
        exit 1
      fi
      first=$count
    done
  done
}

# node --test with the given node flags; fails unless tests ran, and (with --no-skips) none skipped.
node_suite() {  # label [--no-skips] -- node args...
  local label=$1; shift
  local no_skips=0
  [ "$1" = "--no-skips" ] && { no_skips=1; shift; }
  [ "$1" = "--" ] && shift
  local log
  log=$(mktemp)
  local status=0
  node "$@" 2>&1 | tee "$log" || status=$?
  local tests pass skipped
  tests=$(sed -n 's/^# tests //p' "$log" | tail -1)
  pass=$(sed -n 's/^# pass //p' "$log" | tail -1)
  skipped=$(sed -n 's/^# skipped //p' "$log" | tail -1)
  rm -f "$log"
  echo "[test] $label: ${tests:-0} tests, ${pass:-0} passed, ${skipped:-0} skipped"
  [ "$status" -eq 0 ] || exit "$status"
  if [ "${tests:-0}" -eq 0 ] || [ "${pass:-0}" -eq 0 ]; then echo "[test] $label ran no tests" >&2; exit 1; fi
  if [ $no_skips = 1 ] && [ "${skipped:-0}" -ne 0 ]; then echo "[test] $label skipped tests" >&2; exit 1; fi
}

echo "[test] C++ suites (ctest)"
ctest_suite build/native attn_tests_simd=attn_tests_scalar attn_tests_tsan
ctest_suite build/wasm attn_tests_wasm=attn_tests_wasm_relaxed

echo "[test] fuzzing the C++ entry points (libFuzzer + ASan + UBSan)"
bash scripts/fuzz.sh "${ATTN_FUZZ_SECONDS:-60}"

echo "[test] JavaScript suites (node --test)"
node_suite "JS API, SIMD128" -- --test --test-timeout=300000 tests/js/
# The relaxed pass leaves out the 30 s soak (random calls on the SIMD128 build), to keep npm test short.
ATTN_TEST_SIMD=relaxed node_suite "JS API, relaxed SIMD" --no-skips -- --experimental-wasm-relaxed-simd --test --test-timeout=300000 \
  $(ls tests/js/*.test.mjs | grep -v '/soak\.test\.mjs$')
# In Node 20 --test-timeout bounds each test file as a whole, not each test. The files that run
# several engines one after the other get a longer budget: the browser suites (engines.test.mjs:
# Chromium, Firefox and WebKitGTK sharing one build, one pair of servers and one Vite bundle) and
# the quick benchmark (Node and the three browsers); every page and run in them has its own limit.
node_suite "browser engines, benchmark" -- --test --test-timeout=1800000 tests/browser/engines.test.mjs tests/bench/
node_suite "browser (Chromium), package, scripts" -- --test --test-timeout=300000 \
  $(ls tests/browser/*.test.mjs | grep -v '/engines\.test\.mjs$') tests/package/ tests/scripts/
