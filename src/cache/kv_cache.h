// A KV cache: keys and values of the positions seen so far, kept in wasm memory in float32,
// float16, bfloat16, int8 (a symmetric scale per position and kv head) or int4 (a symmetric
// bfloat16 scale per block of 32 values of a row, inside the row), so a decode step reads them in
// place instead of copying them in. Linear (max_seq positions) or, for sliding-window
// layers, a ring of max_seq slots that never overflows. Attention over it goes through resolve()
// (cache_rule.h), which checks the call against the cache and then calls describe().
//
// Storage is [batch, kv_heads, slots, dim] for K (dim = head_dim) and V (dim = value_dim): the
// rows of one kv head are contiguous, so a decode step streams each head's keys and values
// sequentially (interleaving the heads put each row of a head on a page of its own:
// docs/performance.md, Design notes). int8 scales are [batch, kv_heads, slots]; an int4 row is
// kv::int4_row_bytes(dim) bytes. Position j lives in slot j (linear) or j % max_seq (ring).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel/attention.h"
#include "runtime/buffer.h"

namespace attn {

// Every storage type a cache can hold: validate() accepts these, and the tests run each of them.
inline constexpr KvType kCacheDtypes[] = {KvType::f32, KvType::f16, KvType::bf16, KvType::i8, KvType::i4};

struct KvCacheConfig {
  int batch = 1, kv_heads = 1, head_dim = 1, value_dim = 1;
  int max_seq = 1;    // positions (linear) or slots (ring)
  KvType dtype = KvType::f32;
  int window = 0;     // > 0: a ring for attention over the last `window` positions (max_seq >= window)
};

const char* validate(const KvCacheConfig& c);

// A value the cache refused, where it is in the rows an append was given: for float16 a finite
// value it cannot store (it would become ±∞, and attention NaN); for int4 a ±∞ or NaN (a block's
// scale holds finite values only).
struct RefusedValue {
  bool key = true;  // in the keys (else the values)
  int batch = 0, head = 0, row = 0, element = 0;  // row: of the appended positions
  float value = 0.0f;
};

// Finite floats at or beyond this magnitude round to ±∞ in float16 (65504 plus half its ulp:
// the tie rounds to even, which is ∞).
constexpr float kF16Overflow = 65520.0f;

// What append() and stage() return when they refuse such a value, or a ±∞ or NaN for int4
// (callers tell them by their address; refused() says where the value is).
inline constexpr char kF16OverflowError[] =
    "kv cache: a finite value is beyond float16's range (it would be stored as infinity)";
inline constexpr char kInt4NotFiniteError[] = "kv cache: int4 stores finite values only (a value is infinite or NaN)";

// The memory a cache of config c takes, known before allocating it: its keys, its values (int4:
// with their scales) and, for int8, each of its two arrays of scales (one float per row). Doubles,
// so sizes past size_t's range (wasm32's is 4 GiB) stay comparable instead of wrapping; exact
// below 2^53.
struct KvCacheBytes {
  double key = 0, value = 0, scales = 0;
  double total() const { return key + value + 2 * scales; }
  double largest() const { return key > value ? key : value; }  // the largest single buffer
};
KvCacheBytes cache_bytes(const KvCacheConfig& c);

class KvCache {
 public:
  // Allocates the storage; all-or-nothing (on failure the cache is as before).
  const char* allocate(const KvCacheConfig& c);

  // Appends seq positions: key [batch, kv_heads, seq, head_dim] and value [..., value_dim] read
  // with strides ks / vs (either layout), converted or quantised as stored. All-or-nothing: a
  // linear cache must have room (length + seq <= max_seq); a ring must keep the window − 1
  // positions before the first new one (min(length + seq, window − 1 + seq) <= max_seq); a
  // float16 cache refuses a finite value it would store as ±∞, an int4 cache a ±∞ or NaN
  // (refused() says which).
  const char* append(const float* key, const Strides& ks, const float* value, const Strides& vs, int seq);

  // append() in two steps, for a caller that attends over the new positions before keeping them
  // (the layer): stage() writes them without counting them (a ring's overwritten slots are gone
  // either way), describe(p, seq) includes them, commit(seq) keeps them.
  const char* stage(const float* key, const Strides& ks, const float* value, const Strides& vs, int seq);
  void commit(int seq) { length_ += seq; }
  // Positions an append can add now: a linear cache's free positions; a ring's slots less the
  // window − 1 positions before the new ones that it must keep (min(length, window − 1)).
  int room() const;
  bool has_room(int seq) const { return seq <= room(); }

  void reset() { length_ = first_ = 0; }
  // Beam search (Hugging Face's reorder_cache(beam_idx)): batch entry b becomes what entry
  // indices[b] was, at every position held; `indices` has batch entries in [0, batch), repeats
  // allowed (a beam several continue), entries not named are dropped. In place, moving only the
  // held slots: an entry others read is copied to them before it is overwritten, and cycles
  // rotate through a small buffer. Allocates three ints per batch entry first: all-or-nothing.
  const char* reorder(const int* indices);
  // Forgets positions >= n. A ring can only go back as far as it still holds the window − 1
  // positions before n.
  const char* truncate(int n);

  int length() const { return length_; }  // positions appended (a ring counts all of them)
  int held() const;                        // positions stored now: [length − held, length)
  // The first position still held once `staged` more are written (a ring overwrites the oldest).
  int first_held(int staged = 0) const;
  const KvCacheConfig& config() const { return config_; }
  bool allocated() const { return k_.data != nullptr; }
  std::size_t bytes() const;               // memory of K, V and scales (cache_bytes(config()).total())
  std::uintptr_t key_address() const { return reinterpret_cast<std::uintptr_t>(k_.get()); }
  // The value that made the last append (or stage) of a float16 or int4 cache fail.
  const RefusedValue& refused() const { return refused_; }

  // Fills p.key, p.value, p.kv_type, sizes, scales, strides, kv_ring, kv_first and seq_k (the
  // `staged` positions included): where the keys and values are, nothing about the score rule,
  // which is the call's (resolve() in cache_rule.h checks it against the cache first).
  void describe(AttentionParams& p, int staged = 0) const;

 private:
  int slot(int position) const { return config_.window > 0 ? position % config_.max_seq : position; }

  KvCacheConfig config_;
  int length_ = 0, first_ = 0;  // positions appended; the first one still held
  ByteBuffer k_, v_;               // storage of dtype
  FloatBuffer k_scale_, v_scale_;  // int8 only
  RefusedValue refused_;
  // float16: some append stored a ±∞ or NaN (kept for the cache's life: describe() promises
  // AttentionParams::kv_finite only while no slot can hold one).
  bool special_ = false;
};

}  // namespace attn
