// The few-rows path (few_rows.h, driven by attention_forward.cpp): query rows per kv head up to
// kFewRows, K and V read in place a pair of rows at a time (row t of each half of a unit's keys, in
// blocks of kFewKeys / 2 from each half, a lone last key paired with a row of zeros), tiles of 4
// rows and then of 1, keys split into chunks of kSplitKeys and merged. Against the double-precision
// reference on both sides of every edge it has: rows 1–17 and 31–33 (tiles of 4, the kFewRows
// limit), groups 1–32, key counts 1, 2, 3 and around the halves' blocks (511–515), the key blocks
// (512) and the chunks (1024), scale factors folded into the queries or applied after, head dims 8 …
// 576 (odd ones, past a step of 2 vectors, and past int8's integer limit 512), value dims that
// differ, every storage type, rings that wrapped, every score variant, and chunks whose keys are
// all masked, +∞ or NaN. Shapes are spread over the combinations (not their full product) to keep
// the suite fast in every build.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_case.h"

using tcase::Case;
using tcase::check_case;
using tcase::check_run;
using tcase::make_run;
using tcase::Mask;
using tcase::Run;

namespace {

constexpr attn::KvType kTypes[] = {attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8,
                                   attn::KvType::i4};
constexpr int kTypeCount = sizeof kTypes / sizeof kTypes[0];

// Keys quantised with the queries quantised to int16 for integer dot products (int8, int4).
inline bool integer_keys(attn::KvType t) { return t == attn::KvType::i8 || t == attn::KvType::i4; }

// The few-rows limit and its edges, as the tests see them (attention_blocks.h).
constexpr int kFewRows = 32, kSplitKeys = 1024;

}  // namespace

TEST_CASE("few rows: every row count 1-17 and 31-33, as groups of 1-32 query heads times positions", "[few]") {
  const int groups[] = {1, 2, 3, 4, 8, 16, 32};
  const int seq_ks[] = {1, 2, 5, 63, 64, 65, 130, 511, 513};
  const int dims[][2] = {{8, 8}, {13, 13}, {64, 40}, {128, 128}, {17, 31}};
  int n = 0;
  for (int rows = 1; rows <= 33; ++rows) {
    if (rows > 17 && rows < 31) continue;
    for (int g : groups) {
      if (rows % g != 0) continue;
      Case c;
      c.kv_heads = 2;
      c.heads = 2 * g;
      c.seq_q = rows / g;
      c.seq_k = std::max(c.seq_q, seq_ks[n % 9]);
      c.head_dim = dims[n % 5][0];
      c.value_dim = dims[n % 5][1];
      c.kv_type = kTypes[n % kTypeCount];
      c.causal = c.seq_q > 1 && n % 2 == 0;
      c.weights = n % 3 == 0;
      c.lse = n % 3 == 1;
      c.batch = 1 + n % 2;
      c.seed = 100 + n;
      ++n;
      INFO("rows " << rows << (rows > kFewRows ? " (the blocked path)" : " (few rows)"));
      check_case(c);
    }
  }
}

TEST_CASE("few rows: key counts around every block edge, head dims 8-576, every storage type", "[few]") {
  const int seq_ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 17, 63, 64, 65, 511, 512, 513, 1023, 1024, 1025, 2049};
  const int dims[][2] = {{8, 8},   {9, 9},   {15, 16}, {16, 16},   {17, 17},  {31, 33},
                         {33, 31}, {64, 64}, {100, 7}, {129, 129}, {256, 64}, {576, 512}};
  int n = 0;
  for (const auto type : kTypes)
    for (const int rows : {1, 4, 6})
      for (const int seq_k : seq_ks) {
        Case c;
        c.kv_heads = 1 + n % 2;
        c.heads = c.kv_heads * rows;  // a decode step: the rows are the group's heads
        c.seq_k = seq_k;
        const int* d = dims[n % 12];
        if (seq_k > 600 && d[0] > 128) d = dims[n % 8];  // keep the reference cheap
        c.head_dim = d[0];
        c.value_dim = d[1];
        c.kv_type = type;
        c.seed = 300 + n;
        ++n;
        check_case(c);
      }
}

TEST_CASE("few rows: the halves of a unit's keys, their blocks, and a lone last key", "[few]") {
  // A unit of n keys is read as two halves, ceil(n/2) and floor(n/2) keys, side by side, in
  // blocks of 256 keys of each; an odd n leaves the first half's last key alone (paired with a
  // row of zeros). Key counts on both sides of each edge, for tiles of 4 and of 1 rows, every
  // storage type, head dims on both sides of a step of 2 vectors.
  const int seq_ks[] = {1, 2, 3, 4, 255, 256, 257, 511, 512, 513, 514, 515, 1023, 1025, 1026, 2051};
  const int dims[][2] = {{7, 7}, {8, 8}, {9, 12}, {16, 9}, {23, 24}, {129, 128}};
  int n = 0;
  for (const auto type : kTypes)
    for (const int rows : {1, 4, 5, 7})
      for (const int seq_k : seq_ks) {
        if ((n++ + rows) % 3) continue;  // a third of the product, spread over it
        Case c;
        c.kv_heads = 2;
        c.heads = 2 * rows;
        c.seq_k = seq_k;
        c.head_dim = dims[n % 6][0];
        c.value_dim = dims[n % 6][1];
        c.kv_type = type;
        c.weights = n % 4 == 0;
        c.seed = 1200 + n;
        check_case(c);
      }
}

TEST_CASE("few rows: a lone last key's ±∞ values stay ±∞ (its partner, a row of zeros, adds nothing)", "[few]") {
  // 5 keys: halves [0, 3) and [3, 5), so key 2 has no partner. Its values ±∞ must give ±∞ in
  // every row's output (0 · ∞ would be NaN, were the partner a copy of it with probability 0).
  for (const int rows : {1, 4, 6}) {
    Case c;
    c.kv_heads = 1;
    c.heads = rows;
    c.seq_k = 5;
    c.head_dim = 8;
    c.value_dim = 6;
    Run r = make_run(c);
    r.v[2 * 6 + 0] = std::numeric_limits<float>::infinity();
    r.v[2 * 6 + 1] = -std::numeric_limits<float>::infinity();
    REQUIRE(attn::attention(r.p) == nullptr);
    for (int h = 0; h < rows; ++h) {
      INFO("rows " << rows << " head " << h);
      CHECK(r.out[h * 6 + 0] == std::numeric_limits<float>::infinity());
      CHECK(r.out[h * 6 + 1] == -std::numeric_limits<float>::infinity());
      for (int e = 2; e < 6; ++e) CHECK(std::isfinite(r.out[h * 6 + e]));
    }
  }
}

TEST_CASE("few rows: rings that wrapped, in and across blocks and chunks, every storage type", "[few]") {
  int n = 0;
  for (const auto type : kTypes)
    for (const int rows : {1, 3, 4, 8})
      for (const int ring : {5, 66, 700, 1500}) {
        Case c;
        c.kv_heads = 2;
        c.heads = 2 * (rows % 2 ? rows : rows / 2);
        c.seq_q = rows % 2 ? 1 : 2;
        c.seq_k = 3 * ring + 17;  // wrapped more than twice: pieces split blocks anywhere
        c.ring = ring;
        c.causal = true;
        c.window_left = ring - c.seq_q;
        c.window_right = 0;
        c.head_dim = n % 2 ? 24 : 33;
        c.value_dim = 20;
        c.kv_type = type;
        c.weights = n % 3 == 0;
        c.alibi = n % 4 == 1 ? 2 : 0;
        c.seed = 500 + n;
        ++n;
        check_case(c);
      }
}

TEST_CASE("few rows: every score variant, one row and several", "[few]") {
  int n = 0;
  for (const auto type : kTypes)
    for (const int rows : {1, 2, 5, 32}) {
      const attn::KvType t = type;
      const auto base = [&] {
        Case c;
        c.kv_heads = 2;
        c.heads = rows == 32 ? 16 : 2 * rows;
        c.seq_q = rows == 32 ? 4 : 1;
        c.seq_k = 200 + 37 * (n % 3);
        c.head_dim = 16 + n % 3;
        c.value_dim = 12;
        c.kv_type = t;
        c.seed = 700 + n++;
        return c;
      };
      Case c = base();
      c.causal = true;
      c.align = attn::Align::upper_left;
      c.window_left = 50;
      c.window_right = 3;
      c.weights = true;
      check_case(c);
      c = base();
      c.softcap = 5.0f;
      c.alibi = 2;
      c.sinks = true;
      c.lse = true;
      check_case(c);
      c = base();
      c.mask = Mask::additive;
      c.mask_dims = n % 8;
      c.key_padding = true;
      c.weights = true;
      c.bshd = true;
      check_case(c);
      c = base();
      c.mask = Mask::boolean;
      c.causal = true;
      c.weights_only = true;
      check_case(c);
      c = base();
      c.input_scale = 30.0f;  // large logits (scores in the thousands): exact weights still,
      // but for int8 keys, whose queries are quantised to int16 (2^-16 of max |q|: here ~0.01
      // of a score, which the softmax turns into ~1 % of a weight)
      c.tolerance = integer_keys(t) ? 5e-3 : 1e-4;
      c.weights = true;
      check_case(c);
    }
}

TEST_CASE("few rows: scale factors of at most 1 carried by the queries, larger ones applied to the scores", "[few]") {
  int n = 0;
  for (const auto type : kTypes)
    for (const int rows : {1, 5})
      for (const float scale : {0.0f, 0.5f, -0.3f, 2.0f, 40.0f}) {
        Case c;
        c.kv_heads = 1;
        c.heads = rows;
        c.seq_k = 70;
        c.head_dim = 20;
        c.kv_type = type;
        c.scale = scale;
        c.weights = true;
        // logits in the hundreds: int8 keys' int16 queries are off by ~2^-16 of one (see above)
        if (integer_keys(type) && scale > 2.0f) c.tolerance = 5e-3;
        c.seed = 900 + n++;
        check_case(c);
      }
}

TEST_CASE("few rows: float16 known finite without the rebias, queries past 2^16, subnormal keys", "[few]") {
  // A cache promises finite float16 (kv_finite): the rows then widen keys and values without the
  // 2^112 rebias (half::FiniteRaw), which the queries and the probabilities carry instead, while
  // every |q| < 2^16; queries past that read them as any float16. Keys near 2^-16 are mostly
  // subnormal halves; a scale keeps their logits of order one. Tiles of 1 and of 4 rows.
  int n = 0;
  for (const int rows : {1, 3, 5})
    for (const bool big_query : {false, true})
      for (const bool tiny_keys : {false, true})
        for (const int dim : {16, 33, 128}) {
          Case c;
          c.kv_type = attn::KvType::f16;
          c.kv_finite = true;
          c.kv_heads = 2;
          c.heads = 2 * rows;
          c.seq_k = n % 3 == 0 ? 70 : n % 3 == 1 ? 600 : 2 * kSplitKeys + 100;
          c.head_dim = dim;
          c.value_dim = dim % 2 ? 20 : dim;
          float logit = 1.0f / std::sqrt(float(dim));
          if (tiny_keys) {
            c.input_scale = 0x1p-16f;  // q and k
            c.query_scale = 0x1p16f;  // q back to [-1, 1)
            logit *= 0x1p16f;
          }
          if (big_query) {
            c.query_scale *= 0x1p17f;
            logit *= 0x1p-17f;
          }
          c.scale = logit;
          if (n % 4 == 3) {  // a ring that wrapped
            c.ring = 100;
            c.seq_k = 3 * c.ring + 17;
            c.causal = true;
            c.window_left = c.ring - 1;
            c.window_right = 0;
          }
          c.weights = n % 2 == 0;
          c.seed = 1000 + n++;
          check_case(c);
        }
}

TEST_CASE("few rows: int8 and int4 keys through integers, and in float past 512 dims (int8) or for non-finite queries",
          "[few]") {
  const auto type = GENERATE(attn::KvType::i8, attn::KvType::i4);
  for (const int rows : {1, 4, 9}) {
    Case c;
    c.kv_heads = 1;
    c.heads = rows;
    c.seq_k = 77;
    c.kv_type = type;
    c.head_dim = 512;  // int8: the last length the integer dot products take
    check_case(c);
    c.head_dim = type == attn::KvType::i8 ? 513 : 600;  // int8: float; int4: integers, blocks of 32, any length
    check_case(c);
    c.head_dim = 24;
    c.input_scale = 0x1p-105f;  // queries too small to quantise: float
    check_case(c);
  }
  // A NaN query: its row is NaN, the others (float path for the whole block: the scores, and
  // the values, since a row's probabilities are NaN) are exact.
  Case c;
  c.kv_heads = 1;
  c.heads = 4;
  c.seq_k = 40;
  c.head_dim = 16;
  c.value_dim = 37;
  c.kv_type = type;
  Run r = make_run(c);
  r.q[2 * 16 + 5] = std::numeric_limits<float>::quiet_NaN();  // head 2
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int h = 0; h < 4; ++h)
    for (int e = 0; e < 37; ++e) CHECK(std::isnan(r.out[h * 37 + e]) == (h == 2));
  r.q[2 * 16 + 5] = 0.5f;
  check_run(c, r);
}

TEST_CASE("few rows: keys split into chunks merge as one pass, also where a chunk is masked, +inf or NaN", "[few]") {
  const int seq_k = 2 * kSplitKeys + 300;
  for (const auto type : kTypes)
    for (const int rows : {1, 4}) {
      Case c;
      c.kv_heads = 2;
      c.heads = 2 * rows;
      c.seq_k = seq_k;
      c.head_dim = 16;
      c.value_dim = 8;
      c.kv_type = type;
      c.weights = true;
      c.lse = true;
      c.sinks = rows == 4;
      check_case(c);
      // Every key of the middle chunk masked, and of the first chunk but one.
      Run r = make_run(c);
      std::vector<std::uint8_t> padding(seq_k, 0);
      for (int j = kSplitKeys; j < 2 * kSplitKeys; ++j) padding[j] = 1;
      for (int j = 0; j < kSplitKeys - 1; ++j) padding[j] = 1;
      r.p.key_padding = padding.data();
      r.ref_params.key_padding = padding.data();
      check_run(c, r);
    }
  // +∞ scores in the last chunk only take all the weight, shared equally (the float32 keys of
  // two positions made huge), as they would in one pass.
  Case c;
  c.heads = c.kv_heads = 1;
  c.seq_k = seq_k;
  c.head_dim = 4;
  c.scale = 1.0f;
  Run r = make_run(c);
  for (int d = 0; d < 4; ++d) r.q[d] = 0.9f;
  for (int j : {seq_k - 10, seq_k - 3})
    for (int d = 0; d < 4; ++d) r.k[j * 4 + d] = 3e38f;  // q·k overflows to +∞
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int e = 0; e < 4; ++e) CHECK(r.out[e] == Approx((r.v[(seq_k - 10) * 4 + e] + r.v[(seq_k - 3) * 4 + e]) / 2));
  // A NaN value in the first chunk makes its column NaN, whatever the chunks after it.
  r = make_run(c);
  r.v[5 * 4 + 1] = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(attn::attention(r.p) == nullptr);
  CHECK(std::isnan(r.out[1]));
  CHECK(!std::isnan(r.out[0]));
}
