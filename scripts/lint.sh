#!/usr/bin/env bash
# npm run lint: checks that the C++ is formatted (.clang-format, Debian's clang-format-19) and that
# the JavaScript passes ESLint (eslint.config.mjs: lint rules and style). Fails naming the files.
# npm run format (--fix): formats the C++ in place and applies ESLint's fixes.
# Files: every C++ source and header git knows (tracked or new, not ignored); the JavaScript of
# src/js, web, tests and scripts.
set -euo pipefail
cd "$(dirname "$0")/.."

CLANG_FORMAT=clang-format-19
fix=0
[ "${1:-}" = "--fix" ] && fix=1

command -v "$CLANG_FORMAT" >/dev/null || { echo "[lint] $CLANG_FORMAT is missing: run bash scripts/setup.sh" >&2; exit 1; }
[ -x node_modules/.bin/eslint ] || { echo "[lint] ESLint is missing: run bash scripts/setup.sh" >&2; exit 1; }
cpp_files=$(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.h' | sort -u)
[ -n "$cpp_files" ] || { echo "[lint] no C++ files found (run it in a git checkout)" >&2; exit 1; }
mapfile -t cpp <<<"$cpp_files"
# ESLint keeps a cache of the files that passed (by content) in node_modules/.cache.
eslint=(node_modules/.bin/eslint --cache --cache-strategy content --cache-location node_modules/.cache/eslint/
  src/js web tests scripts)

if [ $fix = 1 ]; then
  "$CLANG_FORMAT" -i "${cpp[@]}"
  "${eslint[@]}" --fix
  exit 0
fi

status=0
if ! "$CLANG_FORMAT" --dry-run -Werror "${cpp[@]}" 2>/dev/null; then
  mapfile -t bad < <(for f in "${cpp[@]}"; do "$CLANG_FORMAT" --dry-run -Werror "$f" 2>/dev/null || echo "$f"; done)
  echo "[lint] C++ not formatted: ${bad[*]}" >&2
  status=1
fi
"${eslint[@]}" || status=1
if [ $status -ne 0 ]; then
  echo "[lint] to fix: npm run format (clang-format and eslint --fix); then fix by hand what ESLint still reports" >&2
  exit 1
fi
echo "[lint] C++ (${#cpp[@]} files) formatted; JavaScript passes ESLint"
