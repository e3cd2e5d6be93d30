// The few-rows kernel's loops: a few query rows against K rows (S = Q·Kᵀ) and V rows
// (acc += P·V), for a kv head whose query rows are few (a decode step's heads of one group, a
// speculative verify's few positions), where packing all of K and V into panels, as the blocked
// path does, would cost more than it saves. attention_forward.cpp drives them block by block.
//
// Three facts of the machines this runs on shape them:
//   - Memory streams one row at a time. Reading two or more adjacent K (or V) rows side by side
//     — a tile of keys, or a tile of value columns across a block of keys — streamed at well
//     under half the speed of reading each row whole before the next (134 MiB of 512-byte rows,
//     native SSE: 24 GB/s one at a time, 9-11 GB/s two or more side by side). Rows that come
//     from memory are only ever read whole, in order.
//   - V8 issues every load of a loop iteration before its arithmetic: an iteration's loaded
//     vectors and its accumulators must fit its 15 vector registers together, or they spill (8
//     accumulators of one key spilled, and ran 1.3× slower than 4).
//   - V8 computes every wasm address it loads from (an add per pointer and step, and a stack
//     check per iteration): a loop does best with few pointers and several vectors at constant
//     offsets from each, which the layouts below give it.
// Hence, for one query row, K and V are read in place in their storage type (kv_storage.h's
// readers) by the one-row loops, 4 vectors a step. For more rows, the driver first copies a block
// of K (then of V) rows into L1 as floats, in order (converting each element once, and laying K
// out in groups of kGroup keys), and register tiles of rows × keys (or rows × value columns)
// read it from there. int8 keys are read in place by integer dot products for any number of rows
// (for one row, four short keys at a time: they are one run of memory).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernel/kv_storage.h"
#include "runtime/simd.h"

namespace attn::few_rows {

using kv::Stored;
using simd::lane_sum;
#if !defined(ATTN_SCALAR)
using simd::sum4;
#endif
using simd::round_up;
using simd::vfloat;
using simd::W;

// Query rows per tile (their packed queries interleave, see pack_queries), and keys per group of
// a staged K block (see stage_keys).
constexpr int kQueryTile = 4;
constexpr int kGroup = 4;

// ---- one query row, K and V in place ----

// Vectors per step of the one-row loops: 4, or one widest read of T if that is more.
template <class T>
constexpr int kRowStep = Stored<T>::kVectors < 4 ? 4 : Stored<T>::kVectors;

// s[j] = q · k_j over n elements for `keys` K rows of type T, k_row apart: each row read whole,
// kRowStep accumulators (a step's loads and the accumulators fit V8's registers), summed at the
// end.
template <class T>
void score_row(const float* q, const T* k, std::ptrdiff_t k_row, int keys, int n, float* s) {
  constexpr int V = Stored<T>::kVectors, U = kRowStep<T>;
  for (int j = 0; j < keys; ++j, k += k_row) {
    vfloat acc[U];
    ATTN_UNROLL for (int u = 0; u < U; ++u) acc[u] = vfloat(0.0f);
    int d = 0;
    for (; d + U * W <= n; d += U * W) {
      vfloat kv[U];
      ATTN_UNROLL for (int u = 0; u < U; u += V) Stored<T>::load_chunk(k + d + u * W, kv + u);
      ATTN_UNROLL for (int u = 0; u < U; ++u) acc[u] = simd::madd(simd::load(q + d + u * W), kv[u], acc[u]);
    }
    for (; d + W <= n; d += W) acc[0] = simd::madd(simd::load(q + d), Stored<T>::load(k + d), acc[0]);
    ATTN_UNROLL for (int u = 1; u < U; ++u) acc[0] += acc[u];
    float sum = lane_sum(acc[0]);
    for (; d < n; ++d) sum += q[d] * Stored<T>::one(k + d);
    s[j] = sum;
  }
}

// acc[c] += Σ_j p[j] · v_j[c] over c < cols for `len` V rows of type T, v_row apart: each row
// read whole, kRowStep vectors a step, the accumulator row (in L1) updated in place.
template <class T>
void value_row(const float* p, int len, const T* v, std::ptrdiff_t v_row, int cols, float* acc) {
  constexpr int V = Stored<T>::kVectors, U = kRowStep<T>;
  for (int j = 0; j < len; ++j, v += v_row) {
    const vfloat pj(p[j]);
    int c = 0;
    for (; c + U * W <= cols; c += U * W) {
      vfloat x[U];
      ATTN_UNROLL for (int u = 0; u < U; u += V) Stored<T>::load_chunk(v + c + u * W, x + u);
      ATTN_UNROLL for (int u = 0; u < U; ++u)
          simd::store(acc + c + u * W, simd::madd(pj, x[u], simd::load(acc + c + u * W)));
    }
    for (; c + W <= cols; c += W) simd::store(acc + c, simd::madd(pj, Stored<T>::load(v + c), simd::load(acc + c)));
    for (; c < cols; ++c) acc[c] += p[j] * Stored<T>::one(v + c);
  }
}

// ---- several query rows, over a block of float rows staged in L1 ----
//
// Packed queries: tiles of kQueryTile rows, each [dpad / W][kQueryTile][W] (dpad = head_dim
// rounded up to W, zeros past it and in a last tile's missing rows), so a step's query vectors
// sit at constant offsets. Staged K: groups of kGroup keys, each [dpad / W][kGroup][W] (zeros
// past head_dim and past the block's last key). Staged V: [key][vpad] (vpad: value_dim rounded
// up to the accumulators' width, zeros past value_dim). Probabilities: rows LDP apart.

// The rows' queries times `factor`, packed.
inline void pack_queries(int rows, const float* const* q, int n, float factor, float* out) {
  const int dpad = round_up(n, W);
  for (int t = 0; t * kQueryTile < rows; ++t, out += dpad * kQueryTile)
    for (int r = 0; r < kQueryTile; ++r) {
      const float* src = t * kQueryTile + r < rows ? q[t * kQueryTile + r] : nullptr;
      for (int d = 0; d < dpad; ++d)
        out[(d / W) * kQueryTile * W + r * W + d % W] = src && d < n ? src[d] * factor : 0.0f;
    }
}

// Staged K row `key` of the block (element d at its group's offset), from a row of type T.
template <class T>
inline void stage_key(const T* src, float scale, int n, int key, float* block) {
  const int dpad = round_up(n, W);
  float* g = block + (key / kGroup) * dpad * kGroup + (key % kGroup) * W;
  const vfloat vs(scale);
  int d = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; d + W <= n; d += W) simd::store(g + d * kGroup, simd::load(src + d));
  } else {
    for (; d + W <= n; d += W) simd::store(g + d * kGroup, Stored<T>::load(src + d) * vs);
  }
  for (; d < dpad; ++d) g[(d / W) * kGroup * W + d % W] = d < n ? Stored<T>::one(src + d) * scale : 0.0f;
}

// Zeros for the keys [len, round_up(len, kGroup)) of a staged K block.
inline void stage_key_padding(int len, int n, float* block) {
  const int dpad = round_up(n, W);
  for (int key = len; key % kGroup != 0; ++key) {
    float* g = block + (key / kGroup) * dpad * kGroup + (key % kGroup) * W;
    for (int d = 0; d < dpad; d += W) simd::store(g + d * kGroup, vfloat(0.0f));
  }
}

// Staged V row `key` (vpad floats), from a row of type T.
template <class T>
inline void stage_value(const T* src, float scale, int cols, int vpad, int key, float* block) {
  float* dst = block + static_cast<std::ptrdiff_t>(key) * vpad;
  const vfloat vs(scale);
  int c = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; c + W <= cols; c += W) simd::store(dst + c, simd::load(src + c));
  } else {
    for (; c + W <= cols; c += W) simd::store(dst + c, Stored<T>::load(src + c) * vs);
  }
  for (; c < vpad; ++c) dst[c] = c < cols ? Stored<T>::one(src + c) * scale : 0.0f;
}

// s[r·LDP + c] = Σ_d q·k for the R rows of a query tile and keys c0 … c0 + C − 1 of a group.
template <int R, int C, int LDP>
inline void score_tile(const float* qt, const float* group, int c0, int dpad, float* s) {
  vfloat acc[R][C];
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int c = 0; c < C; ++c) acc[r][c] = vfloat(0.0f);
  const float* k = group + c0 * W;
  for (int d = 0; d < dpad; d += W, qt += kQueryTile * W, k += kGroup * W) {
    vfloat kv[C];
    ATTN_UNROLL for (int c = 0; c < C; ++c) kv[c] = simd::load(k + c * W);
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const vfloat qv = simd::load(qt + r * W);
      ATTN_UNROLL for (int c = 0; c < C; ++c) acc[r][c] = simd::madd(qv, kv[c], acc[r][c]);
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) {
#if !defined(ATTN_SCALAR)
    if constexpr (C == 4) {
      simd::store(s + r * LDP + c0, sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
      continue;
    }
#endif
    ATTN_UNROLL for (int c = 0; c < C; ++c) s[r * LDP + c0 + c] = lane_sum(acc[r][c]);
  }
}

template <int R, int LDP>
inline void score_groups(const float* qt, const float* k, int keys, int n, float* s) {
  constexpr int C = R <= 2 ? 4 : 2;  // 8 accumulators (6 for 3 rows): at most 14 registers a step
  const int dpad = round_up(n, W);
  for (int j = 0; j < keys; j += kGroup) {
    const float* group = k + (j / kGroup) * dpad * kGroup;
    ATTN_UNROLL for (int c0 = 0; c0 < kGroup; c0 += C) score_tile<R, C, LDP>(qt, group, c0, dpad, s + j);
  }
}

// S[rows × keys] (rows LDP apart) = Q·Kᵀ from packed queries and a staged K block; the scores of
// the padding keys past `keys` (up to a whole group) are written too, and are zeros.
template <int LDP>
void scores(int rows, const float* qpack, const float* k, int keys, int n, float* s) {
  const int dpad = round_up(n, W);
  for (int r0 = 0; r0 < rows; r0 += kQueryTile) {
    const float* qt = qpack + (r0 / kQueryTile) * dpad * kQueryTile;
    float* st = s + r0 * LDP;
    switch (std::min(kQueryTile, rows - r0)) {
      case 4: score_groups<4, LDP>(qt, k, keys, n, st); break;
      case 3: score_groups<3, LDP>(qt, k, keys, n, st); break;
      case 2: score_groups<2, LDP>(qt, k, keys, n, st); break;
      default: score_groups<1, LDP>(qt, k, keys, n, st); break;
    }
  }
}

// acc[r·ld_acc + (0 … N·W)] += Σ_j p[r·LDP + j] · v[j·vpad + (0 … N·W)] over keys j < len.
template <int R, int N, int LDP>
inline void value_tile(const float* p, int len, const float* v, int vpad, float* acc, std::ptrdiff_t ld_acc) {
  vfloat a[R][N];
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int c = 0; c < N; ++c) a[r][c] =
      simd::load(acc + r * ld_acc + c * W);
  for (int j = 0; j < len; ++j, v += vpad, ++p) {
    vfloat x[N];
    ATTN_UNROLL for (int c = 0; c < N; ++c) x[c] = simd::load(v + c * W);
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const vfloat pj(p[r * LDP]);
      ATTN_UNROLL for (int c = 0; c < N; ++c) a[r][c] = simd::madd(pj, x[c], a[r][c]);
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int c = 0; c < N; ++c)
      simd::store(acc + r * ld_acc + c * W, a[r][c]);
}

// Value columns per tile: 8 accumulators (6 for 3 rows), at most 14 registers a step; the
// staged V rows and the accumulators are this many vectors wide.
template <int R>
constexpr int kValueVectors = R <= 2 ? 4 : 2;
constexpr int kValueColumns = 4 * W;  // the widest tile's columns: vpad is a multiple of it

template <int R, int LDP>
inline void value_columns(const float* p, int len, const float* v, int vpad, float* acc, std::ptrdiff_t ld_acc) {
  constexpr int N = kValueVectors<R>;
  for (int c = 0; c < vpad; c += N * W) value_tile<R, N, LDP>(p, len, v + c, vpad, acc + c, ld_acc);
}

// acc[rows × vpad] (rows ld_acc apart) += P·V: probabilities (rows LDP apart) over a staged V
// block of `len` rows.
template <int LDP>
void values(int rows, const float* p, int len, const float* v, int vpad, float* acc, std::ptrdiff_t ld_acc) {
  for (int r0 = 0; r0 < rows; r0 += kQueryTile) {
    const float* pt = p + r0 * LDP;
    float* at = acc + r0 * ld_acc;
    switch (std::min(kQueryTile, rows - r0)) {
      case 4: value_columns<4, LDP>(pt, len, v, vpad, at, ld_acc); break;
      case 3: value_columns<3, LDP>(pt, len, v, vpad, at, ld_acc); break;
      case 2: value_columns<2, LDP>(pt, len, v, vpad, at, ld_acc); break;
      default: value_columns<1, LDP>(pt, len, v, vpad, at, ld_acc); break;
    }
  }
}

// ---- int8 keys in place, any number of rows ----

// Queries quantised to int16 (kv::quantize_i16), packed like the float queries but 16 at a
// time: tiles of kQueryTile rows, each [npad / 16][kQueryTile][16] (npad = head_dim rounded up to
// 16, zeros past it). Puts row `row` (n values) in place; `out` was zeroed.
inline void pack_query_i16(const std::int16_t* q16, int row, int n, std::int16_t* out) {
  const int npad = round_up(n, 16);
  out += (row / kQueryTile) * npad * kQueryTile + (row % kQueryTile) * 16;
  for (int d = 0; d < n; ++d) out[(d / 16) * kQueryTile * 16 + d % 16] = q16[d];
}

// s[r·LDP] = Σ q16·k for the R rows of a packed tile and one int8 key, in int32 (exact up to
// kv::kMaxInt8Dot elements), 8 multiply-adds per i32x4.dot_i16x8_s; as floats. The key is read
// up to n only (in place): its last partial 16 go element by element.
template <int R, int LDP>
inline void score_key_i8(const std::int16_t* qt, const std::int8_t* k, int n, float* s) {
  std::int32_t sum[R];
  int d = 0;
#if defined(ATTN_SCALAR)
  ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] = 0;
#else
  __m128i acc[R];
  ATTN_UNROLL for (int r = 0; r < R; ++r) acc[r] = _mm_setzero_si128();
  for (; d + 16 <= n; d += 16, qt += kQueryTile * 16) {
    __m128i lo, hi;
    kv::widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + d)), lo, hi);
    ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qt + r * 16));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qt + r * 16 + 8));
      acc[r] = _mm_add_epi32(acc[r], _mm_add_epi32(_mm_madd_epi16(lo, q0), _mm_madd_epi16(hi, q1)));
    }
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) {
    __m128i a = acc[r];
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(1, 0, 3, 2)));
    a = _mm_add_epi32(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
    sum[r] = _mm_cvtsi128_si32(a);
  }
#endif
  for (int e = d; e < n; ++e)  // qt is at d's group of 16
    ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] +=
        std::int32_t(qt[(e - d) / 16 * kQueryTile * 16 + r * 16 + (e - d) % 16]) * k[e];
  ATTN_UNROLL for (int r = 0; r < R; ++r) s[r * LDP] = float(sum[r]);
}

#if !defined(ATTN_SCALAR)
// [Σ q16·k_0, …, Σ q16·k_3] in int32 for four int8 keys (k_row apart) and row 0 of a packed
// tile: score_key_i8's sums, four accumulators sharing the query's loads, gathered by a 4×4
// transpose folded into the adds (integer adds are exact in any order).
inline __m128i score_keys_i8(const std::int16_t* qt, const std::int8_t* k, std::ptrdiff_t k_row, int n) {
  __m128i acc[4];
  ATTN_UNROLL for (int g = 0; g < 4; ++g) acc[g] = _mm_setzero_si128();
  int d = 0;
  for (; d + 16 <= n; d += 16, qt += kQueryTile * 16) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qt));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qt + 8));
    ATTN_UNROLL for (int g = 0; g < 4; ++g) {
      __m128i lo, hi;
      kv::widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + g * k_row + d)), lo, hi);
      acc[g] = _mm_add_epi32(acc[g], _mm_add_epi32(_mm_madd_epi16(lo, q0), _mm_madd_epi16(hi, q1)));
    }
  }
  const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(acc[0], acc[1]), _mm_unpackhi_epi32(acc[0], acc[1]));
  const __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(acc[2], acc[3]), _mm_unpackhi_epi32(acc[2], acc[3]));
  const __m128i sum = _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd));
  if (d == n) return sum;
  alignas(16) std::int32_t tail[4] = {0, 0, 0, 0};  // the last partial 16 (qt is at d's group)
  for (int g = 0; g < 4; ++g)
    for (int e = d; e < n; ++e) tail[g] += std::int32_t(qt[e - d]) * k[g * k_row + e];
  return _mm_add_epi32(sum, _mm_load_si128(reinterpret_cast<const __m128i*>(tail)));
}
#endif

// s[j] = Σ q16·k_j as floats for `keys` int8 keys (k_row apart) and one packed query row. Where
// four rows lie within 512 bytes (a cache's keys of up to 128 dims), 4 keys at a time: memory
// still streams in order, a few lines ahead, and one transpose (score_keys_i8) replaces four
// per-key reductions (15 % off a decode step over an int8 cache, 32 heads × 4096 keys × 128).
// Otherwise, and for the last keys, one at a time. The sums are the same either way.
template <int LDP>
void score_row_i8(const std::int16_t* qt, const std::int8_t* k, std::ptrdiff_t k_row, int keys, int n, float* s) {
  int j = 0;
#if !defined(ATTN_SCALAR)
  if (k_row <= 128)
    for (; j + 4 <= keys; j += 4) _mm_storeu_ps(s + j, _mm_cvtepi32_ps(score_keys_i8(qt, k + j * k_row, k_row, n)));
#endif
  for (; j < keys; ++j) score_key_i8<1, LDP>(qt, k + j * k_row, n, s + j);
}

// S[rows × keys] for int8 keys (k_row apart) and packed int16 queries: each K row read whole for
// a tile of rows, again (from L1) for the next tile; one row by score_row_i8.
template <int LDP>
void scores_i8(int rows, const std::int16_t* qpack, const std::int8_t* k, std::ptrdiff_t k_row, int keys, int n,
               float* s) {
  if (rows == 1) return score_row_i8<LDP>(qpack, k, k_row, keys, n, s);
  const int npad = round_up(n, 16);
  for (int j = 0; j < keys; ++j, k += k_row)
    for (int r0 = 0; r0 < rows; r0 += kQueryTile) {
      const std::int16_t* qt = qpack + (r0 / kQueryTile) * npad * kQueryTile;
      float* st = s + r0 * LDP + j;
      switch (std::min(kQueryTile, rows - r0)) {
        case 4: score_key_i8<4, LDP>(qt, k, n, st); break;
        case 3: score_key_i8<3, LDP>(qt, k, n, st); break;
        case 2: score_key_i8<2, LDP>(qt, k, n, st); break;
        default: score_key_i8<1, LDP>(qt, k, n, st); break;
      }
    }
}

}  // namespace attn::few_rows
