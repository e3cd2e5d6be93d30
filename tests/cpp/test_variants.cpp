// The score variants of attention.h against the double-precision reference: causal alignments,
// sliding windows, softcap, ALiBi, sinks, alone and together, on the blocked and the direct
// (few rows per kv head) paths; and scores that overflow float32 (never NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_case.h"

using tcase::Case;
using tcase::check_case;
using tcase::make_run;
using tcase::Mask;
using tcase::Run;

namespace {

constexpr int kInf = attn::kNoLimit;

// Each case on the blocked path and, with one query row per kv head, on the few-rows path.
void check_both_paths(Case c) {
  check_case(c);
  c.heads = c.kv_heads;
  c.seq_q = std::min(c.seq_q, 3);
  check_case(c);
}

}  // namespace

TEST_CASE("causal alignments: lower-right and upper-left", "[variants]") {
  const auto seq = GENERATE(std::pair{5, 12}, std::pair{12, 5}, std::pair{70, 70}, std::pair{1, 300}, std::pair{100, 1},
                            std::pair{130, 67});
  const auto align = GENERATE(attn::Align::lower_right, attn::Align::upper_left);
  Case c;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = seq.first;
  c.seq_k = seq.second;
  c.head_dim = 6;
  c.causal = true;
  c.align = align;
  c.weights = true;
  c.lse = true;
  check_both_paths(c);
}

TEST_CASE("upper-left causal: row i sees keys 0..i", "[variants]") {
  Case c;
  c.seq_q = 3;
  c.seq_k = 5;
  c.head_dim = 4;
  c.causal = true;
  c.align = attn::Align::upper_left;
  c.weights = true;
  Run r = make_run(c);
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) CHECK((r.weights[i * 5 + j] > 0) == (j <= i));
}

TEST_CASE("windows: every side kind, with and without causal, both alignments", "[variants]") {
  const int left = GENERATE(0, 1, 5, 64, 300, kInf);
  const int right = GENERATE(0, 1, 7, 300, kInf);
  const bool causal = GENERATE(false, true);
  const auto seq = GENERATE(std::pair{40, 150}, std::pair{150, 40}, std::pair{97, 97});
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq.first;
  c.seq_k = seq.second;
  c.head_dim = 5;
  c.window_left = left;
  c.window_right = right;
  c.causal = causal;
  c.align = (left + right) % 2 ? attn::Align::upper_left : attn::Align::lower_right;
  c.weights = true;
  c.lse = true;
  check_both_paths(c);
}

TEST_CASE("a window narrower than a key block over a long sequence", "[variants]") {
  Case c;
  c.heads = 3;
  c.kv_heads = 3;
  c.seq_q = 700;
  c.seq_k = 700;
  c.head_dim = 16;
  c.causal = true;
  c.window_left = 20;
  c.window_right = 0;
  c.mask = Mask::additive;
  c.weights = true;
  check_case(c);
}

TEST_CASE("an unlimited window is the same as none, bit for bit", "[variants]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 33;
  c.seq_k = 90;
  c.head_dim = 8;
  c.causal = true;
  Run plain = make_run(c);
  REQUIRE(attn::attention(plain.p) == nullptr);
  Run windowed = make_run(c);
  windowed.p.window_left = windowed.p.window_right = kInf;
  REQUIRE(attn::attention(windowed.p) == nullptr);
  CHECK(plain.out == windowed.out);
  windowed.p.window_left = windowed.p.window_right = 100000;  // wider than everything
  REQUIRE(attn::attention(windowed.p) == nullptr);
  CHECK(plain.out == windowed.out);
}

TEST_CASE("softcap, including logits of ±1e3", "[variants]") {
  const float cap = GENERATE(0.5f, 30.0f, 50.0f);
  const float input_scale = GENERATE(1.0f, 40.0f);  // scores up to ~±1e3·(16/√16)
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = 17;
  c.seq_k = 130;
  c.head_dim = 16;
  c.softcap = cap;
  c.input_scale = input_scale;
  c.causal = true;
  c.weights = true;
  c.lse = true;
  // tanh is a rational approximation with relative error < 3e-7, so a capped score carries an
  // absolute error below 3e-7·cap in addition to float rounding of scores up to the cap.
  c.tolerance = 2e-5 + 4e-7 * cap * 4;
  check_both_paths(c);
}

TEST_CASE("a softcap far above every score changes nothing (to float precision)", "[variants]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 9;
  c.seq_k = 40;
  c.head_dim = 8;
  c.softcap = 1e6f;
  c.weights = true;
  Run r = make_run(c);
  REQUIRE(attn::attention(r.p) == nullptr);
  Case plain = c;
  plain.softcap = 0;
  Run q = make_run(plain);
  REQUIRE(attn::attention(q.p) == nullptr);
  for (std::size_t i = 0; i < r.out.size(); ++i) CHECK(r.out[i] == Approx(q.out[i]).margin(1e-6));
}

TEST_CASE("ALiBi slopes per head and per batch entry", "[variants]") {
  const int alibi = GENERATE(1, 2);
  const bool causal = GENERATE(false, true);
  const auto align = GENERATE(attn::Align::lower_right, attn::Align::upper_left);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 23;
  c.seq_k = 77;
  c.head_dim = 8;
  c.alibi = alibi;
  c.causal = causal;
  c.align = align;
  c.weights = true;
  check_both_paths(c);
}

TEST_CASE("sinks join the denominator: masked rows give zeros and lse = sink", "[variants]") {
  const Mask mask = GENERATE(Mask::none, Mask::boolean, Mask::additive);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 1;
  c.seq_q = 11;
  c.seq_k = 70;
  c.head_dim = 7;
  c.sinks = true;
  c.mask = mask;  // row 0 of every mask slice is fully masked
  c.weights = true;
  c.lse = true;
  check_both_paths(c);

  Run r = make_run(c);
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int h = 0; h < 4; ++h) {
    double sum = 0;
    for (int j = 0; j < 70; ++j) sum += r.weights[(h * 11 + 1) * 70 + j];
    CHECK(sum < 1.0);
    if (mask != Mask::none) {
      CHECK(r.lse[h * 11] == Approx(r.sinks[h]));
      for (int d = 0; d < 7; ++d) CHECK(r.out[(h * 11) * 7 + d] == 0.0f);
    }
  }
}

TEST_CASE("sinks of −∞ are the same as none", "[variants]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 20;
  c.seq_k = 20;
  c.head_dim = 4;
  c.causal = true;
  Run plain = make_run(c);
  REQUIRE(attn::attention(plain.p) == nullptr);
  Run r = make_run(c);
  const float none[2] = {-INFINITY, -INFINITY};
  r.p.sinks = none;
  REQUIRE(attn::attention(r.p) == nullptr);
  CHECK(plain.out == r.out);
}

TEST_CASE("every variant at once, random shapes", "[variants]") {
  std::mt19937 rng(20261201);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < 40; ++n) {
    Case c;
    c.batch = pick(1, 2);
    c.kv_heads = pick(1, 2);
    c.heads = c.kv_heads * pick(1, 3);
    c.seq_q = pick(1, 80);
    c.seq_k = pick(1, 160);
    c.head_dim = pick(1, 33);
    c.value_dim = pick(1, 20);
    c.bshd = pick(0, 1);
    c.causal = pick(0, 1);
    c.align = pick(0, 1) ? attn::Align::upper_left : attn::Align::lower_right;
    c.window_left = pick(0, 2) ? pick(0, 90) : kInf;
    c.window_right = pick(0, 2) ? pick(0, 90) : kInf;
    c.softcap = pick(0, 1) ? float(pick(1, 50)) : 0.0f;
    c.alibi = pick(0, 2);
    c.sinks = pick(0, 1);
    c.mask = static_cast<Mask>(pick(0, 2));
    c.mask_dims = pick(0, 7);
    c.key_padding = pick(0, 1);
    c.weights = pick(0, 1);
    c.lse = pick(0, 1);
    c.seed = std::uint32_t(n + 500);
    c.tolerance = 4e-5;
    check_case(c);
  }
}

TEST_CASE("scores that overflow float32 never give NaN (blocked and few-rows paths)", "[variants]") {
  // q = 1e9, k = [0, 1], v = [1, 2], scale 1e30: scores 0 and 1.4e39 → +∞: an argmax, out = 2.
  for (int seq_q : {5, 4, 1, 40}) {
    attn::AttentionParams p;
    std::vector<float> q(seq_q, 1e9f), k = {0.0f, 1.0f}, v = {1.0f, 2.0f}, out(seq_q, NAN), w(2 * seq_q, NAN),
                                       lse(seq_q);
    p.query = q.data();
    p.key = k.data();
    p.value = v.data();
    p.out = out.data();
    p.weights = w.data();
    p.lse = lse.data();
    p.seq_q = seq_q;
    p.seq_k = 2;
    p.q = p.o = attn::dense_bhsd(1, seq_q, 1);
    p.k = p.v = attn::dense_bhsd(1, 2, 1);
    p.w = attn::dense_bhsd(1, seq_q, 2);
    p.l = attn::dense_bhsd(1, seq_q, 1);
    p.scale = 1e30f;
    REQUIRE(attn::attention(p) == nullptr);
    for (int i = 0; i < seq_q; ++i) {
      INFO("seq_q " << seq_q << " row " << i);
      CHECK(out[i] == 2.0f);
      CHECK(w[2 * i] == 0.0f);
      CHECK(w[2 * i + 1] == 1.0f);
      CHECK(!std::isnan(lse[i]));
    }
    // q = 3e38, default-like scale, keys [0, 1e-10]: q·scale alone overflows float32.
    std::fill(q.begin(), q.end(), 3e38f);
    k = {0.0f, 1e-10f};
    p.key = k.data();
    p.scale = 8.0f;
    REQUIRE(attn::attention(p) == nullptr);
    for (int i = 0; i < seq_q; ++i) CHECK(out[i] == Approx(2.0f));
  }
}

TEST_CASE("one query element past the usual factor's range turns its row block to the overflow-safe scaling",
          "[variants]") {
  // The blocked path packs a row block's queries times scale·log2 e while taking their max |q|,
  // and packs them again, overflow-safe, when that max calls for it: one element of 3e38 (times
  // 8·log2 e it overflows) in either row of a tile, a lone last row, a vector or a tail lane.
  // Keys [0 …] and [1e-10 …], values 1 and 2: that row's scores are 0 and 2.4e29 (out = 2), the
  // other rows' nearly equal (out = 1.5); a packed ∞ would make ∞·0 = NaN.
  for (int seq_q : {40, 39}) {
    for (int d : {5, 8}) {
      for (int row : {16, 17, 33, seq_q - 1}) {
        for (int col : {0, d - 1}) {
          INFO("seq_q " << seq_q << " head_dim " << d << " row " << row << " col " << col);
          attn::AttentionParams p;
          std::vector<float> q(seq_q * d, 1.0f), k(2 * d, 0.0f), v = {1.0f, 2.0f}, out(seq_q, NAN);
          std::fill(k.begin() + d, k.end(), 1e-10f);
          q[row * d + col] = 3e38f;
          p.query = q.data();
          p.key = k.data();
          p.value = v.data();
          p.out = out.data();
          p.seq_q = seq_q;
          p.seq_k = 2;
          p.head_dim = d;
          p.q = attn::dense_bhsd(1, seq_q, d);
          p.k = attn::dense_bhsd(1, 2, d);
          p.v = attn::dense_bhsd(1, 2, 1);
          p.o = attn::dense_bhsd(1, seq_q, 1);
          p.scale = 8.0f;
          REQUIRE(attn::attention(p) == nullptr);
          for (int i = 0; i < seq_q; ++i) CHECK(out[i] == Approx(i == row ? 2.0f : 1.5f).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("finite inputs and finite scales never give NaN", "[variants]") {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int n = 0; n < 200; ++n) {
    Case c;
    c.kv_heads = pick(1, 2);
    c.heads = c.kv_heads * pick(1, 2);
    c.seq_q = pick(1, 40);
    c.seq_k = pick(1, 70);
    c.head_dim = pick(1, 20);
    c.causal = pick(0, 1);
    c.softcap = pick(0, 3) == 0 ? std::pow(10.0f, float(pick(-3, 3))) : 0.0f;
    c.sinks = pick(0, 1);
    c.weights = true;
    c.lse = true;
    c.seed = std::uint32_t(n);
    Run r = make_run(c);
    // q and k of any magnitude such that head_dim·|q|·|k| stays in float32, any finite scale.
    const float qexp = float(pick(-30, 30)), kexp = float(pick(-30, 30)) - std::max(0.0f, qexp - 3);
    for (auto& x : r.q) x = uni(rng) * std::pow(10.0f, qexp);
    for (auto& x : r.k) x = uni(rng) * std::pow(10.0f, std::min(kexp, 30.0f - qexp));
    r.p.scale = uni(rng) * std::pow(10.0f, float(pick(-38, 38)));
    INFO(c.describe() << " qexp " << qexp << " scale " << r.p.scale);
    REQUIRE(attn::attention(r.p) == nullptr);
    bool nan = false;
    for (float x : r.out) nan |= std::isnan(x);
    for (float x : r.weights) nan |= std::isnan(x);
    for (float x : r.lse) nan |= std::isnan(x);
    CHECK_FALSE(nan);
  }
}

TEST_CASE("huge finite masks and ALiBi slopes on overflowed scores give no NaN (fuzzer find)", "[variants]") {
  // A score that overflowed to −∞ (scale −1.7e38) plus an additive mask of 3e38 (whose log2-unit
  // value alone overflows) was ∞ − ∞; the same for ALiBi slopes near float32's limit.
  for (int seq_q : {18, 1}) {  // blocked and few-rows paths
    for (int alibi : {0, 1}) {
      Case c;
      c.seq_q = seq_q;
      c.head_dim = 2;
      c.value_dim = 3;
      c.mask = Mask::additive;
      c.mask_dims = 1;
      c.alibi = alibi;
      c.align = attn::Align::upper_left;
      c.lse = true;
      Run r = make_run(c);
      std::fill(r.q.begin(), r.q.end(), 1.03125f);
      std::fill(r.k.begin(), r.k.end(), 11.5f);
      std::fill(r.fmask.begin(), r.fmask.end(), -0.33f);
      r.fmask[0] = 3e38f;
      std::fill(r.slopes.begin(), r.slopes.end(), 3e38f);
      r.p.scale = -1.74e38f;
      INFO(c.describe());
      REQUIRE(attn::attention(r.p) == nullptr);
      for (float x : r.out) CHECK_FALSE(std::isnan(x));
      for (float x : r.lse) CHECK_FALSE(std::isnan(x));
    }
  }
}
