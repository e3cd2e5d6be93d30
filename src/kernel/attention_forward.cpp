// The forward driver. Work items of (batch, kv head, chunk of row blocks) — or, for one kv head
// with few row blocks, of (chunk of keys, row block) — run in parallel; each walks blocks of query
// rows over the keys those rows can see, in passes of up to kPassKeys keys with an online softmax
// (flash attention): Kᵀ and V are packed into panels block by block as first needed (the packing,
// which the backward shares, is here too), or, for a kv head with few query rows, read in place in
// their storage type by few_rows.h's tiles. Only the primitives in simd.h, the micro-kernels and
// the score rule touch scores.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernel/attention.h"
#include "kernel/attention_blocks.h"
#include "kernel/few_rows.h"
#include "kernel/work.h"
#include "runtime/buffer.h"
#include "runtime/parallel.h"

namespace attn {

using namespace blocks;
using kernel::Init;

namespace {

// Stored rows of a block as floats (int8 and int4 scales applied): rows [kb, kb + len) of keys
// (or of values) into dst, `cols` floats per row. The only part of packing that depends on the type.
template <class T>
void convert_rows(const kv::Head& h, bool values, int kb, int len, int cols, float* dst) {
  for (int j = 0; j < len; ++j, dst += cols) {
    const int s = h.slot(kb + j);
    const T* src = values ? h.value_at_slot<T>(s) : h.key_at_slot<T>(s);
    if constexpr (std::is_same_v<T, kv::Int4>) {  // blocks with their own scales
      kv::int4_to_floats(src, cols, dst);
    } else {
      const float scale = values ? h.value_scale_at_slot(s) : h.key_scale_at_slot(s);
      const vfloat vs(scale);
      int c = 0;
      for (; c + W <= cols; c += W) simd::store(dst + c, kv::Stored<T>::load(src + c) * vs);
      ATTN_SCALAR_TAIL for (; c < cols; ++c) dst[c] = kv::Stored<T>::one(src + c) * scale;
    }
  }
}

void convert_block(const kv::Head& h, bool values, int kb, int len, int cols, float* dst) {
  kv::with_type(h.type, [&](auto t) { convert_rows<decltype(t)>(h, values, kb, len, cols, dst); });
}

// Keys [j0, j0 + n) of a key block — rows of `dim` floats, row j0 + j at src + j·ld — into the
// block's panels of kTileCols keys, [panel][dim][kTileCols], so the micro-kernel reads one
// contiguous stream per panel: W keys × W dims at a time, transposed in registers.
void transpose_keys(const float* src, std::ptrdiff_t ld, int j0, int n, int dim, float* block) {
  const auto at = [block, dim](int j, int d) { return block + (j / kTileCols * dim + d) * kTileCols + j % kTileCols; };
  int j = 0;
  for (; j < n && (j0 + j) % W != 0; ++j) {  // (a ring's second piece may start mid-vector)
    ATTN_SCALAR_TAIL for (int d = 0; d < dim; ++d) { *at(j0 + j, d) = src[j * ld + d]; }
  }
  for (; j + W <= n; j += W) {
    const float* s = src + j * ld;
    int d = 0;
    for (; d + W <= dim; d += W) {
      vfloat v[W];
      ATTN_UNROLL for (int i = 0; i < W; ++i) v[i] = simd::load(s + i * ld + d);
      simd::transpose(v);
      float* dst = at(j0 + j, d);
      ATTN_UNROLL for (int i = 0; i < W; ++i) simd::store(dst + i * kTileCols, v[i]);
    }
    for (; d < dim; ++d)
      for (int i = 0; i < W; ++i) *at(j0 + j + i, d) = s[i * ld + d];
  }
  for (; j < n; ++j) {
    ATTN_SCALAR_TAIL for (int d = 0; d < dim; ++d) { *at(j0 + j, d) = src[j * ld + d]; }
  }
}

// Value rows of keys [k0, k0 + n) (row k0 + j at src + j·ld) into panels of kTileCols value
// columns, each [key][kTileCols] over all the head's keys (Workspace::v_at), zero-padded past
// value_dim, so the P·V micro-kernel reads contiguous streams over any range of keys and never a
// partial vector. Keys past seq_k are never read (a pass stops at its last key).
void panel_values(const float* src, std::ptrdiff_t ld, int k0, int n, int value_dim, const Workspace& ws) {
  for (int j = 0; j < n; ++j) {
    const float* row = src + j * ld;
    for (int c0 = 0; c0 < ws.acc_ld; c0 += kTileCols) {
      float* dst = ws.v_at(c0, k0 + j);
      if (c0 + kTileCols <= value_dim) {
        ATTN_UNROLL for (int c = 0; c < kTileCols; c += W) simd::store(dst + c, simd::load(row + c0 + c));
      } else {
        for (int c = 0; c < kTileCols; ++c) dst[c] = c0 + c < value_dim ? row[c0 + c] : 0.0f;
      }
    }
  }
}

// Calls fn(src, ld, j0, n) for the key block's rows [kb, kb + len) of keys (or values) as floats:
// float32 storage read in place, piece by piece (a ring wraps once at most); other types
// converted into `rows` first. j0 is the piece's first key within the block.
template <class Fn>
void block_rows(const kv::Head& h, bool values, int kb, int len, int cols, float* rows, Fn&& fn) {
  if (h.type != kv::Storage::f32) {
    convert_block(h, values, kb, len, cols, rows);
    return fn(static_cast<const float*>(rows), std::ptrdiff_t(cols), 0, len);
  }
  kv::for_each_piece(h, kb, kb + len, [&](int j0, int j1, int s0) {
    fn(values ? h.value_at_slot<float>(s0) : h.key_at_slot<float>(s0), values ? h.value_row : h.key_row, j0 - kb,
       j1 - j0);
  });
}

}  // namespace

void blocks::pack_key_block(const kv::Head& h, bool values, int blk, int seq_k, int dim, float* rows, float* block) {
  const int kb = blk * kKeysPerBlock, len = std::min(kKeysPerBlock, seq_k - kb);
  block_rows(h, values, kb, len, dim, rows,
             [&](const float* src, std::ptrdiff_t ld, int j0, int n) { transpose_keys(src, ld, j0, n, dim, block); });
  float* last = block + len / kTileCols * dim * kTileCols;
  for (int d = 0; len % kTileCols && d < dim; ++d)
    std::fill(last + d * kTileCols + len % kTileCols, last + (d + 1) * kTileCols, 0.0f);
}

void blocks::ensure_packed(const AttentionParams& p, const kv::Head& h, Workspace& ws, int blk) {
  if (ws.packed_flag(blk) != 0.0f) return;
  pack_key_block(h, false, blk, p.seq_k, p.head_dim, ws.rows, ws.kt_block(blk));
  if (h.value) {
    const int kb = blk * kKeysPerBlock, len = std::min(kKeysPerBlock, p.seq_k - kb);
    block_rows(h, true, kb, len, p.value_dim, ws.rows, [&](const float* src, std::ptrdiff_t ld, int j0, int n) {
      panel_values(src, ld, kb + j0, n, p.value_dim, ws);
    });
  }
  ws.packed_flag(blk) = 1.0f;
}

float blocks::pack_queries(const RowBlock& rb, int head_dim, float factor, float* qpack) {
  static_assert(kTileRows == 2, "tiles of two rows, interleaved by simd::zip");
  const vfloat vf(factor), zero(0.0f);
  float q_max = 0.0f;  // row by row, vectors then the tail, in the order of any other reading
  for (int i0 = 0; i0 < rb.rows; i0 += kTileRows) {
    float* tile = qpack + static_cast<std::ptrdiff_t>(i0 / kTileRows) * head_dim * kTileRows;
    const float* q0 = rb.q[i0];
    const float* q1 = i0 + 1 < rb.rows ? rb.q[i0 + 1] : nullptr;
    vfloat m0(0.0f), m1(0.0f);
    int d = 0;
    for (; d + W <= head_dim; d += W) {
      const vfloat a = simd::load(q0 + d), b = q1 ? simd::load(q1 + d) : zero;
      m0 = simd::vmax(m0, simd::vabs(a));
      m1 = simd::vmax(m1, simd::vabs(b));
      vfloat lo, hi;
      simd::zip(a * vf, q1 ? b * vf : zero, lo, hi);
      simd::store(tile + 2 * d, lo);
      simd::store(tile + 2 * d + W, hi);
    }
    q_max = std::max(q_max, simd::reduce_max(m0));
    for (int t = d; t < head_dim; ++t) q_max = std::max(q_max, std::fabs(q0[t]));
    if (q1) {
      q_max = std::max(q_max, simd::reduce_max(m1));
      for (int t = d; t < head_dim; ++t) q_max = std::max(q_max, std::fabs(q1[t]));
    }
    for (; d < head_dim; ++d) {
      tile[2 * d] = q0[d] * factor;
      tile[2 * d + 1] = q1 ? q1[d] * factor : 0.0f;
    }
  }
  return q_max;
}

void blocks::attend_passes(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, int begin, int end,
                           Workspace& ws) {
  start_rows(p, rb, ws);
  const score::Scaling sc = pack_block_queries(p, rb, ws.k_max, ws.qpack);
  // Passes of up to kPassKeys keys from `begin`: which keys a pass holds depends on the row block
  // (and the blocked split's chunk) alone, never on the threads, so neither does a result.
  for (int kb = begin; kb < end; kb += kPassKeys) {
    const int len = std::min(kPassKeys, end - kb);
    for (int blk = block_of(kb); blk <= block_of(kb + len - 1); ++blk) ensure_packed(p, h, ws, blk);
    // S = Q · Kᵀ for this pass, panel by panel (padding keys are zero and ignored below).
    for (int c = 0; c < len; c += kTileCols)
      kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, ws.qpack, p.head_dim * kTileRows, ws.kt_at(kb + c),
                                                  kTileCols, p.head_dim, kTileCols, ws.scores + c, kPassKeys);
    for (int i = 0; i < rb.rows; ++i) {
      float* s = ws.scores + i * kPassKeys;
      score::apply(p, sc, rb.rule[i], rb.key_padding, kb, len, s);
      softmax_update(p, i, len, s, rb.w[i] ? rb.w[i] + kb : nullptr, ws);
    }
    // acc += P · V for this pass.
    if (p.value) {
      for (int c = 0; c < ws.acc_ld; c += kTileCols)
        kernel::gemm_rows<Init::load, kPassKeys, 1>(rb.rows, ws.scores, kTileRows * kPassKeys, ws.v_at(c, kb),
                                                    kTileCols, len, kTileCols, ws.acc + c, ws.acc_ld);
    }
  }
}

void blocks::attend_block(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, Workspace& ws) {
  const int begin = rb.keys.begin / kTileCols * kTileCols;  // from the rows' first visible key's panel
  attend_passes(p, rb, h, begin, rb.keys.end, ws);
  fold_sinks(p, rb, ws);
  finish_rows(p, rb, begin, rb.keys.end, ws);
}

namespace {

// float16 known finite, read without the rebias (half::FiniteRaw): see attend_few_rows.
template <class T>
constexpr bool kRawHalf = std::is_same_v<T, half::FiniteRaw>;

template <class T>
constexpr bool kInt4 = std::is_same_v<T, kv::Int4>;

// The keys of one block of the few-rows path: two runs of logical keys, [start[r], start[r] +
// len[r]) for r = 0, 1, with len[1] ≤ len[0] ≤ len[1] + 1 — the same stretch of each half of a
// unit's keys (see attend_few_rows). Key start[0] + t is read with key start[1] + t: memory then
// streams two runs of rows at once, which kept more lines in flight than one. Their scores share
// a row of ws.scores: run 0's from 0, run 1's from len[0].
struct KeyBlock {
  int start[2] = {0, 0}, len[2] = {0, 0};
  int size() const { return len[0] + len[1]; }
  int offset(int run) const { return run ? len[0] : 0; }
};

// Calls fn(t, a, b) for t < len[0]: a and b the slots of keys start[0] + t and start[1] + t, b
// −1 where run 1 has no key t (its last, when len[0] = len[1] + 1).
template <class Fn>
inline void for_each_pair(const kv::Head& h, const KeyBlock& kb, Fn&& fn) {
  int a = h.slot(kb.start[0]), b = h.slot(kb.start[1]);
  for (int t = 0; t < kb.len[0]; ++t) {
    fn(t, a, t < kb.len[1] ? b : -1);
    if (++a == h.ring) a = 0;
    if (++b == h.ring) b = 0;
  }
}

// How the rows' queries were laid out for the loops: int16 for integer dot products (int8 for
// int4 keys in relaxed-SIMD builds), and the factor still to multiply the scores by (1 once the
// queries carry it).
struct FewQueries {
  bool q16;
  float factor;
};

// s[r·lds + j] = q_r · k_j for the `rows` rows of packed float queries and the keys of kb (run 0's
// from 0, run 1's from len[0]): a pair of K rows at a time, in place, tile by tile (a last key
// alone is paired with a row of zeros, its partner's scores written past the block's and never
// read). A function of its own (few_rows::apart).
template <class T>
void score_pairs(const kv::Head& h, const KeyBlock& kb, int rows, const float* qpack, int n, float* s,
                 std::ptrdiff_t lds, const void* zero_row) {
  const int dpad = round_up(n, W);
  const T* zeros = static_cast<const T*>(zero_row);
  for_each_pair(h, kb, [&](int t, int a, int b) {
    const T* ka = h.key_at_slot<T>(a);
    const T* kb1 = b >= 0 ? h.key_at_slot<T>(b) : zeros;
    float* sa = s + t;
    float* sb = s + kb.len[0] + t;
    few_rows::for_each_tile(rows, [&](auto tile, int r0) {
      constexpr int R = decltype(tile)::value;
      few_rows::score_pair<T, R>(qpack + r0 * dpad, ka, kb1, n, sa + r0 * lds, sb + r0 * lds, lds);
    });
  });
}

// acc[r·ld_acc + c] += p_r,j · v_j[c] for the `rows` rows' probabilities p (laid out as
// score_pairs' scores) and the values of kb: a pair of V rows at a time, in place, tile by tile (a
// last key alone is paired with a row of zeros, whose probability the caller set to 0). A function
// of its own (few_rows::apart).
template <class T>
void value_pairs(const kv::Head& h, const KeyBlock& kb, int rows, const float* p, std::ptrdiff_t ldp, int cols,
                 float* acc, std::ptrdiff_t ld_acc, const void* zero_row) {
  const T* zeros = static_cast<const T*>(zero_row);
  for_each_pair(h, kb, [&](int t, int a, int b) {
    const T* va = h.value_at_slot<T>(a);
    const T* vb = b >= 0 ? h.value_at_slot<T>(b) : zeros;
    const float* pa = p + t;
    const float* pb = p + kb.len[0] + t;
    few_rows::for_each_tile(rows, [&](auto tile, int r0) {
      constexpr int R = decltype(tile)::value;
      few_rows::value_pair<T, R>(pa + r0 * ldp, pb + r0 * ldp, ldp, va, vb, cols, acc + r0 * ld_acc, ld_acc);
    });
  });
}

// Scores of the block's rows for the keys of kb into ws.scores: dot products (of queries that
// may carry the factor already, see few_queries) times the query's scale (int8 through integers),
// the key's scale (int8) and `factor`, in that order (each a product of a finite score and a
// finite operand: ±∞ at worst, never NaN). Float queries: a pair of K rows at a time, in place,
// tile by tile (a last key alone is paired with a row of zeros, its partner's scores written past
// the block's and never read); int8 keys with quantised queries: integers, run by run. (int4
// keys: few_scores_i4.)
template <class T>
void few_scores(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, const FewQueries& fq,
                const KeyBlock& kb, Workspace& ws) {
  const int n = p.head_dim;
  const std::ptrdiff_t lds = ws.scores_ld;
  bool done = false;
  if constexpr (std::is_same_v<T, std::int8_t>) {
    if (fq.q16) {
      const auto* qpack = reinterpret_cast<const std::int16_t*>(ws.qpack);
      for (int run = 0; run < 2; ++run)
        kv::for_each_piece(h, kb.start[run], kb.start[run] + kb.len[run], [&](int j0, int j1, int s0) {
          float* s = ws.scores + kb.offset(run) + (j0 - kb.start[run]);
          few_rows::apart<few_rows::scores_i8<kFewKeys>>(rb.rows, qpack, h.key_at_slot<T>(s0), h.key_row, j1 - j0, n,
                                                         s);
        });
      done = true;
    }
  }
  if (!done) few_rows::apart<score_pairs<T>>(h, kb, rb.rows, ws.qpack, n, ws.scores, lds, ws.zeros);
  if constexpr (std::is_same_v<T, std::int8_t>) {  // the queries' and the keys' scales
    float* ks = ws.vscale;  // the keys' scales, laid out as the scores (free until P·V)
    for (int run = 0; run < 2; ++run) few_rows::key_scales(h, kb.start[run], kb.len[run], ks + kb.offset(run));
    for (int i = 0; i < rb.rows; ++i) {
      float* s = ws.scores + i * lds;
      const float rs = fq.q16 ? ws.row_scale[i] : 1.0f;
      for (int j = 0; j < kb.size(); ++j) s[j] = s[j] * rs * ks[j] * fq.factor;
    }
  } else if (fq.factor != 1.0f) {
    for (int i = 0; i < rb.rows; ++i) {
      float* s = ws.scores + i * lds;
      for (int j = 0; j < kb.size(); ++j) s[j] *= fq.factor;
    }
  }
}

// few_scores for int4 keys, run by run: with quantised queries (q16) through integers (each
// block's 32 products exact in int32, then times its scale in float), else through
// few_rows::scores_i4_float; then times the query's scale and `factor`, in that order.
void few_scores_i4(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, const FewQueries& fq,
                   const KeyBlock& kb, Workspace& ws) {
  const std::ptrdiff_t lds = ws.scores_ld;
  for (int run = 0; run < 2; ++run)
    kv::for_each_piece(h, kb.start[run], kb.start[run] + kb.len[run], [&](int j0, int j1, int s0) {
      float* s = ws.scores + kb.offset(run) + (j0 - kb.start[run]);
      const kv::Int4* k = h.key_at_slot<kv::Int4>(s0);
      if (fq.q16) {
#if defined(__wasm_relaxed_simd__) && !defined(ATTN_SCALAR)
        const auto* qpack = reinterpret_cast<const std::uint8_t*>(ws.qpack);
        few_rows::apart<few_rows::scores_i4_i8<kFewKeys>>(rb.rows, qpack, k, h.key_row, j1 - j0, p.head_dim, s);
#else
        const auto* qpack = reinterpret_cast<const std::int16_t*>(ws.qpack);
        few_rows::apart<few_rows::scores_i4<kFewKeys>>(rb.rows, qpack, k, h.key_row, j1 - j0, p.head_dim, s);
#endif
      } else {
        few_rows::scores_i4_float(rb.rows, rb.q, k, h.key_row, j1 - j0, p.head_dim, ws.rows, s, lds);
      }
    });
  for (int i = 0; i < rb.rows; ++i) {
    float* s = ws.scores + i * lds;
    const float rs = fq.q16 ? ws.row_scale[i] : 1.0f;
    for (int j = 0; j < kb.size(); ++j) s[j] = s[j] * rs * fq.factor;
  }
}

// acc += P·V for the keys of kb over int8 or int4 values, in integers (few_rows_int.h): each
// row's probabilities times the values' scales (int4: of one block of 32 columns at a time)
// quantised to int16 (as the scores, run 0's from 0 and run 1's from len[0]), the sums over the
// block exact in int32, then added to acc times the row's (and block's) scale. False, with nothing
// done, when some product is not finite (a NaN or ±∞ probability, an int8 value row stored with a
// non-finite scale), or the largest is below few_rows::kMinProductMax (tiny scales): the float
// path carries those.
template <class T>
bool few_values_int(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, const KeyBlock& kb,
                    Workspace& ws) {
  const int cols = p.value_dim, ld32 = few_rows::acc32_ld(cols), blocks = kInt4<T> ? kv::int4_blocks(cols) : 1;
  const std::ptrdiff_t lds = ws.scores_ld;
  // The value scales of the block's keys, laid out as the scores, kFewKeys per column block.
  for (int run = 0; run < 2; ++run)
    few_rows::value_scales<T>(h, kb.start[run], kb.len[run], cols, ws.vscale + kb.offset(run), kFewKeys);
  for (int i = 0; i < rb.rows; ++i)
    for (int b = 0; b < blocks; ++b) {
      float m = 0.0f;
      if (!few_rows::product_max(ws.scores + i * lds, ws.vscale + b * kFewKeys, kb.size(), m)) return false;
      if (m > 0.0f && m < few_rows::kMinProductMax) return false;
      ws.pscale[i * blocks + b] = m / few_rows::kP16Max;
    }
  std::fill(ws.acc32, ws.acc32 + rb.rows * ld32, 0);
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < rb.rows; ++i) {
      const float pscale = ws.pscale[i * blocks + b];
      few_rows::quantize_products(ws.scores + i * lds, ws.vscale + b * kFewKeys, kb.size(),
                                  pscale > 0.0f ? 1.0f / pscale : 0.0f, ws.p16 + i * lds);
    }
    for (int run = 0; run < 2; ++run)
      kv::for_each_piece(h, kb.start[run], kb.start[run] + kb.len[run], [&](int j0, int j1, int s0) {
        const std::int16_t* p16 = ws.p16 + kb.offset(run) + (j0 - kb.start[run]);
        if constexpr (kInt4<T>) {
          few_rows::apart<few_rows::values_i4>(rb.rows, p16, lds, j1 - j0,
                                               h.value_at_slot<T>(s0) + b * kv::kInt4BlockBytes, h.value_row,
                                               ws.acc32 + b * kv::kInt4Block, ld32);
        } else {
          few_rows::apart<few_rows::values_i8>(rb.rows, p16, lds, j1 - j0, h.value_at_slot<T>(s0), h.value_row, cols,
                                               ws.acc32, ld32);
        }
      });
  }
  const int block_cols = kInt4<T> ? kv::kInt4Block : cols;
  for (int i = 0; i < rb.rows; ++i) {
    const std::int32_t* a32 = ws.acc32 + i * ld32;
    float* acc = ws.acc + i * ws.acc_ld;
    for (int b = 0; b < blocks; ++b) {
      const float pscale = ws.pscale[i * blocks + b];
      for (int c = b * block_cols; c < std::min(cols, (b + 1) * block_cols); ++c) acc[c] += float(a32[c]) * pscale;
    }
  }
  return true;
}

// few_values for int4 values: in integers (few_values_int), else, run by run, through
// few_rows::values_i4_float.
void few_values_i4(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, const KeyBlock& kb, Workspace& ws) {
  if (few_values_int<kv::Int4>(p, rb, h, kb, ws)) return;
  for (int run = 0; run < 2; ++run)
    kv::for_each_piece(h, kb.start[run], kb.start[run] + kb.len[run], [&](int j0, int j1, int s0) {
      const float* pr = ws.scores + kb.offset(run) + (j0 - kb.start[run]);
      few_rows::values_i4_float(rb.rows, pr, ws.scores_ld, h.value_at_slot<kv::Int4>(s0), h.value_row, j1 - j0,
                                p.value_dim, ws.rows, ws.acc, ws.acc_ld);
    });
}

// acc += P·V for the keys of kb: int8 values in integers (few_values_int) where they can;
// otherwise a pair of V rows at a time, in place, tile by tile (a last key alone is paired with a
// row of zeros and a probability of 0); int8's value scales folded into the probabilities first,
// and the rebias the raw float16 values lack. (int4 values: few_values_i4.)
template <class T>
void few_values(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, const KeyBlock& kb, Workspace& ws) {
  if constexpr (std::is_same_v<T, std::int8_t>) {
    if (few_values_int<T>(p, rb, h, kb, ws)) return;
  }
  const std::ptrdiff_t lds = ws.scores_ld;
  for (int i = 0; i < rb.rows; ++i) {
    float* pr = ws.scores + i * lds;
    if constexpr (std::is_same_v<T, std::int8_t>) {
      for_each_pair(h, kb, [&](int t, int a, int b) {
        pr[t] *= h.value_scale_at_slot(a);
        if (b >= 0) pr[kb.len[0] + t] *= h.value_scale_at_slot(b);
      });
    }
    if constexpr (kRawHalf<T>) {  // probabilities are at most 1: exact
      for (int j = 0; j < kb.size(); ++j) pr[j] *= half::kRebias;
    }
    if (kb.len[0] > kb.len[1]) pr[kb.size()] = 0.0f;  // the zero row's probability
  }
  few_rows::apart<value_pairs<T>>(h, kb, rb.rows, ws.scores, lds, p.value_dim, ws.acc, ws.acc_ld, ws.zeros);
}

// The rows' queries as the loops read them (ws.qpack), packed in tiles (few_rows::pack_queries).
// Float queries carry the scores' `factor` when |factor| ≤ 1 (the usual scale·log2 e): then no
// product q·factor or partial sum of q·factor·k can overflow where the raw ones would not, and no
// pass over the scores is left to scale them. int8 and int4 keys: quantised to int16
// (kv::quantize_i16; scales in ws.row_scale) and packed for the integer dot products (int4:
// head_dim padded to whole blocks; in relaxed-SIMD builds to int8 for its byte dot products,
// few_rows::pack_query_i8), the factor applied to the scores; floats instead when that
// does not apply: a query with a non-finite element, or int8 keys and head_dim > kv::kMaxInt8Dot
// (int4's float path reads the queries where they are).
template <class T>
FewQueries few_queries(const AttentionParams& p, const RowBlock& rb, float factor, Workspace& ws) {
  const int n = p.head_dim;
  if constexpr (std::is_same_v<T, std::int8_t> || kInt4<T>) {
    if constexpr (kInt4<T> && few_rows::kInt4ByteDot) {
      auto* packed = reinterpret_cast<std::uint8_t*>(ws.qpack);
      bool ok = true;
      for (int i = 0; i < rb.rows && ok; ++i) ok = few_rows::pack_query_i8(rb.q[i], n, i, packed, ws.row_scale[i]);
      return {ok, factor};
    }
    if (kInt4<T> || n <= kv::kMaxInt8Dot) {
      auto* packed = reinterpret_cast<std::int16_t*>(ws.qpack);
      auto* row16 = reinterpret_cast<std::int16_t*>(ws.rows);  // a row of scratch, free here
      const int npad = kInt4<T> ? kv::int4_blocks(n) * kv::kInt4Block : round_up(n, 16);
      const int tiles = (rb.rows + few_rows::kQueryTile - 1) / few_rows::kQueryTile;
      std::fill(packed, packed + tiles * few_rows::kQueryTile * npad, std::int16_t{0});
      bool ok = true;
      for (int i = 0; i < rb.rows && ok; ++i) {
        ok = kv::quantize_i16(rb.q[i], n, row16, ws.row_scale[i]);
        if (ok) few_rows::pack_query_i16(row16, i, n, npad, packed);
      }
      if (ok) return {true, factor};
    }
    if constexpr (kInt4<T>) return {false, factor};
  }
  const float fold = std::fabs(factor) <= 1.0f ? factor : 1.0f;
  // (and for raw float16, the rebias the keys lack: exact, see attend_few_rows)
  few_rows::pack_queries(rb.rows, rb.q, n, kRawHalf<T> ? fold * half::kRebias : fold, ws.qpack);
  return {false, fold == factor ? 1.0f : factor};
}

// Whether q·2^112 is finite for every element of every row's query (|q| < 2^16; NaN and ±∞
// are not).
inline bool fits_rebias(const RowBlock& rb, int n) {
  for (int i = 0; i < rb.rows; ++i)
    for (int d = 0; d < n; ++d)
      if (!(std::fabs(rb.q[i][d]) < 0x1p16f)) return false;
  return true;
}

// The few-rows path (see kFewRows) over keys [begin, end): every row of the kv head in one block,
// with the blocked path's score rule and online softmax over blocks of up to kFewKeys keys, K and
// V read by few_rows.h's loops. Block i holds the i-th stretch of kFewKeys / 2 keys of each half
// of [begin, end), read side by side (KeyBlock). Leaves the rows' statistics (max, sum,
// unnormalised acc) in ws.
template <class T>
void attend_keys(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, int begin, int end, Workspace& ws) {
  start_rows(p, rb, ws);
  // Raw dot products times scale·log2 e (or scale/softcap) when that factor is finite, else by
  // its parts in the score rule: one finite operand at a time, so a product may overflow to ±∞
  // but never become NaN.
  const score::Scaling sc = score::few_rows_scaling(p);
  const FewQueries fq = few_queries<T>(p, rb, sc.pack, ws);
  const int keys = end - begin, half = (keys + 1) / 2;
  constexpr int kRun = kFewKeys / 2;
  for (int t0 = 0; t0 < half; t0 += kRun) {
    KeyBlock kb;
    kb.start[0] = begin + t0;
    kb.len[0] = std::min(kRun, half - t0);
    kb.start[1] = begin + half + t0;
    kb.len[1] = std::clamp(keys - half - t0, 0, kRun);
    if constexpr (kInt4<T>) {
      few_scores_i4(p, rb, h, fq, kb, ws);
    } else {
      few_scores<T>(p, rb, h, fq, kb, ws);
    }
    for (int i = 0; i < rb.rows; ++i) {
      float* s = ws.scores + i * ws.scores_ld;
      for (int run = 0; run < 2; ++run) {
        float* sr = s + kb.offset(run);
        score::apply(p, sc, rb.rule[i], rb.key_padding, kb.start[run], kb.len[run], sr);
        if (rb.w[i]) std::copy(sr, sr + kb.len[run], rb.w[i] + kb.start[run]);
      }
      softmax_update(p, i, kb.size(), s, nullptr, ws);
    }
    if (p.value) {
      if constexpr (kInt4<T>) {
        few_values_i4(p, rb, h, kb, ws);
      } else {
        few_values<T>(p, rb, h, kb, ws);
      }
    }
  }
}

// attend_keys over keys of type T; a finite float16 cache (half::Finite) is read without the
// rebias (half::FiniteRaw), which the queries and the probabilities carry instead — the same
// products to the bit (powers of two), a multiply less per vector of K and of V — unless a query
// is too large for that, and then as any float16.
template <class T>
void attend_few_rows(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, int begin, int end,
                     Workspace& ws) {
  if constexpr (std::is_same_v<T, half::Finite>) {
    if (fits_rebias(rb, p.head_dim)) return attend_keys<half::FiniteRaw>(p, rb, h, begin, end, ws);
    return attend_keys<std::uint16_t>(p, rb, h, begin, end, ws);
  } else {
    return attend_keys<T>(p, rb, h, begin, end, ws);
  }
}

// Units are contiguous ranges of the work [0, units), handed out to about four times as many
// items as there are threads worth using for `work`, each item with its own workspace: which
// thread runs which unit never changes a result (a unit is always computed the same way), only
// how the work spreads. Their workspaces: whole (Room::all), the rows' statistics only, or with
// packed Kᵀ and V for one chunk of the blocked split's keys.
enum class Room { all, stats, key_chunk };

template <class Fn>
const char* for_each_unit(const AttentionParams& p, int units, const Work& work, Room room, Fn&& fn) {
  const int items = std::min(units, 4 * threads_for(work));
  std::atomic<const char*> error{nullptr};
  parallel_for(items, work, [&](int item) {
    Workspace ws;
    if (!(room == Room::stats ? ws.reserve_stats(p) : ws.reserve(p, true, room == Room::key_chunk))) {
      error = "attention: out of memory for the workspace";
      return;
    }
    const int u0 = static_cast<int>(std::int64_t(item) * units / items);
    const int u1 = static_cast<int>(std::int64_t(item + 1) * units / items);
    for (int u = u0; u < u1; ++u) fn(u, ws);
  });
  return error.load();
}

// a · b, or SIZE_MAX if that overflows size_t (the allocation of it then fails).
inline std::size_t size_product(std::size_t a, std::size_t b) {
  std::size_t n;
  return __builtin_mul_overflow(a, b, &n) ? std::numeric_limits<std::size_t>::max() : n;
}

// A split's partial results, flash-decoding style: per unit (a chunk of keys for some rows), up to
// `rows` rows' max, sum and unnormalised accumulator, kept while the units run, then merged in
// chunk order. Both splits (run_few_rows, run_blocked_split) keep them so; floats() is what
// attention_workspace_bytes counts.
struct SplitPartials {
  int rows = 0, acc_ld = 0;
  ScratchFloats data;  // the thread's scratch when it fits (runtime/buffer.h)

  SplitPartials(const AttentionParams& p, int rows_cap)
      : rows(rows_cap), acc_ld(p.value ? round_up(p.value_dim, kTileCols) : 0) {}
  static double floats(double units, int unit_rows, int ld) { return units * unit_rows * (2.0 + ld); }
  std::size_t unit_floats() const { return static_cast<std::size_t>(rows) * (2 + acc_ld); }
  bool allocate(std::size_t units) { return data.allocate(size_product(units, unit_floats())); }
  // Unit u's statistics: the workspace's first n rows.
  void save(std::size_t u, int n, const Workspace& ws) {
    float* out = data.get() + u * unit_floats();
    std::copy(ws.row_max, ws.row_max + n, out);
    std::copy(ws.row_sum, ws.row_sum + n, out + rows);
    if (acc_ld) simd::copy(ws.acc, n * acc_ld, out + 2 * rows);
  }
  // Merges unit u's first n rows into the workspace's (after start_rows), the next chunk in order.
  void merge(const AttentionParams& p, std::size_t u, int n, Workspace& ws) const {
    const float* in = data.get() + u * unit_floats();
    for (int i = 0; i < n; ++i) merge_stats(p, i, in[i], in[rows + i], in + 2 * rows + i * acc_ld, ws);
  }
};

// The few-rows path for every (batch, kv head). Decode has few kv heads (MQA, or batch 1 with
// GQA), so the keys are also split, flash-decoding style, into chunks of kSplitKeys from the
// rows' first visible key — a split fixed by the shape alone, never by the thread count, so a
// result is the same bits whatever the threads — each chunk's statistics kept, then merged in
// chunk order.
const char* run_few_rows(const AttentionParams& p) {
  const int heads = p.batch * p.kv_heads;
  const FewRowsSplit split = few_rows_split(p);  // every kv head's rows see the same key range
  const int begin = split.begin, end = split.end, chunks = split.chunks;
  const auto attend = [&p](int b, int kvh, RowBlock& rb, int kb, int ke, Workspace& ws) {
    fill_row_block(p, b, kvh, 0, rb, kFewRows);
    const kv::Head h = kv::head(p, b, kvh);
    kv::with_type(h.type, [&](auto t) { attend_few_rows<decltype(t)>(p, rb, h, kb, ke, ws); });
  };
  const Work work = forward_work(p);
  if (chunks == 1) {
    return for_each_unit(p, heads, work, Room::all, [&](int u, Workspace& ws) {
      RowBlock rb;
      attend(u / p.kv_heads, u % p.kv_heads, rb, begin, end, ws);
      fold_sinks(p, rb, ws);
      finish_rows(p, rb, begin, end, ws);
    });
  }
  // Per (kv head, chunk), head-major.
  const int rows = split.rows;
  SplitPartials partial(p, rows);
  if (!partial.allocate(size_product(heads, chunks))) return "attention: out of memory for the workspace";
  const char* err = for_each_unit(p, heads * chunks, work, Room::all, [&](int u, Workspace& ws) {
    const int head = u / chunks, c = u % chunks;
    const int kb = begin + c * kSplitKeys, ke = std::min(end, kb + kSplitKeys);
    RowBlock rb;
    attend(head / p.kv_heads, head % p.kv_heads, rb, kb, ke, ws);
    partial.save(u, rows, ws);
  });
  if (err) return err;
  const double merged = double(heads) * chunks * double(partial.unit_floats());  // each chunk's, read and merged
  return for_each_unit(p, heads, Work{8 * merged, 4 * merged}, Room::stats, [&](int head, Workspace& ws) {
    RowBlock rb;
    fill_row_block(p, head / p.kv_heads, head % p.kv_heads, 0, rb, kFewRows);
    start_rows(p, rb, ws);
    for (int c = 0; c < chunks; ++c) partial.merge(p, static_cast<std::size_t>(head) * chunks + c, rows, ws);
    fold_sinks(p, rb, ws);
    finish_rows(p, rb, begin, end, ws);
  });
}

// The blocked path over a split of the keys (blocks::blocked_key_split; one kv head): units of
// (chunk, row block), chunk-major, so that a work item's units share chunks and pack each one's
// keys once; each unit's statistics kept, then merged in chunk order per row block, as
// run_few_rows does. Each chunk's k_max (score::scaling) is over its own keys, and an item's
// workspace packs one chunk's keys at a time.
const char* run_blocked_split(const AttentionParams& p, const BlockedKeySplit& split) {
  const int blocks = split.blocks, chunks = split.chunks, units = blocks * chunks;
  const kv::Head h = kv::head(p, 0, 0);
  SplitPartials partial(p, kRowsPerBlock);
  if (!partial.allocate(units)) return "attention: out of memory for the workspace";
  const char* err = for_each_unit(p, units, forward_work(p), Room::key_chunk, [&](int u, Workspace& ws) {
    const int c = u / blocks, blk = u % blocks;
    const int kb = split.begin + c * kBlockedSplitKeys, ke = std::min(split.end, kb + kBlockedSplitKeys);
    if (ws.chunk != c) {
      ws.hold_chunk(c, kb);
      ws.k_max = kv::key_abs_max(h, kb, ke, p.head_dim);
    }
    RowBlock rb;
    fill_row_block(p, 0, 0, blk * kRowsPerBlock, rb);
    // The chunk's keys that the rows may see (none: statistics of nothing, which the merge skips).
    const int begin = std::max(kb, rb.keys.begin / kTileCols * kTileCols), end = std::min(ke, rb.keys.end);
    if (begin < end) {
      attend_passes(p, rb, h, begin, end, ws);
    } else {
      start_rows(p, rb, ws);
    }
    partial.save(u, rb.rows, ws);
  });
  if (err) return err;
  const double merged = double(units) * double(partial.unit_floats());  // each unit's statistics, read and merged
  return for_each_unit(p, blocks, Work{8 * merged, 4 * merged}, Room::stats, [&](int blk, Workspace& ws) {
    RowBlock rb;
    fill_row_block(p, 0, 0, blk * kRowsPerBlock, rb);
    start_rows(p, rb, ws);
    for (int c = 0; c < chunks; ++c) partial.merge(p, static_cast<std::size_t>(c) * blocks + blk, rb.rows, ws);
    fold_sinks(p, rb, ws);
    finish_rows(p, rb, rb.keys.begin / kTileCols * kTileCols, rb.keys.end, ws);
  });
}

const char* run(const AttentionParams& p) {
  if (takes_few_rows(p)) return run_few_rows(p);
  const BlockedKeySplit key_split = blocked_key_split(p);
  if (key_split.chunks > 1) return run_blocked_split(p, key_split);
  // Work items: one (batch, kv head) each, or chunks of its row blocks (each chunk then packs the
  // key blocks it needs itself). Items never share output rows and compute them exactly as a
  // serial run would.
  const Work work = forward_work(p);
  const BlockedSplit split = blocked_split(p, threads_for(work));
  const int chunks = split.chunks;
  std::atomic<const char*> error{nullptr};
  parallel_for(p.batch * p.kv_heads * chunks, work, [&](int item) {
    const int b = item / chunks / p.kv_heads, kvh = item / chunks % p.kv_heads, chunk = item % chunks;
    Workspace ws;
    if (!ws.reserve(p)) {
      error = "attention: out of memory for the workspace";
      return;
    }
    const kv::Head h = kv::head(p, b, kvh);
    const int first = chunk * split.blocks / chunks, last = (chunk + 1) * split.blocks / chunks;
    if (first < last) {  // the largest |k| any row of the kv head may see: whatever the chunks
      // (they follow the thread count), every row block chooses its scaling alike (score::scaling)
      const score::KeyRange r0 = score::key_range(p, 0), r1 = score::key_range(p, p.seq_q - 1);
      ws.k_max = kv::key_abs_max(h, std::min(r0.begin, r1.begin), std::max(r0.end, r1.end), p.head_dim);
    }
    for (int blk = first; blk < last; ++blk) {
      RowBlock rb;
      fill_row_block(p, b, kvh, blk * kRowsPerBlock, rb);
      attend_block(p, rb, h, ws);
    }
  });
  return error.load();
}

}  // namespace

const char* attention(const AttentionParams& p) {
  if (const char* err = validate(p)) return err;
  const ScratchScope scratch;  // the workspaces of a small call (runtime/buffer.h)
  return run(p);
}

double attention_workspace_bytes(const AttentionParams& p, bool backward) {
  // Sizes the kernel refuses before allocating anything (and that the arithmetic below needs).
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.heads % p.kv_heads || p.seq_q < 1 || p.seq_k < 1 ||
      p.head_dim < 1 || (p.value && p.value_dim < 1))
    return 0;
  if (backward) return backward_workspace_bytes(p);
  // Work items run up to `threads` at a time (parallel_for), each with its own Workspace, freed
  // as it ends.
  const int threads = num_threads();
  const auto at_once = [threads](std::int64_t items) { return double(std::min<std::int64_t>(items, threads)); };
  const std::int64_t heads = std::int64_t(p.batch) * p.kv_heads;
  if (!takes_few_rows(p)) {
    const BlockedKeySplit key_split = blocked_key_split(p);
    const WorkspaceLayout layout = workspace_layout(p, false, key_split.chunks > 1);
    const double ws = double(layout.floats());
    if (key_split.chunks == 1) return 4.0 * at_once(heads * blocked_split(p, threads).chunks) * ws;
    // Every unit's statistics, held while the units run, then while the row blocks merge them.
    const std::int64_t units = std::int64_t(key_split.blocks) * key_split.chunks;
    const double partial = SplitPartials::floats(double(units), kRowsPerBlock, layout.acc_ld);
    return 4.0 * (partial + std::max(at_once(units) * ws, at_once(key_split.blocks) * double(stats_floats(p))));
  }
  const WorkspaceLayout ws = workspace_layout(p, true);
  const FewRowsSplit split = few_rows_split(p);
  if (split.chunks == 1) return 4.0 * at_once(heads) * double(ws.floats());
  // Split over keys: every chunk's statistics, held while the chunks run, then while they merge.
  const double partial = SplitPartials::floats(double(heads) * split.chunks, split.rows, ws.acc_ld);
  return 4.0 * (partial + std::max(at_once(heads * split.chunks) * double(ws.floats()),
                                   at_once(heads) * double(stats_floats(p))));
}

}  // namespace attn
