// Attention over a KV cache (cache_rule.h): every pair of a call's options and a cache's that can
// disagree is either answered exactly (against the double reference over the same keys passed as
// arrays) or refused with the conflict and both values; a refusal leaves the params untouched.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cache/cache_rule.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"
#include "reference.h"

namespace {

using attn::CacheConflict;
constexpr int kInf = attn::kNoLimit;

// Keys and values [1, kv_heads, seq, dim] and queries [1, heads, seq, dim] of normal data.
struct Sequence {
  int heads = 2, kv_heads = 1, seq = 30, dim = 8;
  std::vector<float> q, k, v;
  explicit Sequence(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (auto* x : {&q, &k, &v}) {
      x->resize(std::size_t(x == &q ? heads : kv_heads) * seq * dim);
      for (float& e : *x) e = normal(rng);
    }
  }
};

attn::KvCacheConfig config(int max_seq, int window) {
  attn::KvCacheConfig c;
  c.kv_heads = 1;
  c.head_dim = c.value_dim = 8;
  c.max_seq = max_seq;
  c.window = window;
  return c;
}

// Appends positions [0, n) one at a time (a decode loop; a ring then holds its last max_seq).
void fill(attn::KvCache& cache, const Sequence& s, int n) {
  const attn::Strides st = attn::dense_bhsd(s.kv_heads, s.seq, s.dim);
  for (int t = 0; t < n; ++t)
    REQUIRE(cache.append(s.k.data() + t * st.row, st, s.v.data() + t * st.row, st, 1) == nullptr);
}

attn::CacheCall call(int seq_q, bool causal, int left, int right) {
  attn::CacheCall c;
  c.heads = 2;
  c.seq_q = seq_q;
  c.causal = causal;
  c.window_left = left;
  c.window_right = right;
  return c;
}

// The call over the cache (length n) against the reference over keys [0, n) passed as arrays.
void check_exact(const attn::KvCache& cache, const Sequence& s, const attn::CacheCall& c) {
  const int n = cache.length();
  attn::AttentionParams p;
  const attn::CacheCheck check = attn::resolve(c, cache, p);
  INFO("conflict " << int(check.conflict) << " (" << check.call << ", " << check.cache << ")");
  REQUIRE(check.ok());
  CHECK(p.seq_k == n);
  CHECK(p.causal == c.causal);  // the call's rule, unchanged
  CHECK(p.window_left == c.window_left);
  CHECK(p.window_right == c.window_right);
  CHECK(p.align == attn::Align::lower_right);
  std::vector<float> out(std::size_t(s.heads) * c.seq_q * s.dim);
  p.heads = s.heads;
  p.q = attn::dense_bhsd(s.heads, s.seq, s.dim);
  p.query = s.q.data() + (n - c.seq_q) * p.q.row;
  p.out = out.data();
  p.o = attn::dense_bhsd(s.heads, c.seq_q, s.dim);
  p.scale = 1.0f / std::sqrt(8.0f);
  REQUIRE(attn::attention(p) == nullptr);

  attn::AttentionParams r = p;  // the same call over plain arrays
  r.kv_ring = r.kv_first = 0;
  r.key = s.k.data();
  r.value = s.v.data();
  r.k = r.v = attn::dense_bhsd(s.kv_heads, s.seq, s.dim);
  const auto want = ref::attention(r, p.query, s.k.data(), s.v.data());
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(std::abs(out[i] - want[i]) <= 2e-5 + 1e-4 * std::abs(want[i]));
}

}  // namespace

TEST_CASE("a call's window against a ring's: exact when the ring keeps what it sees, else refused with both",
          "[cache][rule]") {
  const Sequence s(3);
  attn::KvCache ring, linear;
  REQUIRE(ring.allocate(config(4, 4)) == nullptr);  // window 4: the 3 positions before each query
  REQUIRE(linear.allocate(config(30, 0)) == nullptr);
  fill(ring, s, 10);
  fill(linear, s, 10);
  struct Row {
    int seq_q;
    bool causal;
    int left, right;
    CacheConflict ring;  // what the ring says (a linear cache answers every row exactly)
    std::int64_t call, cache;
  };
  const Row rows[] = {
      {1, false, 3, 0, CacheConflict::none, 0, 0},         // Hugging Face sliding_window 4
      {1, true, 3, 0, CacheConflict::none, 0, 0},
      {1, false, 1, 0, CacheConflict::none, 0, 0},         // narrower: honoured
      {1, false, 0, 0, CacheConflict::none, 0, 0},
      {1, false, 3, 2, CacheConflict::none, 0, 0},         // one query: nothing after it
      {1, false, 7, 0, CacheConflict::window_wider, 7, 4}, // needs 8 keys, the ring keeps 4
      {1, true, 4, 0, CacheConflict::window_wider, 4, 4},
      {1, true, kInf, 0, CacheConflict::window_unbounded, kInf, 4},
      {1, true, kInf, kInf, CacheConflict::window_unbounded, kInf, 4},  // causal, no window
      {1, false, kInf, kInf, CacheConflict::window_unbounded, kInf, 4},
  };
  for (const Row& row : rows) {
    INFO("seq_q " << row.seq_q << " causal " << row.causal << " window [" << row.left << ", " << row.right << "]");
    const attn::CacheCall c = call(row.seq_q, row.causal, row.left, row.right);
    check_exact(linear, s, c);
    if (row.ring == CacheConflict::none) {
      check_exact(ring, s, c);
    } else {
      attn::AttentionParams p;
      p.seq_k = -5;  // untouched on refusal
      const attn::CacheCheck check = attn::resolve(c, ring, p);
      CHECK(int(check.conflict) == int(row.ring));
      CHECK(check.call == row.call);
      CHECK(check.cache == row.cache);
      CHECK(p.seq_k == -5);
      CHECK(attn::message(check) != nullptr);
    }
  }
}

TEST_CASE("several queries over a ring: any right side is exact, and a narrower window needs fewer positions",
          "[cache][rule]") {
  const Sequence s(5);
  attn::KvCache ring;
  REQUIRE(ring.allocate(config(6, 4)) == nullptr);  // window 4, 6 slots
  fill(ring, s, 30);                                // holds 24 … 29
  REQUIRE(ring.first_held() == 24);
  check_exact(ring, s, call(3, true, 3, 0));    // queries 27 … 29 see back to 24
  check_exact(ring, s, call(3, false, 3, 2));   // not causal: the later keys are held too
  check_exact(ring, s, call(3, false, 2, kInf));
  check_exact(ring, s, call(4, true, 2, 0));    // 26 … 29 see back to 24
  check_exact(ring, s, call(6, false, 0, 1));
  attn::AttentionParams p;
  attn::CacheCheck check = attn::resolve(call(4, true, 3, 0), ring, p);  // 26 − 3 = 23 was overwritten
  CHECK(int(check.conflict) == int(CacheConflict::overwritten));
  CHECK(check.call == 4);
  CHECK(check.cache == 24);
  check = attn::resolve(call(7, false, 0, 0), ring, p);
  CHECK(int(check.conflict) == int(CacheConflict::overwritten));
}

TEST_CASE("sizes, alignment, length and room: each conflict names the call's value and the cache's", "[cache][rule]") {
  const Sequence s(7);
  attn::KvCache cache, ring, empty;
  REQUIRE(cache.allocate(config(12, 0)) == nullptr);
  REQUIRE(ring.allocate(config(5, 4)) == nullptr);
  REQUIRE(empty.allocate(config(12, 0)) == nullptr);
  fill(cache, s, 10);
  fill(ring, s, 10);
  auto with = [](auto change) {
    attn::CacheCall c = call(1, true, kInf, kInf);
    change(c);
    return c;
  };
  struct Row {
    const char* what;
    const attn::KvCache* cache;
    attn::CacheCall call;
    CacheConflict conflict;
    std::int64_t call_value, cache_value;
  };
  const Row rows[] = {
      {"batch", &cache, with([](attn::CacheCall& c) { c.batch = 2; }), CacheConflict::batch, 2, 1},
      {"kv_heads", &cache, with([](attn::CacheCall& c) { c.kv_heads = 2; }), CacheConflict::kv_heads, 2, 1},
      {"head_dim", &cache, with([](attn::CacheCall& c) { c.head_dim = 4; }), CacheConflict::head_dim, 4, 8},
      {"value_dim", &cache, with([](attn::CacheCall& c) { c.value_dim = 9; }), CacheConflict::value_dim, 9, 8},
      {"heads", &cache, with([](attn::CacheCall& c) { c.heads = 0; }), CacheConflict::heads, 0, 1},
      {"seq_k", &cache, with([](attn::CacheCall& c) { c.seq_k = 9; }), CacheConflict::seq_k, 9, 10},
      {"upper-left", &cache, with([](attn::CacheCall& c) { c.align = attn::Align::upper_left; }),
       CacheConflict::upper_left, 0, 0},
      {"seq_q", &cache, with([](attn::CacheCall& c) { c.seq_q = 11; }), CacheConflict::seq_q, 11, 10},
      {"empty", &empty, with([](attn::CacheCall&) {}), CacheConflict::empty, 0, 0},
      {"room", &cache, with([](attn::CacheCall& c) { c.staged = 3; }), CacheConflict::no_room, 3, 2},
      {"ring room", &ring, with([](attn::CacheCall& c) {
         c.staged = 3;
         c.window_left = 3;
       }),
       CacheConflict::no_room, 3, 2},
      {"given sizes that agree", &cache, with([](attn::CacheCall& c) {
         c.batch = 1;
         c.kv_heads = 1;
         c.head_dim = 8;
         c.value_dim = 8;
         c.seq_k = 10;
       }),
       CacheConflict::none, 0, 0},
      {"staged positions count", &cache, with([](attn::CacheCall& c) {
         c.staged = 2;
         c.seq_k = 12;
         c.seq_q = 2;
       }),
       CacheConflict::none, 0, 0},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    attn::AttentionParams p;
    const attn::CacheCheck check = attn::resolve(row.call, *row.cache, p);
    CHECK(int(check.conflict) == int(row.conflict));
    CHECK(check.call == row.call_value);
    CHECK(check.cache == row.cache_value);
    CHECK((attn::message(check) == nullptr) == check.ok());
  }
  attn::KvCache unallocated;
  attn::AttentionParams p;
  CHECK(int(attn::resolve(call(1, true, kInf, kInf), unallocated, p).conflict) == int(CacheConflict::not_allocated));
}

TEST_CASE("check_config is the part that needs no positions: what a layer checks when it makes a cache",
          "[cache][rule]") {
  attn::CacheCall c = call(1, true, 7, 0);
  CHECK(attn::check_config(c, config(8, 8)).ok());
  CHECK(attn::check_config(c, config(8, 0)).ok());
  CHECK(int(attn::check_config(c, config(8, 7)).conflict) == int(CacheConflict::window_wider));
  c.window_left = kInf;
  CHECK(int(attn::check_config(c, config(8, 8)).conflict) == int(CacheConflict::window_unbounded));
  CHECK(attn::check_config(c, config(8, 0)).ok());
}
