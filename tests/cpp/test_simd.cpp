// The vector primitives on their own: exp2 against std::exp2 across its range and at its edges,
// and the lane-wise max.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/simd.h"

namespace {

// Runs the vector exp2 over xs (whole vectors, then the scalar twin on the tail).
std::vector<float> exp2_all(const std::vector<float>& xs) {
  using namespace attn::simd;
  std::vector<float> out(xs.size());
  std::size_t i = 0;
  for (; i + W <= xs.size(); i += W) store(out.data() + i, exp2_softmax(load(xs.data() + i)));
  for (; i < xs.size(); ++i) out[i] = exp2_softmax(xs[i]);
  return out;
}

}  // namespace

TEST_CASE("exp2_softmax matches std::exp2 to 2e-7 relative on [-126, 12]", "[simd]") {
  std::vector<float> xs;
  for (float x = 12.0f; x >= -126.0f; x -= 0.0123f) xs.push_back(x);
  xs.push_back(-0.5f);
  xs.push_back(-125.999f);
  const std::vector<float> got = exp2_all(xs);
  // The vector and scalar twins are checked on the same inputs.
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp2(double(xs[i]));
    INFO("x = " << xs[i]);
    REQUIRE(std::abs(got[i] - want) <= 2e-7 * want);
    REQUIRE(std::abs(attn::simd::exp2_softmax(xs[i]) - want) <= 2e-7 * want);
  }
}

TEST_CASE("exp2_softmax edges: 0, -inf, NaN, below the normal range", "[simd]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {0.0f, -0.0f, -inf, nan, -126.5f, -200.0f, -1e30f, -126.6f, -1.0f, -126.25f, -127.0f};
  const std::vector<float> got = exp2_all(xs);
  for (int pass = 0; pass < 2; ++pass) {
    auto at = [&](std::size_t i) { return pass == 0 ? got[i] : attn::simd::exp2_softmax(xs[i]); };
    CHECK(at(0) == 1.0f);
    CHECK(at(1) == 1.0f);
    CHECK(at(2) == 0.0f);
    CHECK(std::isnan(at(3)));
    // From 2^-126 down to 2^-126.5 a subnormal (-126.5 rounds to n = -126), below it exactly 0.
    CHECK(std::abs(at(4) - std::exp2(-126.5)) <= 5e-7 * std::exp2(-126.0));  // (a few subnormal steps)
    CHECK(at(5) == 0.0f);
    CHECK(at(6) == 0.0f);
    CHECK(at(7) == 0.0f);
    CHECK(at(8) == 0.5f);
    CHECK(std::abs(at(9) - std::exp2(-126.25)) <= 5e-7 * std::exp2(-126.0));
    CHECK(at(10) == 0.0f);
  }
}

TEST_CASE("vmax and reduce_max", "[simd]") {
  using namespace attn::simd;
  std::vector<float> a(W), b(W);
  for (int i = 0; i < W; ++i) {
    a[i] = float(i) - 1.5f;
    b[i] = float(W - i) * 0.75f - 2.0f;
  }
  std::vector<float> m(W);
  store(m.data(), vmax(load(a.data()), load(b.data())));
  float want = -1e30f;
  for (int i = 0; i < W; ++i) {
    CHECK(m[i] == std::max(a[i], b[i]));
    want = std::max(want, m[i]);
  }
  CHECK(reduce_max(load(m.data())) == want);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> neg(W, -inf);
  CHECK(reduce_max(vmax(load(neg.data()), load(neg.data()))) == -inf);
}
