// exp, log and powers in double precision for rotary frequencies and Adam's bias corrections,
// small enough for the wasm build: libc's pow brings 6 KB of tables (5 KB gzipped) to be
// correctly rounded. fdlibm's e_log.c and e_exp.c without their tables, within 1 ulp each;
// power(b, y) carries ln b and y·ln b in two doubles each (Dekker's exact product), so it stays
// within 1 ulp too where exp(y·log b) would lose |y·ln b| ulp: θ_c = base^(−2c/rotary_dim) is
// multiplied by positions up to 2^40 (tests/cpp/test_rotary.cpp measures all three).
// No operation here may be fused into an FMA (wasm and SSE4.1 have none, but a native build for a
// CPU with one could contract a·b + c and change the error terms): contraction is off below.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace attn::math {

// Contraction off: clang's pragma at the start of each function body (it ends with the body; wasm
// has no float_control push/pop for a file-wide one), GCC's optimize options around them.
#if defined(__clang__)
#define ATTN_NO_FMA _Pragma("clang fp contract(off)")
#else
#define ATTN_NO_FMA
#if defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif
#endif

struct Sum {
  double hi, lo;  // hi + lo, |lo| far below an ulp of hi
};

// ln x = hi + lo for x finite and > 0.
inline Sum log_sum(double x) {
  ATTN_NO_FMA
  constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  constexpr double lg1 = 6.666666666666735130e-01, lg2 = 3.999999999940941908e-01, lg3 = 2.857142874366239149e-01,
                   lg4 = 2.222219843214978396e-01, lg5 = 1.818357216161805012e-01, lg6 = 1.531383769920937332e-01,
                   lg7 = 1.479819860511658591e-01;
  int k;
  double m = std::frexp(x, &k);    // x = m·2^k, m in [0.5, 1)
  if (m < 0x1.6a09e667f3bcdp-1) {  // √2/2: m in [√2/2, √2)
    m *= 2;
    --k;
  }
  const double f = m - 1, s = f / (2 + f), z = s * s, w = z * z;
  const double r = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7))) + w * (lg2 + w * (lg4 + w * lg6));
  const double hfsq = 0.5 * f * f, dk = k;
  // ln m = f − q, q ≈ f²/2 < |f|/2; ln x = k·ln2_hi (exact: 32 + 11 bits) + ln m, |ln m| < 0.35 <
  // ln 2 unless k = 0. Each sum's rounding error is kept (Fast2Sum: the larger term first).
  const double q = hfsq - s * (hfsq + r), m_log = f - q, a = dk * ln2_hi, hi = a + m_log;
  return {hi, ((a - hi) + m_log) + (((f - m_log) - q) + dk * ln2_lo)};
}

// ln x for x ≥ 0 (log 0 = −∞).
inline double log(double x) {
  ATTN_NO_FMA
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (!(x < std::numeric_limits<double>::infinity())) return x;  // +∞, NaN
  const Sum l = log_sum(x);
  return l.hi + l.lo;
}

// e^(x + tail), |tail| far below an ulp of x (0 below the smallest subnormal's log, +∞ above the
// largest double's).
inline double exp(double x, double tail = 0) {
  ATTN_NO_FMA
  constexpr double over = 7.09782712893383973096e+02, under = -7.45133219101941108420e+02;
  constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10,
                   inv_ln2 = 1.44269504088896338700e+00;
  constexpr double p1 = 1.66666666666666019037e-01, p2 = -2.77777777770155933842e-03, p3 = 6.61375632143793436117e-05,
                   p4 = -1.65339022054652515390e-06, p5 = 4.13813679705723846039e-08;
  if (x != x) return x;
  if (x > over) return std::numeric_limits<double>::infinity();
  if (x < under) return 0;
  const double k = std::nearbyint(x * inv_ln2);  // x = k·ln 2 + r, |r| ≤ ln 2 / 2
  const double hi = x - k * ln2_hi, lo = k * ln2_lo - tail, r = hi - lo, z = r * r;
  const double c = r - z * (p1 + z * (p2 + z * (p3 + z * (p4 + z * p5))));
  const double y = 1 - ((lo - (r * c) / (2 - c)) - hi);
  const int n = static_cast<int>(k);
  if (n < -1022 || n > 1023) return std::ldexp(y, n);  // a subnormal or infinite result
  // y·2^n with 2^n built from its bits: ldexp is a libc call, and this runs per frequency.
  const std::uint64_t bits = static_cast<std::uint64_t>(n + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// a·b = hi + lo exactly (Dekker), for |a·b| far from overflow.
inline Sum product(double a, double b) {
  ATTN_NO_FMA
  auto split = [](double v) {
    ATTN_NO_FMA
    const double c = 134217729.0 * v, hi = c - (c - v);  // 2^27 + 1: v's top 26 bits, and the rest
    return Sum{hi, v - hi};
  };
  const Sum x = split(a), y = split(b);
  const double p = a * b;
  return {p, ((x.hi * y.hi - p) + x.hi * y.lo + x.lo * y.hi) + x.lo * y.lo};
}

// e^(exponent·ln_base), for ln_base = log_sum(base): base^exponent.
inline double power_of(const Sum& ln_base, double exponent) {
  ATTN_NO_FMA
  const Sum t = product(exponent, ln_base.hi);
  return exp(t.hi, t.lo + exponent * ln_base.lo);
}

// base^exponent for base ≥ 0 finite and a finite exponent (0^y = 0 for y > 0, 0^0 = 1, as pow).
inline double power(double base, double exponent) {
  ATTN_NO_FMA
  if (base == 0) return exponent > 0 ? 0 : exponent == 0 ? 1 : std::numeric_limits<double>::infinity();
  return power_of(log_sum(base), exponent);
}

#if !defined(__clang__) && defined(__GNUC__)
#pragma GCC pop_options
#endif
#undef ATTN_NO_FMA

}  // namespace attn::math
