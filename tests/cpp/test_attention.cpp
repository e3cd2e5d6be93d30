// The kernel against the double-precision reference (reference.h) on many shapes (tolerances:
// attention_case.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention_case.h"
#include "kernel/attention_blocks.h"

using tcase::Case;
using tcase::check_case;
using tcase::expect_close;
using tcase::make_run;
using tcase::Mask;
using tcase::Run;

TEST_CASE("head dims around the vector width", "[attention]") {
  const int dim = GENERATE(1, 3, 4, 5, 7, 8, 15, 16, 17, 64, 80, 128);
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 7;
  c.seq_k = 9;
  c.head_dim = dim;
  c.weights = true;
  check_case(c);
}

TEST_CASE("odd and unequal sequence lengths", "[attention]") {
  const auto seq = GENERATE(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 1}, std::pair{5, 5}, std::pair{33, 33},
                            std::pair{113, 203}, std::pair{203, 113}, std::pair{257, 257}, std::pair{1, 257},
                            std::pair{64, 65}, std::pair{65, 64}, std::pair{17, 129});
  Case c;
  c.heads = 3;
  c.kv_heads = 3;
  c.seq_q = seq.first;
  c.seq_k = seq.second;
  c.head_dim = 16;
  c.weights = true;
  check_case(c);
  c.causal = true;
  check_case(c);
}

// The blocked path's boundaries: query rows per kv head around a block of 16 (two query heads
// share a kv head, so rows interleave), keys around a panel (16), a packed block (64) and a pass
// of the scores (256), head_dim and value_dim not multiples of the vector or panel width (the
// transposes' and panels' tails); with every score variant that moves where a pass starts or
// what it sees.
TEST_CASE("blocked path on both sides of its row block, key block and pass boundaries", "[attention]") {
  const auto seq = GENERATE(std::pair{8, 255}, std::pair{9, 256}, std::pair{23, 257}, std::pair{17, 511},
                            std::pair{40, 513}, std::pair{300, 300}, std::pair{257, 64}, std::pair{129, 271});
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq.first;
  c.seq_k = seq.second;
  c.head_dim = 21;
  c.value_dim = 18;
  c.weights = true;
  c.lse = true;
  check_case(c);
  c.causal = true;
  check_case(c);
  c.align = attn::Align::upper_left;
  check_case(c);
  c.causal = false;
  c.align = attn::Align::lower_right;
  c.window_left = 70;  // rows start their keys mid-pass and mid-panel
  c.window_right = 5;
  c.alibi = 1;
  check_case(c);
  c.window_left = c.window_right = attn::kNoLimit;
  c.alibi = 0;
  c.sinks = true;
  c.softcap = 20.0f;
  c.mask = Mask::additive;
  c.key_padding = true;
  check_case(c);
}

// One kv head with few row blocks (an MQA model's speculative verify) over many keys: the keys
// split into chunks of 2048 (blocks::blocked_key_split), each chunk's statistics merged in order.
// Key counts on both sides of the chunks' edges, row counts from one row block past the few-rows
// limit to the split's limit of 256 (and past it, unsplit), every storage type, rings that
// wrapped, rows whose keys start mid-chunk (a window), a chunk where every key is padding.
TEST_CASE("blocked path: one kv head's keys split into chunks merge as one pass", "[attention]") {
  constexpr int kChunk = 2048;
  const attn::KvType types[] = {attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8,
                                attn::KvType::i4};
  const int seq_ks[] = {kChunk + 1, 2 * kChunk - 1, 2 * kChunk, 2 * kChunk + 1, 3 * kChunk + 77};
  const int shapes[][2] = {{33, 1}, {16, 4}, {40, 2}, {32, 8}, {37, 7}};  // heads × positions: rows 33 … 259
  int n = 0;
  for (const auto type : types)
    for (const int seq_k : seq_ks) {
      Case c;
      c.heads = shapes[n % 5][0];
      c.seq_q = shapes[n % 5][1];
      c.seq_k = seq_k;
      c.head_dim = n % 2 ? 9 : 16;
      c.value_dim = n % 3 ? 7 : 16;
      c.kv_type = type;
      c.causal = n % 2 == 0;
      c.weights = n % 3 == 0;
      c.lse = true;
      c.sinks = n % 4 == 1;
      if (n % 5 == 2) {  // a ring of 2 chunks and a bit, wrapped twice; the rows see its keys
        c.ring = kChunk + 300;
        c.seq_k = 2 * c.ring + 17;
        c.causal = true;
        c.window_left = c.ring - c.seq_q;
        c.window_right = 0;
      }
      if (n % 5 == 3) c.window_left = kChunk + 100;  // rows start mid-chunk
      c.seed = 4000 + n;
      ++n;
      Run r = make_run(c);
      // The split happened (a changed threshold must not leave this testing the unsplit path).
      if (c.heads * c.seq_q <= 256) CHECK(attn::blocks::blocked_key_split(r.p).chunks > 1);
      else CHECK(attn::blocks::blocked_key_split(r.p).chunks == 1);
      tcase::check_run(c, r);
    }
  // Every key of the middle chunk padding, and of the first chunk but one.
  Case c;
  c.heads = 32;
  c.seq_q = 4;
  c.seq_k = 3 * kChunk;
  c.head_dim = 8;
  c.weights = c.lse = true;
  Run r = make_run(c);
  std::vector<std::uint8_t> padding(c.seq_k, 0);
  for (int j = kChunk; j < 2 * kChunk; ++j) padding[j] = 1;
  for (int j = 0; j < kChunk - 1; ++j) padding[j] = 1;
  r.p.key_padding = padding.data();
  r.ref_params.key_padding = padding.data();
  CHECK(attn::blocks::blocked_key_split(r.p).chunks == 3);
  tcase::check_run(c, r);
}

TEST_CASE("value dim differs from head dim", "[attention]") {
  const auto dims = GENERATE(std::pair{8, 3}, std::pair{5, 17}, std::pair{64, 1}, std::pair{3, 64});
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 11;
  c.seq_k = 70;
  c.head_dim = dims.first;
  c.value_dim = dims.second;
  check_case(c);
}

TEST_CASE("multi-head, grouped-query and multi-query", "[attention]") {
  const int kv = GENERATE(6, 3, 2, 1);
  const bool causal = GENERATE(false, true);
  Case c;
  c.batch = 2;
  c.heads = 6;
  c.kv_heads = kv;
  c.seq_q = 19;
  c.seq_k = 37;
  c.head_dim = 8;
  c.causal = causal;
  c.weights = true;
  check_case(c);
  c.seq_q = 1;  // a decode step: one query row per head, a whole group per block
  check_case(c);
}

TEST_CASE("causal is bottom-right aligned", "[attention]") {
  const auto seq =
      GENERATE(std::pair{5, 12}, std::pair{12, 5}, std::pair{70, 70}, std::pair{1, 300}, std::pair{100, 1});
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = seq.first;
  c.seq_k = seq.second;
  c.head_dim = 5;
  c.causal = true;
  c.weights = true;
  check_case(c);
}

TEST_CASE("causal rows before the first key are zeros", "[attention]") {
  Case c;
  c.seq_q = 6;
  c.seq_k = 2;  // rows 0..3 see no key at all
  c.head_dim = 4;
  c.causal = true;
  c.weights = true;
  Run r = make_run(c);
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int i = 0; i < 4; ++i) {
    for (int d = 0; d < 4; ++d) CHECK(r.out[i * 4 + d] == 0.0f);
    for (int j = 0; j < 2; ++j) CHECK(r.weights[i * 2 + j] == 0.0f);
  }
  CHECK(r.weights[4 * 2 + 0] == 1.0f);  // row 4 sees key 0 only
}

TEST_CASE("masks of every kind and shape, alone and with causal", "[attention]") {
  const Mask kind = GENERATE(Mask::additive, Mask::boolean, Mask::block);
  const int dims = GENERATE(range(0, 8));  // every broadcast: [sk], [sq, sk], [h, 1, sk], … [b, h, sq, sk]
  const bool causal = GENERATE(false, true);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 13;
  c.seq_k = 75;
  c.head_dim = 7;
  c.mask = kind;
  c.mask_dims = dims;
  c.causal = causal;
  c.weights = true;
  check_case(c);
  c.seq_q = 1;  // decode steps take the direct (unpacked) path
  check_case(c);
}

TEST_CASE("fully masked rows give zeros, never NaN", "[attention]") {
  const Mask kind = GENERATE(Mask::additive, Mask::boolean, Mask::block);
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 3;
  c.seq_k = 130;  // more than one key block
  c.head_dim = 9;
  c.mask = kind;
  c.weights = true;
  Run r = make_run(c);  // row 0 of every mask slice is fully masked
  REQUIRE(attn::attention(r.p) == nullptr);
  for (int h = 0; h < 2; ++h) {
    for (int d = 0; d < 9; ++d) CHECK(r.out[(h * 3) * 9 + d] == 0.0f);
    for (int j = 0; j < 130; ++j) CHECK(r.weights[(h * 3) * 130 + j] == 0.0f);
  }
}

TEST_CASE("large logits stay finite and exact", "[attention]") {
  // Integer q and k with scale 1 make every score exact in float, up to ±a²·d. What remains is
  // float32's resolution of the score itself (s·log2e rounded: |s|·2⁻²⁴ each) that the softmax
  // turns into relative weight errors, so the allowance grows with the score bound.
  const float a = GENERATE(8.0f, 25.0f);  // scores up to ±1024 and ±10000
  Case c;
  c.heads = 2;
  c.kv_heads = 2;
  c.seq_q = 9;
  c.seq_k = 150;
  c.head_dim = 16;
  c.input_scale = a;
  c.integer_inputs = true;
  c.scale = 1.0f;
  c.weights = true;
  c.tolerance = 2e-5 + 4 * 6e-8 * 1.5 * double(a) * a * 16;
  check_case(c);
}

TEST_CASE("layout bshd gives the same numbers as bhsd", "[attention]") {
  const bool causal = GENERATE(false, true);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 10;
  c.seq_k = 21;
  c.head_dim = 6;
  c.value_dim = 5;
  c.bshd = true;
  c.causal = causal;
  c.mask = Mask::boolean;
  c.mask_dims = 5;
  c.weights = true;
  check_case(c);
}

TEST_CASE("weights only (no value) and scale edge cases", "[attention]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = 12;
  c.seq_k = 67;
  c.head_dim = 5;
  c.weights_only = true;
  c.causal = true;
  check_case(c);

  c.weights_only = false;
  c.weights = true;
  c.causal = false;
  c.scale = 0.0f;  // every visible key weighs the same
  Run r = make_run(c);
  REQUIRE(attn::attention(r.p) == nullptr);
  for (float w : r.weights) CHECK(w == Approx(1.0 / 67).epsilon(1e-5));
  check_case(c);
  c.scale = 1e-30f;
  check_case(c);
}

TEST_CASE("strided keys and values, as a KV cache stores them", "[attention]") {
  // K and V live in a [batch, kv_heads, max_seq, dim] buffer of which seq_k rows are filled.
  const int max_seq = 50, seq_k = 37, dim = 6, heads = 4, kv_heads = 2;
  Case c;
  c.batch = 2;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.seq_q = 3;
  c.seq_k = seq_k;
  c.head_dim = dim;
  c.causal = true;
  Run r = make_run(c);
  std::vector<float> kcache(std::size_t(2) * kv_heads * max_seq * dim, NAN);
  std::vector<float> vcache(kcache.size(), NAN);
  const attn::Strides cs = attn::dense_bhsd(kv_heads, max_seq, dim);
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < kv_heads; ++h)
      for (int j = 0; j < seq_k; ++j)
        for (int d = 0; d < dim; ++d) {
          kcache[b * cs.batch + h * cs.head + j * cs.row + d] =
              r.k[b * r.p.k.batch + h * r.p.k.head + j * r.p.k.row + d];
          vcache[b * cs.batch + h * cs.head + j * cs.row + d] =
              r.v[b * r.p.v.batch + h * r.p.v.head + j * r.p.v.row + d];
        }
  const std::vector<double> want = ref::attention(r.p);
  r.p.key = kcache.data();
  r.p.value = vcache.data();
  r.p.k = cs;
  r.p.v = cs;
  REQUIRE(attn::attention(r.p) == nullptr);
  expect_close(r.out, want, 2e-5, "out");
}

TEST_CASE("validate rejects unusable params", "[attention]") {
  Case c;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 3;
  c.seq_k = 5;
  Run r = make_run(c);
  REQUIRE(attn::validate(r.p) == nullptr);
  auto rejects = [&](auto change) {
    attn::AttentionParams p = r.p;
    change(p);
    const char* err = attn::validate(p);
    REQUIRE(err != nullptr);
    CHECK(std::string(err).rfind("attention: ", 0) == 0);
    CHECK(attn::attention(p) == std::string(err));
  };
  rejects([](auto& p) { p.heads = 3; });
  rejects([](auto& p) { p.kv_heads = 0; });
  rejects([](auto& p) { p.seq_k = 0; });
  rejects([](auto& p) { p.head_dim = -1; });
  rejects([](auto& p) { p.value_dim = 0; });
  rejects([](auto& p) { p.query = nullptr; });
  rejects([](auto& p) { p.out = nullptr; });
  rejects([](auto& p) {
    p.value = nullptr;
    p.out = nullptr;
    p.weights = nullptr;
  });
  rejects([](auto& p) { p.mask_type = attn::MaskType::boolean; });
  rejects([&](auto& p) {
    p.mask = r.q.data();
    p.mask_type = static_cast<attn::MaskType>(7);
  });
}

TEST_CASE("inputs are never modified", "[attention]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = 20;
  c.seq_k = 70;
  c.head_dim = 9;
  c.mask = Mask::additive;
  c.weights = true;
  Run r = make_run(c);
  const auto q = r.q, k = r.k, v = r.v, m = r.fmask;
  REQUIRE(attn::attention(r.p) == nullptr);
  CHECK(q == r.q);
  CHECK(k == r.k);
  CHECK(v == r.v);
  CHECK(std::equal(m.begin(), m.end(), r.fmask.begin(),
                   [](float a, float b) { return a == b || (std::isinf(a) && std::isinf(b)); }));
}

TEST_CASE("random shapes", "[attention]") {
  std::mt19937 rng(20261129);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < 40; ++n) {
    Case c;
    c.batch = pick(1, 3);
    c.kv_heads = pick(1, 3);
    c.heads = c.kv_heads * pick(1, 3);
    c.seq_q = pick(1, 90);
    c.seq_k = pick(1, 150);
    c.head_dim = pick(1, 40);
    c.value_dim = pick(1, 40);
    c.bshd = pick(0, 1);
    c.causal = pick(0, 1);
    c.mask = static_cast<Mask>(pick(0, 3));
    c.mask_dims = pick(0, 7);
    c.weights = pick(0, 1);
    c.seed = std::uint32_t(n + 100);
    check_case(c);
  }
}

TEST_CASE("simd name matches the build", "[attention]") {
  const std::string name = attn::simd_name();
#if defined(ATTN_SCALAR)
  CHECK(name == "scalar");
#elif defined(__wasm_relaxed_simd__)
  CHECK(name == "relaxed-simd");
#elif defined(__EMSCRIPTEN__)
  CHECK(name == "simd128");
#else
  CHECK(name.rfind("sse", 0) == 0);
#endif
}
