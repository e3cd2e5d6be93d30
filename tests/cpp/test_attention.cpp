// The kernel against the double-precision reference (reference.h) on many shapes.
//
// Tolerance: inputs are uniform in [-1, 1) and outputs are convex combinations of value rows,
// so outputs are compared with |got − ref| <= 2e-5 + 1e-4·|ref| (float dot products over up to
// 128 terms plus the 2e-7 relative error of the vectorised exp2). Cases with large logits scale
// the allowance by the score magnitude, since a float score of size |s| carries an absolute
// error of about |s|·2⁻²³·√head_dim that the softmax turns into a relative weight error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention.h"
#include "reference.h"

namespace {

enum class Mask { none, additive, boolean };

struct Case {
  int batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 4, value_dim = -1;
  bool bshd = false, causal = false, weights = false, weights_only = false;
  Mask mask = Mask::none;
  int mask_broadcast = 2;  // 0: [sq, sk], 1: [b, 1, sq, sk], 2: [b, h, sq, sk]
  float input_scale = 1.0f;  // multiplies q and k: large values give large logits
  bool integer_inputs = false;  // round q and k to integers (exact float dot products)
  float scale = -1.0f;       // < 0: 1/sqrt(head_dim)
  double tolerance = 2e-5;
  std::uint32_t seed = 1;

  std::string describe() const {
    std::ostringstream s;
    s << "batch " << batch << " heads " << heads << "/" << kv_heads << " seq " << seq_q << "x"
      << seq_k << " dim " << head_dim << "/" << value_dim << (bshd ? " bshd" : " bhsd")
      << (causal ? " causal" : "") << " mask " << int(mask) << "/" << mask_broadcast
      << " input_scale " << input_scale << " seed " << seed;
    return s.str();
  }
};

struct Run {
  attn::AttentionParams p;
  std::vector<float> q, k, v, out, weights, fmask;
  std::vector<std::uint8_t> bmask;
};

// Fills params and buffers for a case. Masks are random with ~25% masked entries, and row 0 of
// every mask slice is fully masked, so every masked case also covers an all-masked row.
Run make_run(Case c) {
  if (c.value_dim < 0) c.value_dim = c.head_dim;
  Run r;
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, std::size_t n, float s) {
    x.resize(n);
    for (auto& e : x) e = uni(rng) * s;
  };
  attn::AttentionParams& p = r.p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.head_dim = c.head_dim;
  p.value_dim = c.value_dim;
  p.causal = c.causal;
  p.scale = c.scale < 0 ? 1.0f / std::sqrt(float(c.head_dim)) : c.scale;
  const auto dense = c.bshd ? attn::dense_bshd : attn::dense_bhsd;
  p.q = dense(c.heads, c.seq_q, c.head_dim);
  p.k = dense(c.kv_heads, c.seq_k, c.head_dim);
  p.v = dense(c.kv_heads, c.seq_k, c.value_dim);
  p.o = dense(c.heads, c.seq_q, c.value_dim);
  p.w = attn::dense_bhsd(c.heads, c.seq_q, c.seq_k);
  fill(r.q, std::size_t(c.batch) * c.heads * c.seq_q * c.head_dim, c.input_scale);
  fill(r.k, std::size_t(c.batch) * c.kv_heads * c.seq_k * c.head_dim, c.input_scale);
  if (c.integer_inputs) {
    for (auto& e : r.q) e = std::round(e);
    for (auto& e : r.k) e = std::round(e);
  }
  fill(r.v, std::size_t(c.batch) * c.kv_heads * c.seq_k * c.value_dim, 1.0f);
  p.query = r.q.data();
  p.key = r.k.data();
  if (!c.weights_only) {
    r.out.assign(std::size_t(c.batch) * c.heads * c.seq_q * c.value_dim, NAN);
    p.value = r.v.data();
    p.out = r.out.data();
  }
  if (c.weights || c.weights_only) {
    r.weights.assign(std::size_t(c.batch) * c.heads * c.seq_q * c.seq_k, NAN);
    p.weights = r.weights.data();
  }
  if (c.mask != Mask::none) {
    const int mb = c.mask_broadcast == 0 ? 1 : c.batch;
    const int mh = c.mask_broadcast == 2 ? c.heads : 1;
    const std::size_t n = std::size_t(mb) * mh * c.seq_q * c.seq_k;
    p.m = attn::dense_bhsd(mh, c.seq_q, c.seq_k);
    if (c.mask_broadcast == 0) p.m.batch = 0;
    if (c.mask_broadcast != 2) p.m.head = 0;
    std::uniform_int_distribution<int> quarter(0, 3);
    std::vector<bool> keep(n);
    for (std::size_t e = 0; e < n; ++e) keep[e] = quarter(rng) != 0 && (e / c.seq_k) % c.seq_q != 0;
    if (c.mask == Mask::boolean) {
      r.bmask.resize(n);
      for (std::size_t e = 0; e < n; ++e) r.bmask[e] = keep[e] ? std::uint8_t(1 + e % 200) : 0;
      p.mask = r.bmask.data();
      p.mask_type = attn::MaskType::boolean;
    } else {
      r.fmask.resize(n);
      for (std::size_t e = 0; e < n; ++e)
        r.fmask[e] = keep[e] ? uni(rng) : -std::numeric_limits<float>::infinity();
      p.mask = r.fmask.data();
      p.mask_type = attn::MaskType::additive;
    }
  }
  return r;
}

// Reads a kernel output stored with strides s as dense [batch, heads, rows, cols].
std::vector<float> gather(const std::vector<float>& x, const attn::Strides& s, int batch, int heads,
                          int rows, int cols) {
  std::vector<float> d;
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < rows; ++i)
        for (int c = 0; c < cols; ++c) d.push_back(x[b * s.batch + h * s.head + i * s.row + c]);
  return d;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                  const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    const bool ok = err <= atol + 1e-4 * std::abs(want[i]);  // NaN fails here too
    if (!ok && bad++ == 0) first = i;
    if (!(err <= worst)) worst = err;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements off, worst error " << worst
            << ", first at " << first << " got " << (bad ? got[first] : 0.f) << " want "
            << (bad ? want[first] : 0.0));
  CHECK(bad == 0);
}

void check_case(const Case& c) {
  INFO(c.describe());
  Run r = make_run(c);
  const char* err = attn::attention(r.p);
  INFO("error: " << (err ? err : "none"));
  REQUIRE(err == nullptr);
  std::vector<double> ref_weights;
  const std::vector<double> ref_out = ref::attention(r.p, r.p.weights ? &ref_weights : nullptr);
  if (r.p.out)
    expect_close(gather(r.out, r.p.o, c.batch, c.heads, c.seq_q, r.p.value_dim), ref_out,
                 c.tolerance, "out");
  if (r.p.weights) expect_close(r.weights, ref_weights, c.tolerance, "weights");
}

}  // namespace

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
  const auto seq = GENERATE(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 1}, std::pair{5, 5},
                            std::pair{33, 33}, std::pair{113, 203}, std::pair{203, 113},
                            std::pair{257, 257}, std::pair{1, 257}, std::pair{64, 65},
                            std::pair{65, 64}, std::pair{17, 129});
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
  const auto seq = GENERATE(std::pair{5, 12}, std::pair{12, 5}, std::pair{70, 70},
                            std::pair{1, 300}, std::pair{100, 1});
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
  const Mask kind = GENERATE(Mask::additive, Mask::boolean);
  const int broadcast = GENERATE(0, 1, 2);
  const bool causal = GENERATE(false, true);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 13;
  c.seq_k = 75;
  c.head_dim = 7;
  c.mask = kind;
  c.mask_broadcast = broadcast;
  c.causal = causal;
  c.weights = true;
  check_case(c);
  c.seq_q = 1;  // decode steps take the direct (unpacked) path
  check_case(c);
}

TEST_CASE("fully masked rows give zeros, never NaN", "[attention]") {
  const Mask kind = GENERATE(Mask::additive, Mask::boolean);
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
  c.mask_broadcast = 1;
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
          kcache[b * cs.batch + h * cs.head + j * cs.row + d] = r.k[b * r.p.k.batch + h * r.p.k.head + j * r.p.k.row + d];
          vcache[b * cs.batch + h * cs.head + j * cs.row + d] = r.v[b * r.p.v.batch + h * r.p.v.head + j * r.p.v.row + d];
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
  rejects([](auto& p) { p.value = nullptr; p.out = nullptr; p.weights = nullptr; });
  rejects([](auto& p) { p.mask_type = attn::MaskType::boolean; });
  rejects([&](auto& p) { p.mask = r.q.data(); p.mask_type = static_cast<attn::MaskType>(7); });
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
  CHECK(std::equal(m.begin(), m.end(), r.fmask.begin(), [](float a, float b) { return a == b || (std::isinf(a) && std::isinf(b)); }));
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
    c.mask = static_cast<Mask>(pick(0, 2));
    c.mask_broadcast = pick(0, 2);
    c.weights = pick(0, 1);
    c.seed = std::uint32_t(n + 100);
    check_case(c);
  }
}

TEST_CASE("simd name matches the build", "[attention]") {
  const std::string name = attn::simd_name();
#if defined(ATTN_SCALAR)
  CHECK(name == "scalar");
#elif defined(__EMSCRIPTEN__)
  CHECK(name == "simd128");
#else
  CHECK(name.rfind("sse", 0) == 0);
#endif
}
