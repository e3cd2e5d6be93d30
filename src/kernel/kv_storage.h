// How the kernel reads keys and values of each storage type (KvType): one (batch, kv head) at a
// time, converting in registers. The few-rows path (few_rows.h) reads the stored rows in place;
// the blocked path packs blocks of them into float32 panels (see attention_blocks.h). Adding a
// storage type means a Stored<T> specialisation here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel/attention.h"
#include "kernel/half.h"
#include "runtime/simd.h"

namespace attn::kv {

using simd::vfloat;
using simd::W;

// W stored elements -> W floats, and one element -> a float; and for the few-rows path's loops,
// the widest read of the type: kVectors vectors (kVectors·W elements) from one 128-bit load.
template <class T>
struct Stored;

template <>
struct Stored<float> {
  static constexpr int kVectors = 1;
  static vfloat load(const float* p) { return simd::load(p); }
  static void load_chunk(const float* p, vfloat* v) { v[0] = simd::load(p); }
  static float one(const float* p) { return *p; }
};

template <>
struct Stored<std::uint16_t> {
#if defined(ATTN_SCALAR)
  static constexpr int kVectors = 1;
  static void load_chunk(const std::uint16_t* p, vfloat* v) { v[0] = half::load(p); }
#else
  static constexpr int kVectors = 2;
  static void load_chunk(const std::uint16_t* p, vfloat* v) { half::load2(p, v[0], v[1]); }
#endif
  static vfloat load(const std::uint16_t* p) { return half::load(p); }
  static float one(const std::uint16_t* p) { return half::to_float(*p); }
};

// float16 with no ±∞ or NaN (AttentionParams::kv_finite): widened without that case.
template <>
struct Stored<half::Finite> {
#if defined(ATTN_SCALAR)
  static constexpr int kVectors = 1;
  static void load_chunk(const half::Finite* p, vfloat* v) { v[0] = half::load_finite(p); }
#else
  static constexpr int kVectors = 2;
  static void load_chunk(const half::Finite* p, vfloat* v) { half::load2_finite(p, v[0], v[1]); }
#endif
  static vfloat load(const half::Finite* p) { return half::load_finite(p); }
  static float one(const half::Finite* p) { return half::to_float(static_cast<std::uint16_t>(*p)); }
};

// The same read without the rebias (the value times 2^-112; see half::FiniteRaw).
template <>
struct Stored<half::FiniteRaw> {
#if defined(ATTN_SCALAR)
  static constexpr int kVectors = 1;
  static void load_chunk(const half::FiniteRaw* p, vfloat* v) { v[0] = half::load_finite_raw(p); }
#else
  static constexpr int kVectors = 2;
  static void load_chunk(const half::FiniteRaw* p, vfloat* v) { half::load2_finite_raw(p, v[0], v[1]); }
#endif
  static vfloat load(const half::FiniteRaw* p) { return half::load_finite_raw(p); }
  static float one(const half::FiniteRaw* p) { return half::to_float_raw(static_cast<std::uint16_t>(*p)); }
};

template <>
struct Stored<bfloat16::Bits> {
#if defined(ATTN_SCALAR)
  static constexpr int kVectors = 1;
  static void load_chunk(const bfloat16::Bits* p, vfloat* v) { v[0] = bfloat16::load(p); }
#else
  static constexpr int kVectors = 2;
  static void load_chunk(const bfloat16::Bits* p, vfloat* v) { bfloat16::load2(p, v[0], v[1]); }
#endif
  static vfloat load(const bfloat16::Bits* p) { return bfloat16::load(p); }
  static float one(const bfloat16::Bits* p) { return bfloat16::to_float(*p); }
};

#if !defined(ATTN_SCALAR)
// 16 int8 → their first and last 8, sign-extended to int16 (WebAssembly extends either half).
inline void widen_i8(__m128i b, __m128i& lo, __m128i& hi) {
#if defined(__EMSCRIPTEN__)
  lo = wasm_i16x8_extend_low_i8x16(b);
  hi = wasm_i16x8_extend_high_i8x16(b);
#else
  lo = _mm_cvtepi8_epi16(b);
  hi = _mm_cvtepi8_epi16(_mm_srli_si128(b, 8));
#endif
}
#endif

template <>
struct Stored<std::int8_t> {
#if defined(ATTN_SCALAR)
  static constexpr int kVectors = 1;
  static vfloat load(const std::int8_t* p) { return static_cast<float>(*p); }
  static void load_chunk(const std::int8_t* p, vfloat* v) { v[0] = load(p); }
#else
  static constexpr int kVectors = 4;
  static vfloat load(const std::int8_t* p) {
    std::int32_t four;
    std::memcpy(&four, p, sizeof four);
    return vfloat(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(four))));
  }
  // 16 int8 → 4 vectors: widened to 16 then 32 bits, converted.
  static void load_chunk(const std::int8_t* p, vfloat* v) {
    __m128i lo, hi;
    widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), lo, hi);
#if defined(__EMSCRIPTEN__)
    v[0] = vfloat(__m128(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo))));
    v[1] = vfloat(__m128(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo))));
    v[2] = vfloat(__m128(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi))));
    v[3] = vfloat(__m128(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi))));
#else
    v[0] = vfloat(_mm_cvtepi32_ps(_mm_cvtepi16_epi32(lo)));
    v[1] = vfloat(_mm_cvtepi32_ps(_mm_cvtepi16_epi32(_mm_srli_si128(lo, 8))));
    v[2] = vfloat(_mm_cvtepi32_ps(_mm_cvtepi16_epi32(hi)));
    v[3] = vfloat(_mm_cvtepi32_ps(_mm_cvtepi16_epi32(_mm_srli_si128(hi, 8))));
#endif
  }
#endif
  static float one(const std::int8_t* p) { return static_cast<float>(*p); }
};

// int4 (KvType::i4): symmetric 4-bit values with a bfloat16 scale per block of 32 along the row,
// x ≈ scale · q, q ∈ [−7, 7]. A row of n values is ceil(n / 32) blocks of 16 bytes, then their
// scales; value 8k + l of a block (k < 4, l < 8) is the two's-complement nibble k of the block's
// 16-bit lane l (little-endian bytes 2l and 2l + 1), so that shifting the block's 8 lanes gives
// its values in order, 8 at a time, as int16 (int4_block). A block past n holds zeros. Rows are
// addressed in bytes (Int4 is one byte).
enum class Int4 : std::uint8_t {};
constexpr int kInt4Block = 32;
constexpr int kInt4BlockBytes = 16;
inline int int4_blocks(int n) { return n / kInt4Block + (n % kInt4Block != 0); }
inline std::ptrdiff_t int4_row_bytes(int n) { return std::ptrdiff_t(int4_blocks(n)) * (kInt4BlockBytes + 2); }
// The scales of a row of n values: bfloat16 bits, one per block.
inline const bfloat16::Bits* int4_scales(const Int4* row, int n) {
  return reinterpret_cast<const bfloat16::Bits*>(row + std::ptrdiff_t(int4_blocks(n)) * kInt4BlockBytes);
}
// q of value e of a row.
inline int int4_value(const Int4* row, int e) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(row) + (e / kInt4Block) * kInt4BlockBytes + 2 * (e % 8);
  const int lane = b[0] | (b[1] << 8), nibble = (lane >> (4 * ((e % kInt4Block) / 8))) & 0xf;
  return nibble < 8 ? nibble : nibble - 16;
}
// Value e of a row of n values, scaled.
inline float int4_one(const Int4* row, int n, int e) {
  return float(int4_value(row, e)) * bfloat16::to_float(int4_scales(row, n)[e / kInt4Block]);
}
#if !defined(ATTN_SCALAR)
// A block's 16 bytes → its 32 values as int16, 8 at a time, in order: each nibble shifted to the
// top of its lane, then back down with the sign (7 shifts for 32 values).
inline void int4_block(__m128i x, __m128i (&e)[4]) {
  e[0] = _mm_srai_epi16(_mm_slli_epi16(x, 12), 12);
  e[1] = _mm_srai_epi16(_mm_slli_epi16(x, 8), 12);
  e[2] = _mm_srai_epi16(_mm_slli_epi16(x, 4), 12);
  e[3] = _mm_srai_epi16(x, 12);
}
#endif
// A row of n values as floats (the blocked path's packing and the few-rows path's fallback):
// whole blocks a vector at a time, the same products float(q) · scale as int4_one.
inline void int4_to_floats(const Int4* row, int n, float* out) {
  int e = 0;
#if !defined(ATTN_SCALAR)
  const bfloat16::Bits* scales = int4_scales(row, n);
  for (; e + kInt4Block <= n; e += kInt4Block) {
    __m128i q[4];
    int4_block(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + (e / kInt4Block) * kInt4BlockBytes)), q);
    const __m128 scale = _mm_set1_ps(bfloat16::to_float(scales[e / kInt4Block]));
    for (int k = 0; k < 4; ++k) {  // int16 → int32 (the sign from the top half), → float, times the scale
      const __m128 lo = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(q[k], q[k]), 16));
      const __m128 hi = _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(q[k], q[k]), 16));
      _mm_storeu_ps(out + e + 8 * k, _mm_mul_ps(lo, scale));
      _mm_storeu_ps(out + e + 8 * k + 4, _mm_mul_ps(hi, scale));
    }
  }
#endif
  for (; e < n; ++e) out[e] = int4_one(row, n, e);
}

// int8 keys in integers: a query row quantised to int16 (q ≈ scale · q16, |q16| ≤ 32767; its
// rounding, ≤ 2^-16 of max |q|, is far below the keys' own int8 rounding) makes each q·k one
// integer dot product — i32x4.dot_i16x8_s (pmaddwd), 9 instructions per 16 elements where
// converting the keys to float takes 23. Exact in int32 up to kMaxInt8Dot elements.
constexpr int kMaxInt8Dot = 512;  // 512 · 32767 · 127 < 2^31

// The symmetric scale that maps a query row's max |q| to `top` (q ≈ scale · integer): false when
// q has a non-finite element or is so small (max |q| < 2^-100) that its scale would lose
// precision; the caller then stays in float. inv multiplies q into the integers' range.
inline bool query_scale(const float* q, int n, float top, float& scale, float& inv) {
  float m = 0.0f;
  for (int c = 0; c < n; ++c) {
    if (!std::isfinite(q[c])) return false;
    m = std::max(m, std::fabs(q[c]));
  }
  if (m != 0.0f && m < 0x1p-100f) return false;
  scale = m / top;
  inv = m > 0.0f ? top / m : 0.0f;
  return true;
}

// false (out untouched) as query_scale.
inline bool quantize_i16(const float* q, int n, std::int16_t* out, float& scale) {
  float inv;
  if (!query_scale(q, n, 32767.0f, scale, inv)) return false;
  for (int c = 0; c < n; ++c) out[c] = static_cast<std::int16_t>(std::nearbyint(q[c] * inv));
  return true;
}

// Σ q16·k over n ≤ kMaxInt8Dot elements.
inline std::int32_t dot_i16_i8(const std::int16_t* q, const std::int8_t* k, int n) {
  int c = 0;
  std::int32_t sum = 0;
#if !defined(ATTN_SCALAR)
  __m128i a0 = _mm_setzero_si128(), a1 = _mm_setzero_si128();
  for (; c + 16 <= n; c += 16) {
    __m128i lo, hi;
    widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + c)), lo, hi);
    a0 = _mm_add_epi32(a0, _mm_madd_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c))));
    a1 = _mm_add_epi32(a1, _mm_madd_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + c + 8))));
  }
  __m128i a = _mm_add_epi32(a0, a1);
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
  a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
  sum = _mm_cvtsi128_si32(a);
#endif
  for (; c < n; ++c) sum += std::int32_t(q[c]) * k[c];
  return sum;
}

// How a Head's elements are read: KvType, with float16 split by AttentionParams::kv_finite.
enum class Storage { f32, f16, f16_finite, bf16, i8, i4 };

inline Storage storage(const AttentionParams& p) {
  switch (p.kv_type) {
    case KvType::f16: return p.kv_finite ? Storage::f16_finite : Storage::f16;
    case KvType::bf16: return Storage::bf16;
    case KvType::i8: return Storage::i8;
    case KvType::i4: return Storage::i4;
    default: return Storage::f32;
  }
}

// The K and V rows of one (batch, kv head), as stored (type erased: the typed readers below
// take the element type as a template argument). Row j of the logical key sequence lives in
// physical row ("slot") j, or j % ring for a ring buffer; the scales are 1 except for int8 (int4
// keeps its scales in its rows).
struct Head {
  Storage type = Storage::f32;
  const void* key = nullptr;
  const void* value = nullptr;
  std::ptrdiff_t key_row = 0, value_row = 0;
  const float* key_scale = nullptr;  // int8 only: per slot
  const float* value_scale = nullptr;
  std::ptrdiff_t key_scale_row = 0, value_scale_row = 0;
  int ring = 0;

  int slot(int j) const { return ring ? j % ring : j; }
  template <class T>
  const T* key_at_slot(int s) const {
    return static_cast<const T*>(key) + s * key_row;
  }
  template <class T>
  const T* value_at_slot(int s) const {
    return static_cast<const T*>(value) + s * value_row;
  }
  float key_scale_at_slot(int s) const { return key_scale ? key_scale[s * key_scale_row] : 1.0f; }
  float value_scale_at_slot(int s) const { return value_scale ? value_scale[s * value_scale_row] : 1.0f; }
};

// Calls fn(j0, j1, s0) for the contiguous physical pieces of logical keys [begin, end): keys
// j0..j1-1 are in slots s0..s0+(j1-j0)-1 (at most two pieces for a ring).
template <class Fn>
inline void for_each_piece(const Head& h, int begin, int end, Fn&& fn) {
  for (int j = begin; j < end;) {
    const int s = h.slot(j);
    const int n = h.ring ? std::min(end - j, h.ring - s) : end - j;
    fn(j, j + n, s);
    j += n;
  }
}

// Calls fn(T{}) with T the element type of `type` (float, uint16_t, half::Finite, bfloat16::Bits,
// int8_t or Int4).
template <class Fn>
inline void with_type(Storage type, Fn&& fn) {
  switch (type) {
    case Storage::f16: fn(std::uint16_t{}); break;
    case Storage::f16_finite: fn(half::Finite{}); break;
    case Storage::bf16: fn(bfloat16::Bits{}); break;
    case Storage::i8: fn(std::int8_t{}); break;
    case Storage::i4: fn(Int4{}); break;
    default: fn(float{}); break;
  }
}

// Bytes of the unit the strides count (int4's: a byte).
inline std::size_t element_bytes(KvType type) {
  return type == KvType::f32 ? 4 : type == KvType::i8 || type == KvType::i4 ? 1 : 2;
}

inline Head head(const AttentionParams& p, int b, int kvh) {
  Head h;
  h.type = storage(p);
  const std::size_t bytes = element_bytes(p.kv_type);
  const auto at = [bytes](const void* base, std::ptrdiff_t elements) {
    return static_cast<const void*>(static_cast<const char*>(base) + elements * static_cast<std::ptrdiff_t>(bytes));
  };
  h.key = at(p.key, b * p.k.batch + kvh * p.k.head);
  h.value = p.value ? at(p.value, b * p.v.batch + kvh * p.v.head) : nullptr;
  h.key_row = p.k.row;
  h.value_row = p.v.row;
  if (p.kv_type == KvType::i8) {
    h.key_scale = p.key_scale + b * p.ks.batch + kvh * p.ks.head;
    h.value_scale = p.value_scale ? p.value_scale + b * p.vs.batch + kvh * p.vs.head : nullptr;
    h.key_scale_row = p.ks.row;
    h.value_scale_row = p.vs.row;
  }
  h.ring = p.kv_ring;
  return h;
}

// max |k| over logical keys [begin, end) (an upper bound for int8, int4 and float16).
inline float key_abs_max(const Head& h, int begin, int end, int head_dim) {
  float m = 0.0f;
  if (begin >= end) return m;
  if (h.type == Storage::f16 || h.type == Storage::f16_finite) return 65504.0f;
  const auto rows = [&](auto t) {
    using T = decltype(t);
    for_each_piece(h, begin, end, [&](int j0, int j1, int s0) {
      for (int s = s0; s < s0 + (j1 - j0); ++s) {
        if constexpr (std::is_same_v<T, std::int8_t>) {
          m = std::max(m, 128.0f * std::abs(h.key_scale_at_slot(s)));
        } else if constexpr (std::is_same_v<T, Int4>) {
          const bfloat16::Bits* scales = int4_scales(h.key_at_slot<Int4>(s), head_dim);
          for (int b = 0; b < int4_blocks(head_dim); ++b)
            m = std::max(m, 8.0f * std::abs(bfloat16::to_float(scales[b])));
        } else {
          const T* k = h.key_at_slot<T>(s);
          vfloat vm(0.0f);
          int c = 0;
          for (; c + W <= head_dim; c += W) vm = simd::vmax(vm, simd::vabs(Stored<T>::load(k + c)));
          m = std::max(m, simd::reduce_max(vm));
          for (; c < head_dim; ++c) m = std::max(m, std::abs(Stored<T>::one(k + c)));
        }
      }
    });
  };
  with_type(h.type, rows);
  return m;
}

}  // namespace attn::kv
