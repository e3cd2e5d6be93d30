// One call of the multi-head attention layer as a test case, against a double-precision
// reference built from ref::linear and ref::attention (reference.h): the layer's projections,
// attention per head and output projection, written from their definitions (the head size and
// scale from the config, not from the layer). Shared by test_mha.cpp and test_mha_wide.cpp.
// Tolerance |got − want| <= 5e-5 + 1e-4·|want|: three chained float GEMMs around the attention.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "layer/mha.h"
#include "reference.h"

namespace mha_case {

struct Layer {
  attn::MhaConfig config;
  attn::MultiHeadAttention mha;
  std::vector<float> w[4], b[4];  // q, k, v, o
  std::vector<float> sinks, alibi;  // when the config has sinks / ALiBi

  Layer(int embed, int heads, int kv_heads, int kdim, int vdim, bool bias, std::uint32_t seed)
      : Layer(attn::MhaConfig{embed, heads, kv_heads, kdim, vdim, bias}, false, seed) {}

  // Any config (head size, scale, biases, rotary, window, softcap, sinks), with ALiBi slopes
  // when `with_alibi`.
  Layer(const attn::MhaConfig& c, bool with_alibi, std::uint32_t seed) : config(c) {
    REQUIRE(mha.configure(config) == nullptr);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int qf = c.num_heads * head_dim(), kv = c.num_kv_heads * head_dim();
    const int outs[4] = {qf, kv, kv, c.embed_dim}, ins[4] = {c.embed_dim, c.kdim, c.vdim, qf};
    attn::ProjectionArrays a;
    for (int i = 0; i < 4; ++i) {
      w[i].resize(static_cast<std::size_t>(outs[i]) * ins[i]);
      for (auto& e : w[i]) e = uni(rng) / std::sqrt(float(ins[i]));
      b[i].resize(outs[i]);
      for (auto& e : b[i]) e = uni(rng) * 0.5f;
      a.w[i] = w[i].data();
      a.b[i] = c.bias[i] ? b[i].data() : nullptr;
    }
    if (c.sinks) {
      for (int h = 0; h < c.num_heads; ++h) sinks.push_back(uni(rng));
      a.sinks = sinks.data();
    }
    REQUIRE(mha.set_weights(a) == nullptr);
    if (with_alibi) {
      for (int h = 0; h < c.num_heads; ++h) alibi.push_back(std::pow(2.0f, -8.0f * float(h + 1) / float(c.num_heads)));
      REQUIRE(mha.set_alibi(alibi.data()) == nullptr);
    }
    REQUIRE(mha.ready());
  }
  const float* bias(int i) const { return config.bias[i] ? b[i].data() : nullptr; }
  // From the definitions, not from the layer's resolved config.
  int head_dim() const { return config.head_dim ? config.head_dim : config.embed_dim / config.num_heads; }
  double scale() const { return config.scale != 0.0f ? double(config.scale) : 1.0 / std::sqrt(double(head_dim())); }
};

inline std::vector<float> random_vec(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = uni(rng);
  return v;
}

// The layer in double precision: projections, attention per head, output projection. `weights`
// are per head, or their mean with f.average_weights.
inline std::vector<double> reference(const Layer& L, const attn::MhaForward& f, int seq_k,
                                     std::vector<double>* weights = nullptr) {
  const auto& c = L.config;
  const int hd = L.head_dim(), qf = c.num_heads * hd, kv = c.num_kv_heads * hd;
  const float* key = f.key ? f.key : f.query;
  const float* value = f.value ? f.value : key;
  auto q = ref::linear(f.query, f.batch * f.seq_q, c.embed_dim, L.w[0].data(), L.bias(0), qf);
  auto k = ref::linear(key, f.batch * seq_k, c.kdim, L.w[1].data(), L.bias(1), kv);
  const auto v = ref::linear(value, f.batch * seq_k, c.vdim, L.w[2].data(), L.bias(2), kv);
  if (c.rotary_dim) {  // keys at 0… and queries at t + off, or both at f.positions
    const int off = f.align == attn::Align::upper_left ? 0 : seq_k - f.seq_q;
    auto at = [&](int shift) {
      return
          [&f, shift](int b, int t) { return f.positions ? f.positions[b * f.positions_batch_stride + t] : t + shift; };
    };
    ref::rotary_bshd(q, f.batch, f.seq_q, c.num_heads, hd, c.rotary_dim, c.rotary_interleaved, c.rotary_base, at(off));
    ref::rotary_bshd(k, f.batch, seq_k, c.num_kv_heads, hd, c.rotary_dim, c.rotary_interleaved, c.rotary_base, at(0));
  }
  attn::AttentionParams p;
  p.batch = f.batch;
  p.heads = c.num_heads;
  p.kv_heads = c.num_kv_heads;
  p.seq_q = f.seq_q;
  p.seq_k = seq_k;
  p.head_dim = p.value_dim = hd;
  p.q = attn::dense_bshd(c.num_heads, f.seq_q, hd);
  p.k = p.v = attn::dense_bshd(c.num_kv_heads, seq_k, hd);
  p.mask = f.mask;
  p.mask_type = f.mask_type;
  p.m = attn::mask_strides(f.mask_shape, c.num_heads, f.seq_q, seq_k);
  p.key_padding = f.key_padding;
  p.key_padding_batch_stride = seq_k;
  p.scale = float(L.scale());
  p.causal = f.causal;
  p.align = f.align;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.alibi_slopes = L.alibi.empty() ? nullptr : L.alibi.data();
  p.sinks = c.sinks ? L.sinks.data() : nullptr;
  const auto a = ref::attention(p, q.data(), k.data(), v.data(), weights);  // [b, h, i, d]
  if (weights && f.average_weights) {  // [b, h, i, j] → the mean over h, [b, i, j]
    const std::size_t plane = std::size_t(f.seq_q) * seq_k;
    std::vector<double> mean(std::size_t(f.batch) * plane, 0.0);
    for (int b = 0; b < f.batch; ++b)
      for (int h = 0; h < c.num_heads; ++h)
        for (std::size_t j = 0; j < plane; ++j)
          mean[b * plane + j] += (*weights)[(std::size_t(b) * c.num_heads + h) * plane + j] / c.num_heads;
    *weights = mean;
  }
  std::vector<double> concat(static_cast<std::size_t>(f.batch) * f.seq_q * qf);
  for (int b = 0; b < f.batch; ++b)
    for (int h = 0; h < c.num_heads; ++h)
      for (int i = 0; i < f.seq_q; ++i)
        for (int d = 0; d < hd; ++d)
          concat[(static_cast<std::size_t>(b) * f.seq_q + i) * qf + h * hd + d] =
              a[((static_cast<std::size_t>(b) * c.num_heads + h) * f.seq_q + i) * hd + d];
  return ref::linear(concat.data(), f.batch * f.seq_q, qf, L.w[3].data(), L.bias(3), c.embed_dim);
}

inline void expect_close(const std::vector<float>& got, const std::vector<double>& want, const char* what,
                         double tolerance = 5e-5) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    if (!(err <= tolerance + 1e-4 * std::abs(want[i]))) ++bad;
    if (!(err <= worst)) worst = err;
  }
  INFO(what << ": " << bad << " elements off, worst error " << worst);
  CHECK(bad == 0);
}

struct Case {
  int embed = 16, heads = 4, kv_heads = 4, kdim = 16, vdim = 16, batch = 1, seq_q = 5, seq_k = 5;
  attn::Biases bias = true;
  int head_dim = 0;    // 0: embed / heads
  float scale = 0.0f;  // 0: 1/√head_dim
  // Variants: rotary dims (0 = none), window, softcap, sinks, ALiBi (slopes 2^(−8(h+1)/H)).
  int rotary_dim = 0, window_left = attn::kNoLimit, window_right = attn::kNoLimit;
  float softcap = 0.0f;
  bool sinks = false, alibi = false;
  bool cross = false, causal = false, weights = false, average = false;  // average: the heads' mean weights
  int mask = 0;  // 0 none, 1 boolean per-head, 2 additive plane
  bool key_padding = false;
  // Cross-attention through a cross-attention cache of this dtype filled from the key and value
  // (not the arrays), within `tolerance` of the reference over the unstored keys and values.
  bool cross_cache = false;
  attn::KvType dtype = attn::KvType::f32;
  double tolerance = 5e-5;
};

inline void check_case(const Case& c) {
  std::ostringstream d;
  d << "E " << c.embed << " H " << c.heads << "/" << c.kv_heads << " head_dim " << c.head_dim << " scale " << c.scale
    << " kdim " << c.kdim << " vdim " << c.vdim << " B " << c.batch << " seq " << c.seq_q << "x" << c.seq_k << " bias "
    << c.bias[0] << c.bias[1] << c.bias[2] << c.bias[3] << " rotary " << c.rotary_dim << " window [" << c.window_left
    << ", " << c.window_right << "] softcap " << c.softcap << " sinks " << c.sinks << " alibi " << c.alibi << " cross "
    << c.cross << (c.cross_cache ? " through a cache of dtype " : "") << (c.cross_cache ? int(c.dtype) : 0)
    << " causal " << c.causal << " mask " << c.mask << " pad " << c.key_padding << " average " << c.average;
  INFO(d.str());
  attn::MhaConfig config{c.embed, c.heads, c.kv_heads, c.kdim, c.vdim, c.bias};
  config.head_dim = c.head_dim;
  config.scale = c.scale;
  config.rotary_dim = c.rotary_dim;
  config.window_left = c.window_left;
  config.window_right = c.window_right;
  config.softcap = c.softcap;
  config.sinks = c.sinks;
  Layer L(config, c.alibi, 11);
  const int seq_k = c.cross ? c.seq_k : c.seq_q;
  const auto xq = random_vec(static_cast<std::size_t>(c.batch) * c.seq_q * c.embed, 1);
  const auto xk = random_vec(static_cast<std::size_t>(c.batch) * seq_k * c.kdim, 2);
  const auto xv = random_vec(static_cast<std::size_t>(c.batch) * seq_k * c.vdim, 3);
  std::vector<std::uint8_t> bmask, pad;
  std::vector<float> fmask;
  attn::MhaForward f;
  f.query = xq.data();
  if (c.cross) {
    f.key = xk.data();
    f.value = xv.data();
  }
  f.batch = c.batch;
  f.seq_q = c.seq_q;
  f.seq_k = seq_k;
  f.causal = c.causal;
  if (c.mask == 1) {
    bmask.resize(static_cast<std::size_t>(c.batch) * c.heads * c.seq_q * seq_k);
    for (std::size_t e = 0; e < bmask.size(); ++e) bmask[e] = (e * 7 % 5) != 0;
    f.mask = bmask.data();
    f.mask_type = attn::MaskType::boolean;
    f.mask_shape = attn::MaskShape::per_head;
  } else if (c.mask == 2) {
    fmask = random_vec(static_cast<std::size_t>(c.seq_q) * seq_k, 4);
    f.mask = fmask.data();
    f.mask_type = attn::MaskType::additive;
  }
  if (c.key_padding) {  // batch entry b pads its last b + 1 keys; the last entry pads all
    pad.assign(static_cast<std::size_t>(c.batch) * seq_k, 0);
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < seq_k; ++j) pad[b * seq_k + j] = (b == c.batch - 1 && c.batch > 1) || j >= seq_k - 1 - b;
    f.key_padding = pad.data();
  }
  std::vector<float> out(xq.size(), NAN), weights;
  f.out = out.data();
  if (c.weights) {
    weights.assign(static_cast<std::size_t>(c.batch) * (c.average ? 1 : c.heads) * c.seq_q * seq_k, NAN);
    f.weights = weights.data();
    f.average_weights = c.average;
  }
  std::vector<double> want_weights;
  const auto want = reference(L, f, seq_k, c.weights ? &want_weights : nullptr);
  attn::KvCache cache;
  if (c.cross_cache) {
    REQUIRE(c.cross);
    REQUIRE(cache.allocate(L.mha.cache_config(c.batch, seq_k, c.dtype)) == nullptr);
    REQUIRE(L.mha.fill_cross_cache(cache, f.key, f.value, c.batch, seq_k) == nullptr);
    CHECK(cache.length() == seq_k);
    f.key = f.value = nullptr;
    f.seq_k = 0;  // not used: the cache's length
    f.cross = &cache;
  }
  const char* err = L.mha.forward(f);
  INFO("error: " << (err ? err : "none"));
  REQUIRE(err == nullptr);
  expect_close(out, want, "out", c.tolerance);
  if (c.weights) expect_close(weights, want_weights, "weights", c.tolerance);
  if (c.cross_cache) CHECK(cache.length() == seq_k);  // attended to, never appended to
}

}  // namespace mha_case
