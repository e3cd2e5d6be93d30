// The packed GEMM behind the projections against the double reference: odd row counts, depths
// across the K block (256), partial panels, strided rows, with and without bias.
// Tolerance |got − want| <= 2e-5 + 1e-4·|want| (inputs in [-1, 1), weights scaled by 1/√in).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "layer/linear.h"
#include "reference.h"

TEST_CASE("PackedLinear matches x·Wᵀ + b", "[linear]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int rows = GENERATE(1, 2, 3, 4, 5, 9, 17);
  const int in = GENERATE(1, 3, 8, 255, 257, 600);
  const int out = GENERATE(1, 5, 8, 19, 64);
  const bool bias = GENERATE(false, true);
  INFO("rows " << rows << " in " << in << " out " << out << " bias " << bias);

  const int ldx = in + 3, ldy = out + 2;  // rows inside larger buffers
  std::vector<float> x(static_cast<std::size_t>(rows) * ldx), w(static_cast<std::size_t>(out) * in), b(out);
  for (auto& e : x) e = uni(rng);
  for (auto& e : w) e = uni(rng) / std::sqrt(float(in));
  for (auto& e : b) e = uni(rng);
  std::vector<float> dense(static_cast<std::size_t>(rows) * in);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < in; ++k) dense[i * in + k] = x[i * ldx + k];
  const std::vector<double> want = ref::linear(dense.data(), rows, in, w.data(), bias ? b.data() : nullptr, out);

  attn::PackedLinear lin;
  REQUIRE(lin.pack(w.data(), bias ? b.data() : nullptr, out, in) == nullptr);
  std::vector<float> scratch(lin.scratch_floats(rows));
  std::vector<float> y(static_cast<std::size_t>(rows) * ldy, -7.0f);
  lin.apply(x.data(), ldx, rows, y.data(), ldy, scratch.data());
  int bad = 0;
  for (int i = 0; i < rows; ++i) {
    for (int o = 0; o < out; ++o) {
      const double g = y[i * ldy + o], e = want[i * out + o];
      if (!(std::abs(g - e) <= 2e-5 + 1e-4 * std::abs(e))) ++bad;
    }
    for (int o = out; o < ldy; ++o) CHECK(y[i * ldy + o] == -7.0f);  // padding untouched
  }
  CHECK(bad == 0);
}

TEST_CASE("PackedLinear rejects invalid shapes", "[linear]") {
  attn::PackedLinear lin;
  float w = 1.0f;
  CHECK(lin.pack(nullptr, nullptr, 2, 2) != nullptr);
  CHECK(lin.pack(&w, nullptr, 0, 1) != nullptr);
  CHECK(lin.pack(&w, nullptr, 1, 0) != nullptr);
  CHECK_FALSE(lin.packed());
}
