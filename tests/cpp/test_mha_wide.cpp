// The layer as wide as current models make it — a head size of its own (num_heads · head_dim ≠
// embed_dim: Qwen3, Gemma), any scale (T5: 1), a bias per projection (Qwen2: no o bias; Whisper:
// no k bias), the heads' mean weights (PyTorch's average_attn_weights) — and cross-attention over
// a cache filled once from the encoder's output (Whisper, T5, BART), against the reference of
// mha_case.h on odd shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "layer/mha.h"
#include "mha_case.h"

namespace {

using namespace mha_case;

// A Whisper-style cross-attention layer: no k bias, kdim and vdim of their own, grouped heads.
attn::MhaConfig whisper_like() {
  attn::MhaConfig c{12, 4, 2, 7, 5, attn::Biases(true, false, true, true)};
  c.head_dim = 5;  // 4 · 5 = 20 ≠ 12
  return c;
}

}  // namespace

TEST_CASE("a layer as wide as current models against the reference", "[mha][wide]") {
  Case c;
  c.batch = 2;
  c.weights = true;
  SECTION("Qwen-style: head_dim wider than embed_dim / heads, no o bias, rotary, causal") {
    c.embed = 10;
    c.heads = 4;
    c.kv_heads = 2;
    c.kdim = c.vdim = 10;
    c.head_dim = 6;  // 24 features of Q against 10
    c.bias = attn::Biases(true, true, true, false);
    c.rotary_dim = 6;
    c.causal = true;
    c.seq_q = 7;
    check_case(c);
  }
  SECTION("Gemma-style: own head_dim and scale, softcap, window, sinks, ALiBi, masks, mean weights") {
    c.embed = 12;
    c.heads = 2;
    c.kv_heads = 1;
    c.kdim = c.vdim = 12;
    c.head_dim = 10;
    c.scale = 0.25f;  // query_pre_attn_scalar 16
    c.bias = false;
    c.softcap = 3.0f;
    c.window_left = 2;
    c.window_right = 0;
    c.sinks = true;
    c.alibi = true;
    c.causal = true;
    c.mask = 1;
    c.key_padding = true;
    c.average = true;
    c.seq_q = 9;
    check_case(c);
  }
  SECTION("Whisper-style cross-attention: no k bias, kdim and vdim of their own, mean weights") {
    const attn::MhaConfig w = whisper_like();
    c.embed = w.embed_dim;
    c.heads = w.num_heads;
    c.kv_heads = w.num_kv_heads;
    c.kdim = w.kdim;
    c.vdim = w.vdim;
    c.head_dim = w.head_dim;
    c.bias = w.bias;
    c.cross = true;
    c.seq_q = 4;
    c.seq_k = 13;
    c.average = true;
    check_case(c);
  }
  SECTION("T5-style: scale 1, no biases, an additive position bias, head_dim narrower than embed_dim / heads") {
    c.embed = 8;
    c.heads = 2;
    c.kv_heads = 2;
    c.kdim = c.vdim = 8;
    c.head_dim = 3;  // 6 features of Q against 8
    c.scale = 1.0f;
    c.bias = false;
    c.mask = 2;
    c.cross = true;
    c.seq_q = 6;
    c.seq_k = 9;
    check_case(c);
  }
  SECTION("one head: the mean weights are the weights") {
    c.embed = 5;
    c.heads = c.kv_heads = 1;
    c.kdim = c.vdim = 5;
    c.head_dim = 3;
    c.bias = attn::Biases(false, true, false, true);
    c.average = true;
    c.seq_q = 33;  // past the vector width and the few-rows path
    check_case(c);
  }
}

TEST_CASE("the heads' mean weights through a KV cache equal those of the full causal forward", "[mha][wide][cache]") {
  attn::MhaConfig config{9, 3, 1, 9, 9, attn::Biases(true, true, false, true)};
  config.head_dim = 4;
  config.rotary_dim = 4;
  Layer L(config, false, 5);
  const int seq = 6, e = 9;
  const auto x = random_vec(std::size_t(seq) * e, 6);
  std::vector<float> out(x.size()), full_w(std::size_t(seq) * seq);
  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.weights = full_w.data();
  f.average_weights = true;
  f.seq_q = f.seq_k = seq;
  f.causal = true;
  REQUIRE(L.mha.forward(f) == nullptr);
  std::vector<double> want;
  expect_close(out, reference(L, f, seq, &want), "out");
  expect_close(full_w, want, "weights");
  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(1, seq)) == nullptr);
  for (int t = 0; t < seq; ++t) {  // a decode step's mean weights: row t of the full ones, over keys 0 … t
    std::vector<float> y(e), w(t + 1, NAN);
    attn::MhaForward step;
    step.query = x.data() + std::size_t(t) * e;
    step.out = y.data();
    step.weights = w.data();
    step.average_weights = true;
    step.seq_q = 1;
    step.cache = &cache;
    REQUIRE(L.mha.forward(step) == nullptr);
    for (int j = 0; j <= t; ++j) CHECK(w[j] == Approx(full_w[std::size_t(t) * seq + j]).margin(1e-6));
  }
}

TEST_CASE("a cross-attention cache: every forward over it equals the forward given the encoder output",
          "[mha][wide][cross]") {
  // Stored values differ from the reference's by the dtype's rounding: float32 exact, float16
  // 2^-11, bfloat16 2^-8 and int8 max|x|/254 relative, through the output projection.
  const auto dtype = GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8);
  const double tolerance = dtype == attn::KvType::f32    ? 5e-5
                           : dtype == attn::KvType::f16  ? 2e-3
                           : dtype == attn::KvType::bf16 ? 1.5e-2
                                                         : 2e-2;
  Case c;
  const attn::MhaConfig w = whisper_like();
  c.embed = w.embed_dim;
  c.heads = w.num_heads;
  c.kv_heads = w.num_kv_heads;
  c.kdim = w.kdim;
  c.vdim = w.vdim;
  c.head_dim = w.head_dim;
  c.bias = w.bias;
  c.cross = c.cross_cache = true;
  c.dtype = dtype;
  c.tolerance = tolerance;
  c.batch = 2;
  c.seq_k = 23;
  c.weights = true;
  SECTION("a decoder prefill (more queries than a step, fewer than the keys), masks, per-head weights") {
    c.seq_q = 5;
    c.mask = 1;
    c.key_padding = true;
    check_case(c);
  }
  SECTION("more queries than keys, mean weights") {
    c.seq_q = 30;
    c.average = true;
    check_case(c);
  }
  SECTION("rotary keys at 0 … seq_k − 1 and queries where the score rule puts them, ALiBi, causal") {
    c.seq_q = 3;
    c.rotary_dim = 4;
    c.alibi = true;
    c.causal = true;
    check_case(c);
  }
  SECTION("sinks, softcap, a window and T5's scale 1") {
    c.seq_q = 2;
    c.sinks = true;
    c.softcap = 4.0f;
    c.window_left = 9;
    c.window_right = 3;
    c.scale = 1.0f;
    check_case(c);
  }
}

TEST_CASE("a cross-attention cache serves every decoder step", "[mha][wide][cross]") {
  Layer L(whisper_like(), false, 13);
  const int batch = 2, seq_k = 17, steps = 5, e = L.config.embed_dim;
  const auto enc_k = random_vec(std::size_t(batch) * seq_k * L.config.kdim, 14);
  const auto enc_v = random_vec(std::size_t(batch) * seq_k * L.config.vdim, 15);
  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(batch, seq_k, attn::KvType::f32)) == nullptr);
  REQUIRE(L.mha.fill_cross_cache(cache, enc_k.data(), enc_v.data(), batch, seq_k) == nullptr);
  for (int t = 0; t < steps; ++t) {
    const auto x = random_vec(std::size_t(batch) * e, 20 + t);
    std::vector<float> out(x.size()), want_out(x.size());
    attn::MhaForward f;
    f.query = x.data();
    f.out = out.data();
    f.batch = batch;
    f.seq_q = 1;
    f.cross = &cache;
    REQUIRE(L.mha.forward(f) == nullptr);
    f.cross = nullptr;  // the same call with the encoder output as key and value
    f.key = enc_k.data();
    f.value = enc_v.data();
    f.seq_k = seq_k;
    f.out = want_out.data();
    REQUIRE(L.mha.forward(f) == nullptr);
    CHECK(out == want_out);  // same keys, same kernel: bit for bit
    CHECK(cache.length() == seq_k);
  }
}

TEST_CASE("a cross-attention cache: what the layer and the cache disagree on is refused", "[mha][wide][cross]") {
  Layer L(whisper_like(), false, 31);
  attn::MhaConfig self_config{12, 4, 2, 12, 12, true};
  self_config.head_dim = 5;
  Layer self(self_config, false, 32);
  const int batch = 2, seq_k = 6, e = 12;
  const auto enc = random_vec(std::size_t(batch) * seq_k * 7, 33);
  const auto enc_v = random_vec(std::size_t(batch) * seq_k * 5, 34);
  const auto x = random_vec(std::size_t(batch) * e, 35);
  std::vector<float> out(x.size());
  const std::string prefix = "multi-head attention: ";
  auto error = [](const char* e) { return std::string(e ? e : "(none)"); };

  attn::KvCache cache, ring, wrong;
  REQUIRE(cache.allocate(L.mha.cache_config(batch, seq_k)) == nullptr);
  // Filling: value required when vdim differs from kdim, a ring, another batch, too few
  // positions, sizes of another layer; then a filled cache is not filled again.
  CHECK(error(L.mha.fill_cross_cache(cache, enc.data(), nullptr, batch, seq_k)) ==
        prefix + "a value is required when vdim differs from kdim");
  REQUIRE(ring.allocate(L.mha.cache_config(batch, seq_k + 2, attn::KvType::f32, seq_k)) == nullptr);
  CHECK(error(L.mha.fill_cross_cache(ring, enc.data(), enc_v.data(), batch, seq_k)) ==
        prefix + "a cross-attention cache is linear, not a ring");
  CHECK(error(L.mha.fill_cross_cache(cache, enc.data(), enc_v.data(), 1, seq_k)) ==
        prefix + "the call's batch differs from the cross-attention cache's");
  CHECK(error(L.mha.fill_cross_cache(cache, enc.data(), enc_v.data(), batch, seq_k + 1)) ==
        prefix + "the cross-attention cache has too few positions");
  attn::KvCacheConfig other = L.mha.cache_config(batch, seq_k);
  other.kv_heads = 1;
  REQUIRE(wrong.allocate(other) == nullptr);
  CHECK(error(L.mha.fill_cross_cache(wrong, enc.data(), enc_v.data(), batch, seq_k)) ==
        prefix + "the cross-attention cache's kv_heads, head_dim and value_dim must be the layer's");
  CHECK(cache.length() == 0);
  CHECK(L.mha.fill_cross_cache_bytes(cache, batch, seq_k + 1) == 0);  // refused before allocating

  attn::MhaForward f;
  f.query = x.data();
  f.out = out.data();
  f.batch = batch;
  f.seq_q = 1;
  f.cross = &cache;
  CHECK(error(L.mha.forward(f)) == prefix + "the cross-attention cache is empty");
  CHECK(L.mha.forward_workspace_bytes(f) == 0);
  REQUIRE(L.mha.fill_cross_cache(cache, enc.data(), enc_v.data(), batch, seq_k) == nullptr);
  CHECK(error(L.mha.fill_cross_cache(cache, enc.data(), enc_v.data(), batch, seq_k)) ==
        prefix + "the cross-attention cache is not empty");
  CHECK(cache.length() == seq_k);

  // Forwarding: another batch, keys given as well, positions, a tape, a self-attention cache too.
  REQUIRE(L.mha.forward(f) == nullptr);
  f.batch = 1;
  CHECK(error(L.mha.forward(f)) == prefix + "the call's batch differs from the cross-attention cache's");
  f.batch = batch;
  f.key = enc.data();
  CHECK(error(L.mha.forward(f)) == prefix + "with a cross-attention cache, key and value come from it");
  f.key = nullptr;
  const std::vector<std::int32_t> positions = {3};
  f.positions = positions.data();
  CHECK(error(L.mha.forward(f)) ==
        prefix + "positions do not apply to a cross-attention cache (its keys were rotated when it was filled)");
  f.positions = nullptr;
  attn::MhaTape tape;
  f.tape = &tape;
  CHECK(error(L.mha.forward(f)) == prefix + "training (a tape) does not work with a cache");
  CHECK(L.mha.forward_workspace_bytes(f) == 0);
  f.tape = nullptr;
  f.average_weights = true;  // without weights to average
  CHECK(error(L.mha.forward(f)) == prefix + "invalid forward arguments");
  f.average_weights = false;
  attn::KvCache self_cache;
  REQUIRE(self_cache.allocate(self.mha.cache_config(batch, 4)) == nullptr);
  f.cache = &self_cache;
  CHECK(error(self.mha.forward(f)) == prefix + "a cache and a cross-attention cache exclude each other");
  CHECK(self_cache.length() == 0);
  // Another layer's cross-attention cache of other sizes.
  f.cache = nullptr;
  attn::MhaConfig narrow = whisper_like();
  narrow.head_dim = 4;
  Layer N(narrow, false, 36);
  CHECK(error(N.mha.forward(f)) ==
        prefix + "the cross-attention cache's kv_heads, head_dim and value_dim must be the layer's");
}

TEST_CASE("a float16 cross-attention cache refuses a projected key beyond its range and stays empty",
          "[mha][wide][cross]") {
  attn::MhaConfig config{4, 1, 1, 4, 4, false};
  Layer L(config, false, 41);
  L.w[1].assign(16, 0.0f);
  L.w[1][0] = 1e5f;  // K[0] = 1e5 · key[0]
  attn::ProjectionArrays a;
  for (int i = 0; i < 4; ++i) a.w[i] = L.w[i].data();
  REQUIRE(L.mha.set_weights(a) == nullptr);
  attn::KvCache cache;
  REQUIRE(cache.allocate(L.mha.cache_config(1, 3, attn::KvType::f16)) == nullptr);
  const std::vector<float> enc = {0.1f, 0, 0, 0, 1.0f, 0, 0, 0, 0.2f, 0, 0, 0};
  CHECK(std::string(L.mha.fill_cross_cache(cache, enc.data(), nullptr, 1, 3)) ==
        "kv cache: a finite value is beyond float16's range (it would be stored as infinity)");
  CHECK(cache.length() == 0);
  CHECK(cache.refused().row == 1);
}

TEST_CASE("wide configuration errors", "[mha][wide]") {
  attn::MultiHeadAttention m;
  attn::MhaConfig c{10, 3, 3, 10, 10, true};
  CHECK(std::string(m.configure(c)) ==
        "multi-head attention: embed_dim must be a multiple of num_heads (or head_dim given)");
  c.head_dim = 4;  // 3 · 4 = 12 ≠ 10: any head size once given
  REQUIRE(m.configure(c) == nullptr);
  CHECK(m.head_dim() == 4);
  CHECK(m.q_features() == 12);
  CHECK(m.config().scale == 0.5f);  // 1/√4
  c.head_dim = -1;
  CHECK(std::string(m.configure(c)) == "multi-head attention: sizes must be positive");
  c.head_dim = 1 << 30;
  CHECK(std::string(m.configure(c)) == "multi-head attention: num_heads * head_dim is too large");
  c.head_dim = 4;
  for (float scale : {-1.0f, INFINITY, NAN}) {
    c.scale = scale;
    CHECK(std::string(m.configure(c)) == "multi-head attention: scale must be finite and >= 0 (0: 1/sqrt(head_dim))");
  }
  c.scale = 1.0f;
  c.bias = attn::Biases(true, false, true, false);
  REQUIRE(m.configure(c) == nullptr);
  std::vector<float> wq(12 * 10), wk(12 * 10), wv(12 * 10), wo(10 * 12), b(12);
  attn::ProjectionArrays a;
  a.w[0] = wq.data();
  a.w[1] = wk.data();
  a.w[2] = wv.data();
  a.w[3] = wo.data();
  a.b[0] = b.data();
  a.b[1] = b.data();
  CHECK(std::string(m.set_weights(a)) == "multi-head attention: the k projection has no bias");
  a.b[1] = nullptr;
  CHECK(std::string(m.set_weights(a)) == "multi-head attention: the v projection needs a bias");
  a.b[2] = b.data();
  REQUIRE(m.set_weights(a) == nullptr);
  CHECK(std::string(m.set_weight(attn::Projection::o, wo.data(), b.data())) ==
        "multi-head attention: the o projection has no bias");
  std::vector<float> got(12 * 10), got_b(12);
  REQUIRE(m.get_weight(attn::Projection::k, got.data(), nullptr) == nullptr);  // no bias: none asked for
  CHECK(std::string(m.get_weight(attn::Projection::q, got.data(), nullptr)) ==
        "multi-head attention: missing output buffers");
}
