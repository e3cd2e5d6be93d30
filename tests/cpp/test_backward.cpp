// attention_backward against finite differences of the double-precision reference forward:
// L = Σ out ⊙ G for a random G, dL/dx ≈ (L(x + h) − L(x − h)) / 2h, h = 1e-3, in double.
// The kernel works in float, so gradients are compared with |got − want| <= 2e-4 + 2e-3·|want|.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "kernel/attention.h"
#include "reference.h"

namespace {

struct Case {
  int batch = 1, heads = 2, kv_heads = 2, seq_q = 3, seq_k = 4, d = 3, dv = 2;
  bool bshd = false, causal = false, key_padding = false;
  // 0 none, 1 boolean [sq, sk], 2 additive [b, h, sq, sk], 3 block (nonzero = masked) [b, 1, 1, sk],
  // 4 additive [h, sq, sk] (broadcast over the batch)
  int mask = 0;
  // Score variants (attention.h).
  attn::Align align = attn::Align::lower_right;
  int window_left = attn::kNoLimit, window_right = attn::kNoLimit;
  float softcap = 0.0f;
  bool alibi = false, sinks = false;
};

std::vector<double> random_vec(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) e = uni(rng);
  return v;
}

void check_gradients(const Case& c) {
  std::ostringstream name;
  name << "b" << c.batch << " h" << c.heads << "/" << c.kv_heads << " " << c.seq_q << "x" << c.seq_k << " d" << c.d
       << "/" << c.dv << (c.bshd ? " bshd" : "") << (c.causal ? " causal" : "") << " mask " << c.mask
       << (c.key_padding ? " padding" : "") << (c.align == attn::Align::upper_left ? " upper-left" : "") << " window ["
       << c.window_left << "," << c.window_right << "] softcap " << c.softcap << (c.alibi ? " alibi" : "")
       << (c.sinks ? " sinks" : "");
  INFO(name.str());
  std::mt19937 rng(42);
  const auto dense = c.bshd ? attn::dense_bshd : attn::dense_bhsd;
  attn::AttentionParams p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.head_dim = c.d;
  p.value_dim = c.dv;
  p.q = dense(c.heads, c.seq_q, c.d);
  p.k = dense(c.kv_heads, c.seq_k, c.d);
  p.v = dense(c.kv_heads, c.seq_k, c.dv);
  p.o = dense(c.heads, c.seq_q, c.dv);
  p.scale = 0.7f;
  p.causal = c.causal;
  p.align = c.align;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  std::vector<float> slopes, sinks;
  if (c.alibi) {
    for (int h = 0; h < c.heads; ++h) slopes.push_back(0.5f / float(h + 1));
    p.alibi_slopes = slopes.data();
  }
  if (c.sinks) {
    for (int h = 0; h < c.heads; ++h) sinks.push_back(0.3f * float(h) - 0.2f);
    p.sinks = sinks.data();
  }
  std::vector<double> qd = random_vec(std::size_t(c.batch) * c.heads * c.seq_q * c.d, rng);
  std::vector<double> kd = random_vec(std::size_t(c.batch) * c.kv_heads * c.seq_k * c.d, rng);
  std::vector<double> vd = random_vec(std::size_t(c.batch) * c.kv_heads * c.seq_k * c.dv, rng);
  std::vector<double> gd = random_vec(std::size_t(c.batch) * c.heads * c.seq_q * c.dv, rng);
  std::vector<std::uint8_t> bmask, pad;
  std::vector<float> fmask;
  if (c.mask == 1) {
    bmask.resize(std::size_t(c.seq_q) * c.seq_k);
    for (std::size_t e = 0; e < bmask.size(); ++e) bmask[e] = e % 3 != 1;
    bmask[0] = bmask[1] = bmask[2] = bmask[3] = 0;  // row 0 fully masked (seq_k 4)
    p.mask = bmask.data();
    p.mask_type = attn::MaskType::boolean;
    p.m = attn::mask_strides(attn::MaskShape::plane, c.heads, c.seq_q, c.seq_k);
  } else if (c.mask == 2) {
    fmask.resize(std::size_t(c.batch) * c.heads * c.seq_q * c.seq_k);
    for (std::size_t e = 0; e < fmask.size(); ++e) fmask[e] = e % 5 == 2 ? -INFINITY : float(std::sin(double(e)));
    p.mask = fmask.data();
    p.mask_type = attn::MaskType::additive;
    p.m = attn::mask_strides(attn::MaskShape::per_head, c.heads, c.seq_q, c.seq_k);
  } else if (c.mask == 3) {
    bmask.resize(std::size_t(c.batch) * c.seq_k);
    for (std::size_t e = 0; e < bmask.size(); ++e) bmask[e] = e % 4 == 1;
    p.mask = bmask.data();
    p.mask_type = attn::MaskType::block;
    p.m = attn::mask_strides({true, false, false}, c.heads, c.seq_q, c.seq_k);
  } else if (c.mask == 4) {
    fmask.resize(std::size_t(c.heads) * c.seq_q * c.seq_k);
    for (std::size_t e = 0; e < fmask.size(); ++e) fmask[e] = e % 6 == 2 ? -INFINITY : float(std::cos(double(e)));
    p.mask = fmask.data();
    p.mask_type = attn::MaskType::additive;
    p.m = attn::mask_strides({false, true, true}, c.heads, c.seq_q, c.seq_k);
  }
  if (c.key_padding) {
    pad.assign(std::size_t(c.batch) * c.seq_k, 0);
    pad[c.seq_k - 1] = 1;
    p.key_padding = pad.data();
    p.key_padding_batch_stride = c.seq_k;
  }
  // The output is dense [b, h, i, c] in the reference; G indexes it the same way.
  auto loss = [&]() {
    const auto out = ref::attention(p, qd.data(), kd.data(), vd.data());
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += out[i] * gd[i];
    return l;
  };
  auto numeric = [&](std::vector<double>& x) {
    std::vector<double> grad(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double keep = x[i];
      x[i] = keep + 1e-3;
      const double up = loss();
      x[i] = keep - 1e-3;
      const double down = loss();
      x[i] = keep;
      grad[i] = (up - down) / 2e-3;
    }
    return grad;
  };
  const auto want_q = numeric(qd), want_k = numeric(kd), want_v = numeric(vd);
  std::vector<double> want_sinks;
  for (std::size_t h = 0; h < sinks.size(); ++h) {
    const float keep = sinks[h];
    sinks[h] = keep + 1e-3f;
    const double up = loss(), step_up = double(sinks[h]) - keep;
    sinks[h] = keep - 1e-3f;
    const double down = loss(), step_down = keep - double(sinks[h]);
    sinks[h] = keep;
    want_sinks.push_back((up - down) / (step_up + step_down));
  }

  // The kernel in float, with d_out = G laid out like out.
  auto to_float = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
  const auto qf = to_float(qd), kf = to_float(kd), vf = to_float(vd);
  std::vector<float> dout(gd.size());
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.seq_q; ++i)
        for (int x = 0; x < c.dv; ++x)
          dout[b * p.o.batch + h * p.o.head + i * p.o.row + x] =
              float(gd[((std::size_t(b) * c.heads + h) * c.seq_q + i) * c.dv + x]);
  p.query = qf.data();
  p.key = kf.data();
  p.value = vf.data();
  std::vector<float> dq(qf.size(), NAN), dk(kf.size(), NAN), dv(vf.size(), NAN);
  attn::AttentionGrads g;
  g.d_out = dout.data();
  g.d_query = dq.data();
  g.d_key = dk.data();
  g.d_value = dv.data();
  g.d_o = p.o;
  g.d_q = p.q;
  g.d_k = p.k;
  g.d_v = p.v;
  std::vector<float> dsinks(sinks.size(), NAN);
  if (c.sinks) g.d_sinks = dsinks.data();
  REQUIRE(attn::attention_backward(p, g) == nullptr);
  auto compare = [](const std::vector<float>& got, const std::vector<double>& want, const char* what) {
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - want[i]) <= 2e-4 + 2e-3 * std::abs(want[i]))) ++bad;
    INFO(what << ": " << bad << " of " << got.size() << " off");
    CHECK(bad == 0);
  };
  compare(dq, want_q, "d_query");
  compare(dk, want_k, "d_key");
  compare(dv, want_v, "d_value");
  compare(dsinks, want_sinks, "d_sinks");

  // Again from the forward's saved log-sum-exp and output (rows with no visible key give −∞
  // and make their block recompute).
  std::vector<float> out(dout.size()), lse(std::size_t(c.batch) * c.heads * c.seq_q);
  p.l = attn::dense_bhsd(c.heads, c.seq_q, 1);  // the backward reads lse with p.l, out with p.o
  attn::AttentionParams fw = p;
  fw.out = out.data();
  fw.lse = lse.data();
  REQUIRE(attn::attention(fw) == nullptr);
  for (std::size_t r = 0; r < lse.size(); ++r) {  // lse is log Σ exp(score) over visible keys
    INFO("row " << r);
    CHECK((std::isfinite(lse[r]) || lse[r] == -INFINITY));
  }
  std::fill(dq.begin(), dq.end(), NAN);
  std::fill(dk.begin(), dk.end(), NAN);
  std::fill(dv.begin(), dv.end(), NAN);
  g.lse = lse.data();
  g.out = out.data();
  REQUIRE(attn::attention_backward(p, g) == nullptr);
  compare(dq, want_q, "d_query from saved lse");
  compare(dk, want_k, "d_key from saved lse");
  compare(dv, want_v, "d_value from saved lse");
  std::fill(dsinks.begin(), dsinks.end(), NAN);
  if (c.sinks) {
    REQUIRE(attn::attention_backward(p, g) == nullptr);
    compare(dsinks, want_sinks, "d_sinks from saved lse");
  }
}

}  // namespace

TEST_CASE("attention_backward matches finite differences", "[backward]") {
  Case c;
  check_gradients(c);  // multi-head
  c.kv_heads = 1;      // multi-query: d_key and d_value sum over both heads
  check_gradients(c);
  c.heads = 4;
  c.kv_heads = 2;      // grouped-query
  c.batch = 2;
  c.causal = true;
  check_gradients(c);
  c.seq_q = 5;         // causal with seq_q > seq_k: early rows see no key
  check_gradients(c);
}

TEST_CASE("attention_backward with masks, padding, layouts and odd sizes", "[backward]") {
  Case c;
  c.seq_q = 4;
  c.d = 5;
  c.dv = 7;
  c.mask = 1;  // includes a fully masked row
  check_gradients(c);
  c.mask = 2;
  c.key_padding = true;
  c.bshd = true;
  check_gradients(c);
  c.seq_k = 19;
  c.d = 9;
  c.mask = 0;
  c.causal = true;
  check_gradients(c);
  c.batch = 2;
  c.heads = 2;
  c.mask = 3;  // broadcast masks: padding of each batch entry, a bias per head
  check_gradients(c);
  c.mask = 4;
  c.key_padding = false;
  check_gradients(c);
}

TEST_CASE("attention_backward of every score variant", "[backward]") {
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 6;
  c.seq_k = 9;
  c.d = 4;
  c.dv = 3;
  SECTION("upper-left causal, seq_q < seq_k and > seq_k") {
    c.causal = true;
    c.align = attn::Align::upper_left;
    check_gradients(c);
    c.seq_q = 11;
    check_gradients(c);
  }
  SECTION("windows") {
    c.window_left = 2;
    c.window_right = 1;
    check_gradients(c);
    c.causal = true;
    c.window_right = 0;
    c.window_left = 0;
    check_gradients(c);
  }
  SECTION("softcap") {
    c.softcap = 1.5f;  // small, so the slope 1 − tanh² matters
    check_gradients(c);
    c.causal = true;
    check_gradients(c);
  }
  SECTION("ALiBi") {
    c.alibi = true;
    c.causal = true;
    check_gradients(c);
  }
  SECTION("sinks, with a fully masked row") {
    c.sinks = true;
    check_gradients(c);
    c.mask = 1;
    c.seq_k = 4;
    check_gradients(c);
  }
  SECTION("all at once") {
    c.causal = true;
    c.window_left = 3;
    c.softcap = 2.0f;
    c.alibi = true;
    c.sinks = true;
    c.mask = 2;
    c.key_padding = true;
    c.bshd = true;
    check_gradients(c);
  }
}

TEST_CASE("attention_backward rejects missing gradients", "[backward]") {
  attn::AttentionParams p;
  float x[4] = {};
  p.query = x;
  p.key = p.value = x;
  p.out = x;
  p.q = p.k = p.v = p.o = attn::dense_bhsd(1, 1, 1);
  attn::AttentionGrads g;
  CHECK(attn::attention_backward(p, g) != nullptr);
  p.value = nullptr;
  p.out = nullptr;
  p.weights = x;
  CHECK(std::string(attn::attention_backward(p, g)) == "attention_backward: value is required");
}
