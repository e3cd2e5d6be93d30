// The multi-head attention layer against a double-precision reference (mha_case.h), and its KV
// cache against full causal forwards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "layer/mha.h"
#include "mha_case.h"
#include "reference.h"

namespace {

using namespace mha_case;

// One causal forward over the whole sequence, then the same sequence fed through a cache in
// chunks: every chunk's output must equal the matching rows of the full forward.
void check_chunks(Layer& L, int batch, const std::vector<int>& chunks, std::uint32_t seed) {
  const int e = L.config.embed_dim;
  int total = 0;
  for (int n : chunks) total += n;
  const auto x = random_vec(static_cast<std::size_t>(batch) * total * e, seed);
  std::vector<float> full(x.size());
  attn::MhaForward f;
  f.query = x.data();
  f.out = full.data();
  f.batch = batch;
  f.seq_q = f.seq_k = total;
  f.causal = true;
  REQUIRE(L.mha.forward(f) == nullptr);

  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(batch, total)) == nullptr);
  int at = 0;
  for (int n : chunks) {
    std::vector<float> chunk(static_cast<std::size_t>(batch) * n * e), out(chunk.size());
    for (int b = 0; b < batch; ++b)
      std::copy_n(x.begin() + (static_cast<std::ptrdiff_t>(b) * total + at) * e, n * e, chunk.begin() + b * n * e);
    attn::MhaForward step;
    step.query = chunk.data();
    step.out = out.data();
    step.batch = batch;
    step.seq_q = n;
    step.cache = &cache;
    REQUIRE(L.mha.forward(step) == nullptr);
    for (int b = 0; b < batch; ++b)
      for (int i = 0; i < n * e; ++i) {
        const float want = full[(static_cast<std::size_t>(b) * total + at) * e + i];
        REQUIRE(std::abs(out[b * n * e + i] - want) <= 2e-5 + 1e-4 * std::abs(want));
      }
    at += n;
    CHECK(cache.length() == at);
  }
}

}  // namespace

TEST_CASE("self-attention layer matches the reference", "[mha]") {
  Case c;
  c.batch = GENERATE(1, 2);
  c.bias = GENERATE(true, false);
  c.causal = GENERATE(false, true);
  c.weights = true;
  check_case(c);
}

TEST_CASE("cross-attention with kdim and vdim different from embed_dim", "[mha]") {
  Case c;
  c.cross = true;
  c.kdim = 7;
  c.vdim = 11;
  c.batch = 2;
  c.seq_q = 7;
  c.seq_k = 19;
  c.weights = true;
  check_case(c);
}

TEST_CASE("grouped-query layers", "[mha]") {
  Case c;
  c.embed = c.kdim = c.vdim = 32;
  c.heads = 8;
  c.kv_heads = GENERATE(4, 2, 1);
  c.batch = 2;
  c.seq_q = 9;
  c.causal = true;
  check_case(c);
}

TEST_CASE("masks and key padding, incl. fully padded rows", "[mha]") {
  Case c;
  c.batch = 3;
  c.seq_q = 6;
  c.mask = GENERATE(0, 1, 2);
  c.key_padding = GENERATE(false, true);
  c.weights = true;
  check_case(c);
}

TEST_CASE("a fully padded row outputs the output bias", "[mha]") {
  Layer L(8, 2, 2, 8, 8, true, 5);
  const auto x = random_vec(3 * 8, 6);
  std::vector<std::uint8_t> pad(3, 1);
  std::vector<float> out(x.size());
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.seq_q = f.seq_k = 3;
  f.key_padding = pad.data();
  REQUIRE(L.mha.forward(f) == nullptr);
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 8; ++o) CHECK(out[i * 8 + o] == L.b[3][o]);
}

TEST_CASE("odd sizes: head_dim not a multiple of the vector width, long sequences", "[mha]") {
  Case c;
  c.embed = 15;
  c.heads = 3;
  c.kv_heads = 1;
  c.kdim = c.vdim = 15;
  c.seq_q = 70;
  c.causal = true;
  check_case(c);
}

TEST_CASE("KV cache: chunked decoding equals one causal forward", "[mha][cache]") {
  Layer mha_layer(16, 4, 4, 16, 16, true, 21);
  check_chunks(mha_layer, 1, {5, 1, 1, 3}, 30);
  check_chunks(mha_layer, 2, {1, 1, 1, 1, 1, 1}, 31);
  Layer gqa(24, 6, 2, 24, 24, false, 22);
  check_chunks(gqa, 2, {5, 1, 1, 3}, 32);
  check_chunks(gqa, 2, {10}, 33);
  check_chunks(gqa, 1, {3, 70, 2}, 34);
}

TEST_CASE(
    "KV cache: a wide layer (head_dim, scale, biases per projection, rotary, ALiBi) decodes as one causal forward",
    "[mha][cache][wide]") {
  attn::MhaConfig c{14, 4, 2, 14, 14, attn::Biases(true, true, true, false)};
  c.head_dim = 5;  // 20 features of Q against 14
  c.scale = 0.7f;
  c.rotary_dim = 4;
  Layer L(c, true, 23);
  check_chunks(L, 2, {4, 1, 2, 1}, 35);
  check_chunks(L, 1, {1, 1, 1, 37}, 36);
}

TEST_CASE("KV cache: reset, exact fill, overflow leaves it intact, wrong use", "[mha][cache]") {
  Layer L(8, 2, 1, 8, 8, true, 41);
  Layer other(8, 2, 2, 8, 8, true, 42);  // 2 kv heads: another cache shape
  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(1, 4)) == nullptr);
  const auto x = random_vec(4 * 8, 43);
  std::vector<float> out(4 * 8), again(4 * 8);
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.seq_q = 4;
  f.cache = &cache;
  REQUIRE(L.mha.forward(f) == nullptr);  // fills exactly to max_seq
  CHECK(cache.length() == 4);

  f.seq_q = 1;
  CHECK(std::string(L.mha.forward(f)) == "kv cache: no room for these positions (max_seq)");
  CHECK(cache.length() == 4);

  cache.reset();
  CHECK(cache.length() == 0);
  f.seq_q = 4;
  f.out = again.data();
  REQUIRE(L.mha.forward(f) == nullptr);  // a new sequence gives the same result
  CHECK(again == out);

  CHECK(std::string(other.mha.forward(f)) == "kv cache: the call's kv_heads differ from the cache's");
  cache.reset();
  f.batch = 2;
  CHECK(std::string(L.mha.forward(f)) == "kv cache: the call's batch differs from the cache's");
  f.batch = 1;
  f.key = x.data();
  CHECK(std::string(L.mha.forward(f)) == "multi-head attention: with a cache, key and value come from the query");
  CHECK(cache.length() == 0);
}

TEST_CASE("configuration and weight errors", "[mha]") {
  attn::MultiHeadAttention m;
  CHECK(m.configure({10, 3, 3, 10, 10, true}) != nullptr);  // 10 % 3
  CHECK(m.configure({12, 4, 3, 12, 12, true}) != nullptr);  // 4 % 3
  CHECK(m.configure({12, 4, 2, 0, 12, true}) != nullptr);
  REQUIRE(m.configure({12, 4, 2, 12, 12, true}) == nullptr);
  std::vector<float> w(12 * 12), b(12);
  CHECK(std::string(m.set_weight(attn::Projection::q, w.data(), nullptr)) ==
        "multi-head attention: the q projection needs a bias");
  CHECK_FALSE(m.ready());
  std::vector<float> x(12), out(12);
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  CHECK(std::string(m.forward(f)) == "multi-head attention: weights are not set");
}

namespace {

// Finite differences of the double reference: loss = Σ out ⊙ G, perturbing one float at a time.
struct BackwardCase {
  int embed = 4, heads = 2, kv_heads = 1, kdim = 4, vdim = 4, batch = 2, seq_q = 3, seq_k = 3;
  attn::Biases bias = true;
  int head_dim = 0;    // 0: embed / heads
  float scale = 0.0f;  // 0: 1/√head_dim
  bool cross = false, causal = false, mask = false, padding = false;
  // Variants: rotary dims (0 = none), interleaved, window, softcap, sinks, ALiBi, alignment, positions.
  int rotary_dim = 0;
  bool interleaved = false;
  int window_left = attn::kNoLimit, window_right = attn::kNoLimit;
  float softcap = 0.0f;
  bool sinks = false, alibi = false, upper_left = false, positions = false;
};

void check_layer_gradients(const BackwardCase& c) {
  INFO("E " << c.embed << " H " << c.heads << "/" << c.kv_heads << " cross " << c.cross << " causal " << c.causal
            << " mask " << c.mask << " padding " << c.padding << " bias " << c.bias[0] << c.bias[1] << c.bias[2]
            << c.bias[3] << " head_dim " << c.head_dim << " scale " << c.scale << " rotary " << c.rotary_dim
            << (c.interleaved ? " interleaved" : "") << " window [" << c.window_left << ", " << c.window_right
            << "] softcap " << c.softcap << " sinks " << c.sinks << " alibi " << c.alibi << " upper-left "
            << c.upper_left << " positions " << c.positions);
  attn::MhaConfig config{c.embed, c.heads, c.kv_heads, c.kdim, c.vdim, c.bias};
  config.head_dim = c.head_dim;
  config.scale = c.scale;
  config.rotary_dim = c.rotary_dim;
  config.rotary_interleaved = c.interleaved;
  config.window_left = c.window_left;
  config.window_right = c.window_right;
  config.softcap = c.softcap;
  config.sinks = c.sinks;
  Layer L(config, c.alibi, 77);
  const int seq_k = c.cross ? c.seq_k : c.seq_q;
  std::vector<float> xq = random_vec(std::size_t(c.batch) * c.seq_q * c.embed, 1);
  std::vector<float> xk = random_vec(std::size_t(c.batch) * seq_k * c.kdim, 2);
  std::vector<float> xv = random_vec(std::size_t(c.batch) * seq_k * c.vdim, 3);
  const std::vector<float> gy = random_vec(xq.size(), 4);
  std::vector<std::uint8_t> mask, pad;
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
  f.align = c.upper_left ? attn::Align::upper_left : attn::Align::lower_right;
  std::vector<std::int32_t> positions;
  if (c.positions) {  // [batch, seq]: each batch entry somewhere else
    for (int b = 0; b < c.batch; ++b)
      for (int t = 0; t < c.seq_q; ++t) positions.push_back(7 * b + 3 * t + 2);
    f.positions = positions.data();
    f.positions_batch_stride = c.seq_q;
  }
  if (c.mask) {
    mask.resize(std::size_t(c.seq_q) * seq_k);
    for (std::size_t e = 0; e < mask.size(); ++e) mask[e] = e % 4 != 1;
    f.mask = mask.data();
    f.mask_type = attn::MaskType::boolean;
  }
  if (c.padding) {
    pad.assign(std::size_t(c.batch) * seq_k, 0);
    pad[seq_k - 1] = 1;
    f.key_padding = pad.data();
  }
  auto loss = [&]() {
    const auto y = reference(L, f, seq_k);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * gy[i];
    return l;
  };
  auto numeric = [&](std::vector<float>& x) {
    std::vector<double> grad(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float keep = x[i];
      x[i] = keep + 1e-2f;
      const double up = loss();
      x[i] = keep - 1e-2f;
      const double down = loss();
      x[i] = keep;
      grad[i] = (up - down) / (double(keep + 1e-2f) - double(keep - 1e-2f));
    }
    return grad;
  };

  attn::MhaTape tape;
  std::vector<float> out(xq.size());
  f.out = out.data();
  f.tape = &tape;
  REQUIRE(L.mha.forward(f) == nullptr);
  REQUIRE(tape.filled());
  std::vector<float> dq(xq.size()), dk(xk.size()), dv(xv.size());
  std::vector<float> dw[4], db[4];
  attn::MhaGrads g;
  g.d_query = dq.data();
  if (c.cross) {
    g.d_key = dk.data();
    g.d_value = dv.data();
  }
  for (int i = 0; i < 4; ++i) {
    dw[i].resize(L.w[i].size());
    db[i].resize(L.b[i].size());
    g.d_w[i] = dw[i].data();
    g.d_b[i] = db[i].data();
  }
  std::vector<float> dsinks(L.sinks.size(), NAN);
  if (c.sinks) g.d_sinks = dsinks.data();
  REQUIRE(L.mha.backward(tape, gy.data(), g) == nullptr);

  auto compare = [](const std::vector<float>& got, const std::vector<double>& want, const char* what) {
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - want[i]) <= 2e-3 + 1e-2 * std::abs(want[i]))) ++bad;
    INFO(what << ": " << bad << " of " << got.size() << " off");
    CHECK(bad == 0);
  };
  compare(dq, numeric(xq), "d_query");
  if (c.cross) {
    compare(dk, numeric(xk), "d_key");
    compare(dv, numeric(xv), "d_value");
  }
  const char* names[4] = {"d_wq", "d_wk", "d_wv", "d_wo"};
  for (int i = 0; i < 4; ++i) {
    compare(dw[i], numeric(L.w[i]), names[i]);
    if (c.bias[i]) compare(db[i], numeric(L.b[i]), "d_b");
  }
  if (c.sinks) compare(dsinks, numeric(L.sinks), "d_sinks");
}

}  // namespace

TEST_CASE("layer backward matches finite differences", "[mha][backward]") {
  BackwardCase c;
  check_layer_gradients(c);  // self-attention, grouped K/V: the query collects three shares
  c.causal = true;
  c.mask = true;
  c.padding = true;
  check_layer_gradients(c);
  c = BackwardCase{};
  c.cross = true;
  c.kdim = 3;
  c.vdim = 5;
  c.seq_k = 4;
  c.bias = false;
  check_layer_gradients(c);
}

TEST_CASE("layer backward of every variant matches finite differences", "[mha][backward][variants]") {
  BackwardCase c;
  c.embed = 8;
  c.heads = 2;
  c.kdim = c.vdim = 8;
  c.seq_q = c.seq_k = 4;
  SECTION("rotary (rotate_half), causal") {
    c.rotary_dim = 4;
    c.causal = true;
    check_layer_gradients(c);
  }
  SECTION("partial interleaved rotary at given positions [batch, seq]") {
    c.rotary_dim = 2;
    c.interleaved = true;
    c.positions = true;
    check_layer_gradients(c);
  }
  SECTION("window and upper-left causal") {
    c.window_left = 1;
    c.window_right = 1;
    c.causal = true;
    c.upper_left = true;
    check_layer_gradients(c);
  }
  SECTION("softcap, ALiBi and learned sinks") {
    c.softcap = 1.0f;
    c.alibi = true;
    c.sinks = true;
    c.causal = true;
    c.mask = true;
    check_layer_gradients(c);
  }
  SECTION("cross-attention with rotary and sinks") {
    c.cross = true;
    c.kdim = 3;
    c.vdim = 5;
    c.seq_k = 6;
    c.rotary_dim = 4;
    c.sinks = true;
    check_layer_gradients(c);
  }
}

TEST_CASE("layer backward of a wide layer matches finite differences", "[mha][backward][wide]") {
  BackwardCase c;
  c.embed = 5;
  c.heads = 2;
  c.kv_heads = 1;
  c.kdim = c.vdim = 5;
  c.head_dim = 3;  // 6 features of Q against 5
  SECTION("Qwen-style: no o bias, rotary, causal, own scale") {
    c.bias = attn::Biases(true, true, true, false);
    c.rotary_dim = 2;
    c.causal = true;
    c.scale = 0.8f;
    check_layer_gradients(c);
  }
  SECTION("Whisper-style cross-attention: no k bias, kdim and vdim of their own, sinks, ALiBi") {
    c.bias = attn::Biases(true, false, true, true);
    c.cross = true;
    c.kdim = 3;
    c.vdim = 4;
    c.seq_k = 5;
    c.sinks = true;
    c.alibi = true;
    c.mask = true;
    check_layer_gradients(c);
  }
  SECTION("T5-style: scale 1, head_dim narrower than embed_dim / heads, window, softcap") {
    c.embed = 8;
    c.kdim = c.vdim = 8;
    c.head_dim = 2;
    c.scale = 1.0f;
    c.bias = false;
    c.window_left = 1;
    c.window_right = 1;
    c.softcap = 2.0f;
    c.padding = true;
    check_layer_gradients(c);
  }
}

TEST_CASE("optimizer steps move the packed weights", "[mha][backward]") {
  attn::MhaConfig wide{5, 2, 1, 3, 5, attn::Biases(false, true, false, true)};
  wide.head_dim = 3;
  const attn::MhaConfig config = GENERATE_COPY(attn::MhaConfig{4, 2, 2, 4, 4, true}, wide);
  INFO("embed " << config.embed_dim << " head_dim " << config.head_dim);
  Layer L(config, false, 88);
  std::vector<float> gw[4], gb[4];
  attn::MhaGrads g;
  for (int i = 0; i < 4; ++i) {
    gw[i] = random_vec(L.w[i].size(), 10 + i);
    gb[i] = random_vec(L.b[i].size(), 20 + i);
    g.d_w[i] = gw[i].data();
    g.d_b[i] = config.bias[i] ? gb[i].data() : nullptr;
  }
  // The layer's weights (unpacked) against want(i, j, bias), for the projections' weights and
  // the biases they have.
  auto expect_weights = [&](attn::MultiHeadAttention& m, const std::function<float(int, std::size_t, bool)>& want,
                            float margin) {
    for (int i = 0; i < 4; ++i) {
      std::vector<float> w(L.w[i].size()), b(L.b[i].size());
      REQUIRE(m.get_weight(static_cast<attn::Projection>(i), w.data(), config.bias[i] ? b.data() : nullptr) == nullptr);
      for (std::size_t j = 0; j < w.size(); ++j) CHECK(w[j] == Approx(want(i, j, false)).margin(margin));
      if (config.bias[i])
        for (std::size_t j = 0; j < b.size(); ++j) CHECK(b[j] == Approx(want(i, j, true)).margin(margin));
    }
  };
  L.mha.sgd_step(g, 0.1f);
  expect_weights(
      L.mha,
      [&](int i, std::size_t j, bool bias) { return bias ? L.b[i][j] - 0.1f * gb[i][j] : L.w[i][j] - 0.1f * gw[i][j]; },
      0);
  // Adam's first step moves each weight by lr·g/(|g| + eps): −lr·sign(g), nearly; its moments
  // are (1 − β1)·g and (1 − β2)·g².
  Layer A(config, false, 88);
  REQUIRE(A.mha.adam_step(g, 0.01f, 0.9f, 0.999f, 1e-8f, 1) == nullptr);
  expect_weights(
      A.mha,
      [&](int i, std::size_t j, bool bias) {
        const float grad = bias ? gb[i][j] : gw[i][j];
        const float w = bias ? L.b[i][j] : L.w[i][j];
        return w - 0.01f * (grad > 0 ? 1.0f : -1.0f);
      },
      1e-6f);
  for (int i = 0; i < 4; ++i) {
    const bool bias = config.bias[i];
    std::vector<float> mw(gw[i].size()), vw(mw.size()), mb(gb[i].size()), vb(mb.size());
    REQUIRE(A.mha.get_adam_state(static_cast<attn::Projection>(i), mw.data(), bias ? mb.data() : nullptr, vw.data(),
                                 bias ? vb.data() : nullptr) == nullptr);
    const float b1 = 1.0f - 0.9f, b2 = 1.0f - 0.999f;  // as the step computes them, in float
    for (std::size_t j = 0; j < mw.size(); ++j) CHECK(mw[j] == b1 * gw[i][j]);
    for (std::size_t j = 0; j < vw.size(); ++j) CHECK(vw[j] == b2 * gw[i][j] * gw[i][j]);
    if (bias)
      for (std::size_t j = 0; j < mb.size(); ++j) CHECK(mb[j] == b1 * gb[i][j]);
  }
}

namespace {

// A layer's outputs for queries x [seq, E] fed all at once (causal) and fed through a cache in
// chunks: the same to float rounding.
std::vector<float> forward_full(Layer& L, const std::vector<float>& x, int seq) {
  std::vector<float> out(x.size());
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.seq_q = f.seq_k = seq;
  f.causal = true;
  REQUIRE(L.mha.forward(f) == nullptr);
  return out;
}

std::vector<float> forward_cached(Layer& L, const std::vector<float>& x, int seq, const std::vector<int>& chunks,
                                  attn::KvType dtype = attn::KvType::f32, int window = 0, int max_seq = 0) {
  const int e = L.config.embed_dim;
  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(1, max_seq ? max_seq : seq, dtype, window)) == nullptr);
  std::vector<float> out(x.size());
  int at = 0;
  for (int n : chunks) {
    attn::MhaForward f;
    f.query = x.data() + static_cast<std::size_t>(at) * e;
    f.out = out.data() + static_cast<std::size_t>(at) * e;
    f.seq_q = n;
    f.cache = &cache;
    const char* err = L.mha.forward(f);
    INFO((err ? err : ""));
    REQUIRE(err == nullptr);
    at += n;
  }
  REQUIRE(at == seq);
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol, const char* what) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) ++bad;
  INFO(what << ": " << bad << " of " << got.size() << " off");
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("a layer with every variant against the reference", "[mha][variants]") {
  const bool interleaved = GENERATE(false, true);
  const bool upper_left = GENERATE(false, true);
  attn::MhaConfig c{32, 4, 2, 32, 32, true};
  c.rotary_dim = interleaved ? 4 : 8;  // partial rotary (head_dim 8) and full
  c.rotary_interleaved = interleaved;
  c.rotary_base = 500000.0;
  c.window_left = 3;
  c.window_right = 1;
  c.softcap = 5.0f;
  c.sinks = true;
  Layer L(c, true, 21);
  const int batch = 2, seq = 9;
  const auto x = random_vec(static_cast<std::size_t>(batch) * seq * 32, 22);
  std::vector<float> out(x.size()), w(static_cast<std::size_t>(batch) * 4 * seq * seq);
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.weights = w.data();
  f.batch = batch;
  f.seq_q = f.seq_k = seq;
  f.causal = true;
  f.align = upper_left ? attn::Align::upper_left : attn::Align::lower_right;
  REQUIRE(L.mha.forward(f) == nullptr);
  std::vector<double> want_w;
  expect_close(out, reference(L, f, seq, &want_w), "out");
  std::vector<std::int32_t> positions = {5, 1, 9, 2, 2, 8, 0, 3, 4, 100, 101, 102, 103, 104, 105, 106, 107, 108};
  f.positions = positions.data();
  f.positions_batch_stride = seq;
  REQUIRE(L.mha.forward(f) == nullptr);
  expect_close(out, reference(L, f, seq), "out at given positions");
}

TEST_CASE("a Llama-style layer (rotary, GQA, no bias): prefill then decode equals one causal forward",
          "[mha][variants][cache]") {
  const auto dtype = GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16);
  attn::MhaConfig c{64, 8, 2, 64, 64, false};
  c.rotary_dim = 8;
  c.rotary_base = 500000.0;
  Layer L(c, false, 31);
  const int seq = 12;
  const auto x = random_vec(static_cast<std::size_t>(seq) * 64, 32);
  const auto full = forward_full(L, x, seq);
  const double tolerance = dtype == attn::KvType::f32 ? 2e-5 : dtype == attn::KvType::f16 ? 2e-3 : 1.6e-2;
  expect_near(forward_cached(L, x, seq, {7, 1, 1, 1, 2}, dtype), full, tolerance, "cached decoding");
}

TEST_CASE("a Mistral-style window layer: a ring cache decodes as the full windowed forward", "[mha][variants][cache]") {
  const int window = 4;
  attn::MhaConfig c{32, 4, 1, 32, 32, true};
  c.rotary_dim = 8;
  c.window_left = window - 1;
  c.window_right = 0;
  Layer L(c, false, 41);
  const int seq = 20;
  const auto x = random_vec(static_cast<std::size_t>(seq) * 32, 42);
  const auto full = forward_full(L, x, seq);
  std::vector<int> chunks = {3};
  for (int t = 3; t < seq; ++t) chunks.push_back(1);
  expect_near(forward_cached(L, x, seq, chunks, attn::KvType::f32, window, window + 2), full, 2e-5, "ring decoding");
}

TEST_CASE("a ring must keep every key the layer's window sees: refused otherwise, exact when it does",
          "[mha][variants][cache]") {
  attn::MhaConfig c{16, 2, 1, 16, 16, false};
  c.rotary_dim = 8;
  Layer unbounded(c, false, 51);  // no window: every earlier position
  c.window_left = 15;
  c.window_right = 0;
  Layer wide(c, false, 52);
  c.window_left = 7;
  Layer eight(c, false, 53);  // Hugging Face sliding_window 8
  struct Row {
    Layer* layer;
    int ring;
    attn::CacheConflict conflict;
    std::int64_t call, cache;
  };
  const Row rows[] = {
      {&unbounded, 0, attn::CacheConflict::none, 0, 0},
      {&unbounded, 8, attn::CacheConflict::window_unbounded, attn::kNoLimit, 8},
      {&wide, 8, attn::CacheConflict::window_wider, 15, 8},
      {&wide, 16, attn::CacheConflict::none, 0, 0},
      {&eight, 8, attn::CacheConflict::none, 0, 0},
      {&eight, 7, attn::CacheConflict::window_wider, 7, 7},
      {&eight, 20, attn::CacheConflict::none, 0, 0},  // a wider ring keeps more than needed: exact
      {&eight, 0, attn::CacheConflict::none, 0, 0},
  };
  const int seq = 24;
  const auto x = random_vec(static_cast<std::size_t>(seq) * 16, 54);
  for (const Row& row : rows) {
    INFO("layer window " << row.layer->config.window_left << ", ring " << row.ring);
    const attn::KvCacheConfig cc =
        row.layer->mha.cache_config(1, std::max(row.ring + 2, 1) + (row.ring ? 0 : seq), attn::KvType::f32, row.ring);
    const attn::CacheCheck check = row.layer->mha.check_cache(cc);
    CHECK(int(check.conflict) == int(row.conflict));
    CHECK(check.call == row.call);
    CHECK(check.cache == row.cache);
    attn::KvCache cache;
    REQUIRE(cache.allocate(cc) == nullptr);
    std::vector<float> out(static_cast<std::size_t>(3) * 16);
    attn::MhaForward f;
    f.query = x.data();
    f.out = out.data();
    f.seq_q = 3;
    f.cache = &cache;
    const char* err = row.layer->mha.forward(f);
    if (row.conflict == attn::CacheConflict::none) {
      REQUIRE(err == nullptr);
      cache.reset();
      std::vector<int> chunks = {3};
      for (int t = 3; t < seq; ++t) chunks.push_back(1);
      expect_near(forward_cached(*row.layer, x, seq, chunks, attn::KvType::f32, row.ring, cc.max_seq),
                  forward_full(*row.layer, x, seq), 2e-5, "decoding equals the full causal forward");
    } else {
      CHECK(std::string(err) == attn::message(check));
      CHECK(cache.length() == 0);  // nothing staged, nothing kept
    }
  }
}

TEST_CASE("layer variant errors", "[mha][variants]") {
  attn::MultiHeadAttention m;
  attn::MhaConfig c{16, 2, 2, 16, 16, true};
  c.rotary_dim = 3;
  CHECK(m.configure(c) != nullptr);
  c.rotary_dim = 10;  // > head_dim 8
  CHECK(m.configure(c) != nullptr);
  c.rotary_dim = 8;
  c.softcap = -1.0f;
  CHECK(m.configure(c) != nullptr);
  c.softcap = 0.0f;
  c.sinks = true;
  REQUIRE(m.configure(c) == nullptr);
  std::vector<float> w(16 * 16), b(16);
  attn::ProjectionArrays a;
  for (int i = 0; i < 4; ++i) {
    a.w[i] = w.data();
    a.b[i] = b.data();
  }
  CHECK(std::string(m.set_weights(a)) == "multi-head attention: this layer needs sinks");
  CHECK_FALSE(m.ready());
  std::vector<float> s(2, 0.5f), got(2);
  a.sinks = s.data();
  REQUIRE(m.set_weights(a) == nullptr);
  REQUIRE(m.get_sinks(got.data()) == nullptr);
  CHECK(got == s);
  CHECK(m.ready());
}
