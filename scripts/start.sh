#!/usr/bin/env bash
# npm start: set up if needed, build the package if needed, serve the demo page.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh --wasm-only
exec node scripts/serve.mjs "$@"
