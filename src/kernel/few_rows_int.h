// The few-rows kernel's integer loops for int8 and int4 caches (attention_forward.cpp drives
// them block by block, run by run):
//   - P·V for int8 and int4 values: the probabilities of a block of keys, times the values'
//     scales, quantised per row (int4: per row and block of 32 columns) to int16 (p' = p ·
//     vscale ≈ pscale · p16, |p16| ≤ 32767: the rounding, 2^-16 of the block's largest p', is
//     far below the values' own), then acc32[c] = Σ_j p16_j · v_j[c] exactly in int32 (kFewKeys
//     · 32767 · 128 < 2^31), and acc[c] += pscale · acc32[c] once per block. Two positions per
//     i32x4.dot_i16x8_s (pmaddwd): rows j and j+1 interleaved as they are loaded, [v_j[c],
//     v_j+1[c], …], so each 32-bit lane multiplies a pair of values by the pair of probabilities
//     [p16_j, p16_j+1] (one 32-bit splat): 8 multiply-adds an instruction where float32 takes 2,
//     and no conversion of V to float. Register tiles of R rows × 8T columns (8 int32
//     accumulators or fewer) run over the pairs of a sub-block of keys that stays in L1; each
//     tile reads its columns of the sub-block's V rows, the first tile from memory and the
//     others from L1.
//   - Q·Kᵀ for int4 keys: the queries quantised to int16 as for int8 keys (few_rows.h), each
//     block's 32 products exact in int32, then times the block's scale in float; in relaxed-SIMD
//     builds, to int8 for the byte dot product (16 multiply-adds an instruction).
//   - The float path int4 falls back to (rare: queries that cannot be quantised, probabilities
//     that are not finite), one decoded row at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernel/few_rows.h"
#include "kernel/kv_storage.h"
#include "runtime/simd.h"

namespace attn::few_rows {

// Largest p16 (the probabilities' int16 scale).
constexpr float kP16Max = 32767.0f;
// The smallest largest product the int16 quantisation takes: its scale, max / kP16Max, is then a
// normal float (full precision, and 1 / scale finite). Below it, the float path.
constexpr float kMinProductMax = kP16Max * std::numeric_limits<float>::min();
// Keys per sub-block of the integer P·V: its V rows stay in L1 while every tile reads them.
constexpr int kPairKeys = 32;

// Columns of a block's int32 accumulators per row (whole tiles of 32: every tile stores whole).
inline int acc32_ld(int cols) { return round_up(cols, 32); }

#if !defined(ATTN_SCALAR)
namespace detail {

inline __m128i splat_pair(const std::int16_t* p) {
#if defined(__EMSCRIPTEN__)
  return __m128i(wasm_v128_load32_splat(p));
#else
  std::int32_t x;
  std::memcpy(&x, p, sizeof x);
  return _mm_set1_epi32(x);
#endif
}

// Bytes [v_j[c], v_j+1[c], …] for 8 columns → two i16x8 of 4 columns × 2 positions each.
inline void widen_pairs(__m128i xy, __m128i& lo, __m128i& hi) { kv::widen_i8(xy, lo, hi); }

// acc[r][2u], acc[r][2u + 1] += pairs of rows a and b (columns c0 + 8u …) × the rows' weights.
template <int R, int T>
inline void pair_step(const std::int8_t* a, const std::int8_t* b, const __m128i* w, __m128i (&acc)[R][2 * T]) {
  if constexpr (T % 2 == 0) {
    ATTN_UNROLL for (int u = 0; u < T; u += 2) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 8 * u));
      const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 8 * u));
      __m128i v[4];
      widen_pairs(_mm_unpacklo_epi8(x, y), v[0], v[1]);
      widen_pairs(_mm_unpackhi_epi8(x, y), v[2], v[3]);
      ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 4; ++k) acc[r][2 * u + k] =
          _mm_add_epi32(acc[r][2 * u + k], _mm_madd_epi16(v[k], w[r]));
    }
  } else {
    ATTN_UNROLL for (int u = 0; u < T; ++u) {
      const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + 8 * u));
      const __m128i y = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 8 * u));
      __m128i v[2];
      widen_pairs(_mm_unpacklo_epi8(x, y), v[0], v[1]);
      ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2; ++k) acc[r][2 * u + k] =
          _mm_add_epi32(acc[r][2 * u + k], _mm_madd_epi16(v[k], w[r]));
    }
  }
}

// acc32[r·ld32 + c0 …+8T] += Σ_j p16[r·ldp + j] · v_j[c0 …+8T] over `len` keys of rows v (v_row
// apart), R rows: pairs of keys, then a last odd key (its partner's weight 0).
template <int R, int T>
inline void value_tile_i8(const std::int16_t* p16, std::ptrdiff_t ldp, int len, const std::int8_t* v,
                          std::ptrdiff_t v_row, std::int32_t* acc32, std::ptrdiff_t ld32) {
  __m128i acc[R][2 * T];
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2 * T; ++k) acc[r][k] =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc32 + r * ld32 + 4 * k));
  int j = 0;
  for (; j + 2 <= len; j += 2, v += 2 * v_row) {
    __m128i w[R];
    ATTN_UNROLL for (int r = 0; r < R; ++r) w[r] = splat_pair(p16 + r * ldp + j);
    pair_step<R, T>(v, v + v_row, w, acc);
  }
  if (j < len) {  // the last key alone: its partner is itself, weighted 0
    __m128i w[R];
    ATTN_UNROLL for (int r = 0; r < R; ++r) w[r] = _mm_set1_epi32(static_cast<std::uint16_t>(p16[r * ldp + j]));
    pair_step<R, T>(v, v, w, acc);
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2 * T; ++k)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(acc32 + r * ld32 + 4 * k), acc[r][k]);
}

// Every column of R rows: tiles of 8T columns while they fit, then of 8, then one column at a time.
template <int R, int T>
inline void value_rows_i8(const std::int16_t* p16, std::ptrdiff_t ldp, int len, const std::int8_t* v,
                          std::ptrdiff_t v_row, int cols, std::int32_t* acc32, std::ptrdiff_t ld32) {
  int c = 0;
  for (; c + 8 * T <= cols; c += 8 * T) value_tile_i8<R, T>(p16, ldp, len, v + c, v_row, acc32 + c, ld32);
  for (; c + 8 <= cols; c += 8) value_tile_i8<R, 1>(p16, ldp, len, v + c, v_row, acc32 + c, ld32);
  for (; c < cols; ++c)
    for (int r = 0; r < R; ++r) {
      std::int32_t sum = acc32[r * ld32 + c];
      ATTN_SCALAR_TAIL for (int j = 0; j < len; ++j) sum += std::int32_t(p16[r * ldp + j]) * v[j * v_row + c];
      acc32[r * ld32 + c] = sum;
    }
}

}  // namespace detail
#endif

// acc32[r·ld32 + c] += Σ_j p16[r·ldp + j] · v_j[c] for `rows` rows, `len` int8 V rows (v_row
// apart, read in place) and columns c < cols, exactly (int32; the caller keeps len ≤ kFewKeys).
// The keys go kPairKeys at a time, each sub-block read by every tile of rows × columns.
inline void values_i8(int rows, const std::int16_t* p16, std::ptrdiff_t ldp, int len, const std::int8_t* v,
                      std::ptrdiff_t v_row, int cols, std::int32_t* acc32, std::ptrdiff_t ld32) {
#if defined(ATTN_SCALAR)
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < len; ++j) {
      const std::int32_t pj = p16[r * ldp + j];
      for (int c = 0; c < cols; ++c) acc32[r * ld32 + c] += pj * v[j * v_row + c];
    }
#else
  using namespace detail;
  for (int j0 = 0; j0 < len; j0 += kPairKeys) {
    const int n = std::min(kPairKeys, len - j0);
    const std::int8_t* vb = v + j0 * v_row;
    for (int r0 = 0; r0 < rows; r0 += 4) {
      const std::int16_t* pr = p16 + r0 * ldp + j0;
      std::int32_t* ar = acc32 + r0 * ld32;
      switch (std::min(4, rows - r0)) {
        case 4: value_rows_i8<4, 1>(pr, ldp, n, vb, v_row, cols, ar, ld32); break;
        case 3: value_rows_i8<3, 1>(pr, ldp, n, vb, v_row, cols, ar, ld32); break;
        case 2: value_rows_i8<2, 2>(pr, ldp, n, vb, v_row, cols, ar, ld32); break;
        default: value_rows_i8<1, 4>(pr, ldp, n, vb, v_row, cols, ar, ld32); break;
      }
    }
  }
#endif
}

// The probabilities' side: p' = p · vscale for each key of a block (and each block of 32
// columns, for int4), quantised per row (and column block) to int16 against the largest p':
// p16 = round(p' / pscale), pscale = max p' / kP16Max. The value scales are gathered once per
// block of keys (value_scales), then each row's p' formed and quantised a vector at a time.

// vs[b·ld + j] = the scale of block b of the values of key start + j (slots through h), j < len:
// int8's one per row (b = 0), int4's one per block of 32 of its `cols` values.
template <class T>
inline void value_scales(const kv::Head& h, int start, int len, int cols, float* vs, std::ptrdiff_t ld) {
  kv::for_each_piece(h, start, start + len, [&](int j0, int j1, int s0) {
    float* out = vs + (j0 - start);
    const int n = j1 - j0;
    if constexpr (std::is_same_v<T, kv::Int4>) {
      const int blocks = kv::int4_blocks(cols);
      const auto* row =
          reinterpret_cast<const std::uint8_t*>(h.value_at_slot<kv::Int4>(s0)) + blocks * kv::kInt4BlockBytes;
      int b = 0;
#if !defined(ATTN_SCALAR)
      // Four blocks of four keys at a time: one 8-byte load a key, a 4×4 transpose to the layout.
      for (; b + 4 <= blocks; b += 4) {
        int t = 0;
        for (; t + 4 <= n; t += 4) {
          __m128 f[4];
          ATTN_UNROLL for (int i = 0; i < 4; ++i) {
            const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + (t + i) * h.value_row + 2 * b));
            f[i] = _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), x));  // bfloat16: the top half
          }
          _MM_TRANSPOSE4_PS(f[0], f[1], f[2], f[3]);
          ATTN_UNROLL for (int i = 0; i < 4; ++i) _mm_storeu_ps(out + (b + i) * ld + t, f[i]);
        }
        for (; t < n; ++t)
          for (int i = 0; i < 4; ++i)
            out[(b + i) * ld + t] =
                bfloat16::to_float(reinterpret_cast<const bfloat16::Bits*>(row + t * h.value_row)[b + i]);
      }
#endif
      for (; b < blocks; ++b) {
        ATTN_SCALAR_TAIL for (int t = 0; t < n; ++t) out[b * ld + t] =
            bfloat16::to_float(reinterpret_cast<const bfloat16::Bits*>(row + t * h.value_row)[b]);
      }
    } else {
      for (int t = 0; t < n; ++t) out[t] = h.value_scale_at_slot(s0 + t);
    }
  });
}

// out[j] = the scale of int8 key start + j (its slot through h), j < len.
inline void key_scales(const kv::Head& h, int start, int len, float* out) {
  kv::for_each_piece(h, start, start + len, [&](int j0, int j1, int s0) {
    const float* ks = h.key_scale + s0 * h.key_scale_row;
    for (int t = 0; t < j1 - j0; ++t) out[j0 - start + t] = ks[t * h.key_scale_row];
  });
}

// Raises m to max_j |p[j] · vs[j]| over j < len (a scale may be negative through the C++ API);
// false when some product is not finite (the caller then takes the float path, which carries the
// NaN or ∞).
inline bool product_max(const float* p, const float* vs, int len, float& m) {
  int j = 0;
  vfloat vm(m), check(0.0f);  // x − x: 0, or NaN for a product that is ±∞ or NaN
  for (; j + W <= len; j += W) {
    const vfloat x = simd::load(p + j) * simd::load(vs + j);
    vm = simd::vmax(vm, simd::vabs(x));
    check += x - x;
  }
  m = simd::reduce_max(vm);
  float c = simd::reduce_add(check);
  for (; j < len; ++j) {
    const float x = p[j] * vs[j];
    m = std::max(m, std::fabs(x));
    c += x - x;
  }
  return c == 0.0f;
}

// p16[j] = round(p[j] · vs[j] · inv), ties to even, for j < len (all within [−32767, 32767]).
inline void quantize_products(const float* p, const float* vs, int len, float inv, std::int16_t* p16) {
  int j = 0;
#if !defined(ATTN_SCALAR)
  const vfloat vi(inv);
  for (; j + 4 <= len; j += 4) {
    const vfloat x = simd::load(p + j) * simd::load(vs + j) * vi;
#if defined(__EMSCRIPTEN__)
    const __m128i q = __m128i(wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(v128_t(x.data))));
#else
    const __m128i q = _mm_cvtps_epi32(x);  // the default rounding: to nearest, ties to even
#endif
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p16 + j), _mm_packs_epi32(q, q));
  }
#endif
  ATTN_SCALAR_TAIL for (; j < len; ++j) p16[j] = static_cast<std::int16_t>(std::nearbyint(p[j] * vs[j] * inv));
}

// ---- int4 keys and values (kv::Int4: blocks of 32 values, a scale each) ----
//
// Q·Kᵀ: the query rows quantised to int16 (as for int8 keys), packed with head_dim padded to
// whole blocks; each block's 32 products summed exactly in int32 (8 per i32x4.dot_i16x8_s), then
// converted and multiplied by the block's scale into a float accumulator: no head_dim limit.
// P·V: the probabilities times each value block's scale, quantised per row and block of columns.

// s[r·LDP] = Σ_b scale_b · Σ_{d in block b} q16[r][d] · k[d] for the R rows of a packed tile
// (kQueryTile rows, [nb · 2][kQueryTile][16]) and one key row of nb blocks.
template <int R, int LDP>
inline void score_key_i4(const std::int16_t* qt, const kv::Int4* k, int nb, float* s) {
  const bfloat16::Bits* scales = reinterpret_cast<const bfloat16::Bits*>(k + nb * kv::kInt4BlockBytes);
  constexpr int kGroupStride = kQueryTile * 16;  // int16 between a tile's groups of 16 dims
#if defined(ATTN_SCALAR)
  float sum[R];
  ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] = 0.0f;
  for (int b = 0; b < nb; ++b) {
    const float scale = bfloat16::to_float(scales[b]);
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      std::int32_t dot = 0;
      for (int e = 0; e < kv::kInt4Block; ++e)
        dot += std::int32_t(qt[(2 * b + e / 16) * kGroupStride + r * 16 + e % 16]) *
               kv::int4_value(k, b * kv::kInt4Block + e);
      sum[r] += float(dot) * scale;
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) s[r * LDP] = sum[r];
#else
  vfloat acc[R];
  ATTN_UNROLL for (int r = 0; r < R; ++r) acc[r] = vfloat(0.0f);
  for (int b = 0; b < nb; ++b, qt += 2 * kGroupStride) {
    __m128i e[4];
    kv::int4_block(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + b * kv::kInt4BlockBytes)), e);
    const vfloat scale(bfloat16::to_float(scales[b]));
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const std::int16_t* q = qt + r * 16;
      const __m128i d01 = _mm_add_epi32(_mm_madd_epi16(e[0], _mm_loadu_si128(reinterpret_cast<const __m128i*>(q))),
                                        _mm_madd_epi16(e[1], _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8))));
      const __m128i d23 =
          _mm_add_epi32(_mm_madd_epi16(e[2], _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + kGroupStride))),
                        _mm_madd_epi16(e[3], _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + kGroupStride + 8))));
      acc[r] = simd::madd(vfloat(_mm_cvtepi32_ps(_mm_add_epi32(d01, d23))), scale, acc[r]);
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) s[r * LDP] = lane_sum(acc[r]);
#endif
}

// S[rows × keys] (rows LDP apart) for `keys` int4 key rows (k_row bytes apart) of n values and
// packed int16 queries (head_dim padded to whole blocks): each K row read whole for a tile of
// rows, again (from L1) for the next tile.
template <int LDP>
void scores_i4(int rows, const std::int16_t* qpack, const kv::Int4* k, std::ptrdiff_t k_row, int keys, int n,
               float* s) {
  const int nb = kv::int4_blocks(n), npad = nb * kv::kInt4Block;
  for (int j = 0; j < keys; ++j, k += k_row)
    for (int r0 = 0; r0 < rows; r0 += kQueryTile) {
      const std::int16_t* qt = qpack + (r0 / kQueryTile) * npad * kQueryTile;
      float* st = s + r0 * LDP + j;
      switch (std::min(kQueryTile, rows - r0)) {
        case 4: score_key_i4<4, LDP>(qt, k, nb, st); break;
        case 3: score_key_i4<3, LDP>(qt, k, nb, st); break;
        case 2: score_key_i4<2, LDP>(qt, k, nb, st); break;
        default: score_key_i4<1, LDP>(qt, k, nb, st); break;
      }
    }
}

// ---- int4 keys by the relaxed-SIMD byte dot (relaxed builds only) ----
//
// i16x8.relaxed_dot_i8x16_i7x16_s multiplies 16 signed bytes by 16 bytes of 7 bits and adds
// neighbouring products: 16 multiply-adds an instruction (x64: pmaddubsw, its unsigned operand
// the 7-bit one), where the int16 path takes 8. Its result is the same on every engine when the
// 7-bit operand's top bit is clear, which the keys give it: each nibble k ∈ [−8, 7] read as
// k + 8 ∈ [0, 15] (the nibble's top bit flipped, then a mask or a shift: 4 instructions a block
// where int4_block takes 7). The queries are quantised to int8 per row (q ≈ scale · q8, |q8| ≤
// 127: a rounding of 2^-8 of max |q|, below the keys' own 4-bit rounding of 2^-4 of their block's
// largest) and packed per block of 32 dims in the keys' byte order, with −8·Σ q8 (per int16 lane)
// to undo the +8: each lane sums 4 products, |Σ| ≤ 4 · 127 · 15 + 8 · 4 · 127 < 2^15.
#if defined(__wasm_relaxed_simd__) && !defined(ATTN_SCALAR)
constexpr bool kInt4ByteDot = true;
#else
constexpr bool kInt4ByteDot = false;
#endif
// Bytes of one query row's block: the two byte vectors, then the int16 correction.
constexpr int kQuery8Block = 48;

// false (out untouched) as kv::query_scale.
// Else row r of the packed queries (tiles of kQueryTile rows, each [blocks][kQueryTile][48 bytes]):
// bytes 2l and 2l + 1 of a block's first vector q8[l], q8[16 + l], of its second q8[8 + l], q8[24
// + l] (l < 8, zeros past n), as the key's nibbles lie in its bytes (kv::Int4), then the
// corrections −8 · (q8[l] + q8[8 + l] + q8[16 + l] + q8[24 + l]) as int16.
inline bool pack_query_i8(const float* q, int n, int r, std::uint8_t* packed, float& scale) {
  float inv;
  if (!kv::query_scale(q, n, 127.0f, scale, inv)) return false;
  const int blocks = kv::int4_blocks(n);
  std::uint8_t* tile = packed + std::ptrdiff_t(r / kQueryTile) * blocks * kQueryTile * kQuery8Block;
  for (int b = 0; b < blocks; ++b) {
    std::uint8_t* out = tile + (b * kQueryTile + r % kQueryTile) * kQuery8Block;
    std::int8_t q8[kv::kInt4Block] = {};
    for (int e = 0; e < kv::kInt4Block && b * kv::kInt4Block + e < n; ++e)
      q8[e] = static_cast<std::int8_t>(std::nearbyint(q[b * kv::kInt4Block + e] * inv));
    for (int l = 0; l < 8; ++l) {
      out[2 * l] = std::uint8_t(q8[l]);
      out[2 * l + 1] = std::uint8_t(q8[16 + l]);
      out[16 + 2 * l] = std::uint8_t(q8[8 + l]);
      out[16 + 2 * l + 1] = std::uint8_t(q8[24 + l]);
      const std::int16_t fix = std::int16_t(-8 * (q8[l] + q8[8 + l] + q8[16 + l] + q8[24 + l]));
      std::memcpy(out + 32 + 2 * l, &fix, sizeof fix);
    }
  }
  return true;
}

#if defined(__wasm_relaxed_simd__) && !defined(ATTN_SCALAR)
// s[r·LDP] = Σ_b scale_b · Σ_{d in block b} q8[r][d] · k[d] for the R rows of a packed tile
// (pack_query_i8) and one key row of nb blocks.
template <int R, int LDP>
inline void score_key_i4_i8(const std::uint8_t* qt, const kv::Int4* k, int nb, float* s) {
  const bfloat16::Bits* scales = reinterpret_cast<const bfloat16::Bits*>(k + nb * kv::kInt4BlockBytes);
  const v128_t flip = wasm_i8x16_splat(std::int8_t(0x88)), low = wasm_i8x16_splat(0x0f);
  vfloat acc[R];
  ATTN_UNROLL for (int r = 0; r < R; ++r) acc[r] = vfloat(0.0f);
  for (int b = 0; b < nb; ++b, qt += kQueryTile * kQuery8Block) {
    const v128_t u = wasm_v128_xor(wasm_v128_load(k + b * kv::kInt4BlockBytes), flip);  // k + 8 in each nibble
    const v128_t lo = wasm_v128_and(u, low), hi = wasm_u8x16_shr(u, 4);
    const vfloat scale(bfloat16::to_float(scales[b]));
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const std::uint8_t* q = qt + r * kQuery8Block;
      const v128_t d16 = wasm_i16x8_add(wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q), lo),
                                                       wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(q + 16), hi)),
                                        wasm_v128_load(q + 32));
      const v128_t d32 = wasm_i32x4_extadd_pairwise_i16x8(d16);
      acc[r] = simd::madd(vfloat(__m128(wasm_f32x4_convert_i32x4(d32))), scale, acc[r]);
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) s[r * LDP] = lane_sum(acc[r]);
}

// scores_i4 for queries packed by pack_query_i8.
template <int LDP>
void scores_i4_i8(int rows, const std::uint8_t* qpack, const kv::Int4* k, std::ptrdiff_t k_row, int keys, int n,
                  float* s) {
  const int nb = kv::int4_blocks(n);
  for (int j = 0; j < keys; ++j, k += k_row)
    for (int r0 = 0; r0 < rows; r0 += kQueryTile) {
      const std::uint8_t* qt = qpack + std::ptrdiff_t(r0 / kQueryTile) * nb * kQueryTile * kQuery8Block;
      float* st = s + r0 * LDP + j;
      switch (std::min(kQueryTile, rows - r0)) {
        case 4: score_key_i4_i8<4, LDP>(qt, k, nb, st); break;
        case 3: score_key_i4_i8<3, LDP>(qt, k, nb, st); break;
        case 2: score_key_i4_i8<2, LDP>(qt, k, nb, st); break;
        default: score_key_i4_i8<1, LDP>(qt, k, nb, st); break;
      }
    }
}
#endif

#if !defined(ATTN_SCALAR)
namespace detail {

// Blocks a and b of two V rows (16 bytes each) → for nibble level k (columns 8k … 8k + 7 of the
// block): [a[8k + l], b[8k + l]] for l < 4 (lo) and 4 ≤ l < 8 (hi), as int16 pairs.
template <int K>
inline void int4_pairs(__m128i lo16, __m128i hi16, __m128i& lo, __m128i& hi) {
  if constexpr (K == 3) {
    lo = _mm_srai_epi16(lo16, 12);
    hi = _mm_srai_epi16(hi16, 12);
  } else {
    lo = _mm_srai_epi16(_mm_slli_epi16(lo16, 12 - 4 * K), 12);
    hi = _mm_srai_epi16(_mm_slli_epi16(hi16, 12 - 4 * K), 12);
  }
}

// acc[r][2u], acc[r][2u + 1] += the pair of blocks a, b at nibble levels K0 + u (columns
// 8(K0 + u) …) × the rows' weights.
template <int R, int T, int K0>
inline void pair_step_i4(const kv::Int4* a, const kv::Int4* b, const __m128i* w, __m128i (&acc)[R][2 * T]) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i lo16 = _mm_unpacklo_epi16(x, y), hi16 = _mm_unpackhi_epi16(x, y);
  ATTN_UNROLL for (int u = 0; u < T; ++u) {
    __m128i v[2];
    if (K0 + u == 0) int4_pairs<0>(lo16, hi16, v[0], v[1]);
    if (K0 + u == 1) int4_pairs<1>(lo16, hi16, v[0], v[1]);
    if (K0 + u == 2) int4_pairs<2>(lo16, hi16, v[0], v[1]);
    if (K0 + u == 3) int4_pairs<3>(lo16, hi16, v[0], v[1]);
    ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2; ++k) acc[r][2 * u + k] =
        _mm_add_epi32(acc[r][2 * u + k], _mm_madd_epi16(v[k], w[r]));
  }
}

// acc32[r·ld32 + 8·K0 …+8T] += Σ_j p16[r·ldp + j] · v_j[8·K0 …+8T] over `len` keys of one block
// of columns (v: the block in the first row, v_row bytes apart), R rows.
template <int R, int T, int K0>
inline void value_tile_i4(const std::int16_t* p16, std::ptrdiff_t ldp, int len, const kv::Int4* v, std::ptrdiff_t v_row,
                          std::int32_t* acc32, std::ptrdiff_t ld32) {
  __m128i acc[R][2 * T];
  std::int32_t* a32 = acc32 + 8 * K0;
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2 * T; ++k) acc[r][k] =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(a32 + r * ld32 + 4 * k));
  int j = 0;
  for (; j + 2 <= len; j += 2, v += 2 * v_row) {
    __m128i w[R];
    ATTN_UNROLL for (int r = 0; r < R; ++r) w[r] = splat_pair(p16 + r * ldp + j);
    pair_step_i4<R, T, K0>(v, v + v_row, w, acc);
  }
  if (j < len) {  // the last key alone: its partner is itself, weighted 0
    __m128i w[R];
    ATTN_UNROLL for (int r = 0; r < R; ++r) w[r] = _mm_set1_epi32(static_cast<std::uint16_t>(p16[r * ldp + j]));
    pair_step_i4<R, T, K0>(v, v, w, acc);
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2 * T; ++k)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(a32 + r * ld32 + 4 * k), acc[r][k]);
}

// The 32 columns of one block for R rows: 4 / T tiles of T nibble levels.
template <int R, int T>
inline void value_block_i4(const std::int16_t* p16, std::ptrdiff_t ldp, int len, const kv::Int4* v,
                           std::ptrdiff_t v_row, std::int32_t* acc32, std::ptrdiff_t ld32) {
  if constexpr (T == 4) {
    value_tile_i4<R, 4, 0>(p16, ldp, len, v, v_row, acc32, ld32);
  } else if constexpr (T == 2) {
    value_tile_i4<R, 2, 0>(p16, ldp, len, v, v_row, acc32, ld32);
    value_tile_i4<R, 2, 2>(p16, ldp, len, v, v_row, acc32, ld32);
  } else {
    value_tile_i4<R, 1, 0>(p16, ldp, len, v, v_row, acc32, ld32);
    value_tile_i4<R, 1, 1>(p16, ldp, len, v, v_row, acc32, ld32);
    value_tile_i4<R, 1, 2>(p16, ldp, len, v, v_row, acc32, ld32);
    value_tile_i4<R, 1, 3>(p16, ldp, len, v, v_row, acc32, ld32);
  }
}

}  // namespace detail
#endif

// acc32[r·ld32 + c] += Σ_j p16[r·ldp + j] · q_j[c] for the 32 columns c of one block of `len`
// int4 V rows (v: that block of the first row, v_row bytes apart; q: the stored 4-bit values),
// `rows` rows, exactly (int32). The keys go kPairKeys at a time, as for int8.
inline void values_i4(int rows, const std::int16_t* p16, std::ptrdiff_t ldp, int len, const kv::Int4* v,
                      std::ptrdiff_t v_row, std::int32_t* acc32, std::ptrdiff_t ld32) {
#if defined(ATTN_SCALAR)
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < len; ++j) {
      const std::int32_t pj = p16[r * ldp + j];
      for (int c = 0; c < kv::kInt4Block; ++c) acc32[r * ld32 + c] += pj * kv::int4_value(v + j * v_row, c);
    }
#else
  using namespace detail;
  for (int j0 = 0; j0 < len; j0 += kPairKeys) {
    const int n = std::min(kPairKeys, len - j0);
    const kv::Int4* vb = v + j0 * v_row;
    for (int r0 = 0; r0 < rows; r0 += 4) {
      const std::int16_t* pr = p16 + r0 * ldp + j0;
      std::int32_t* ar = acc32 + r0 * ld32;
      switch (std::min(4, rows - r0)) {
        case 4: value_block_i4<4, 1>(pr, ldp, n, vb, v_row, ar, ld32); break;
        case 3: value_block_i4<3, 1>(pr, ldp, n, vb, v_row, ar, ld32); break;
        case 2: value_block_i4<2, 2>(pr, ldp, n, vb, v_row, ar, ld32); break;
        default: value_block_i4<1, 4>(pr, ldp, n, vb, v_row, ar, ld32); break;
      }
    }
  }
#endif
}

// The float path for int4 (queries that cannot be quantised: a non-finite element, or max |q| <
// 2^-100; probabilities that are not finite), rare, so kept simple and apart from the other
// storage types' loops: each K or V row decoded into `row` (dim floats), then one dot product or
// axpy per query row.
// s[i·lds + j] = q_i · k_j for the `rows` queries q[i] and keys [0, keys) (k_row bytes apart).
inline void scores_i4_float(int rows, const float* const* q, const kv::Int4* k, std::ptrdiff_t k_row, int keys, int n,
                            float* row, float* s, std::ptrdiff_t lds) {
  for (int j = 0; j < keys; ++j, k += k_row) {
    kv::int4_to_floats(k, n, row);
    for (int i = 0; i < rows; ++i) s[i * lds + j] = simd::dot(q[i], row, n);
  }
}

// acc[i·ld_acc + c] += p[i·ldp + j] · v_j[c] for the `rows` rows and values [0, len) (v_row bytes apart).
inline void values_i4_float(int rows, const float* p, std::ptrdiff_t ldp, const kv::Int4* v, std::ptrdiff_t v_row,
                            int len, int cols, float* row, float* acc, std::ptrdiff_t ld_acc) {
  for (int j = 0; j < len; ++j, v += v_row) {
    kv::int4_to_floats(v, cols, row);
    for (int i = 0; i < rows; ++i) {
      const float pj = p[i * ldp + j];
      float* a = acc + i * ld_acc;
      for (int c = 0; c < cols; ++c) a[c] += pj * row[c];
    }
  }
}

}  // namespace attn::few_rows
