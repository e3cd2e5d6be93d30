// The few vector primitives the kernel is written in, each with a scalar twin.
//
// `vfloat` is xsimd::batch<float> for the build's instruction set (SSE natively; under Emscripten
// `-msimd128 -msse4.1`, which Emscripten translates to WebAssembly SIMD128), or a one-lane scalar
// type when ATTN_SCALAR is defined. The kernel is written once against this header, so the
// scalar build exercises the same blocking logic with a vector width of 1.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

// Loops over a compile-time number of vectors (the micro-kernel's tiles, the K/V readers' vector
// groups) must be unrolled completely so each vector stays in a register, also in the wasm builds,
// which turn general loop unrolling off for size (-fno-unroll-loops): write them ATTN_UNROLL for.
// Scalar tails (a loop's last elements, fewer than a vector's worth, and the loops within them)
// stay scalar: clang would vectorise them into code larger than the loop that seldom or never runs.
// Write them ATTN_SCALAR_TAIL for.
#if defined(__clang__)
#define ATTN_UNROLL _Pragma("clang loop unroll(full)")
#define ATTN_SCALAR_TAIL _Pragma("clang loop vectorize(disable)")
#else
#define ATTN_UNROLL
#define ATTN_SCALAR_TAIL
#endif

#if !defined(ATTN_SCALAR)
#include <xsimd/xsimd.hpp>
#if defined(__EMSCRIPTEN__)
#include <wasm_simd128.h>
#endif
#endif

namespace attn::simd {

// Whether madd is one fused instruction (the relaxed-SIMD build; see madd below).
#if defined(__wasm_relaxed_simd__) && !defined(ATTN_SCALAR)
constexpr bool kFusedMadd = true;
#else
constexpr bool kFusedMadd = false;
#endif

#if defined(ATTN_SCALAR)

struct vfloat {
  static constexpr std::size_t size = 1;
  float x;
  vfloat() = default;
  vfloat(float v) : x(v) {}  // NOLINT: implicit like xsimd's broadcast constructor
  friend vfloat operator+(vfloat a, vfloat b) { return a.x + b.x; }
  friend vfloat operator-(vfloat a, vfloat b) { return a.x - b.x; }
  friend vfloat operator*(vfloat a, vfloat b) { return a.x * b.x; }
  vfloat& operator+=(vfloat b) {
    x += b.x;
    return *this;
  }
  vfloat& operator*=(vfloat b) {
    x *= b.x;
    return *this;
  }
};

inline vfloat load(const float* p) { return *p; }
inline void store(float* p, vfloat v) { *p = v.x; }
inline vfloat madd(vfloat a, vfloat b, vfloat c) { return a.x * b.x + c.x; }
inline vfloat vmax(vfloat a, vfloat b) { return a.x > b.x ? a : b; }
inline vfloat vabs(vfloat a) { return std::fabs(a.x); }
inline vfloat add_unless_inf(vfloat s, vfloat b) { return std::isinf(s.x) ? s : s.x + b.x; }
inline float reduce_max(vfloat v) { return v.x; }
inline float reduce_add(vfloat v) { return v.x; }
inline float lane_sum(vfloat a) { return a.x; }
inline void transpose(vfloat*) {}
inline void zip(vfloat a, vfloat b, vfloat& lo, vfloat& hi) { lo = a, hi = b; }

#else

using vfloat = xsimd::batch<float>;

inline vfloat load(const float* p) { return xsimd::load_unaligned(p); }
inline void store(float* p, vfloat v) { xsimd::store_unaligned(p, v); }
// Lane-wise max for finding a row's maximum. Under Emscripten _mm_max_ps becomes a compare and a
// select (2 dependent ops); WebAssembly's pseudo-max f32x4.pmax (b > a ? b : a) is one maxps.
// Either way a NaN in b is skipped and a NaN already in a stays.
inline vfloat vmax(vfloat a, vfloat b) {
#if defined(__EMSCRIPTEN__)
  return vfloat(static_cast<__m128>(wasm_f32x4_pmax(static_cast<v128_t>(a.data), static_cast<v128_t>(b.data))));
#else
  return xsimd::max(a, b);
#endif
}
// a·b + c. The relaxed-SIMD build (clang ≥ 16, -mrelaxed-simd) emits f32x4.relaxed_madd, which
// engines on FMA hardware fuse: one rounding, and one instruction in each dependency chain.
// Elsewhere a multiply and an add (SSE4.1 and SIMD128 have no FMA).
inline vfloat madd(vfloat a, vfloat b, vfloat c) {
#if defined(__wasm_relaxed_simd__)
  return vfloat(static_cast<__m128>(
      wasm_f32x4_relaxed_madd(static_cast<v128_t>(a.data), static_cast<v128_t>(b.data), static_cast<v128_t>(c.data))));
#else
  return a * b + c;
#endif
}
inline vfloat vabs(vfloat a) { return xsimd::abs(a); }
// s + b, except that a score already at ±∞ stays there (∞ − ∞ would be NaN).
inline vfloat add_unless_inf(vfloat s, vfloat b) {
  return xsimd::select(xsimd::abs(s) == vfloat(std::numeric_limits<float>::infinity()), s, s + b);
}
inline float reduce_add(vfloat v) { return xsimd::hadd(v); }
inline float reduce_max(vfloat v) {
  alignas(64) float lanes[vfloat::size];
  xsimd::store_aligned(lanes, v);
  float m = lanes[0];
  for (std::size_t i = 1; i < vfloat::size; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

// Lane sums, always in the order (x0 + x2) + (x1 + x3), as sum4 adds them: a key's score must
// not depend on the tile it fell in (a ring's wrap moves keys between tiles). Here, before the
// kernel's blocks, so the profiling builds (which make those noinline) still inline them.
inline float lane_sum(vfloat a) {
  const __m128 t = _mm_add_ps(a, _mm_movehl_ps(a, a));  // a0 + a2, a1 + a3
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// v[0..3] as the rows of a 4×4 matrix, transposed in place (packing Kᵀ panels).
inline void transpose(vfloat* v) {
  __m128 r0 = v[0], r1 = v[1], r2 = v[2], r3 = v[3];
  _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
  v[0] = vfloat(r0), v[1] = vfloat(r1), v[2] = vfloat(r2), v[3] = vfloat(r3);
}

// The lanes of a and b interleaved: lo = a0 b0 a1 b1, hi = a2 b2 a3 b3 (packing pairs of rows).
inline void zip(vfloat a, vfloat b, vfloat& lo, vfloat& hi) {
  lo = vfloat(_mm_unpacklo_ps(a, b));
  hi = vfloat(_mm_unpackhi_ps(a, b));
}

// [Σa, Σb, Σc, Σd] in lane_sum's order: a 4×4 transpose folded into the adds (9 instructions
// where four lane_sums take 16).
inline vfloat sum4(vfloat a, vfloat b, vfloat c, vfloat d) {
  const __m128 ab0 = _mm_unpacklo_ps(a, b), ab1 = _mm_unpackhi_ps(a, b);  // a0 b0 a1 b1 | a2 b2 a3 b3
  const __m128 cd0 = _mm_unpacklo_ps(c, d), cd1 = _mm_unpackhi_ps(c, d);
  const __m128 ab = _mm_add_ps(ab0, ab1), cd = _mm_add_ps(cd0, cd1);      // a02 b02 a13 b13 | c02 d02 c13 d13
  return vfloat(_mm_add_ps(_mm_movelh_ps(ab, cd), _mm_movehl_ps(cd, ab)));
}

#endif

constexpr int W = static_cast<int>(vfloat::size);

// x rounded up to a multiple of m: sizes padded to whole vectors, tiles or panels.
template <class T>
constexpr T round_up(T x, int m) {
  return (x + T(m) - 1) / T(m) * T(m);
}

// dst[0, n) = src[0, n), by vectors. Emscripten's memcpy (and std::copy) hands copies of 512
// bytes and more to JavaScript (emscripten_memcpy_big): per row of a kernel, that call cost more
// than the copy.
inline void copy(const float* src, int n, float* dst) {
  int c = 0;
  for (; c + W <= n; c += W) store(dst + c, load(src + c));
  ATTN_SCALAR_TAIL for (; c < n; ++c) dst[c] = src[c];
}

// a·b over n elements: 4 chains of vectors, then single vectors, then a scalar tail.
inline float dot(const float* a, const float* b, int n) {
  constexpr int S = 4;
  vfloat acc[S];
  ATTN_UNROLL for (int k = 0; k < S; ++k) acc[k] = vfloat(0.0f);
  int c = 0;
  for (; c + S * W <= n; c += S * W) {
    ATTN_UNROLL for (int k = 0; k < S; ++k) acc[k] = madd(load(a + c + k * W), load(b + c + k * W), acc[k]);
  }
  for (; c + W <= n; c += W) acc[0] = madd(load(a + c), load(b + c), acc[0]);
  ATTN_UNROLL for (int k = 1; k < S; ++k) acc[0] += acc[k];
  float sum = reduce_add(acc[0]);
  for (; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// 2^x ≈ 2^n · P(f) with n = round(x), f = x − n ∈ [−½, ½] and P a degree-5 polynomial for 2^f
// fitted to its relative error on [−½, ½] (9.1e-8, and < 1.9e-7 evaluated in float; Cephes'
// degree-6 exp2f is within 1e-7 at one multiply-add more per vector, a tenth of the exp pass).
// Built for softmax, where x = score − reference ≤ a few units (valid up to x < 128). x is first
// clamped to −127, where 2^n's exponent field is 0: x < −126.5 (including −∞, a masked key) gives
// exactly 0, so masked keys get no weight, and −126.5 ≤ x < −126 a subnormal; NaN stays NaN. (A
// clamp is one instruction where a compare and a select to 0 took four or five.)
//
// Rounding and 2^n use the 1.5·2^23 trick instead of float→int conversions, which have no
// WebAssembly SIMD equivalent with SSE semantics (Emscripten emulates _mm_cvttps_epi32 lane by
// lane, which made exp the slowest part of the kernel): t = x + 1.5·2^23 holds round(x) in its
// low mantissa bits, and shifting t's bits left by 23 moves them into the exponent field.
namespace exp2_coef {
constexpr float c1 = 6.931470036506653e-1f, c2 = 2.402224242687225e-1f, c3 = 5.550733581185341e-2f,
                c4 = 9.671512991189957e-3f, c5 = 1.326472382061184e-3f;
constexpr float lowest = -127.0f;
constexpr float round_magic = 12582912.0f;  // 1.5·2^23
constexpr std::int32_t exponent_bias = 127 << 23;
}  // namespace exp2_coef

inline float exp2_softmax(float x) {
  using namespace exp2_coef;
  x = x < lowest ? lowest : x;
  const float t = x + round_magic;
  const float n = t - round_magic;
  const float f = x - n;
  const float poly = 1.0f + f * (c1 + f * (c2 + f * (c3 + f * (c4 + f * c5))));
  std::uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits = (bits << 23) + exponent_bias;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return poly * scale;
}

#if defined(ATTN_SCALAR)
inline vfloat exp2_softmax(vfloat x) { return exp2_softmax(x.x); }
#else
inline vfloat exp2_softmax(vfloat x) {
  using namespace exp2_coef;
  using vint = xsimd::batch<std::int32_t>;
  // max(x, lowest) with a NaN x kept: WebAssembly's pseudo-max, SSE's maxps with x second.
#if defined(__EMSCRIPTEN__)
  x = vfloat(static_cast<__m128>(wasm_f32x4_pmax(static_cast<v128_t>(x.data), wasm_f32x4_splat(lowest))));
#else
  x = vfloat(_mm_max_ps(vfloat(lowest), x));
#endif
  const vfloat t = x + vfloat(round_magic);
  const vfloat n = t - vfloat(round_magic);
  const vfloat f = x - n;
  vfloat poly = vfloat(c5);
  poly = madd(poly, f, vfloat(c4));
  poly = madd(poly, f, vfloat(c3));
  poly = madd(poly, f, vfloat(c2));
  poly = madd(poly, f, vfloat(c1));
  poly = madd(poly, f, vfloat(1.0f));
  const vint bits = (xsimd::bitwise_cast<vint>(t) << 23) + vint(exponent_bias);
  return poly * xsimd::bitwise_cast<vfloat>(bits);
}
#endif

// tanh(x) as a rational function (Eigen's float tanh: odd degree-13 numerator over even degree-6
// denominator, input clamped to ±7.9053 where tanh rounds to ±1; relative error < 3e-7; |x| <
// 4e-4 returns x). For softcapped scores. NaN stays NaN.
namespace tanh_coef {
constexpr float clamp = 7.90531110763549805f, tiny = 0.0004f;
constexpr float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f, a5 = 1.48572235717979e-05f,
                a7 = 5.12229709037114e-08f, a9 = -8.60467152213735e-11f, a11 = 2.00018790482477e-13f,
                a13 = -2.76076847742355e-16f;
constexpr float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f, b4 = 1.18534705686654e-04f,
                b6 = 1.19825839466702e-06f;
}  // namespace tanh_coef

inline float tanh_rational(float x) {
  using namespace tanh_coef;
  if (std::fabs(x) < tiny) return x;
  x = x > clamp ? clamp : x < -clamp ? -clamp : x;
  const float x2 = x * x;
  const float num = x * (a1 + x2 * (a3 + x2 * (a5 + x2 * (a7 + x2 * (a9 + x2 * (a11 + x2 * a13))))));
  const float den = b0 + x2 * (b2 + x2 * (b4 + x2 * b6));
  return num / den;
}

#if defined(ATTN_SCALAR)
inline vfloat tanh_rational(vfloat x) { return tanh_rational(x.x); }
#else
inline vfloat tanh_rational(vfloat x) {
  using namespace tanh_coef;
#if defined(__EMSCRIPTEN__)
  // WebAssembly's pseudo-min/max (one instruction each, where _mm_min_ps/_mm_max_ps become a
  // compare and a select) keep a NaN x, and the polynomial carries it to t: no NaN select needed.
  const vfloat c(static_cast<__m128>(wasm_f32x4_pmin(
      wasm_f32x4_pmax(static_cast<v128_t>(x.data), wasm_f32x4_splat(-clamp)), wasm_f32x4_splat(clamp))));
#else
  const vfloat c = xsimd::min(xsimd::max(x, vfloat(-clamp)), vfloat(clamp));
#endif
  const vfloat x2 = c * c;
  vfloat num = madd(x2, vfloat(a13), vfloat(a11));
  num = madd(x2, num, vfloat(a9));
  num = madd(x2, num, vfloat(a7));
  num = madd(x2, num, vfloat(a5));
  num = madd(x2, num, vfloat(a3));
  num = madd(x2, num, vfloat(a1));
  num = num * c;
  vfloat den = madd(x2, vfloat(b6), vfloat(b4));
  den = madd(x2, den, vfloat(b2));
  den = madd(x2, den, vfloat(b0));
  const vfloat t = num / den;
#if defined(__EMSCRIPTEN__)
  return xsimd::select(xsimd::abs(x) < vfloat(tiny), x, t);
#else
  return xsimd::select(xsimd::abs(x) < vfloat(tiny), x, xsimd::select(x != x, x, t));
#endif
}
#endif

}  // namespace attn::simd
