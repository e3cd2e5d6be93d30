// The forward driver. Work items of (batch, kv head, chunk of row blocks) run in parallel; each
// walks blocks of query rows over the key blocks those rows can see, with an online softmax
// (flash attention): Kᵀ and V are packed into panels block by block as first needed (or, for a
// decode step, read in place in their storage type). Only the primitives in simd.h, the
// micro-kernel and the score rule touch scores.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention.h"
#include "attention_blocks.h"
#include "parallel.h"

namespace attn {

using namespace blocks;
using kernel::Init;

void blocks::attend_block(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, Workspace& ws) {
  start_rows(p, rb, ws);
  const score::Scaling sc = score::scaling(p, query_abs_max(rb, p.head_dim), ws.k_max);
  pack_queries(rb, p.head_dim, sc.pack, ws.qpack);
  const int b0 = first_block(rb), b1 = end_block(rb);
  for (int blk = b0; blk < b1; ++blk) {
    const int kb = blk * kKeysPerBlock;
    const int len = std::min(kKeysPerBlock, rb.keys.end - kb);
    ensure_packed(p, h, ws, blk);
    // S = Q · Kᵀ for this block, panel by panel (padding keys are zero and ignored below).
    const float* kt = ws.kt_block(blk);
    for (int c = 0; c < len; c += kTileCols)
      kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, ws.qpack, p.head_dim * kTileRows,
                                                  kt + c * p.head_dim, kTileCols, p.head_dim,
                                                  kTileCols, ws.scores + c, kKeysPerBlock);
    for (int i = 0; i < rb.rows; ++i) {
      float* s = ws.scores + i * kKeysPerBlock;
      score::apply(p, sc, rb.rule[i], rb.key_padding, kb, len, s);
      softmax_update(p, i, len, s, rb.w[i] ? rb.w[i] + kb : nullptr, ws);
    }
    // acc += P · V for this block.
    if (p.value) {
      const float* vblock = ws.v_block(blk);
      for (int c = 0; c < ws.acc_ld; c += kTileCols)
        kernel::gemm_rows<Init::load, kKeysPerBlock, 1>(
            rb.rows, ws.scores, kTileRows * kKeysPerBlock, vblock + c * kKeysPerBlock, kTileCols,
            len, kTileCols, ws.acc + c, ws.acc_ld);
    }
  }
  fold_sinks(p, rb, ws);
  finish_rows(p, rb, b0 * kKeysPerBlock, rb.keys.end, ws);
}

namespace {

// int8 keys with the queries quantised to int16 (kv::quantize_i16): integer dot products, times
// the query's and the key's scale and `factor`. false when it does not apply (a query with a
// non-finite element, or head_dim > kv::kMaxInt8Dot): the float path then runs.
bool direct_scores_int8(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, float factor, Workspace& ws) {
  if (p.head_dim > kv::kMaxInt8Dot) return false;
  alignas(16) std::int16_t q16[kDirectRows][kv::kMaxInt8Dot];
  float q_scale[kDirectRows];
  for (int i = 0; i < rb.rows; ++i)
    if (!kv::quantize_i16(rb.q[i], p.head_dim, q16[i], q_scale[i])) return false;
  kv::for_each_piece(h, rb.keys.begin, rb.keys.end, [&](int j0, int j1, int s0) {
    for (int j = j0, s = s0; j < j1; ++j, ++s) {
      const std::int8_t* k = h.key_at_slot<std::int8_t>(s);
      const float ks = h.key_scale_at_slot(s);
      for (int i = 0; i < rb.rows; ++i)
        ws.scores[i * ws.scores_ld + j] = float(kv::dot_i16_i8(q16[i], k, p.head_dim)) * q_scale[i] * ks * factor;
    }
  });
  return true;
}

// Scores of the block's rows for keys [begin, end) from K rows read in place, each loaded once
// for all rows: raw dot products (times the int8 scale) times `factor`.
template <class T>
void direct_scores(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, float factor, Workspace& ws) {
  if constexpr (std::is_same_v<T, std::int8_t>) {
    if (direct_scores_int8(p, rb, h, factor, ws)) return;
  }
  kv::for_each_piece(h, rb.keys.begin, rb.keys.end, [&](int j0, int j1, int s0) {
    for (int j = j0, s = s0; j < j1; ++j, ++s) {
      const T* k = h.key_at_slot<T>(s);
      const float ks = h.key_scale_at_slot(s);
      for (int i = 0; i < rb.rows; ++i)
        ws.scores[i * ws.scores_ld + j] = kv::dot(rb.q[i], k, p.head_dim) * ks * factor;
    }
  });
}

// acc += P·V as one pass over V's rows, each loaded once for all rows.
template <class T>
void direct_values(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, Workspace& ws) {
  kv::for_each_piece(h, rb.keys.begin, rb.keys.end, [&](int j0, int j1, int s0) {
    for (int j = j0, s = s0; j < j1; ++j, ++s) {
      const T* v = h.value_at_slot<T>(s);
      const float vs = h.value_scale_at_slot(s);
      for (int i = 0; i < rb.rows; ++i)
        kv::axpy(ws.scores[i * ws.scores_ld + j] * vs, v, ws.acc + i * ws.acc_ld, p.value_dim);
    }
  });
}

// The few-rows path (see kDirectRows): scores for the visible keys at once, then P·V, with K
// and V read in place in their storage type.
void attend_direct(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, Workspace& ws) {
  start_rows(p, rb, ws);
  // Raw dot products times scale·log2 e (or scale/softcap) when that factor is finite, else by
  // its parts in the score rule: one finite operand at a time, so a product may overflow to ±∞
  // but never become NaN.
  const score::Scaling sc = score::direct_scaling(p);
  const int begin = rb.keys.begin, end = rb.keys.end;
  kv::with_type(h.type, [&](auto t) { direct_scores<decltype(t)>(p, rb, h, sc.pack, ws); });
  for (int i = 0; i < rb.rows; ++i) {
    float* s = ws.scores + i * ws.scores_ld + begin;
    score::apply(p, sc, rb.rule[i], rb.key_padding, begin, end - begin, s);
    softmax_update(p, i, end - begin, s, rb.w[i] ? rb.w[i] + begin : nullptr, ws);
  }
  if (p.value) kv::with_type(h.type, [&](auto t) { direct_values<decltype(t)>(p, rb, h, ws); });
  fold_sinks(p, rb, ws);
  finish_rows(p, rb, begin, end, ws);
}

const char* run(const AttentionParams& p) {
  const int group = p.heads / p.kv_heads;
  const int rows_per_kv_head = group * p.seq_q;
  const int blocks_per_head = (rows_per_kv_head + kRowsPerBlock - 1) / kRowsPerBlock;
  const int kv_heads_total = p.batch * p.kv_heads;
  // Work items: one (batch, kv head) each, split into chunks of row blocks when there are too
  // few heads to keep every thread busy (each chunk then packs the key blocks it needs itself).
  // Items never share output rows and compute them exactly as a serial run would.
  const int threads = num_threads();
  const int chunks =
      threads == 1 ? 1
                   : std::clamp((2 * threads + kv_heads_total - 1) / kv_heads_total, 1, blocks_per_head);
  std::atomic<const char*> error{nullptr};
  parallel_for(kv_heads_total * chunks, [&](int item) {
    const int b = item / chunks / p.kv_heads, kvh = item / chunks % p.kv_heads, chunk = item % chunks;
    Workspace ws;
    if (!ws.reserve(p)) {
      error = "attention: out of memory for the workspace";
      return;
    }
    const kv::Head h = kv::head(p, b, kvh);
    const int first = chunk * blocks_per_head / chunks, last = (chunk + 1) * blocks_per_head / chunks;
    if (!ws.direct && first < last) {  // the largest |k| this item's rows may see
      const int qi0 = first * kRowsPerBlock / group;
      const int qi1 = (std::min(last * kRowsPerBlock, rows_per_kv_head) - 1) / group;
      const score::KeyRange r0 = score::key_range(p, qi0), r1 = score::key_range(p, qi1);
      ws.k_max = kv::key_abs_max(h, std::min(r0.begin, r1.begin), std::max(r0.end, r1.end), p.head_dim);
    }
    for (int blk = first; blk < last; ++blk) {
      RowBlock rb;
      fill_row_block(p, b, kvh, blk * kRowsPerBlock, rb);
      if (ws.direct)
        attend_direct(p, rb, h, ws);
      else
        attend_block(p, rb, h, ws);
    }
  });
  return error.load();
}

}  // namespace

const char* attention(const AttentionParams& p) {
  if (const char* err = validate(p)) return err;
  return run(p);
}

}  // namespace attn
