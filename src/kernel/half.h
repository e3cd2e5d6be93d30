// The two 16-bit float formats of the KV cache, <-> float32 by integer bit manipulation
// (WebAssembly has no 16-bit float instructions), one value at a time and W at a time, both with
// round to nearest, ties to even: used by the KV cache (storing) and the kernel (reading).
//   half:     IEEE binary16 (float16): overflow gives ±∞; NaN stays NaN (quiet); subnormals both ways.
//   bfloat16: the top 16 bits of a float32 (same exponent range), as PyTorch's c10::BFloat16
//             rounds: NaN becomes 0x7FC0, values past the largest bfloat16 round to ±∞;
//             widening is exact (a 16-bit shift).
#pragma once

#include <cstdint>
#include <cstring>

#include "runtime/simd.h"

namespace attn::half {

// The storage type of float16 elements known to hold no ±∞ or NaN (exponent 31): the same bits
// as std::uint16_t, read by the readers below that skip that case (kv_storage.h picks them when
// AttentionParams::kv_finite says so).
enum class Finite : std::uint16_t {};

// float16 elements known finite, read without the rebias: their float32 bit pattern (sign,
// exponent and mantissa moved into place), which is the value times 2^-112 exactly, normals and
// subnormals alike. Whoever reads them multiplies the other operand by kRebias instead (exact,
// where that stays finite): one multiply less per vector.
enum class FiniteRaw : std::uint16_t {};
constexpr float kRebias = 0x1p112f;

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Exponent and mantissa moved into float32 position and multiplied by 2^112 (the difference of
// the exponent biases): exact for normals and subnormals. Inf/NaN (exponent 31) get float32's
// all-ones exponent instead.
inline float to_float(std::uint16_t h) {
  const std::uint32_t em = static_cast<std::uint32_t>(h & 0x7fff) << 13;
  std::uint32_t u = float_to_bits(bits_to_float(em) * 0x1p112f);
  if ((h & 0x7c00) == 0x7c00) u = em | 0x7f800000u;
  return bits_to_float(u | (static_cast<std::uint32_t>(h & 0x8000) << 16));
}

// A finite half times 2^-112 (FiniteRaw's value): its bits moved into float32 position.
inline float to_float_raw(std::uint16_t h) {
  return bits_to_float((static_cast<std::uint32_t>(h & 0x8000) << 16) | (static_cast<std::uint32_t>(h & 0x7fff) << 13));
}

// After F. Giesen's float_to_half_fast3_rtne: subnormal results come from a float addition that
// rounds at the right bit; normal results round by adding 0xfff plus the lowest kept bit.
inline std::uint16_t from_float(float f) {
  std::uint32_t u = float_to_bits(f);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t o;
  if (u >= (143u << 23)) {  // ≥ 65536 (beyond half's range after rounding), Inf or NaN
    o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {  // below 2^-14: a half subnormal or zero
    const float denorm_magic = bits_to_float(((127u - 15u) + (23u - 10u) + 1u) << 23);
    o = float_to_bits(bits_to_float(u) + denorm_magic) - float_to_bits(denorm_magic);
  } else {
    const std::uint32_t odd = (u >> 13) & 1u;
    u += ((15u - 127u) << 23) + 0xfffu + odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

#if defined(ATTN_SCALAR)

inline simd::vfloat load(const std::uint16_t* p) { return to_float(*p); }
inline void load2(const std::uint16_t* p, simd::vfloat& lo, simd::vfloat& hi) {
  lo = to_float(p[0]);
  hi = to_float(p[1]);
}
inline void store(std::uint16_t* p, simd::vfloat v) { *p = from_float(v.x); }
inline simd::vfloat load_finite(const Finite* p) { return to_float(static_cast<std::uint16_t>(*p)); }
inline void load2_finite(const Finite* p, simd::vfloat& lo, simd::vfloat& hi) {
  lo = to_float(static_cast<std::uint16_t>(p[0]));
  hi = to_float(static_cast<std::uint16_t>(p[1]));
}
inline simd::vfloat load_finite_raw(const FiniteRaw* p) { return to_float_raw(static_cast<std::uint16_t>(*p)); }
inline void load2_finite_raw(const FiniteRaw* p, simd::vfloat& lo, simd::vfloat& hi) {
  lo = to_float_raw(static_cast<std::uint16_t>(p[0]));
  hi = to_float_raw(static_cast<std::uint16_t>(p[1]));
}

#else

using vint = xsimd::batch<std::int32_t>;
using simd::vfloat;

// W halves -> W floats.
inline vfloat load(const std::uint16_t* p) {
  static_assert(vfloat::size == 4, "one 64-bit load of halves per vector");
  const __m128i h = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const vint hv(h);
  const vint em = (hv & vint(0x7fff)) << 13;
  const vfloat finite = xsimd::bitwise_cast<vfloat>(em) * vfloat(0x1p112f);
  const vint special = em | vint(0x7f800000);
  const vint bits = xsimd::select((hv & vint(0x7c00)) == vint(0x7c00), special, xsimd::bitwise_cast<vint>(finite));
  return xsimd::bitwise_cast<vfloat>(bits | ((hv & vint(0x8000)) << 16));
}

// 2W halves -> 2W floats (lo: the first W), as to_float, working on the 16-bit lanes: the high
// half of each float32 is sign | exponent | top 7 mantissa bits (an arithmetic shift by 3 keeps
// the sign in bit 15; the mask clears the copies of it), the low half the other 3 mantissa bits;
// interleaved, that is the float32 pattern of sign · 2^(e−127) · 1.m, which times 2^112 is the
// value for normals and subnormals alike. Exponent 31 (∞, NaN) gets float32's all-ones
// exponent first, and stays ∞ or NaN. About half the instructions of two load()s.
inline void load2(const std::uint16_t* p, vfloat& lo, vfloat& hi) {
  static_assert(vfloat::size == 4, "one 128-bit load of halves per two vectors");
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i exponent = _mm_set1_epi16(0x7c00);
  const __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exponent), exponent);
  const __m128i top = _mm_or_si128(_mm_and_si128(_mm_srai_epi16(h, 3), _mm_set1_epi16(static_cast<short>(0x8fff))),
                                   _mm_and_si128(special, _mm_set1_epi16(0x7000)));
  const __m128i bottom = _mm_slli_epi16(h, 13);
  const vfloat scale(0x1p112f);
  lo = vfloat(_mm_castsi128_ps(_mm_unpacklo_epi16(bottom, top))) * scale;
  hi = vfloat(_mm_castsi128_ps(_mm_unpackhi_epi16(bottom, top))) * scale;
}

// As load() and load2() for halves that are not ±∞ or NaN, without the rebias (FiniteRaw's
// value, times 2^-112): each half into the top 16 bits of a 32-bit lane, shifted right by 3
// (arithmetic: the sign stays in bit 31), the copies of the sign masked off.
inline vfloat load_finite_raw(const FiniteRaw* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i bits = _mm_and_si128(_mm_srai_epi32(_mm_unpacklo_epi16(_mm_setzero_si128(), h), 3),
                                     _mm_set1_epi32(static_cast<int>(0x8fffe000u)));
  return vfloat(_mm_castsi128_ps(bits));
}

// 2W halves (no ±∞ or NaN) -> 2W floats times 2^-112 (lo: the first W): load2's 16-bit form
// without the exponent-31 case.
inline void load2_finite_raw(const FiniteRaw* p, vfloat& lo, vfloat& hi) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i top = _mm_and_si128(_mm_srai_epi16(h, 3), _mm_set1_epi16(static_cast<short>(0x8fff)));
  const __m128i bottom = _mm_slli_epi16(h, 13);
  lo = vfloat(_mm_castsi128_ps(_mm_unpacklo_epi16(bottom, top)));
  hi = vfloat(_mm_castsi128_ps(_mm_unpackhi_epi16(bottom, top)));
}

// The same times 2^112: the multiply form of to_float without its exponent-31 case. That case
// cost 4 of load2's 11 operations, and decode steps over a float16 cache are bound by them.
inline vfloat load_finite(const Finite* p) {
  return load_finite_raw(reinterpret_cast<const FiniteRaw*>(p)) * vfloat(kRebias);
}
inline void load2_finite(const Finite* p, vfloat& lo, vfloat& hi) {
  load2_finite_raw(reinterpret_cast<const FiniteRaw*>(p), lo, hi);
  lo *= vfloat(kRebias);
  hi *= vfloat(kRebias);
}

// W floats -> W halves, as from_float.
inline void store(std::uint16_t* p, vfloat f) {
  const vint all = xsimd::bitwise_cast<vint>(f);
  const vint sign = all & vint(static_cast<std::int32_t>(0x80000000u));
  const vint u = all ^ sign;  // |f|, as bits; compared as signed ints (all below 2^31)
  const vint big = xsimd::select(u > vint(0x7f800000), vint(0x7e00), vint(0x7c00));
  const vfloat magic = xsimd::bitwise_cast<vfloat>(vint(((127 - 15) + (23 - 10) + 1) << 23));
  const vint sub = xsimd::bitwise_cast<vint>(xsimd::bitwise_cast<vfloat>(u) + magic) - xsimd::bitwise_cast<vint>(magic);
  const vint odd = (u >> 13) & vint(1);
  const vint normal = (u + vint(static_cast<std::int32_t>((15u - 127u) << 23) + 0xfff) + odd) >> 13;
  vint o = xsimd::select(u < vint(113 << 23), sub, normal);
  o = xsimd::select(u >= vint(143 << 23), big, o);
  o = o | ((all >> 16) & vint(0x8000));
  // Pack the low 16 bits of each lane (all values fit in 16 bits unsigned).
  const __m128i packed = _mm_packus_epi32(static_cast<__m128i>(o), static_cast<__m128i>(o));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), packed);
}

#endif

}  // namespace attn::half

namespace attn::bfloat16 {

// The storage type of a bfloat16 element: its bits, as a type of its own, so the kernel's
// per-type readers (kv_storage.h) tell it from float16's std::uint16_t.
enum class Bits : std::uint16_t {};

inline float to_float(Bits b) { return half::bits_to_float(static_cast<std::uint32_t>(b) << 16); }

// Round to nearest, ties to even, on the bits: adding 0x7fff plus the lowest kept bit carries
// into the kept half exactly when the dropped half is above the midpoint (or at it, for an odd
// kept half); a carry out of the mantissa moves the exponent up, to ∞ past the largest finite.
inline Bits from_float(float f) {
  const std::uint32_t u = half::float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bits{0x7fc0};
  return static_cast<Bits>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if defined(ATTN_SCALAR)

inline simd::vfloat load(const Bits* p) { return to_float(*p); }
inline void load2(const Bits* p, simd::vfloat& lo, simd::vfloat& hi) {
  lo = to_float(p[0]);
  hi = to_float(p[1]);
}
inline void store(Bits* p, simd::vfloat v) { *p = from_float(v.x); }

#else

using vint = xsimd::batch<std::int32_t>;
using simd::vfloat;

// W bfloat16 -> W floats: each 16 bits into the top half of a 32-bit lane.
inline vfloat load(const Bits* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return vfloat(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h)));
}

// 2W bfloat16 -> 2W floats (lo: the first W): one interleave with zeros each.
inline void load2(const Bits* p, vfloat& lo, vfloat& hi) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  lo = vfloat(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h)));
  hi = vfloat(_mm_castsi128_ps(_mm_unpackhi_epi16(_mm_setzero_si128(), h)));
}

// W floats -> W bfloat16, as from_float.
inline void store(Bits* p, vfloat f) {
  const vint u = xsimd::bitwise_cast<vint>(f);
  // Wrapping 32-bit adds; the arithmetic shift's copies of the sign are masked off.
  const vint rounded = ((u + vint(0x7fff) + ((u >> 16) & vint(1))) >> 16) & vint(0xffff);
  const vint o = xsimd::select((u & vint(0x7fffffff)) > vint(0x7f800000), vint(0x7fc0), rounded);  // NaN
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(static_cast<__m128i>(o), static_cast<__m128i>(o)));
}

#endif

}  // namespace attn::bfloat16
