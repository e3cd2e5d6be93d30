// The backward driver (float32 keys and values). One item per (batch, kv head): its d_key and
// d_value sum over the group's query rows. Per block of query rows: the row statistics (from the
// forward's saved lse and out, or a forward pass over the block), then per visible key block
// S = Q·Kᵀ through the score rule, P, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)) ⊙ softcap slope,
// dQ += dS·K, dK += dSᵀ·Q and dV += Pᵀ·dO, all on the micro-kernel.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel/attention.h"
#include "kernel/attention_blocks.h"
#include "kernel/work.h"
#include "runtime/buffer.h"
#include "runtime/parallel.h"

namespace attn {
namespace {

using namespace blocks;
using kernel::Init;

// The forward's statistics for the rows of rb from its saved lse and out (when given and
// finite): the reference is lse in log2 units and the sum 1, so exp2(s − ref) is the weight.
bool load_saved(const AttentionParams& p, const AttentionGrads& g, int b, const RowBlock& rb, Workspace& ws,
                const float** out_rows) {
  if (!g.lse || !g.out) return false;
  for (int i = 0; i < rb.rows; ++i) {
    const float l = g.lse[b * p.l.batch + rb.h[i] * p.l.head + rb.qi[i] * p.l.row];
    if (!std::isfinite(l)) return false;
    ws.row_max[i] = l * kLog2e;
    ws.row_sum[i] = 1.0f;
    out_rows[i] = g.out + b * p.o.batch + rb.h[i] * p.o.head + rb.qi[i] * p.o.row;
  }
  return true;
}

// Floats of Vᵀ's panels (V read as keys, for dP = dO·Vᵀ), key block by key block.
std::uint64_t vt_floats(const AttentionParams& p) {
  const std::uint64_t blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
  return blocks * kKeysPerBlock * std::uint64_t(p.value_dim);
}

// Floats of an item's own buffer beside its forward Workspace (laid out in attention_backward):
// Vᵀ and a flag per key block, the block's rows (queries, dO as tiles and as rows, the forward
// output, dQ), P, dS and the softcap slopes of a key block, rowsum(dO ⊙ O), and dK and dV for
// every key. 64-bit, like WorkspaceLayout.
std::uint64_t item_floats(const AttentionParams& p) {
  using U = std::uint64_t;
  const U d_ld = round_up(p.head_dim, W), dv_ld = round_up(p.value_dim, W), dv = p.value_dim;
  const U blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
  return vt_floats(p) + blocks + kRowsPerBlock * (2 * d_ld + 2 * dv_ld + dv + 3 * kKeysPerBlock + 1) +
         U(p.seq_k) * (d_ld + dv_ld);
}

}  // namespace

// One item per (batch, kv head), up to `threads` at a time, each with a forward Workspace and
// its own buffer; d_sinks' per-item parts for the whole call.
double blocks::backward_workspace_bytes(const AttentionParams& p) {
  const std::int64_t items = std::int64_t(p.batch) * p.kv_heads;
  const double sink_parts = p.sinks ? double(items) * (p.heads / p.kv_heads) : 0.0;
  const double item = double(workspace_layout(p, false).floats()) + double(item_floats(p));
  return 4.0 * (sink_parts + double(std::min<std::int64_t>(items, num_threads())) * item);
}

const char* attention_backward(const AttentionParams& forward, const AttentionGrads& g) {
  if (!forward.value) return "attention_backward: value is required";
  if (!g.d_out || !g.d_query || !g.d_key || !g.d_value)
    return "attention_backward: d_out, d_query, d_key and d_value are required";
  if (forward.kv_type != KvType::f32 || forward.kv_ring != 0)
    return "attention_backward: keys and values must be float32, not a ring";
  if (forward.sinks && !g.d_sinks) return "attention_backward: d_sinks is required with sinks";
  const ScratchScope scratch;  // the workspaces of a small call (runtime/buffer.h)
  // The forward's weights play no part; its out is replaced by a private buffer per block.
  AttentionParams p = forward;
  p.out = g.d_query;  // (only to validate as a forward call)
  p.weights = nullptr;
  p.lse = nullptr;
  if (const char* err = validate(p)) return err;
  const int d = p.head_dim, dv = p.value_dim, group = p.heads / p.kv_heads;
  const int d_ld = round_up(d, W), dv_ld = round_up(dv, W);
  const int rows_per_kv_head = group * p.seq_q;
  const int blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
  const int items = p.batch * p.kv_heads;
  // d_sinks: per item and query head of its group, summed in a fixed order afterwards, so the
  // result does not depend on the thread count.
  FloatBuffer sink_parts;
  if (p.sinks && !sink_parts.allocate(static_cast<std::size_t>(items) * group))
    return "attention_backward: out of memory";
  std::atomic<const char*> error{nullptr};
  parallel_for(items, backward_work(p), [&](int item) {
    const int b = item / p.kv_heads, kvh = item % p.kv_heads;
    Workspace ws;
    FloatBuffer buf;
    if (!ws.reserve(p, false) || !buf.allocate(item_floats(p))) {
      error = "attention_backward: out of memory";
      return;
    }
    float* vt = buf.get();                                  // Vᵀ panels (V read as keys), for dP = dO·Vᵀ
    float* vt_packed = vt + vt_floats(p);                   // per key block: 1 once vt holds it
    float* qraw = vt_packed + blocks;                       // the block's query rows [16][d_ld]
    float* dopack = qraw + kRowsPerBlock * d_ld;            // dO rows as A tiles [tile][dv][2]
    float* doraw = dopack + kRowsPerBlock * dv;             // dO rows [16][dv_ld]
    float* o = doraw + kRowsPerBlock * dv_ld;               // the forward output [16][dv_ld]
    float* dq = o + kRowsPerBlock * dv_ld;                  // [16][d_ld]
    float* pblk = dq + kRowsPerBlock * d_ld;                // P for a key block [16][64]
    float* dsblk = pblk + kRowsPerBlock * kKeysPerBlock;    // dP, then dS [16][64]
    float* slope = dsblk + kRowsPerBlock * kKeysPerBlock;   // softcap slopes [16][64]
    float* dsum = slope + kRowsPerBlock * kKeysPerBlock;    // rowsum(dO ⊙ O) [16]
    float* dk = dsum + kRowsPerBlock;                       // [seq_k][d_ld]
    float* dvv = dk + static_cast<std::size_t>(p.seq_k) * d_ld;  // [seq_k][dv_ld]
    std::fill(dk, dk + static_cast<std::size_t>(p.seq_k) * (d_ld + dv_ld), 0.0f);
    std::fill(vt_packed, vt_packed + blocks, 0.0f);
    float* sinks_out = p.sinks ? sink_parts.get() + static_cast<std::size_t>(item) * group : nullptr;
    if (sinks_out) std::fill(sinks_out, sinks_out + group, 0.0f);

    const kv::Head h = kv::head(p, b, kvh);
    const score::KeyRange first = score::key_range(p, 0), last = score::key_range(p, p.seq_q - 1);
    ws.k_max = kv::key_abs_max(h, std::min(first.begin, last.begin), std::max(first.end, last.end), d);

    for (int r0 = 0; r0 < rows_per_kv_head; r0 += kRowsPerBlock) {
      RowBlock rb;
      fill_row_block(p, b, kvh, r0, rb);
      const float* d_out_rows[kRowsPerBlock];
      float* d_query_rows[kRowsPerBlock];
      const float* out_rows[kRowsPerBlock];
      for (int i = 0; i < rb.rows; ++i) {
        d_out_rows[i] = g.d_out + b * g.d_o.batch + rb.h[i] * g.d_o.head + rb.qi[i] * g.d_o.row;
        d_query_rows[i] = g.d_query + b * g.d_q.batch + rb.h[i] * g.d_q.head + rb.qi[i] * g.d_q.row;
        rb.o[i] = o + i * dv_ld;
      }
      // Row statistics (ws.row_max, ws.row_sum) and O: saved, or from a forward pass.
      if (!load_saved(p, g, b, rb, ws, out_rows)) {
        blocks::attend_block(p, rb, h, ws);
        for (int i = 0; i < rb.rows; ++i) out_rows[i] = o + i * dv_ld;
      }
      const score::Scaling sc = pack_block_queries(p, rb, ws.k_max, ws.qpack);
      for (int i = 0; i < rb.rows; ++i) {
        dsum[i] = simd::dot(d_out_rows[i], out_rows[i], dv);
        std::copy(rb.q[i], rb.q[i] + d, qraw + i * d_ld);
        std::copy(d_out_rows[i], d_out_rows[i] + dv, doraw + i * dv_ld);
        // d(sink) = −Σ_rows P(sink) · rowsum(dO ⊙ O)
        if (sinks_out && rb.rule[i].sink != kNegInf && ws.row_sum[i] != 0.0f && ws.row_max[i] != kPosInf)
          sinks_out[rb.h[i] - kvh * group] -=
              simd::exp2_softmax(rb.rule[i].sink - ws.row_max[i]) / ws.row_sum[i] * dsum[i];
      }
      for (int i0 = 0; i0 < rb.rows; i0 += kTileRows) {
        float* tile = dopack + static_cast<std::ptrdiff_t>(i0 / kTileRows) * dv * kTileRows;
        for (int i = 0; i < kTileRows; ++i)
          for (int c = 0; c < dv; ++c) tile[c * kTileRows + i] = i0 + i < rb.rows ? d_out_rows[i0 + i][c] : 0.0f;
      }
      std::fill(dq, dq + rb.rows * d_ld, 0.0f);

      for (int blk = first_block(rb); blk < end_block(rb); ++blk) {
        const int kb = blk * kKeysPerBlock;
        const int len = std::min(kKeysPerBlock, rb.keys.end - kb);
        ensure_packed(p, h, ws, blk);
        const float* kt = ws.kt_block(blk);
        float* vtb = vt + static_cast<std::ptrdiff_t>(blk) * dv * kKeysPerBlock;
        if (vt_packed[blk] == 0.0f) {
          pack_key_block(h, true, blk, p.seq_k, dv, ws.rows, vtb);
          vt_packed[blk] = 1.0f;
        }
        for (int c = 0; c < len; c += kTileCols) {
          kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, ws.qpack, d * kTileRows, kt + c * d, kTileCols, d,
                                                      kTileCols, pblk + c, kKeysPerBlock);
          kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, dopack, dv * kTileRows, vtb + c * dv, kTileCols, dv,
                                                      kTileCols, dsblk + c, kKeysPerBlock);
        }
        for (int i = 0; i < rb.rows; ++i) {
          float* s = pblk + i * kKeysPerBlock;
          float* ds = dsblk + i * kKeysPerBlock;
          float* sl = slope + i * kKeysPerBlock;
          score::apply(p, sc, rb.rule[i], rb.key_padding, kb, len, s, sl);
          const float ref = ws.row_max[i], sum = ws.row_sum[i];
          if (sum == 0.0f) {  // every key masked: no weight, no gradient
            std::fill(s, s + len, 0.0f);
            std::fill(ds, ds + len, 0.0f);
            continue;
          }
          const float inv = 1.0f / sum;
          int j = 0;
          if (ref != kPosInf) {
            const vfloat vref(ref), vinv(inv), vd(dsum[i]), vscale(p.scale);
            for (; j + W <= len; j += W) {
              const vfloat pj = simd::exp2_softmax(simd::load(s + j) - vref) * vinv;
              simd::store(s + j, pj);
              simd::store(ds + j, pj * (simd::load(ds + j) - vd) * simd::load(sl + j) * vscale);
            }
          }
          for (; j < len; ++j) {
            s[j] = unnormalised_weight(s[j], ref) * inv;
            ds[j] = s[j] * (ds[j] - dsum[i]) * sl[j] * p.scale;
          }
        }
        // dQ += dS·K (K rows in place); dK += dSᵀ·Q; dV += Pᵀ·dO.
        kernel::gemm_rows<Init::load, kKeysPerBlock, 1>(rb.rows, dsblk, kTileRows * kKeysPerBlock,
                                                        h.key_at_slot<float>(kb), h.key_row, len, d, dq, d_ld);
        kernel::gemm_rows<Init::load, 1, kKeysPerBlock>(len, dsblk, kTileRows, qraw, d_ld, rb.rows, d,
                                                        dk + static_cast<std::ptrdiff_t>(kb) * d_ld, d_ld);
        kernel::gemm_rows<Init::load, 1, kKeysPerBlock>(len, pblk, kTileRows, doraw, dv_ld, rb.rows, dv,
                                                        dvv + static_cast<std::ptrdiff_t>(kb) * dv_ld, dv_ld);
      }
      for (int i = 0; i < rb.rows; ++i) std::copy(dq + i * d_ld, dq + i * d_ld + d, d_query_rows[i]);
    }
    float* dkey = g.d_key + b * g.d_k.batch + kvh * g.d_k.head;
    float* dvalue = g.d_value + b * g.d_v.batch + kvh * g.d_v.head;
    for (int j = 0; j < p.seq_k; ++j) {
      std::copy(dk + static_cast<std::ptrdiff_t>(j) * d_ld, dk + static_cast<std::ptrdiff_t>(j) * d_ld + d,
                dkey + j * g.d_k.row);
      std::copy(dvv + static_cast<std::ptrdiff_t>(j) * dv_ld, dvv + static_cast<std::ptrdiff_t>(j) * dv_ld + dv,
                dvalue + j * g.d_v.row);
    }
  });
  if (const char* err = error.load()) return err;
  if (p.sinks) {
    for (int h = 0; h < p.heads; ++h) g.d_sinks[h] = 0.0f;
    for (int item = 0; item < items; ++item)
      for (int i = 0; i < group; ++i) g.d_sinks[(item % p.kv_heads) * group + i] += sink_parts.get()[item * group + i];
  }
  return nullptr;
}

}  // namespace attn
