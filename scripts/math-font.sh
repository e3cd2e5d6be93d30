#!/usr/bin/env bash
# Makes web/fonts/math.woff2, the math font the demo page ships for its MathML formulas: a subset
# of DejaVu Math TeX Gyre (Debian's fonts-dejavu-extra; Bitstream Vera licence, see
# web/fonts/LICENSE) with ASCII, Greek and the operators the formulas use, and its OpenType MATH
# table (stretchy parentheses, radicals and sums, accent placement), which browsers need to lay
# out MathML. Run it again when a formula needs a character the font lacks (the formulas test of
# tests/browser/quality.test.mjs says which); it needs Debian's python3 with python3-fonttools and
# python3-brotli (PYTHON names another interpreter that has fontTools).
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf
# ASCII; · ×; Greek; ′ ″; the invisible function application and times; … ∑ − √ ∼ ∂ ⋅; the
# combining hat and tilde and their spacing forms.
UNICODES="U+0020-007E,U+00B7,U+00D7,U+0391-03A9,U+03B1-03C9,U+2032,U+2033,U+2061,U+2062,U+2026,U+2211,U+2212,U+221A,U+223C,U+2202,U+22C5,U+0302,U+0303,U+02C6,U+02DC"
"${PYTHON:-/usr/bin/python3}" -m fontTools.subset "$SOURCE" --unicodes="$UNICODES" --layout-features='*' --flavor=woff2 \
  --name-IDs='*' --output-file=web/fonts/math.woff2
echo "web/fonts/math.woff2: $(stat -c %s web/fonts/math.woff2) bytes"
