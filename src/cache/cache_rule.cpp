// Attention over a KV cache: the call's score rule over what the cache holds, or a refusal
// (the rule itself is stated in cache_rule.h).
#include "cache/cache_rule.h"

#include <algorithm>
#include <utility>

namespace attn {

namespace {

CacheCheck conflict(CacheConflict kind, std::int64_t call, std::int64_t cache) { return {kind, call, cache}; }

}  // namespace

CacheCall cache_call(const AttentionParams& p, int staged) {
  CacheCall c;
  c.batch = p.batch;
  c.heads = p.heads;
  c.kv_heads = p.kv_heads;
  c.head_dim = p.head_dim;
  c.value_dim = p.value_dim;
  c.seq_k = p.seq_k;
  c.seq_q = p.seq_q;
  c.staged = staged;
  c.causal = p.causal;
  c.align = p.align;
  c.window_left = p.window_left;
  c.window_right = p.window_right;
  return c;
}

CacheCheck check_config(const CacheCall& call, const KvCacheConfig& c) {
  const std::pair<int, int> sizes[] = {
      {call.batch, c.batch}, {call.kv_heads, c.kv_heads}, {call.head_dim, c.head_dim}, {call.value_dim, c.value_dim}};
  const CacheConflict kinds[] = {CacheConflict::batch, CacheConflict::kv_heads, CacheConflict::head_dim,
                                 CacheConflict::value_dim};
  for (int i = 0; i < 4; ++i)
    if (sizes[i].first != 0 && sizes[i].first != sizes[i].second)
      return conflict(kinds[i], sizes[i].first, sizes[i].second);
  if (call.heads < 1 || call.heads % c.kv_heads != 0) return conflict(CacheConflict::heads, call.heads, c.kv_heads);
  if (call.align == Align::upper_left) return conflict(CacheConflict::upper_left, 0, 0);
  if (c.window > 0) {
    // A ring keeps the window − 1 positions before each query: the call may look no further back.
    if (call.window_left == kNoLimit) return conflict(CacheConflict::window_unbounded, kNoLimit, c.window);
    if (call.window_left > c.window - 1) return conflict(CacheConflict::window_wider, call.window_left, c.window);
  }
  return {};
}

CacheCheck check_call(const CacheCall& call, const KvCache& cache) {
  if (!cache.allocated()) return conflict(CacheConflict::not_allocated, 0, 0);
  const KvCacheConfig& c = cache.config();
  if (const CacheCheck check = check_config(call, c); !check.ok()) return check;
  const std::int64_t keys = std::int64_t(cache.length()) + call.staged;
  if (call.staged < 0 || (call.staged > 0 && !cache.has_room(call.staged)))
    return conflict(CacheConflict::no_room, call.staged, cache.room());
  if (keys == 0) return conflict(CacheConflict::empty, 0, 0);
  if (call.seq_k != 0 && call.seq_k != keys) return conflict(CacheConflict::seq_k, call.seq_k, keys);
  if (call.seq_q < 1 || call.seq_q > keys) return conflict(CacheConflict::seq_q, call.seq_q, keys);
  // The earliest key a query sees: its position (keys − seq_q at least) minus the window's left
  // side (at most window − 1 for a ring, checked above; a linear cache holds every position).
  const int first = cache.first_held(call.staged);
  if (call.window_left != kNoLimit && std::max<std::int64_t>(0, keys - call.seq_q - call.window_left) < first)
    return conflict(CacheConflict::overwritten, call.seq_q, first);
  return {};
}

CacheCheck resolve(const CacheCall& call, const KvCache& cache, AttentionParams& p) {
  if (const CacheCheck check = check_call(call, cache); !check.ok()) return check;
  cache.describe(p, call.staged);
  p.seq_q = call.seq_q;
  p.causal = call.causal;
  p.align = Align::lower_right;  // the queries are the last positions: score::offset = length − seq_q
  p.window_left = call.window_left;
  p.window_right = call.window_right;
  return {};
}

const char* message(const CacheCheck& check) {
  switch (check.conflict) {
    case CacheConflict::none: return nullptr;
    case CacheConflict::not_allocated: return "kv cache: not allocated";
    case CacheConflict::batch: return "kv cache: the call's batch differs from the cache's";
    case CacheConflict::kv_heads: return "kv cache: the call's kv_heads differ from the cache's";
    case CacheConflict::head_dim: return "kv cache: the call's head_dim differs from the cache's";
    case CacheConflict::value_dim: return "kv cache: the call's value_dim differs from the cache's";
    case CacheConflict::heads: return "kv cache: heads must be a multiple of the cache's kv_heads";
    case CacheConflict::seq_k: return "kv cache: the call's seq_k differs from the positions the cache holds";
    case CacheConflict::empty: return "kv cache: the cache is empty";
    case CacheConflict::seq_q:
      return "kv cache: the queries must be among the positions appended (1 <= seq_q <= length)";
    case CacheConflict::upper_left:
      return "kv cache: upper-left alignment does not apply (the queries are the last positions)";
    case CacheConflict::window_unbounded:
      return "kv cache: a ring keeps only the window - 1 positions before each query; the call's window must bound its left side";
    case CacheConflict::window_wider:
      return "kv cache: the call's window looks further back than the ring keeps (its left side must be at most window - 1)";
    case CacheConflict::overwritten:
      return "kv cache: these queries need positions the ring no longer holds (fewer queries, or a larger max_seq)";
    case CacheConflict::no_room: return "kv cache: no room for these positions (max_seq)";
  }
  return "kv cache: unknown conflict";
}

}  // namespace attn
