// The register-tiled matrix-multiply micro-kernel shared by the attention kernel (Q·Kᵀ, P·V)
// and the projections (x·Wᵀ + b): C[rows × cols] = init + A[rows × K] · B[K × cols].
//
// A is read one element at a time and broadcast; B is read as vectors. A's strides are
// compile-time constants (AI between rows, AK between steps) so that each step's R broadcasts
// are loads at constant offsets from one moving pointer: V8 spends an address computation per
// row and step on separate row pointers. B's rows are ldb apart; C's rows are ldc apart.
#pragma once

#include <algorithm>
#include <cstddef>

#include "runtime/simd.h"

// The tile loops have compile-time trip counts, unrolled completely by ATTN_UNROLL (simd.h): each
// accumulator a register.

namespace attn::kernel {

using simd::vfloat;
using simd::W;

// 2 rows × 4 vectors = 8 independent accumulators, 4 vector loads and only 2 broadcasts per
// step: broadcasts from memory are what V8's code spends most on (the other shapes measured:
// docs/performance.md, Design notes).
constexpr int kTileRows = 2;
constexpr int kTileVecs = 4;
constexpr int kTileCols = kTileVecs * W;  // columns of a tile, and of a packed B panel

// What the accumulators start from.
enum class Init {
  zero,  // C = A·B
  load,  // C += A·B
  bias,  // C = A·B + bias, where `bias` (one row of cols values) is passed as `c_init`
};

template <int R, int N, Init I, int AI, int AK>
inline void micro_tile(const float* a, const float* b, std::ptrdiff_t ldb, int k_len, float* c, std::ptrdiff_t ldc,
                       const float* c_init) {
  vfloat acc[R][N];
  ATTN_UNROLL for (int i = 0; i < R; ++i) {
    ATTN_UNROLL for (int n = 0; n < N; ++n) {
      acc[i][n] = I == Init::load   ? simd::load(c + i * ldc + n * W)
                  : I == Init::bias ? simd::load(c_init + n * W)
                                    : vfloat(0.0f);
    }
  }
  // With a separate multiply and add, the full tile (most of the work) takes S = 2 steps a trip,
  // with an exit between them: V8 checks for interrupts and moves the pointers once per two steps,
  // and the exit keeps each step's loads beside its arithmetic (both steps' loads first would not
  // fit its registers). V8 unrolls the smaller loop of fused multiply-adds by itself.
  constexpr int S = R == kTileRows && N == kTileVecs && !simd::kFusedMadd ? 2 : 1;
  for (int k = k_len; k > 0; k -= S) {
    ATTN_UNROLL for (int s = 0; s < S; ++s, a += AK, b += ldb) {
      if (s > 0 && k == s) break;  // an odd k_len's last step
      vfloat bv[N];
      ATTN_UNROLL for (int n = 0; n < N; ++n) bv[n] = simd::load(b + n * W);
      ATTN_UNROLL for (int i = 0; i < R; ++i) {
        const vfloat av(a[i * AI]);
        ATTN_UNROLL for (int n = 0; n < N; ++n) acc[i][n] = simd::madd(av, bv[n], acc[i][n]);
      }
    }
  }
  ATTN_UNROLL for (int i = 0; i < R; ++i) {
    ATTN_UNROLL for (int n = 0; n < N; ++n) simd::store(c + i * ldc + n * W, acc[i][n]);
  }
}

// Row-count dispatch for one column strip of N vectors: a whole tile, or the one row a matrix of
// odd rows ends with (every caller passes 1..kTileRows; tiles of 3 and 4 rows, never reached, were
// compiled for every instantiation all the same).
static_assert(kTileRows == 2, "tile_rows dispatches a tile of kTileRows rows or a single row");
template <int N, Init I, int AI, int AK>
inline void tile_rows(int rows, const float* a, const float* b, std::ptrdiff_t ldb, int k_len, float* c,
                      std::ptrdiff_t ldc, const float* c_init) {
  if (rows == kTileRows) micro_tile<kTileRows, N, I, AI, AK>(a, b, ldb, k_len, c, ldc, c_init);
  else micro_tile<1, N, I, AI, AK>(a, b, ldb, k_len, c, ldc, c_init);
}

// C[rows × cols] = init + A[rows × k_len] · B[k_len × cols], in tiles of kTileRows rows (tile t
// of A starts at a + t·a_tile) and kTileVecs vectors. The cols % W last columns take a scalar
// loop, so B, which may be caller memory, is never read past cols.
template <Init I, int AI, int AK>
void gemm_rows(int rows, const float* a, std::ptrdiff_t a_tile, const float* b, std::ptrdiff_t ldb, int k_len, int cols,
               float* c, std::ptrdiff_t ldc, const float* c_init = nullptr) {
  for (int i0 = 0; i0 < rows; i0 += kTileRows) {
    const int r = std::min(kTileRows, rows - i0);
    const float* at = a + (i0 / kTileRows) * a_tile;
    float* ct = c + i0 * ldc;
    const auto init = [c_init](int col) { return I == Init::bias ? c_init + col : nullptr; };
    int col = 0;
    for (; col + kTileVecs * W <= cols; col += kTileVecs * W)
      tile_rows<kTileVecs, I, AI, AK>(r, at, b + col, ldb, k_len, ct + col, ldc, init(col));
    for (; col + W <= cols; col += W) tile_rows<1, I, AI, AK>(r, at, b + col, ldb, k_len, ct + col, ldc, init(col));
    for (; col < cols; ++col) {
      for (int i = 0; i < r; ++i) {
        float s = I == Init::load ? ct[i * ldc + col] : I == Init::bias ? c_init[col] : 0.0f;
        for (int k = 0; k < k_len; ++k) s += at[i * AI + k * AK] * b[k * ldb + col];
        ct[i * ldc + col] = s;
      }
    }
  }
}

}  // namespace attn::kernel
