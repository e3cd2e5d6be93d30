#!/usr/bin/env bash
# Makes web/fonts/math.woff2, the math font the demo page ships for its MathML formulas: a subset
# of DejaVu Math TeX Gyre (Debian's fonts-dejavu-extra; Bitstream Vera licence, see
# web/fonts/LICENSE) with just what the formulas of web/index.html use — their characters, the
# mathematical italic forms browsers set single letters in (𝑖 for i), the radical and the accents
# — and its OpenType MATH table (stretchy parentheses, radicals and sums, accent placement), which
# browsers need to lay out MathML. Run it again when a formula changes (the formulas test of
# tests/browser/quality.test.mjs says which character the font lacks); it needs Debian's python3
# with python3-fonttools and python3-brotli (PYTHON names another interpreter that has fontTools).
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf
PYTHON=${PYTHON:-/usr/bin/python3}
UNICODES=$("$PYTHON" - <<'PY'
import html, re
page = open('web/index.html', encoding='utf-8').read()
chars = set()
for formula in re.findall(r'<math.*?</math>', page, re.S):
    chars |= set(html.unescape(re.sub(r'<[^>]+>', '', formula))) - set(' \n\t')
# Single letters in <mi> are set in mathematical italic: a–z from U+1D44E (h is U+210E),
# A–Z from U+1D434, α–ω from U+1D6FC.
italic = {c: 0x1D44E + ord(c) - ord('a') for c in 'abcdefgijklmnopqrstuvwxyz'}
italic.update({'h': 0x210E}, **{c: 0x1D434 + ord(c) - ord('A') for c in 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'})
italic.update({chr(c): 0x1D6FC + c - 0x3B1 for c in range(0x3B1, 0x3CA)})
letters = {html.unescape(m) for m in re.findall(r'<mi(?![^>]*mathvariant="normal")[^>]*>([^<])</mi>', page)}
codes = {ord(c) for c in chars} | {italic[c] for c in letters if c in italic}
codes |= {0x221A, 0x0302, 0x0303, 0x02C6, 0x02DC}  # the radical msqrt draws; combining and spacing hat and tilde
print(','.join(f'U+{c:04X}' for c in sorted(codes)))
PY
)
"$PYTHON" -m fontTools.subset "$SOURCE" --unicodes="$UNICODES" --layout-features='*' --flavor=woff2 \
  --name-IDs='*' --output-file=web/fonts/math.woff2
echo "web/fonts/math.woff2: $(stat -c %s web/fonts/math.woff2) bytes"
