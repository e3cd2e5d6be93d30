#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test attention-wasm.
# Idempotent: every step checks first and says what it does. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

# The network steps (apt-get update / install, npm ci) are retried: a mirror or the npm registry
# timing out once (npm's EIDLETIMEOUT, apt's "Temporary failure resolving") must not end a fresh
# machine's first command. Up to ATTN_SETUP_TRIES tries (default 4), ATTN_SETUP_PAUSE seconds
# apart (default 10, doubled after each failure).
TRIES=${ATTN_SETUP_TRIES:-4}
PAUSE=${ATTN_SETUP_PAUSE:-10}
retry() {  # what, command...
  local what=$1 try=1 pause=$PAUSE
  shift
  until "$@"; do
    if [ "$try" -ge "$TRIES" ]; then
      say "$what failed $try times; giving up"
      return 1
    fi
    say "$what failed (try $try of $TRIES); trying again in $pause s"
    sleep "$pause"
    try=$((try + 1))
    pause=$((pause * 2))
  done
}
quietly() { "$@" >/dev/null; }  # its errors still show

# Debian packages: the toolchain (emscripten 3.1.6 with clang-14; clang's sanitizer and libFuzzer
# runtimes; clang-19, lld-19 and llvm-19, which emcc runs for the relaxed-SIMD builds;
# clang-format-19, which scripts/lint.sh checks the C++ with), the
# header-only libraries (xsimd 8.1, Catch2 2.x), and the three browser engines of the page tests
# with Latin and Chinese fonts: Chromium, Firefox ESR, and WebKitGTK's WebDriver (Safari's engine;
# its browser needs a display: Xvfb, with xauth for xvfb-run and Mesa's software GL).
APT_PACKAGES=(emscripten libxsimd-dev catch2 libclang-rt-14-dev clang-19 lld-19 llvm-19 clang-format-19 chromium fonts-liberation
  fonts-wqy-microhei firefox-esr webkit2gtk-driver xvfb xauth libgl1-mesa-dri)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  retry "apt-get update" $SUDO apt-get update -qq
  retry "apt-get install" quietly $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  say "Debian packages present: ${APT_PACKAGES[*]}"
fi

# Node dev dependencies (test tools, TypeScript, ESLint, binaryen's wasm-opt for the relaxed builds).
# Re-run npm ci when the lock file changed.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dev dependencies (npm ci)"
  retry "npm ci" npm ci --no-audit --no-fund --loglevel=error
else
  say "npm dev dependencies up to date"
fi
say "ready"
