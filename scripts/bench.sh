#!/usr/bin/env bash
# npm run bench [-- --quick]: set up, build the package, run the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >&2
bash scripts/build.sh --wasm-only >&2
exec node scripts/bench.mjs "$@"
