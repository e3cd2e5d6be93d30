// The few-rows kernel's loops: a few query rows against K rows (S = Q·Kᵀ) and V rows
// (acc += P·V), for a kv head whose query rows are few (a decode step's heads of one group, a
// speculative verify's few positions), where packing all of K and V into panels, as the blocked
// path does, would cost more than it saves. attention_forward.cpp drives them block by block.
//
// Three facts of the machines this runs on shape them (measured: docs/performance.md, Design notes):
//   - Memory streams rows read whole, one after the other. Reading two or more adjacent K (or
//     V) rows side by side — a tile of keys, or a tile of value columns across a block of keys —
//     streamed at well under half the speed. Rows far apart are separate streams: reading one
//     row of each of two runs of keys at a time keeps two streams in flight.
//   - V8 issues every load of a loop iteration before its arithmetic: an iteration's loaded
//     vectors and its accumulators must fit its 15 vector registers together, or they spill.
//   - V8 computes every wasm address it loads from (an add per pointer and step, and a stack
//     check per iteration): a loop does best with few pointers and several vectors at constant
//     offsets from each, which the layouts below give it.
// Hence K and V are read in place, in their storage type (kv_storage.h's readers), a pair of
// rows at a time: row t of each of the block's two runs of keys (see KeyBlock in
// attention_forward.cpp), each row read whole and once from memory for every query row of the kv
// head — a tile of up to 4 rows reads it from memory, the next tiles from L1. A tile of R rows
// keeps 2·R accumulators of scores (one per row and key) or reads and writes the rows'
// accumulators of P·V in L1 (2·R probabilities and the two rows' vectors in registers). int8
// keys are read in place by integer dot products for any number of rows (for one row, four short
// keys at a time: they are one run of memory).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

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

// F(args…) through a pointer neither compiler sees through, so that F stays a function of its own
// in the .wasm: Binaryen inlines every function that has one caller, whatever its size (LLVM's
// noinline does not stop it), and V8 compiled the few-rows loops inlined into their large
// per-dtype caller about a quarter slower (docs/performance.md, Design notes). For the loops
// over a run of keys: one indirect call each.
template <auto F, class... Args>
inline void apart(Args&&... args) {
  static decltype(F) volatile f = F;
  f(std::forward<Args>(args)...);
}

// Query rows per tile, at most, on both paths (the integer path's int16 queries interleave in tiles
// of this many, see pack_query_i16).
constexpr int kQueryTile = 4;

// ---- float rows, a pair of K or V rows at a time ----
//
// Tiles: of 4 rows while 4 remain, then of 1 (a tile's rows are its accumulators'
// rows; nothing is computed for rows that are not there). Packed queries: tile by tile, a tile
// of R rows starting at its first row r0, at r0 · dpad floats, laid out [dpad / W][R][W] (dpad =
// head_dim rounded up to W, zeros past head_dim): one row is its query as it is, zero-padded.

// Calls fn(std::integral_constant<int, R>{}, r0) for each tile of `rows`: R rows from r0.
template <class Fn>
inline void for_each_tile(int rows, Fn&& fn) {
  int r0 = 0;
  for (; r0 + kQueryTile <= rows; r0 += kQueryTile) fn(std::integral_constant<int, kQueryTile>{}, r0);
  for (; r0 < rows; ++r0) fn(std::integral_constant<int, 1>{}, r0);
}

// The rows' queries times `factor`, packed tile by tile.
inline void pack_queries(int rows, const float* const* q, int n, float factor, float* out) {
  const int dpad = round_up(n, W);
  for_each_tile(rows, [&](auto tile, int r0) {
    constexpr int R = decltype(tile)::value;
    float* t = out + static_cast<std::ptrdiff_t>(r0) * dpad;
    for (int r = 0; r < R; ++r)
      for (int d = 0; d < dpad; ++d) t[(d / W) * R * W + r * W + d % W] = d < n ? q[r0 + r][d] * factor : 0.0f;
  });
}

// Vectors of T one step of the pair loops reads per row: its widest read, at most 2 (int8's 4,
// for two rows, would not fit the registers beside the accumulators).
template <class T>
constexpr int kPairVectors = Stored<T>::kVectors < 2 ? Stored<T>::kVectors : 2;

template <class T, int V>
inline void load_vectors(const T* p, vfloat* v) {
  if constexpr (V == Stored<T>::kVectors) {
    Stored<T>::load_chunk(p, v);
  } else {
    ATTN_UNROLL for (int u = 0; u < V; ++u) v[u] = Stored<T>::load(p + u * W);
  }
}

// s_a[r·lds] = q_r · k_a and s_b[r·lds] = q_r · k_b over n elements, for the R rows of a packed
// query tile and two K rows of type T read whole (ka == kb is allowed). Accumulators per row and
// key: 1 for 4 rows, else 2 (alternate vectors), so that a step has 8 independent chains of
// multiply-adds and its loads and accumulators fit V8's registers. Each key's score is summed the
// same way whichever key it is paired with.
template <class T, int R>
inline void score_pair(const float* qt, const T* ka, const T* kb, int n, float* sa, float* sb, std::ptrdiff_t lds) {
  constexpr int V = kPairVectors<T>, A = R == 4 ? 1 : 2, U = V > A ? V : A;
  vfloat acc[R][2][A];
  ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int k = 0; k < 2; ++k)
      ATTN_UNROLL for (int a = 0; a < A; ++a) acc[r][k][a] = vfloat(0.0f);
  int d = 0;
  for (; d + U * W <= n; d += U * W) {
    vfloat xa[U], xb[U];
    ATTN_UNROLL for (int u = 0; u < U; u += V) {
      load_vectors<T, V>(ka + d + u * W, xa + u);
      load_vectors<T, V>(kb + d + u * W, xb + u);
    }
    ATTN_UNROLL for (int u = 0; u < U; ++u) ATTN_UNROLL for (int r = 0; r < R; ++r) {
      const vfloat qv = simd::load(qt + (d / W + u) * R * W + r * W);
      acc[r][0][u % A] = simd::madd(qv, xa[u], acc[r][0][u % A]);
      acc[r][1][u % A] = simd::madd(qv, xb[u], acc[r][1][u % A]);
    }
  }
  float* out[2] = {sa, sb};
  const T* key[2] = {ka, kb};
  ATTN_UNROLL for (int k = 0; k < 2; ++k) {
    alignas(16) float sum[R < 4 ? 4 : R];
    ATTN_UNROLL for (int r = 0; r < R; ++r) ATTN_UNROLL for (int a = 1; a < A; ++a) acc[r][k][0] += acc[r][k][a];
#if !defined(ATTN_SCALAR)
    if constexpr (R == 4) {
      simd::store(sum, sum4(acc[0][k][0], acc[1][k][0], acc[2][k][0], acc[3][k][0]));
    } else
#endif
    {
      ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] = lane_sum(acc[r][k][0]);
    }
    for (int e = d; e < n; ++e) {
      const float x = Stored<T>::one(key[k] + e);
      ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] += qt[(e / W) * R * W + r * W + e % W] * x;
    }
    ATTN_UNROLL for (int r = 0; r < R; ++r) out[k][r * lds] = sum[r];
  }
}

// acc_r[c] += p_a[r·ldp] · v_a[c] + p_b[r·ldp] · v_b[c] over c < cols, for R rows of
// accumulators (ld_acc apart) and two V rows of type T read whole: a step reads both rows' vectors
// once and updates each row's accumulators in L1 (a key's p may be 0 with a row of zeros).
template <class T, int R>
inline void value_pair(const float* pa, const float* pb, std::ptrdiff_t ldp, const T* va, const T* vb, int cols,
                       float* acc, std::ptrdiff_t ld_acc) {
  constexpr int V = kPairVectors<T>;
  vfloat wa[R], wb[R];
  ATTN_UNROLL for (int r = 0; r < R; ++r) {
    wa[r] = vfloat(pa[r * ldp]);
    wb[r] = vfloat(pb[r * ldp]);
  }
  int c = 0;
  for (; c + V * W <= cols; c += V * W) {
    vfloat xa[V], xb[V];
    load_vectors<T, V>(va + c, xa);
    load_vectors<T, V>(vb + c, xb);
    ATTN_UNROLL for (int u = 0; u < V; ++u) ATTN_UNROLL for (int r = 0; r < R; ++r) {
      float* a = acc + r * ld_acc + c + u * W;
      simd::store(a, simd::madd(wb[r], xb[u], simd::madd(wa[r], xa[u], simd::load(a))));
    }
  }
  ATTN_SCALAR_TAIL for (; c < cols; ++c) {
    const float xa = Stored<T>::one(va + c), xb = Stored<T>::one(vb + c);
    ATTN_UNROLL for (int r = 0; r < R; ++r) acc[r * ld_acc + c] =
        acc[r * ld_acc + c] + pa[r * ldp] * xa + pb[r * ldp] * xb;
  }
}

// ---- int8 keys in place, any number of rows ----

// Queries quantised to int16 (kv::quantize_i16), packed like the float queries but 16 at a
// time: tiles of kQueryTile rows, each [npad / 16][kQueryTile][16] (npad = head_dim rounded up to
// 16, or to int4's blocks of 32; zeros past it). Puts row `row` (n values) in place; `out` was
// zeroed.
inline void pack_query_i16(const std::int16_t* q16, int row, int n, int npad, std::int16_t* out) {
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
  ATTN_SCALAR_TAIL for (int e = d; e < n; ++e) {  // qt is at d's group of 16
    ATTN_UNROLL for (int r = 0; r < R; ++r) sum[r] +=
        std::int32_t(qt[(e - d) / 16 * kQueryTile * 16 + r * 16 + (e - d) % 16]) * k[e];
  }
  ATTN_UNROLL for (int r = 0; r < R; ++r) s[r * LDP] = float(sum[r]);
}

#if !defined(ATTN_SCALAR)
// [Σ q16·k_0, …, Σ q16·k_3] in int32 for four int8 keys (k_row apart) and row 0 of a packed
// tile: score_key_i8's sums, each key's row read whole before the next (reading the four rows
// side by side, 16 bytes of each in turn, overlapped less of the reads from memory with the
// arithmetic: docs/performance.md, Design notes), gathered by a 4×4 transpose folded into the
// adds (integer adds are exact in any order).
inline __m128i score_keys_i8(const std::int16_t* qt, const std::int8_t* k, std::ptrdiff_t k_row, int n) {
  const int full = n / 16 * 16;
  __m128i acc[4];
  ATTN_UNROLL for (int g = 0; g < 4; ++g) {
    const std::int8_t* kg = k + g * k_row;
    const std::int16_t* q = qt;
    __m128i a = _mm_setzero_si128(), b = _mm_setzero_si128();
    for (int d = 0; d < full; d += 16, q += kQueryTile * 16) {
      __m128i lo, hi;
      kv::widen_i8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kg + d)), lo, hi);
      a = _mm_add_epi32(a, _mm_madd_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
      b = _mm_add_epi32(b, _mm_madd_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8))));
    }
    acc[g] = _mm_add_epi32(a, b);
  }
  const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(acc[0], acc[1]), _mm_unpackhi_epi32(acc[0], acc[1]));
  const __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(acc[2], acc[3]), _mm_unpackhi_epi32(acc[2], acc[3]));
  const __m128i sum = _mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd));
  if (full == n) return sum;
  qt += full / 16 * kQueryTile * 16;  // the last partial 16: qt at its group
  alignas(16) std::int32_t tail[4] = {0, 0, 0, 0};
  for (int g = 0; g < 4; ++g)
    ATTN_SCALAR_TAIL for (int e = full; e < n; ++e) tail[g] += std::int32_t(qt[e - full]) * k[g * k_row + e];
  return _mm_add_epi32(sum, _mm_load_si128(reinterpret_cast<const __m128i*>(tail)));
}
#endif

// s[j] = Σ q16·k_j as floats for `keys` int8 keys (k_row apart) and one packed query row: 4 keys
// at a time (score_keys_i8: one transpose replaces four per-key reductions, docs/performance.md,
// Design notes), then the last keys one at a time. The sums are the same either way.
template <int LDP>
void score_row_i8(const std::int16_t* qt, const std::int8_t* k, std::ptrdiff_t k_row, int keys, int n, float* s) {
  int j = 0;
#if !defined(ATTN_SCALAR)
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
