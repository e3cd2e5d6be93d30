// Attention over a KV cache: where a call's options meet a cache's. lib.attention(query, cache,
// null, options) and the layer's forward with a cache both go through resolve(), so the two
// cannot disagree about what is computed.
//
// The rule: a cache stores keys and values and never changes what a call computes. The queries
// are the last seq_q positions (so the key position of query row i is i + seq_k − seq_q, the
// lower-right alignment of score::offset); causal and the window are the call's own, exactly as if
// the keys had been passed as arrays. A call is refused, never answered differently, when:
//   - its sizes differ from the cache's (batch, kv_heads, head_dim, value_dim, seq_k), or its heads
//     are not a multiple of the cache's kv_heads;
//   - it asks for upper-left alignment (the queries are the cache's last positions);
//   - the cache is a ring of window W, which keeps the W − 1 positions before each query (and
//     every later one), and the call's window reaches further back: its left side must be at
//     most W − 1 (Hugging Face's sliding_window = W is window [W − 1, 0] here); a call without a
//     left side (no window, or Infinity) would need every position;
//   - the queries need positions a ring has already overwritten (too many queries at once);
//   - with positions staged by the layer, the cache has no room for them.
#pragma once

#include <cstdint>

#include "cache/kv_cache.h"
#include "kernel/attention.h"

namespace attn {

// What a call over a cache asks for. A size of 0 is "not given": the cache's is used.
struct CacheCall {
  int batch = 0, heads = 1, kv_heads = 0, head_dim = 0, value_dim = 0;
  int seq_k = 0;   // every key position, staged ones included
  int seq_q = 1;   // the queries: the last seq_q positions
  int staged = 0;  // positions this call adds to the cache first (the layer's new keys)
  bool causal = false;
  Align align = Align::lower_right;
  int window_left = kNoLimit, window_right = kNoLimit;
};

// The call that p describes (its sizes, seq_q, causal, align and window), adding `staged` positions.
CacheCall cache_call(const AttentionParams& p, int staged = 0);

// Why a call and a cache disagree; `call` and `cache` in CacheCheck hold the two values.
enum class CacheConflict : int {
  none = 0,
  not_allocated = 1,
  batch = 2,             // call.batch vs the cache's batch
  kv_heads = 3,          // likewise kv_heads, head_dim, value_dim
  head_dim = 4,
  value_dim = 5,
  heads = 6,             // call.heads, not a multiple of the cache's kv_heads
  seq_k = 7,             // call.seq_k vs the positions the cache holds (with the staged ones)
  empty = 8,             // nothing appended yet
  seq_q = 9,             // more queries than positions
  upper_left = 10,       // alignment upper-left
  window_unbounded = 11, // a ring (cache = its window), and the call's window has no left side
  window_wider = 12,     // call = the window's left side, cache = the ring's window
  overwritten = 13,      // call = seq_q; cache = the first position still held, later than needed
  no_room = 14,          // call = staged, cache = the positions the cache has room for
};

struct CacheCheck {
  CacheConflict conflict = CacheConflict::none;
  std::int64_t call = 0, cache = 0;
  bool ok() const { return conflict == CacheConflict::none; }
};

// The checks that depend only on the cache's config (not on what it holds yet): sizes, the
// alignment, a ring's window against the call's. What a layer checks when it makes its cache.
CacheCheck check_config(const CacheCall& call, const KvCacheConfig& config);

// Everything: check_config, then the positions (length, a ring's overwritten ones, room for the
// staged ones). Works before or after the staged positions are written.
CacheCheck check_call(const CacheCall& call, const KvCache& cache);

// check_call, and when ok() fills p with the cache's keys and values (describe()), seq_k and the
// call's score rule (causal, align, window); the caller adds the queries, outputs and variants.
// p is unchanged otherwise.
CacheCheck resolve(const CacheCall& call, const KvCache& cache, AttentionParams& p);

// A static message for C++ callers ("kv cache: …"); the JS side words its own, with the values.
const char* message(const CacheCheck& check);

}  // namespace attn
