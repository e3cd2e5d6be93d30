// The pieces the forward and backward drivers share: blocks of query rows with their score rules,
// the packed layouts the micro-kernel reads (queries, Kᵀ and V panels, packed lazily block by
// block from any storage type), and the online softmax over key blocks (flash attention), which
// the few-rows path (few_rows.h) shares too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernel/attention.h"
#include "kernel/few_rows.h"
#include "kernel/few_rows_int.h"
#include "kernel/kv_storage.h"
#include "kernel/microkernel.h"
#include "kernel/score_rule.h"
#include "runtime/buffer.h"
#include "runtime/simd.h"

namespace attn::blocks {

using kernel::kTileCols;
using kernel::kTileRows;
using score::kLog2e;
using score::kNegInf;
using simd::round_up;
using simd::vfloat;
using simd::W;

constexpr int kRowsPerBlock = 16;  // query rows that share one pass over a key block
constexpr int kKeysPerBlock = 64;  // keys packed at a time (K and V are packed lazily, by blocks)
// Keys per pass of a row block's scores (one softmax update, one P·V): the per-row work of a pass
// is paid once per this many keys. S (16×256) and a V panel of a pass (256×16) stay in L1.
constexpr int kPassKeys = 256;
constexpr float kRescaleSlack = 8.0f;  // log2 units: probabilities up to 2^8 before a rescale
constexpr float kPosInf = std::numeric_limits<float>::infinity();
static_assert(kKeysPerBlock % kTileCols == 0 && kPassKeys % kTileCols == 0, "key blocks and passes hold whole panels");
// Up to this many query rows per kv head (a decode step: one position, the heads of a group;
// a speculative verify: a few positions), packing K and V would cost more than it saves: the
// few-rows path reads them in place, all rows of the kv head in one block.
constexpr int kFewRows = 32;
// Keys per block of the few-rows path: its rows' scores for them, then their softmax, then P·V,
// so the K and then the V rows of a block are read in order (measured: docs/performance.md,
// Design notes). A block is two runs of kFewKeys / 2 keys read side by side (see KeyBlock in
// attention_forward.cpp).
constexpr int kFewKeys = 512;
// Few rows: keys per chunk of a split over keys (flash-decoding; see attention_forward.cpp).
constexpr int kSplitKeys = 2 * kFewKeys;
constexpr int kMaxBlockRows = std::max(kRowsPerBlock, kFewRows);

inline int block_of(int key) { return key / kKeysPerBlock; }

// One block of query rows of one (batch, kv head): the rows may come from different query
// heads of the group, so every row carries its own pointers and score rule.
struct RowBlock {
  int rows = 0;
  int qi[kMaxBlockRows];  // query position of each row
  int h[kMaxBlockRows];   // query head of each row
  const float* q[kMaxBlockRows];
  float* o[kMaxBlockRows];
  float* w[kMaxBlockRows];
  float* lse[kMaxBlockRows];  // null when not asked for
  score::RowRule rule[kMaxBlockRows];
  const std::uint8_t* key_padding = nullptr;  // this block's batch entry, or null
  score::KeyRange keys;  // the union of the rows' key ranges
};

// Describes rows [r0, r0 + max_rows) of kv head kvh in batch entry b: query rows ordered
// position-major, so a block's key ranges stay close together and, in a decode step, one
// block holds every query head of the group.
inline void fill_row_block(const AttentionParams& p, int b, int kvh, int r0, RowBlock& rb,
                           int max_rows = kRowsPerBlock) {
  const int group = p.heads / p.kv_heads;
  const int off = score::offset(p);
  rb.rows = std::min(max_rows, group * p.seq_q - r0);
  rb.key_padding = p.key_padding ? p.key_padding + b * p.key_padding_batch_stride : nullptr;
  rb.keys = {p.seq_k, 0};
  for (int i = 0; i < rb.rows; ++i) {
    const int qi = (r0 + i) / group;
    const int h = kvh * group + (r0 + i) % group;
    rb.qi[i] = qi;
    rb.h[i] = h;
    rb.q[i] = p.query + b * p.q.batch + h * p.q.head + qi * p.q.row;
    rb.o[i] = p.out ? p.out + b * p.o.batch + h * p.o.head + qi * p.o.row : nullptr;
    rb.w[i] = p.weights ? p.weights + b * p.w.batch + h * p.w.head + qi * p.w.row : nullptr;
    rb.lse[i] = p.lse ? p.lse + b * p.l.batch + h * p.l.head + qi * p.l.row : nullptr;
    score::RowRule& r = rb.rule[i];
    r.keys = score::key_range(p, qi);
    r.pos = float(qi + off);
    r.alibi = p.alibi_slopes ? -p.alibi_slopes[b * p.alibi_batch_stride + h] : 0.0f;
    r.sink = p.sinks ? p.sinks[h] * kLog2e : kNegInf;
    r.mask = nullptr;
    const std::ptrdiff_t m = b * p.m.batch + h * p.m.head + qi * p.m.row;
    if (p.mask_type == MaskType::additive) r.mask = static_cast<const float*>(p.mask) + m;
    if (p.mask_type == MaskType::boolean || p.mask_type == MaskType::block)
      r.mask = static_cast<const std::uint8_t*>(p.mask) + m;
    if (r.keys.begin < r.keys.end) {
      rb.keys.begin = std::min(rb.keys.begin, r.keys.begin);
      rb.keys.end = std::max(rb.keys.end, r.keys.end);
    }
  }
  if (rb.keys.begin >= rb.keys.end) rb.keys = {0, 0};
}

// The block's key blocks: [first, last) in units of kKeysPerBlock.
inline int first_block(const RowBlock& rb) { return block_of(rb.keys.begin); }
inline int end_block(const RowBlock& rb) { return (rb.keys.end + kKeysPerBlock - 1) / kKeysPerBlock; }

// Whether the rows of each kv head take the few-rows path (few_rows.h).
inline bool takes_few_rows(const AttentionParams& p) {
  return (p.heads / p.kv_heads) * static_cast<std::int64_t>(p.seq_q) <= kFewRows;
}

// The few-rows path's keys: every kv head's rows (group · seq_q of them) see keys [begin, end),
// the union of the rows' ranges, split flash-decoding style into `chunks` chunks of kSplitKeys
// (see run_few_rows). From the shape and the score rule alone, reading no tensor: the kernel and
// attention_workspace_bytes() (which sizes a call before its data is staged) both use it.
struct FewRowsSplit {
  int rows = 0, begin = 0, end = 0, chunks = 1;
};

inline FewRowsSplit few_rows_split(const AttentionParams& p) {
  FewRowsSplit s;
  s.rows = (p.heads / p.kv_heads) * p.seq_q;
  s.begin = p.seq_k;
  for (int qi = 0; qi < p.seq_q; ++qi) {
    const score::KeyRange r = score::key_range(p, qi);
    if (r.begin < r.end) {
      s.begin = std::min(s.begin, r.begin);
      s.end = std::max(s.end, r.end);
    }
  }
  if (s.begin >= s.end) s.begin = s.end = 0;
  s.chunks = std::max(1, (s.end - s.begin + kSplitKeys - 1) / kSplitKeys);
  return s;
}

// The blocked path's work on `threads` threads: every (batch, kv head) has `rows` query rows
// (group · seq_q) in `blocks` row blocks, split into `chunks` work items of whole row blocks when
// there are too few heads to keep every thread busy (see run in attention_forward.cpp). The
// kernel and attention_workspace_bytes() both use it.
struct BlockedSplit {
  int rows = 0, blocks = 0, chunks = 1;
};

inline BlockedSplit blocked_split(const AttentionParams& p, int threads) {
  BlockedSplit s;
  s.rows = p.heads / p.kv_heads * p.seq_q;
  s.blocks = (s.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int kv_heads_total = p.batch * p.kv_heads;
  s.chunks = threads == 1 ? 1 : std::clamp((2 * threads + kv_heads_total - 1) / kv_heads_total, 1, s.blocks);
  return s;
}

// The blocked path's split over keys: when one (batch, kv head) has all the rows — an MQA model's
// speculative verify or short prompt over a long cache: few row blocks, each reading every key —
// chunks of kBlockedSplitKeys keys are units of their own (with each row block; their statistics
// merged in chunk order, flash-decoding style), so the threads share the keys instead of each
// packing all of them for its row blocks. From the shape and the score rule alone, as
// few_rows_split: a result never depends on the threads. `chunks` is 1 where it does not apply.
constexpr int kBlockedSplitKeys = 2048;
// A chunk starts on a key block's boundary only past its panel's start (begin is anywhere), so it
// spans at most kBlockedSplitKeys / kKeysPerBlock + 1 key blocks: workspace_layout's bound.
static_assert(kBlockedSplitKeys % kKeysPerBlock == 0, "a blocked split's chunk is whole key blocks");
constexpr int kBlockedSplitRows = 256;  // rows per kv head up to which the keys are split
struct BlockedKeySplit {
  int blocks = 0, begin = 0, end = 0, chunks = 1;  // row blocks; keys [begin, end) from a panel's start
};

inline BlockedKeySplit blocked_key_split(const AttentionParams& p) {
  BlockedKeySplit s;
  const int rows = p.heads / p.kv_heads * p.seq_q;
  if (p.batch * p.kv_heads != 1 || rows > kBlockedSplitRows || takes_few_rows(p)) return s;
  const FewRowsSplit keys = few_rows_split(p);  // the union of the rows' key ranges
  s.blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  s.begin = keys.begin / kTileCols * kTileCols;
  s.end = keys.end;
  s.chunks = std::max(1, (s.end - s.begin + kBlockedSplitKeys - 1) / kBlockedSplitKeys);
  return s;
}

// The arrays of a Workspace (below), in floats: the one layout reserve() allocates from and
// attention_workspace_bytes() counts. 64-bit, so no size can wrap in wasm32's 32-bit size_t
// (reserve() refuses a total past one block's limit instead).
struct WorkspaceLayout {
  bool few = false;         // few rows per kv head: no packing, see few_rows.h
  int blocks = 0;           // key blocks of seq_k
  int acc_ld = 0;           // value_dim rounded up to kTileCols (0 without values)
  int scores_ld = 0;        // kPassKeys, or kFewKeys for few rows
  std::uint64_t rows_cap = 0;  // query rows of one block
  std::uint64_t kt = 0, vp = 0, flags = 0, rows = 0, zeros = 0, qpack = 0, scores = 0, acc = 0;
  // Few rows over int8 or int4 values: the block's probabilities as int16, P·V's int32
  // accumulators (in floats' room), the probabilities' scales and the values' (few_rows_int.h).
  std::uint64_t p16 = 0, acc32 = 0, pscale = 0, vscale = 0;
  // Floats in all: the arrays above, then row_max, row_sum and row_scale (rows_cap each).
  std::uint64_t floats() const {
    return kt + vp + flags + rows + zeros + qpack + scores + acc + p16 + acc32 + pscale + vscale + 3 * rows_cap;
  }
};

// key_chunk: the packed Kᵀ and V hold one chunk of the blocked split's keys at a time (the key
// blocks it spans, from a block's start: see Workspace::hold_chunk), not all seq_k keys.
inline WorkspaceLayout workspace_layout(const AttentionParams& p, bool few, bool key_chunk = false) {
  using U = std::uint64_t;
  WorkspaceLayout l;
  l.few = few;
  l.blocks = (p.seq_k + kKeysPerBlock - 1) / kKeysPerBlock;
  if (key_chunk) l.blocks = std::min(l.blocks, kBlockedSplitKeys / kKeysPerBlock + 1);
  l.acc_ld = p.value ? round_up(p.value_dim, kTileCols) : 0;
  l.scores_ld = few ? kFewKeys : kPassKeys;
  l.rows_cap = few ? kFewRows : kRowsPerBlock;
  // Kᵀ and V of one kv head, packed block by block, and a flag per block once packed (blocked only).
  l.kt = few ? 0 : U(l.blocks) * kKeysPerBlock * U(p.head_dim);
  l.vp = few ? 0 : U(l.blocks) * kKeysPerBlock * U(l.acc_ld);
  l.flags = few ? 0 : U(l.blocks);
  // A key block of K or V rows as floats; few rows: one row of scratch, and a row of zeros (a K
  // or V row of any storage type: all-zero bits are zeros in each) to pair a block's last key with.
  const U row = std::max(U(round_up(std::max(p.head_dim, p.value_dim), kTileCols)), U(l.acc_ld));
  l.rows = few ? row : U(kKeysPerBlock) * row;
  l.zeros = few ? row : 0;
  // The queries; few rows: in tiles of at most few_rows::kQueryTile rows, head_dim padded to 16
  // (int16 for int8 keys, and for int4's padded to 32, fit).
  l.qpack = few ? U(round_up(kFewRows, few_rows::kQueryTile)) * U(round_up(p.head_dim, 16))
                : U(kRowsPerBlock) * U(p.head_dim);
  l.scores = l.rows_cap * U(l.scores_ld);
  l.acc = l.rows_cap * U(l.acc_ld);
  if (few && (p.kv_type == KvType::i8 || p.kv_type == KvType::i4)) {
    // Blocks of value columns with a scale each; the keys' scales (int8) take one.
    const U blocks = p.kv_type == KvType::i4 ? kv::int4_blocks(p.value_dim) : 1;
    l.vscale = U(kFewKeys) * blocks;
    if (p.value) {
      l.p16 = l.rows_cap * U(kFewKeys) / 2;
      l.acc32 = l.rows_cap * U(few_rows::acc32_ld(p.value_dim));
      l.pscale = l.rows_cap * blocks;
    }
  }
  return l;
}

// Floats of Workspace::reserve_stats(): acc, row_max and row_sum for kFewRows rows, which holds
// both splits' partials: the few-rows path's (up to kFewRows rows) and the blocked split's (a row
// block, up to kRowsPerBlock rows).
static_assert(kRowsPerBlock <= kFewRows, "reserve_stats holds a row block's statistics");
inline std::uint64_t stats_floats(const AttentionParams& p) {
  return kFewRows * (std::uint64_t(p.value ? round_up(p.value_dim, kTileCols) : 0) + 2);
}

// In the threaded wasm builds (-pthread enables bulk memory) clang would make a function's
// variable-size zeroings memory.fill, a call into the engine: Firefox takes 10-16 ns per small fill
// of shared memory, and reserve and start_rows made 20 of the 25 fills of a one-position prefill
// of 8 heads (docs/performance.md). -mno-bulk-memory is refused with -pthread, and
// -fno-builtin-memset on the whole threaded kernel grew the layers builds past their size guards;
// tests/package/memory-fill.test.mjs.
#if defined(__EMSCRIPTEN_PTHREADS__)
#define ATTN_LOOP_ZEROING __attribute__((no_builtin("memset")))
#else
#define ATTN_LOOP_ZEROING
#endif

// Scratch for one work item (from the thread's scratch when it fits, runtime/buffer.h: an item
// runs on one thread); sizes depend only on the params.
struct Workspace {
  int blocks = 0;  // key blocks of seq_k
  int kt_block_floats = 0;  // head_dim × kKeysPerBlock
  int acc_ld = 0;           // value_dim rounded up to kTileCols
  int v_panel_floats = 0;   // blocks × kKeysPerBlock × kTileCols: V's columns of one panel, every key
  int scores_ld = kPassKeys;  // kFewKeys for few rows
  bool few = false;         // few rows per kv head: no packing, see few_rows.h
  ScratchFloats mem;
  float* kt = nullptr;      // Kᵀ of one kv head in panels of kTileCols keys, see transpose_keys
  float* vp = nullptr;      // V of one kv head in panels of kTileCols columns, see panel_values
  float* packed = nullptr;  // per key block: 1 once kt and vp hold it
  float* rows = nullptr;  // one key block of K or V rows as floats (before transposing); few rows: one row
  float* zeros = nullptr;  // few rows: a row of zeros, as long as the longest K or V row
  // The block's query rows: tile by tile, [tile][head_dim][kTileRows] (blocked), or as
  // few_rows.h packs them (tiles of 4 and 1 rows; int16 for int8 keys).
  float* qpack = nullptr;
  float* scores = nullptr;  // [rows][scores_ld]
  float* acc = nullptr;  // [rows][acc_ld]
  float* row_max = nullptr;  // per row: the reference the exponents are taken from (log2 units)
  float* row_sum = nullptr;  // running sum of exp2(score − max) per row
  float* row_scale = nullptr;  // few rows: per row, the scale of its packed query (int8 keys)
  // Few rows over int8 or int4 values (few_rows_int.h): per row, the block's probabilities as
  // int16 (kFewKeys apart), P·V's int32 accumulators (acc32_ld apart) and the probabilities'
  // scales (one per row; int4: per row and block of columns).
  std::int16_t* p16 = nullptr;
  std::int32_t* acc32 = nullptr;
  float* pscale = nullptr;
  // Per block of value columns, the values' scales of a block's keys (kFewKeys apart); int8: the
  // keys' scales first.
  float* vscale = nullptr;
  float k_max = 0.0f;  // max |k| over the keys this item may see (see score::scaling)
  int chunk = -1;     // the blocked split's chunk of keys held (packed, and k_max's), or -1
  int key_base = 0;   // the first key the packed Kᵀ and V hold (a key block's start)

  // key_chunk: room for one chunk of the blocked split's keys (hold_chunk), not all of them.
  ATTN_LOOP_ZEROING bool reserve(const AttentionParams& p, bool allow_few = true, bool key_chunk = false) {
    const WorkspaceLayout l = workspace_layout(p, allow_few && takes_few_rows(p), key_chunk);
    if (!mem.allocate(l.floats())) return false;  // refuses a layout past one block's limit
    few = l.few;
    blocks = l.blocks;
    scores_ld = l.scores_ld;
    acc_ld = l.acc_ld;
    // Both fit in int now: a key block of either is within the block just allocated.
    kt_block_floats = few ? 0 : p.head_dim * kKeysPerBlock;
    v_panel_floats = few ? 0 : blocks * kKeysPerBlock * kTileCols;
    kt = mem.get();
    vp = kt + l.kt;
    packed = vp + l.vp;
    std::fill(packed, packed + l.flags, 0.0f);
    rows = packed + l.flags;
    zeros = rows + l.rows;
    std::fill(zeros, zeros + l.zeros, 0.0f);
    qpack = zeros + l.zeros;
    scores = qpack + l.qpack;
    acc = scores + l.scores;
    p16 = reinterpret_cast<std::int16_t*>(acc + l.acc);
    acc32 = reinterpret_cast<std::int32_t*>(acc + l.acc + l.p16);
    pscale = acc + l.acc + l.p16 + l.acc32;
    vscale = pscale + l.pscale;
    row_max = vscale + l.vscale;
    row_sum = row_max + l.rows_cap;
    row_scale = row_sum + l.rows_cap;
    return true;
  }

  // Only the rows' statistics (acc, row_max, row_sum), for merging the chunks of either split (the
  // few-rows path's or the blocked path's: stats_floats).
  bool reserve_stats(const AttentionParams& p) {
    few = true;
    acc_ld = p.value ? round_up(p.value_dim, kTileCols) : 0;
    if (!mem.allocate(stats_floats(p))) return false;
    acc = mem.get();
    row_max = acc + kFewRows * acc_ld;
    row_sum = row_max + kFewRows;
    return true;
  }

  // From now on the packed Kᵀ and V hold chunk c of the blocked split, keys from `first` on:
  // nothing packed yet.
  void hold_chunk(int c, int first) {
    chunk = c;
    key_base = first / kKeysPerBlock * kKeysPerBlock;
    std::fill(packed, packed + blocks, 0.0f);
  }
  // Whether key block blk is packed (its flag).
  float& packed_flag(int blk) const { return packed[blk - key_base / kKeysPerBlock]; }
  float* kt_block(int blk) const {
    return kt + static_cast<std::ptrdiff_t>(blk - key_base / kKeysPerBlock) * kt_block_floats;
  }
  // Where Kᵀ holds the panel that starts at `key`.
  const float* kt_at(int key) const {
    return kt + static_cast<std::ptrdiff_t>(key - key_base) * (kt_block_floats / kKeysPerBlock);
  }
  // Where value panel c0 / kTileCols (the panel of value columns c0 … c0 + kTileCols − 1) holds `key`.
  float* v_at(int c0, int key) const {
    return vp + static_cast<std::ptrdiff_t>(c0 / kTileCols) * v_panel_floats +
           static_cast<std::ptrdiff_t>(key - key_base) * kTileCols;
  }
};

// Key block blk of the head (keys, or values read as keys) as panels of kTileCols keys,
// [panel][dim][kTileCols] (the B layout of the Q·Kᵀ micro-kernel); keys past the block's length,
// to the end of its last panel, are zero. `rows` holds a block of converted rows for storage
// types other than float32 (attention_forward.cpp).
void pack_key_block(const kv::Head& h, bool values, int blk, int seq_k, int dim, float* rows, float* block);

// Makes sure key block blk of the head is packed: Kᵀ, and V in panels of kTileCols value columns
// over all the head's keys (Workspace::v_at) when there is a value (attention_forward.cpp).
void ensure_packed(const AttentionParams& p, const kv::Head& h, Workspace& ws, int blk);

// Copies the block's query rows, times `factor`, into tiles of kTileRows rows stored
// [head_dim][kTileRows], the A layout of the Q·Kᵀ micro-kernel; rows past the block's end are
// zero. Returns max |q| over the rows, taken as they are read (attention_forward.cpp).
float pack_queries(const RowBlock& rb, int head_dim, float factor, float* qpack);

// Packs the block's queries times the factor the score rule takes for them against keys whose
// largest |element| is k_max (score::scaling), reading them once: packed times the usual factor
// while their max |q| is taken, and again only when that max calls for the overflow-safe one.
inline score::Scaling pack_block_queries(const AttentionParams& p, const RowBlock& rb, float k_max, float* qpack) {
  const float usual = score::scaling(p, 0.0f, 0.0f).pack;
  const score::Scaling sc = score::scaling(p, pack_queries(rb, p.head_dim, usual, qpack), k_max);
  if (sc.pack != usual) pack_queries(rb, p.head_dim, sc.pack, qpack);
  return sc;
}

// ---- the online softmax ----

// exp2(s − ref): the unnormalised weight of score s in a row whose reference is ref (log2 units).
// When ref is +∞, scores of +∞ (overflowing inputs or masks) take all the weight, shared equally,
// as the limit of the softmax (exp2(∞ − ∞) would be NaN); a NaN score stays NaN.
inline float unnormalised_weight(float s, float ref) {
  if (ref != kPosInf) return simd::exp2_softmax(s - ref);
  return s != s ? s : s == kPosInf ? 1.0f : 0.0f;
}

// Plain loops, not memory.fill, for these zeroings (ATTN_LOOP_ZEROING).
ATTN_LOOP_ZEROING inline void start_rows(const AttentionParams& p, const RowBlock& rb, Workspace& ws) {
  std::fill(ws.row_max, ws.row_max + rb.rows, kNegInf);
  std::fill(ws.row_sum, ws.row_sum + rb.rows, 0.0f);
  if (p.value) std::fill(ws.acc, ws.acc + rb.rows * ws.acc_ld, 0.0f);
}

// Moves row i's reference to `ref` (when it differs), rescaling its sum and accumulator.
inline void rebase_row(const AttentionParams& p, int i, float ref, Workspace& ws) {
  const float old_ref = ws.row_max[i];
  if (ref == old_ref) return;
  ws.row_max[i] = ref;
  // Nothing added yet: the sum and the accumulator are 0 (or NaN), which alpha = 0 would keep.
  if (old_ref == kNegInf) return;
  const float alpha = simd::exp2_softmax(old_ref - ref);  // 0 while old_ref is -inf
  ws.row_sum[i] *= alpha;
  if (p.value) {
    float* acc = ws.acc + i * ws.acc_ld;
    for (int c = 0; c < ws.acc_ld; c += W) simd::store(acc + c, simd::load(acc + c) * vfloat(alpha));
  }
}

// Folds one row's scores s[0, len) (log2 units, masks applied) into its running max and sum;
// leaves p = exp2(score − reference) in s and rescales the row's accumulator when the reference
// moves. `w`, when not null, receives the scores themselves (normalised by finish_rows).
inline void softmax_update(const AttentionParams& p, int i, int len, float* s, float* w, Workspace& ws) {
  if (w) std::copy(s, s + len, w);

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
  if (ref == kPosInf) {  // scores of +∞ take all the weight (see unnormalised_weight)
    for (j = 0; j < len; ++j) {
      s[j] = unnormalised_weight(s[j], ref);
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
  rebase_row(p, i, ref, ws);
  ws.row_sum[i] += sum;
}

// Merges statistics of row i over other keys — reference m, sum s of exp2(score − m), acc its
// unnormalised values — into row i's in ws, as if both had been one pass: both rebased to the
// larger reference (a +∞ reference takes all the weight, as in softmax_update); a NaN sum stays.
inline void merge_stats(const AttentionParams& p, int i, float m, float s, const float* acc, Workspace& ws) {
  if (s != s) ws.row_sum[i] = s;
  if (s != s || s == 0.0f) return;  // NaN, or nothing visible there
  const float ref = std::max(ws.row_max[i], m);
  rebase_row(p, i, ref, ws);
  const float beta = m == ref ? 1.0f : simd::exp2_softmax(m - ref);
  ws.row_sum[i] += s * beta;
  if (p.value) {
    float* a = ws.acc + i * ws.acc_ld;
    for (int c = 0; c < ws.acc_ld; c += W)
      simd::store(a + c, simd::madd(vfloat(beta), simd::load(acc + c), simd::load(a + c)));
  }
}

// Adds each row's sink (if any) to its softmax denominator, as one more key with no value.
inline void fold_sinks(const AttentionParams& p, const RowBlock& rb, Workspace& ws) {
  if (!p.sinks) return;
  for (int i = 0; i < rb.rows; ++i) {
    const float sink = rb.rule[i].sink;
    const float sum = ws.row_sum[i];
    if (sink == kNegInf || sum != sum) continue;
    const float old_ref = ws.row_max[i];
    if (old_ref == kPosInf) continue;  // +∞ scores take all the weight anyway
    const float ref = sink > old_ref + kRescaleSlack ? sink : old_ref;
    rebase_row(p, i, ref, ws);
    ws.row_sum[i] += simd::exp2_softmax(sink - ref);
  }
}

// Writes the normalised output, weights and lse of every row in the block. Scores (and so
// weights) were written for keys [kstart, kend); the rest of each weights row is zero.
inline void finish_rows(const AttentionParams& p, const RowBlock& rb, int kstart, int kend, Workspace& ws) {
  for (int i = 0; i < rb.rows; ++i) {
    const float sum = ws.row_sum[i];
    if (rb.lse[i]) *rb.lse[i] = sum == 0.0f ? kNegInf : (ws.row_max[i] + std::log2(sum)) / kLog2e;
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;  // 0: every key masked; NaN stays NaN
    if (p.value) {
      const float* acc = ws.acc + i * ws.acc_ld;
      float* o = rb.o[i];
      int c = 0;
      for (; c + W <= p.value_dim; c += W) simd::store(o + c, simd::load(acc + c) * vfloat(inv));
      ATTN_SCALAR_TAIL for (; c < p.value_dim; ++c) o[c] = acc[c] * inv;
    }
    if (float* w = rb.w[i]) {
      const float ref = ws.row_max[i];
      const int end = sum == 0.0f ? kstart : kend;
      for (int j = kstart; j < end; ++j) w[j] = unnormalised_weight(w[j], ref) * inv;
      std::fill(w, w + kstart, 0.0f);
      std::fill(w + end, w + p.seq_k, 0.0f);
    }
  }
}

// The passes of a row block's rows over keys [begin, end) (begin at a panel's start), from
// start_rows on: their statistics (max, sum, unnormalised acc) left in ws, raw scores in the
// weights (attention_forward.cpp).
void attend_passes(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, int begin, int end, Workspace& ws);

// One forward pass over a row block: out, weights and lse of its rows, and their statistics left
// in ws (also the backward's recomputation; attention_forward.cpp).
void attend_block(const AttentionParams& p, const RowBlock& rb, const kv::Head& h, Workspace& ws);

// What attention_backward(p) allocates at most, in bytes (attention_backward.cpp; see
// attention_workspace_bytes in attention.h).
double backward_workspace_bytes(const AttentionParams& p);

}  // namespace attn::blocks
