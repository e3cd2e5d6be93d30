// The forward driver. Work items of (batch, kv head, chunk of row blocks) run in parallel; each
// packs its head's Kᵀ and V into panels (or, for a decode step, reads them in place), then walks
// blocks of query rows over blocks of keys with an online softmax (flash attention). Only the
// primitives in simd.h and the register-tiled micro-kernel in microkernel.h touch vectors.
#include "attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "buffer.h"
#include "microkernel.h"
#include "parallel.h"
#include "simd.h"

namespace attn {
namespace {

using kernel::Init;
using kernel::kTileCols;
using kernel::kTileRows;
using simd::vfloat;
using simd::W;

constexpr int kRowsPerBlock = 16;  // query rows that share one pass over a key block
constexpr int kKeysPerBlock = 64;  // keys per block: S (16×64) and a Kᵀ block stay in L1
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRescaleSlack = 8.0f;  // log2 units: probabilities up to 2^8 before a rescale
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
static_assert(kKeysPerBlock % kernel::kTileCols == 0, "key blocks hold whole panels");
// Up to this many query rows per kv head (a decode step: one position, the heads of a group),
// packing K and V would cost more than it saves: attend_direct reads them once, in place.
constexpr int kDirectRows = 4;

inline int round_up(int x, int m) { return (x + m - 1) / m * m; }

// a·b over n floats (two vector chains, scalar tail).
inline float dot(const float* a, const float* b, int n) {
  vfloat a0(0.0f), a1(0.0f);
  int c = 0;
  for (; c + 2 * W <= n; c += 2 * W) {
    a0 += simd::load(a + c) * simd::load(b + c);
    a1 += simd::load(a + c + W) * simd::load(b + c + W);
  }
  for (; c + W <= n; c += W) a0 += simd::load(a + c) * simd::load(b + c);
  float sum = simd::reduce_add(a0 + a1);
  for (; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// y += alpha · x over n floats.
inline void axpy(float alpha, const float* x, float* y, int n) {
  int c = 0;
  for (; c + W <= n; c += W) simd::store(y + c, simd::load(y + c) + vfloat(alpha) * simd::load(x + c));
  for (; c < n; ++c) y[c] += alpha * x[c];
}

// Scratch for one work item; sizes depend only on the params.
struct Workspace {
  int kt_block_floats = 0;  // head_dim × kKeysPerBlock
  int acc_ld = 0;           // value_dim rounded up to kTileCols
  int v_block_floats = 0;   // kKeysPerBlock × acc_ld
  int scores_ld = 0;        // kKeysPerBlock, or seq_k in direct mode
  bool direct = false;      // few rows per kv head: no packing, see attend_direct
  FloatBuffer mem;
  float* kt = nullptr;      // Kᵀ of one kv head, see pack_keys_transposed
  float* vp = nullptr;      // V of one kv head, see pack_values
  float* qpack = nullptr;   // the block's query rows, tile by tile: [tile][head_dim][kTileRows]
  float* scores = nullptr;  // [kRowsPerBlock][scores_ld]
  float* acc = nullptr;     // [kRowsPerBlock][acc_ld]
  float* row_max = nullptr;  // per row: the reference the exponents are taken from (log2 units)
  float* row_sum = nullptr;  // running sum of exp2(score − max) per row

  bool reserve(const AttentionParams& p, bool allow_direct = true) {
    direct = allow_direct && (p.heads / p.kv_heads) * static_cast<std::int64_t>(p.seq_q) <= kDirectRows;
    const int blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
    kt_block_floats = direct ? 0 : p.head_dim * kKeysPerBlock;
    acc_ld = p.value ? round_up(p.value_dim, kTileCols) : 0;
    v_block_floats = direct ? 0 : kKeysPerBlock * acc_ld;
    scores_ld = direct ? p.seq_k : kKeysPerBlock;
    const std::size_t kt_n = static_cast<std::size_t>(blocks) * kt_block_floats;
    const std::size_t vp_n = static_cast<std::size_t>(blocks) * v_block_floats;
    const std::size_t q_n = direct ? 0 : kRowsPerBlock * static_cast<std::size_t>(p.head_dim);
    const std::size_t total =
        kt_n + vp_n + q_n + kRowsPerBlock * (static_cast<std::size_t>(scores_ld) + acc_ld + 2);
    if (!mem.allocate(total)) return false;
    kt = mem.get();
    vp = kt + kt_n;
    qpack = vp + vp_n;
    scores = qpack + q_n;
    acc = scores + kRowsPerBlock * static_cast<std::size_t>(scores_ld);
    row_max = acc + kRowsPerBlock * acc_ld;
    row_sum = row_max + kRowsPerBlock;
    return true;
  }
};

// One block of query rows of one (batch, kv head): the rows may come from different query
// heads of the group, so every row carries its own pointers and causal limit.
struct RowBlock {
  int rows = 0;
  const float* q[kRowsPerBlock];
  float* o[kRowsPerBlock];
  float* w[kRowsPerBlock];
  const void* m[kRowsPerBlock];
  float* lse[kRowsPerBlock];  // null when not asked for
  const std::uint8_t* key_padding = nullptr;  // this block's batch entry, or null
  int key_end[kRowsPerBlock];  // keys [0, key_end) are not causally masked
};

// Transposes key rows [seq_k × head_dim] into blocks of kKeysPerBlock keys, each stored as
// panels of kTileCols keys, [panel][head_dim][kTileCols]: the micro-kernel then reads one
// contiguous stream per panel. Keys past seq_k in the last panel are zero.
void pack_transposed(const float* key, std::ptrdiff_t row_stride, int seq_k, int head_dim,
                     float* packed) {
  for (int kb = 0; kb < seq_k; kb += kKeysPerBlock) {
    const int len = std::min(kKeysPerBlock, seq_k - kb);
    float* block = packed + static_cast<std::ptrdiff_t>(kb / kKeysPerBlock) * head_dim * kKeysPerBlock;
    for (int j = 0; j < round_up(len, kTileCols); ++j) {
      float* dst = block + (j / kTileCols) * head_dim * kTileCols + j % kTileCols;
      const float* src = j < len ? key + static_cast<std::ptrdiff_t>(kb + j) * row_stride : nullptr;
      for (int d = 0; d < head_dim; ++d) dst[d * kTileCols] = src ? src[d] : 0.0f;
    }
  }
}

void pack_keys_transposed(const float* key, std::ptrdiff_t row_stride, int seq_k, int head_dim,
                          Workspace& ws) {
  pack_transposed(key, row_stride, seq_k, head_dim, ws.kt);
}

// Copies value rows [seq_k × value_dim] into blocks of kKeysPerBlock keys, each stored as
// panels of kTileCols value columns, [panel][key][kTileCols], zero-padded past value_dim, so the
// P·V micro-kernel reads contiguous streams and never a partial vector.
void pack_values(const float* value, std::ptrdiff_t row_stride, int seq_k, int value_dim,
                 Workspace& ws) {
  const int panels = ws.acc_ld / kTileCols;
  for (int kb = 0; kb < seq_k; kb += kKeysPerBlock) {
    const int len = std::min(kKeysPerBlock, seq_k - kb);
    float* block = ws.vp + (kb / kKeysPerBlock) * ws.v_block_floats;
    for (int j = 0; j < len; ++j) {
      const float* src = value + static_cast<std::ptrdiff_t>(kb + j) * row_stride;
      for (int pn = 0; pn < panels; ++pn) {
        float* dst = block + (pn * kKeysPerBlock + j) * kTileCols;
        const int c0 = pn * kTileCols;
        for (int c = 0; c < kTileCols; ++c) dst[c] = c0 + c < value_dim ? src[c0 + c] : 0.0f;
      }
    }
  }
}

// Copies the block's query rows, times `scale` (so Q·Kᵀ comes out already scaled), into tiles
// of kTileRows rows stored [head_dim][kTileRows], the A layout of the Q·Kᵀ micro-kernel; rows
// past the block's end are zero.
void pack_queries(const RowBlock& rb, int head_dim, float scale, float* qpack) {
  for (int i0 = 0; i0 < rb.rows; i0 += kTileRows) {
    float* tile = qpack + static_cast<std::ptrdiff_t>(i0 / kTileRows) * head_dim * kTileRows;
    for (int i = 0; i < kTileRows; ++i) {
      const float* q = i0 + i < rb.rows ? rb.q[i0 + i] : nullptr;
      for (int d = 0; d < head_dim; ++d) tile[d * kTileRows + i] = q ? q[d] * scale : 0.0f;
    }
  }
}

// Takes one row of scores (already scaled into log2 units: the queries were packed times
// scale·log2 e), applies the masks, and folds the row into its running max and sum; leaves
// p = exp2(score − max) in s and rescales the row's accumulator.
// Applies row i's masks (additive, boolean, key padding, causal) to its scores for keys
// [kb, kb + len), in log2 units: masked keys become −∞.
void mask_scores(const AttentionParams& p, const RowBlock& rb, int i, int kb, int len, float* s) {
  int j;
  if (p.mask_type == MaskType::additive) {
    const float* mrow = static_cast<const float*>(rb.m[i]) + kb;
    for (j = 0; j < len; ++j) s[j] += mrow[j] * kLog2e;
  } else if (p.mask_type == MaskType::boolean) {
    const std::uint8_t* mrow = static_cast<const std::uint8_t*>(rb.m[i]) + kb;
    for (j = 0; j < len; ++j)
      if (!mrow[j]) s[j] = kNegInf;
  }
  if (rb.key_padding) {
    const std::uint8_t* pad = rb.key_padding + kb;
    for (j = 0; j < len; ++j)
      if (pad[j]) s[j] = kNegInf;
  }
  for (j = std::max(0, rb.key_end[i] - kb); j < len; ++j) s[j] = kNegInf;  // causal
}

void softmax_update(const AttentionParams& p, const RowBlock& rb, int i, int kb, int len,
                    float* s, Workspace& ws) {
  mask_scores(p, rb, i, kb, len, s);
  if (rb.w[i]) std::copy(s, s + len, rb.w[i] + kb);  // normalised once the row is done

  int j;
  vfloat vm0(kNegInf), vm1(kNegInf);  // two chains: max has a long latency
  for (j = 0; j + 2 * W <= len; j += 2 * W) {
    vm0 = simd::vmax(vm0, simd::load(s + j));
    vm1 = simd::vmax(vm1, simd::load(s + j + W));
  }
  for (; j + W <= len; j += W) vm0 = simd::vmax(vm0, simd::load(s + j));
  float block_max = simd::reduce_max(simd::vmax(vm0, vm1));
  for (; j < len; ++j) block_max = std::max(block_max, s[j]);

  // The row's reference point moves only when the block's max exceeds it by more than
  // kRescaleSlack (or on the first visible block): exp2(s − ref) then stays below 2^kRescaleSlack,
  // far from overflow, and the accumulator is rescaled rarely instead of on every new max.
  const float old_ref = ws.row_max[i];
  const float ref = block_max > old_ref + kRescaleSlack ? block_max : old_ref;
  if (ref == kNegInf) {  // every key so far is masked (or NaN): nothing to add but NaNs
    bool nan = false;
    for (j = 0; j < len; ++j) {
      nan |= s[j] != s[j];
      if (s[j] == s[j]) s[j] = 0.0f;
    }
    if (nan) ws.row_sum[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  float sum = 0.0f;
  if (ref == kPosInf) {
    // Scores of +∞ (overflowing inputs or masks) take all the weight, shared equally, as the
    // limit of the softmax; exp2(∞ − ∞) would be NaN.
    for (j = 0; j < len; ++j) {
      s[j] = s[j] != s[j] ? s[j] : s[j] == kPosInf ? 1.0f : 0.0f;
      sum += s[j];
    }
  } else {
    vfloat vsum(0.0f);
    for (j = 0; j + W <= len; j += W) {
      const vfloat e = simd::exp2_softmax(simd::load(s + j) - vfloat(ref));
      simd::store(s + j, e);
      vsum += e;
    }
    sum = simd::reduce_add(vsum);
    for (; j < len; ++j) {
      s[j] = simd::exp2_softmax(s[j] - ref);
      sum += s[j];
    }
  }
  if (ref != old_ref) {
    const float alpha = simd::exp2_softmax(old_ref - ref);  // 0 while old_ref is -inf
    ws.row_sum[i] *= alpha;
    if (p.value) {
      float* acc = ws.acc + i * ws.acc_ld;
      for (int c = 0; c < ws.acc_ld; c += W) simd::store(acc + c, simd::load(acc + c) * vfloat(alpha));
    }
    ws.row_max[i] = ref;
  }
  ws.row_sum[i] += sum;
}

// Writes the normalised output and weights of every row in the block.
void finish_rows(const AttentionParams& p, const RowBlock& rb, int key_end, Workspace& ws) {
  for (int i = 0; i < rb.rows; ++i) {
    const float sum = ws.row_sum[i];
    if (rb.lse[i]) *rb.lse[i] = sum == 0.0f ? kNegInf : (ws.row_max[i] + std::log2(sum)) / kLog2e;
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;  // 0: every key masked; NaN stays NaN
    if (p.value) {
      const float* acc = ws.acc + i * ws.acc_ld;
      float* o = rb.o[i];
      int c = 0;
      for (; c + W <= p.value_dim; c += W) simd::store(o + c, simd::load(acc + c) * vfloat(inv));
      for (; c < p.value_dim; ++c) o[c] = acc[c] * inv;
    }
    if (float* w = rb.w[i]) {
      const int visited = sum == 0.0f ? 0 : key_end;
      const float ref = ws.row_max[i];
      for (int j = 0; j < visited; ++j) {
        const float e = ref == kPosInf ? (w[j] != w[j] ? w[j] : w[j] == kPosInf ? 1.0f : 0.0f)
                                       : simd::exp2_softmax(w[j] - ref);
        w[j] = e * inv;
      }
      std::fill(w + visited, w + p.seq_k, 0.0f);
    }
  }
}

void attend_block(const AttentionParams& p, const RowBlock& rb, Workspace& ws) {
  int key_end = 0;
  for (int i = 0; i < rb.rows; ++i) key_end = std::max(key_end, rb.key_end[i]);
  std::fill(ws.row_max, ws.row_max + rb.rows, kNegInf);
  std::fill(ws.row_sum, ws.row_sum + rb.rows, 0.0f);
  if (p.value) std::fill(ws.acc, ws.acc + rb.rows * ws.acc_ld, 0.0f);

  pack_queries(rb, p.head_dim, p.scale * kLog2e, ws.qpack);

  for (int kb = 0; kb < key_end; kb += kKeysPerBlock) {
    const int len = std::min(kKeysPerBlock, key_end - kb);
    const float* kt = ws.kt + (kb / kKeysPerBlock) * ws.kt_block_floats;
    // S = Q · Kᵀ for this block, panel by panel (padding keys are zero and ignored below).
    for (int c = 0; c < len; c += kTileCols)
      kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, ws.qpack, p.head_dim * kTileRows,
                                                  kt + c * p.head_dim, kTileCols, p.head_dim,
                                                  kTileCols, ws.scores + c, kKeysPerBlock);
    for (int i = 0; i < rb.rows; ++i)
      softmax_update(p, rb, i, kb, len, ws.scores + i * kKeysPerBlock, ws);
    // acc += P · V for this block.
    if (p.value) {
      const float* vblock = ws.vp + (kb / kKeysPerBlock) * ws.v_block_floats;
      for (int c = 0; c < ws.acc_ld; c += kTileCols)
        kernel::gemm_rows<Init::load, kKeysPerBlock, 1>(
            rb.rows, ws.scores, kTileRows * kKeysPerBlock, vblock + c * kKeysPerBlock, kTileCols,
            len, kTileCols, ws.acc + c, ws.acc_ld);
    }
  }
  finish_rows(p, rb, key_end, ws);
}

// The few-rows path (see kDirectRows): scores for the whole row at once from K rows read in
// place, then P·V as one pass over V's rows; each K and V row is loaded once for all rows.
void attend_direct(const AttentionParams& p, const RowBlock& rb, const float* key_head,
                   const float* value_head, Workspace& ws) {
  int key_end = 0;
  for (int i = 0; i < rb.rows; ++i) key_end = std::max(key_end, rb.key_end[i]);
  std::fill(ws.row_max, ws.row_max + rb.rows, kNegInf);
  std::fill(ws.row_sum, ws.row_sum + rb.rows, 0.0f);
  if (p.value) std::fill(ws.acc, ws.acc + rb.rows * ws.acc_ld, 0.0f);

  const float scale2 = p.scale * kLog2e;
  const int d = p.head_dim;
  for (int j = 0; j < key_end; ++j) {
    const float* k = key_head + j * p.k.row;
    for (int i = 0; i < rb.rows; ++i) ws.scores[i * ws.scores_ld + j] = dot(rb.q[i], k, d) * scale2;
  }
  for (int i = 0; i < rb.rows; ++i)
    softmax_update(p, rb, i, 0, key_end, ws.scores + i * ws.scores_ld, ws);
  if (p.value) {
    const int dv = p.value_dim;
    for (int j = 0; j < key_end; ++j) {
      const float* v = value_head + j * p.v.row;
      for (int i = 0; i < rb.rows; ++i) axpy(ws.scores[i * ws.scores_ld + j], v, ws.acc + i * ws.acc_ld, dv);
    }
  }
  finish_rows(p, rb, key_end, ws);
}

// Describes rows [r0, r0 + kRowsPerBlock) of kv head kvh in batch entry b: query rows ordered
// position-major, so a block's causal limits stay close together and, in a decode step, one
// block holds every query head of the group.
void fill_row_block(const AttentionParams& p, int b, int kvh, int r0, RowBlock& rb) {
  const int group = p.heads / p.kv_heads;
  rb.rows = std::min(kRowsPerBlock, group * p.seq_q - r0);
  rb.key_padding = p.key_padding ? p.key_padding + b * p.key_padding_batch_stride : nullptr;
  for (int i = 0; i < rb.rows; ++i) {
    const int qi = (r0 + i) / group;
    const int h = kvh * group + (r0 + i) % group;
    rb.q[i] = p.query + b * p.q.batch + h * p.q.head + qi * p.q.row;
    rb.o[i] = p.out ? p.out + b * p.o.batch + h * p.o.head + qi * p.o.row : nullptr;
    rb.w[i] = p.weights ? p.weights + b * p.w.batch + h * p.w.head + qi * p.w.row : nullptr;
    rb.lse[i] = p.lse ? p.lse + b * p.l.batch + h * p.l.head + qi * p.l.row : nullptr;
    rb.m[i] = nullptr;
    if (p.mask_type == MaskType::additive)
      rb.m[i] = static_cast<const float*>(p.mask) + b * p.m.batch + h * p.m.head + qi * p.m.row;
    else if (p.mask_type == MaskType::boolean)
      rb.m[i] = static_cast<const std::uint8_t*>(p.mask) + b * p.m.batch + h * p.m.head + qi * p.m.row;
    const int limit = p.causal ? qi + 1 + (p.seq_k - p.seq_q) : p.seq_k;
    rb.key_end[i] = std::clamp(limit, 0, p.seq_k);
  }
}

}  // namespace

Strides dense_bhsd(int heads, int rows, int cols) {
  return {static_cast<std::ptrdiff_t>(heads) * rows * cols,
          static_cast<std::ptrdiff_t>(rows) * cols, cols};
}

Strides mask_strides(MaskShape shape, int heads, int seq_q, int seq_k) {
  Strides m = dense_bhsd(shape == MaskShape::per_head ? heads : 1, seq_q, seq_k);
  if (shape == MaskShape::plane) m.batch = 0;
  if (shape != MaskShape::per_head) m.head = 0;
  return m;
}

Strides dense_bshd(int heads, int rows, int cols) {
  return {static_cast<std::ptrdiff_t>(rows) * heads * cols, cols,
          static_cast<std::ptrdiff_t>(heads) * cols};
}

const char* validate(const AttentionParams& p) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1 ||
      p.head_dim < 1)
    return "attention: batch, heads, kv_heads, seq_q, seq_k and head_dim must be positive";
  if (p.heads % p.kv_heads != 0) return "attention: heads must be a multiple of kv_heads";
  if (!p.query || !p.key) return "attention: query and key are required";
  if (!p.value != !p.out) return "attention: value and out must be given together";
  if (!p.value && !p.weights) return "attention: nothing to compute (no out and no weights)";
  if (p.value && p.value_dim < 1) return "attention: value_dim must be positive";
  if ((p.mask_type == MaskType::none) != (p.mask == nullptr))
    return "attention: mask and mask_type disagree";
  if (p.mask_type != MaskType::none && p.mask_type != MaskType::additive &&
      p.mask_type != MaskType::boolean)
    return "attention: unknown mask_type";
  // Rows of the group are indexed with int; keep that product in range.
  if (static_cast<std::int64_t>(p.seq_q) * (p.heads / p.kv_heads) >
      std::numeric_limits<int>::max())
    return "attention: seq_q × heads/kv_heads is too large";
  return nullptr;
}

const char* attention(const AttentionParams& p) {
  if (const char* err = validate(p)) return err;
  const int group = p.heads / p.kv_heads;
  const int rows_per_kv_head = group * p.seq_q;
  const int blocks_per_head = (rows_per_kv_head + kRowsPerBlock - 1) / kRowsPerBlock;
  const int kv_heads_total = p.batch * p.kv_heads;
  // Work items: one (batch, kv head) each, split into chunks of row blocks when there are too
  // few heads to keep every thread busy (each chunk then packs its head's K and V itself).
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
    const float* key_head = p.key + b * p.k.batch + kvh * p.k.head;
    const float* value_head = p.value ? p.value + b * p.v.batch + kvh * p.v.head : nullptr;
    if (!ws.direct) {
      pack_keys_transposed(key_head, p.k.row, p.seq_k, p.head_dim, ws);
      if (value_head) pack_values(value_head, p.v.row, p.seq_k, p.value_dim, ws);
    }
    const int first = chunk * blocks_per_head / chunks, last = (chunk + 1) * blocks_per_head / chunks;
    for (int blk = first; blk < last; ++blk) {
      RowBlock rb;
      fill_row_block(p, b, kvh, blk * kRowsPerBlock, rb);
      if (ws.direct)
        attend_direct(p, rb, key_head, value_head, ws);
      else
        attend_block(p, rb, ws);
    }
  });
  return error.load();
}

const char* attention_backward(const AttentionParams& forward, const AttentionGrads& g) {
  if (!forward.value) return "attention_backward: value is required";
  if (!g.d_out || !g.d_query || !g.d_key || !g.d_value)
    return "attention_backward: d_out, d_query, d_key and d_value are required";
  // The forward's weights play no part; its out is replaced by a private buffer per block.
  AttentionParams p = forward;
  p.out = g.d_query;  // (only to validate as a forward call)
  p.weights = nullptr;
  p.lse = nullptr;
  if (const char* err = validate(p)) return err;
  const int d = p.head_dim, dv = p.value_dim;
  const int d_ld = round_up(d, W), dv_ld = round_up(dv, W);
  const int rows_per_kv_head = (p.heads / p.kv_heads) * p.seq_q;
  const int blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
  std::atomic<const char*> error{nullptr};
  // One item per (batch, kv head): its d_key and d_value sum over the group's query rows.
  // Per block of query rows: a forward pass (row statistics and O), then per key block
  // S = Q·Kᵀ, P, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)), dQ += dS·K, dK += dSᵀ·Q and
  // dV += Pᵀ·dO, all on the micro-kernel.
  parallel_for(p.batch * p.kv_heads, [&](int item) {
    const int b = item / p.kv_heads, kvh = item % p.kv_heads;
    Workspace ws;
    const std::size_t vt_n = static_cast<std::size_t>(blocks) * dv * kKeysPerBlock;
    const std::size_t extra = vt_n +
        kRowsPerBlock * static_cast<std::size_t>(2 * d_ld + 2 * dv_ld + dv + 2 * kKeysPerBlock + 1) +
        static_cast<std::size_t>(p.seq_k) * (d_ld + dv_ld);
    FloatBuffer buf;
    if (!ws.reserve(p, false) || !buf.allocate(extra)) {
      error = "attention_backward: out of memory";
      return;
    }
    float* vt = buf.get();                                  // Vᵀ panels, for dP = dO·Vᵀ
    float* qraw = vt + vt_n;                                // the block's query rows [16][d_ld]
    float* dopack = qraw + kRowsPerBlock * d_ld;            // dO rows as A tiles [tile][dv][2]
    float* doraw = dopack + kRowsPerBlock * dv;             // dO rows [16][dv_ld]
    float* o = doraw + kRowsPerBlock * dv_ld;               // the forward output [16][dv_ld]
    float* dq = o + kRowsPerBlock * dv_ld;                  // [16][d_ld]
    float* pblk = dq + kRowsPerBlock * d_ld;                // P for a key block [16][64]
    float* dsblk = pblk + kRowsPerBlock * kKeysPerBlock;    // dP, then dS [16][64]
    float* dsum = dsblk + kRowsPerBlock * kKeysPerBlock;    // rowsum(dO ⊙ O) [16]
    float* dk = dsum + kRowsPerBlock;                       // [seq_k][d_ld]
    float* dvv = dk + static_cast<std::size_t>(p.seq_k) * d_ld;  // [seq_k][dv_ld]
    std::fill(dk, dk + static_cast<std::size_t>(p.seq_k) * (d_ld + dv_ld), 0.0f);

    const float* key_head = p.key + b * p.k.batch + kvh * p.k.head;
    const float* value_head = p.value + b * p.v.batch + kvh * p.v.head;
    pack_keys_transposed(key_head, p.k.row, p.seq_k, d, ws);
    pack_values(value_head, p.v.row, p.seq_k, dv, ws);
    pack_transposed(value_head, p.v.row, p.seq_k, dv, vt);

    for (int r0 = 0; r0 < rows_per_kv_head; r0 += kRowsPerBlock) {
      RowBlock rb;
      fill_row_block(p, b, kvh, r0, rb);
      const float* d_out_rows[kRowsPerBlock];
      float* d_query_rows[kRowsPerBlock];
      for (int i = 0; i < rb.rows; ++i) {
        const int group = p.heads / p.kv_heads;
        const int qi = (r0 + i) / group, h = kvh * group + (r0 + i) % group;  // as fill_row_block
        d_out_rows[i] = g.d_out + b * g.d_o.batch + h * g.d_o.head + qi * g.d_o.row;
        d_query_rows[i] = g.d_query + b * g.d_q.batch + h * g.d_q.head + qi * g.d_q.row;
        rb.o[i] = o + i * dv_ld;
      }
      // Row statistics (ws.row_max, ws.row_sum), O and the packed queries: from the forward's
      // saved lse and out when given and finite, else from a forward pass over the block.
      bool saved = g.lse && g.out;
      const float* out_rows[kRowsPerBlock];
      for (int i = 0; i < rb.rows && saved; ++i) {
        const int group = p.heads / p.kv_heads;
        const int qi = (r0 + i) / group, h = kvh * group + (r0 + i) % group;
        const float l = g.lse[b * p.l.batch + h * p.l.head + qi * p.l.row];
        saved = std::isfinite(l);
        ws.row_max[i] = l * kLog2e;
        ws.row_sum[i] = 1.0f;
        out_rows[i] = g.out + b * p.o.batch + h * p.o.head + qi * p.o.row;
      }
      if (saved) {
        pack_queries(rb, d, p.scale * kLog2e, ws.qpack);
      } else {
        attend_block(p, rb, ws);
        for (int i = 0; i < rb.rows; ++i) out_rows[i] = o + i * dv_ld;
      }
      int key_end = 0;
      for (int i = 0; i < rb.rows; ++i) {
        key_end = std::max(key_end, rb.key_end[i]);
        dsum[i] = dot(d_out_rows[i], out_rows[i], dv);
        std::copy(rb.q[i], rb.q[i] + d, qraw + i * d_ld);
        std::copy(d_out_rows[i], d_out_rows[i] + dv, doraw + i * dv_ld);
      }
      for (int i0 = 0; i0 < rb.rows; i0 += kTileRows) {
        float* tile = dopack + static_cast<std::ptrdiff_t>(i0 / kTileRows) * dv * kTileRows;
        for (int i = 0; i < kTileRows; ++i)
          for (int c = 0; c < dv; ++c) tile[c * kTileRows + i] = i0 + i < rb.rows ? d_out_rows[i0 + i][c] : 0.0f;
      }
      std::fill(dq, dq + rb.rows * d_ld, 0.0f);

      for (int kb = 0; kb < key_end; kb += kKeysPerBlock) {
        const int len = std::min(kKeysPerBlock, key_end - kb);
        const float* kt = ws.kt + (kb / kKeysPerBlock) * ws.kt_block_floats;
        const float* vtb = vt + static_cast<std::ptrdiff_t>(kb / kKeysPerBlock) * dv * kKeysPerBlock;
        for (int c = 0; c < len; c += kTileCols) {
          kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, ws.qpack, d * kTileRows, kt + c * d,
                                                      kTileCols, d, kTileCols, pblk + c, kKeysPerBlock);
          kernel::gemm_rows<Init::zero, 1, kTileRows>(rb.rows, dopack, dv * kTileRows, vtb + c * dv,
                                                      kTileCols, dv, kTileCols, dsblk + c, kKeysPerBlock);
        }
        for (int i = 0; i < rb.rows; ++i) {
          float* s = pblk + i * kKeysPerBlock;
          float* ds = dsblk + i * kKeysPerBlock;
          mask_scores(p, rb, i, kb, len, s);
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
              simd::store(ds + j, pj * (simd::load(ds + j) - vd) * vscale);
            }
          }
          for (; j < len; ++j) {
            const float e = ref == kPosInf ? (s[j] == kPosInf ? 1.0f : 0.0f) : simd::exp2_softmax(s[j] - ref);
            s[j] = e * inv;
            ds[j] = s[j] * (ds[j] - dsum[i]) * p.scale;
          }
        }
        // dQ += dS·K (K rows in place); dK += dSᵀ·Q; dV += Pᵀ·dO.
        kernel::gemm_rows<Init::load, kKeysPerBlock, 1>(rb.rows, dsblk, kTileRows * kKeysPerBlock,
                                                        key_head + kb * p.k.row, p.k.row, len, d, dq, d_ld);
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
      std::copy(dk + static_cast<std::ptrdiff_t>(j) * d_ld, dk + static_cast<std::ptrdiff_t>(j) * d_ld + d, dkey + j * g.d_k.row);
      std::copy(dvv + static_cast<std::ptrdiff_t>(j) * dv_ld, dvv + static_cast<std::ptrdiff_t>(j) * dv_ld + dv, dvalue + j * g.d_v.row);
    }
  });
  return error.load();
}

const char* simd_name() {
#if defined(ATTN_SCALAR)
  return "scalar";
#elif defined(__EMSCRIPTEN__)
  return "simd128";
#else
  return xsimd::default_arch::name();
#endif
}

}  // namespace attn
