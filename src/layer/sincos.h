// sin and cos in double precision for the rotary angles, small enough for the wasm build: libc's
// versions bring Payne–Hanek reduction tables for arguments up to 1e308 (about 10 KB of code
// and data), while rotary angles are position·θ, ≤ 2^31 for a base ≥ 1. Cody–Waite reduction by π/2 in five
// parts of 21 bits (n·part is exact for |n| < 2^32, and the parts carry π/2 to 2^−105), then
// fdlibm's kernels on [−π/4, π/4]: within 3 ulp of the exact values for |x| < 2^31 (2.25
// measured by tests/cpp/test_rotary.cpp), and within 4e−11 absolute
// up to 2^52, far below the float32 rounding (2^−25) of the rotary tables.
#pragma once

#include <cmath>
#include <cstdint>

namespace attn::trig {

inline void sincos(double x, double* s, double* c) {
  constexpr double two_over_pi = 0x1.45f306dc9c883p-1;
  constexpr double pio2[5] = {0x1.921fbp+0, 0x1.5110bp-22, 0x1.18469p-44, 0x1.13198p-65, 0x1.45c06p-86};
  const double n = std::nearbyint(x * two_over_pi);
  // n·part is exact while n has at most 32 significant bits; beyond (|x| ≳ 6.7e9, e.g. a base
  // below 1) n is split into its high 32 bits and the rest, each product then exact.
  const double n_hi = std::fabs(n) < 0x1p32 ? n : std::ldexp(std::trunc(std::ldexp(n, -21)), 21);
  const double n_lo = n - n_hi;
  double r = x;
  for (double part : pio2) r = (r - n_hi * part) - n_lo * part;
  // fdlibm's __kernel_sin and __kernel_cos (minimax on [−π/4, π/4]).
  const double z = r * r;
  // clang-format off
  const double sr = r + r * z * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 +
                    z * (-1.98412698298579493134e-04 + z * (2.75573137070700676789e-06 +
                    z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))));
  const double cr = 1.0 - 0.5 * z + z * z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 +
                    z * (2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 +
                    z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
  switch (static_cast<std::int64_t>(n) & 3) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
  }
  // clang-format on
}

}  // namespace attn::trig
