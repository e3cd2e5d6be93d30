// Rotary embeddings against a plain double-precision reference written from the definition
// (Hugging Face's rotate_half and GPT-J's interleaved pairing), over both pairings, partial
// rotary, offsets, 1-D and per-batch positions, tables, both layouts, strided rows, in place,
// the inverse, sizes around the vector width and the 32-row block, and thread counts.
//
// Tolerance: the kernel rounds cos and sin of the double angle to float (≤ 2⁻²⁵ each) and
// rotates in float (three roundings of 2⁻²⁴ relative), so each output of a pair (x1, x2) is
// within 2⁻²²·(|x1| + |x2|) of the exact value, plus (|x1| + |x2|)·|angle|·2⁻⁵⁰ for the angle's
// and θ's roundings to double in kernel and reference (visible only at positions ≳ 2²⁷).
// Pass-through dimensions must be exact.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "layer/exp_log.h"
#include "layer/rotary.h"
#include "layer/sincos.h"
#include "pool_for_every_call.h"
#include "runtime/parallel.h"

namespace {

enum class Positions { offset, shared, per_batch };

struct Case {
  int batch = 1, heads = 1, seq = 1, head_dim = 8, rotary_dim = -1;
  bool interleaved = false, bshd = false, in_place = false, inverse = false, table = false;
  Positions positions = Positions::offset;
  std::int64_t offset = 0;
  double base = 10000.0;
  int position_range = 4096;  // positions arrays draw from [-range, range) (tables: [0, range))
  std::uint32_t seed = 1;

  std::string describe() const {
    std::ostringstream s;
    s << "batch " << batch << " heads " << heads << " seq " << seq << " dim " << head_dim << "/" << rotary_dim
      << (interleaved ? " interleaved" : " half") << (bshd ? " bshd" : " bhsd") << (in_place ? " in-place" : "")
      << (inverse ? " inverse" : "") << (table ? " table" : "") << " positions " << int(positions) << " offset "
      << offset << " base " << base << " seed " << seed;
    return s.str();
  }
};

struct Run {
  attn::RotaryParams p;
  std::vector<float> x, out, cos, sin;
  std::vector<std::int32_t> positions;
};

inline std::ptrdiff_t at(const attn::Strides& s, int b, int h, int t) { return b * s.batch + h * s.head + t * s.row; }

std::int64_t position(const attn::RotaryParams& p, int b, int t) {
  if (!p.positions) return p.position_offset + t;
  return p.positions[b * p.positions_batch_stride + t];
}

// The reference: out as dense bhsd doubles, from p (sizes, pairing, positions, tables) and x read
// with p.x. The angle of pair c at position pos is pos · base^(−2c/rotary_dim).
std::vector<double> reference(const attn::RotaryParams& p, const float* x) {
  const int h = p.rotary_dim / 2;
  std::vector<double> out(std::size_t(p.batch) * p.heads * p.seq * p.head_dim);
  for (int b = 0; b < p.batch; ++b)
    for (int hd = 0; hd < p.heads; ++hd)
      for (int t = 0; t < p.seq; ++t) {
        const float* row = x + at(p.x, b, hd, t);
        double* y = out.data() + ((std::size_t(b) * p.heads + hd) * p.seq + t) * p.head_dim;
        for (int d = 0; d < p.head_dim; ++d) y[d] = row[d];
        const std::int64_t pos = position(p, b, t);
        for (int c = 0; c < h; ++c) {
          double co, si;
          if (p.cos) {
            co = p.cos[pos * h + c];
            si = p.sin[pos * h + c];
          } else {
            const double angle = double(pos) * std::pow(p.base, -2.0 * c / p.rotary_dim);
            co = std::cos(angle);
            si = std::sin(angle);
          }
          if (p.inverse) si = -si;
          const int i1 = p.interleaved ? 2 * c : c, i2 = p.interleaved ? 2 * c + 1 : c + h;
          const double x1 = row[i1], x2 = row[i2];
          y[i1] = x1 * co - x2 * si;
          y[i2] = x1 * si + x2 * co;
        }
      }
  return out;
}

Run make_run(Case c) {
  if (c.rotary_dim < 0) c.rotary_dim = c.head_dim;
  Run r;
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  attn::RotaryParams& p = r.p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.seq = c.seq;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.interleaved = c.interleaved;
  p.inverse = c.inverse;
  p.base = c.base;
  p.position_offset = c.offset;
  p.x = p.o = c.bshd ? attn::dense_bshd(c.heads, c.seq, c.head_dim) : attn::dense_bhsd(c.heads, c.seq, c.head_dim);
  r.x.resize(std::size_t(c.batch) * c.heads * c.seq * c.head_dim);
  for (auto& e : r.x) e = uni(rng);
  r.out.assign(r.x.size(), -7.0f);  // garbage: every element must be written
  if (c.positions != Positions::offset) {
    const int lo = c.table ? 0 : -c.position_range;
    std::uniform_int_distribution<int> pick(lo, c.position_range - 1);
    const int n = c.positions == Positions::per_batch ? c.batch * c.seq : c.seq;
    r.positions.resize(n);
    // Runs of consecutive positions (the recurrence) broken by jumps and repeats.
    for (int i = 0; i < n; ++i) {
      const bool step = i > 0 && rng() % 4 != 0 && r.positions[i - 1] + 1 < c.position_range;
      r.positions[i] = step ? r.positions[i - 1] + 1 : pick(rng);
    }
    p.positions = r.positions.data();
    p.positions_batch_stride = c.positions == Positions::per_batch ? c.seq : 0;
  }
  if (c.table) {
    const int h = c.rotary_dim / 2, rows = c.position_range;
    r.cos.resize(std::size_t(rows) * h);
    r.sin.resize(r.cos.size());
    // Arbitrary values, not a rotation: the kernel must use them exactly as given.
    for (auto& e : r.cos) e = uni(rng);
    for (auto& e : r.sin) e = uni(rng);
    p.cos = r.cos.data();
    p.sin = r.sin.data();
    p.table_positions = rows;
  }
  p.in = r.x.data();
  p.out = c.in_place ? r.x.data() : r.out.data();
  return r;
}

// Runs the case, compares with the reference, and returns the output (dense, as laid out by p.o).
std::vector<float> check(const Case& c) {
  INFO(c.describe());
  Run r = make_run(c);
  const std::vector<float> x = r.x;  // before an in-place run overwrites it
  const std::vector<double> want = reference(r.p, x.data());
  REQUIRE(attn::rotary(r.p) == nullptr);
  const attn::RotaryParams& p = r.p;
  const float* got = p.out;
  const int h = p.rotary_dim / 2;
  for (int b = 0; b < p.batch; ++b)
    for (int hd = 0; hd < p.heads; ++hd)
      for (int t = 0; t < p.seq; ++t) {
        const float* g = got + at(p.o, b, hd, t);
        const float* in = x.data() + at(p.x, b, hd, t);
        const double* w = want.data() + ((std::size_t(b) * p.heads + hd) * p.seq + t) * p.head_dim;
        for (int d = 0; d < p.head_dim; ++d) {
          INFO("b " << b << " h " << hd << " t " << t << " d " << d << " got " << g[d] << " want " << w[d]);
          if (d >= p.rotary_dim) {
            REQUIRE(g[d] == in[d]);
            continue;
          }
          const int pair = p.interleaved ? d / 2 : d % h;
          const int i1 = p.interleaved ? 2 * pair : pair, i2 = p.interleaved ? 2 * pair + 1 : pair + h;
          // Plus the rounding of the angle itself to double, which matters only for huge positions.
          const double angle =
              p.cos ? 0.0 : std::abs(double(position(p, b, t))) * std::pow(p.base, -2.0 * pair / p.rotary_dim);
          const double size = std::abs(in[i1]) + std::abs(in[i2]);
          REQUIRE(std::abs(g[d] - w[d]) <= size * (std::ldexp(1.0, -22) + std::ldexp(angle, -50)));
        }
      }
  return std::vector<float>(got, got + r.x.size());
}

}  // namespace

TEST_CASE("rotary: both pairings, sizes around the vector width, partial dims", "[rotary]") {
  for (bool interleaved : {false, true})
    for (int rotary_dim : {2, 4, 6, 8, 10, 14, 16, 18, 30, 32, 34, 64, 128})
      for (int extra : {0, 1, 3}) {
        Case c;
        c.interleaved = interleaved;
        c.rotary_dim = rotary_dim;
        c.head_dim = rotary_dim + extra;
        c.heads = 2;
        c.seq = 37;
        c.offset = 5;
        c.seed = std::uint32_t(rotary_dim * 7 + extra);
        check(c);
      }
}

TEST_CASE("rotary: sequence lengths around the 32-row block, batches, both layouts", "[rotary]") {
  for (bool bshd : {false, true})
    for (int seq : {1, 2, 31, 32, 33, 64, 65, 100})
      for (bool interleaved : {false, true}) {
        Case c;
        c.batch = 2;
        c.heads = 3;
        c.seq = seq;
        c.head_dim = 12;
        c.bshd = bshd;
        c.interleaved = interleaved;
        c.offset = seq % 3 == 0 ? 0 : 1000 + seq;
        c.seed = std::uint32_t(seq + (bshd ? 100 : 0));
        check(c);
      }
}

TEST_CASE("rotary: position arrays, shared and per batch entry, negative and repeated", "[rotary]") {
  for (Positions mode : {Positions::shared, Positions::per_batch})
    for (bool interleaved : {false, true})
      for (bool bshd : {false, true}) {
        Case c;
        c.batch = 3;
        c.heads = 2;
        c.seq = 70;
        c.head_dim = 20;
        c.rotary_dim = 16;
        c.positions = mode;
        c.interleaved = interleaved;
        c.bshd = bshd;
        c.position_range = 50;  // small: many repeats and jumps back
        c.seed = std::uint32_t(int(mode) * 4 + interleaved * 2 + bshd);
        check(c);
        c.position_range = 1 << 30;  // large and negative angles
        check(c);
      }
}

TEST_CASE("rotary: large offsets keep the double-precision angle (recurrence over long runs)", "[rotary]") {
  for (std::int64_t offset : {std::int64_t{0}, std::int64_t{131071}, std::int64_t{1} << 31, -(std::int64_t{1} << 40)})
    for (double base : {10000.0, 500000.0, 1.5}) {
      Case c;
      c.heads = 1;
      c.seq = 200;
      c.head_dim = 128;
      c.offset = offset;
      c.base = base;
      check(c);
    }
}

TEST_CASE("rotary: cos/sin tables are used exactly as given", "[rotary]") {
  for (bool interleaved : {false, true})
    for (Positions mode : {Positions::offset, Positions::shared, Positions::per_batch}) {
      Case c;
      c.batch = 2;
      c.heads = 3;
      c.seq = 41;
      c.head_dim = 22;
      c.rotary_dim = 18;
      c.interleaved = interleaved;
      c.table = true;
      c.positions = mode;
      c.position_range = 64;
      c.offset = 64 - 41;  // the last row uses the table's last position
      c.seed = std::uint32_t(10 + int(mode) + 3 * interleaved);
      check(c);
    }
}

TEST_CASE("rotary: in place, and the inverse undoes the rotation", "[rotary]") {
  for (bool interleaved : {false, true})
    for (bool table : {false, true}) {
      Case c;
      c.batch = 2;
      c.heads = 4;
      c.seq = 45;
      c.head_dim = 24;
      c.rotary_dim = 20;
      c.interleaved = interleaved;
      c.table = table;
      c.positions = Positions::per_batch;
      c.position_range = 100;
      c.in_place = true;
      check(c);
      c.inverse = true;
      check(c);
      c.in_place = false;
      check(c);
    }
  // R(−angle)·R(angle)·x ≈ x, through the kernel alone.
  Case c;
  c.heads = 3;
  c.seq = 50;
  c.head_dim = 64;
  c.offset = 100000;
  Run r = make_run(c);
  const std::vector<float> x = r.x;
  REQUIRE(attn::rotary(r.p) == nullptr);
  r.p.in = r.out.data();
  r.p.inverse = true;
  REQUIRE(attn::rotary(r.p) == nullptr);  // out = R⁻¹(out), in place
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(r.out[i] - x[i]) <= 1e-6);
}

TEST_CASE("rotary: strided rows inside larger buffers (a layer's Q or a KV-cache slice)", "[rotary]") {
  // bshd rows of 3 heads × 16 dims living in a cache of 10 rows, rows 4..9 rotated from position 4;
  // the output goes to another strided buffer. Elements outside the rows must stay untouched.
  const int heads = 3, d = 16, max_seq = 10, first = 4, seq = 6;
  std::vector<float> cache(std::size_t(max_seq) * heads * d), dst(std::size_t(max_seq) * heads * (d + 5), 9.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (auto& e : cache) e = uni(rng);
  attn::RotaryParams p;
  p.in = cache.data() + std::size_t(first) * heads * d;
  p.out = dst.data() + std::size_t(first) * heads * (d + 5);
  p.x = attn::dense_bshd(heads, max_seq, d);
  p.o = {0, d + 5, heads * (d + 5)};
  p.heads = heads;
  p.seq = seq;
  p.head_dim = d;
  p.rotary_dim = 12;
  p.position_offset = first;
  REQUIRE(attn::rotary(p) == nullptr);
  const std::vector<double> want = reference(p, p.in);
  for (int hd = 0; hd < heads; ++hd)
    for (int t = 0; t < seq; ++t)
      for (int c = 0; c < d; ++c)
        REQUIRE(std::abs(p.out[at(p.o, 0, hd, t) + c] - want[(std::size_t(hd) * seq + t) * d + c]) <= 5e-7);
  for (std::size_t i = 0; i < dst.size(); ++i) {
    const std::size_t row = i / (heads * (d + 5)), col = i % (d + 5);
    if (row < std::size_t(first) || col >= std::size_t(d)) REQUIRE(dst[i] == 9.0f);
  }
}

TEST_CASE("rotary: bit-identical for 1, 2 and 3 threads", "[rotary][parallel]") {
  Case c;
  c.batch = 2;
  c.heads = 5;
  c.seq = 300;
  c.head_dim = 40;
  c.rotary_dim = 32;
  c.positions = Positions::per_batch;
  const PoolForEveryCall every_call;
  std::vector<float> one;
  for (int threads : {1, 2, 3}) {
    attn::set_num_threads(threads);
    const std::vector<float> got = check(c);
    if (threads == 1) one = got;
    REQUIRE(got == one);
  }
  attn::set_num_threads(1);
}

TEST_CASE("rotary: invalid params are reported, never computed", "[rotary]") {
  std::vector<float> x(64);
  std::vector<float> table(8);
  std::vector<std::int32_t> positions = {0, 1, 2, 4};
  auto base_params = [&] {
    attn::RotaryParams p;
    p.in = x.data();
    p.out = x.data();
    p.seq = 4;
    p.head_dim = 16;
    p.rotary_dim = 8;
    p.x = p.o = attn::dense_bhsd(1, 4, 16);
    return p;
  };
  REQUIRE(attn::validate(base_params()) == nullptr);
  auto fails = [&](auto change, const char* message) {
    attn::RotaryParams p = base_params();
    change(p);
    const char* err = attn::rotary(p);
    INFO(message);
    REQUIRE(err != nullptr);
    REQUIRE(std::string(err) == message);
  };
  fails([](attn::RotaryParams& p) { p.seq = 0; }, "rotary: batch, heads, seq and head_dim must be positive");
  fails([](attn::RotaryParams& p) { p.rotary_dim = 7; },
        "rotary: rotary_dim must be even, at least 2 and at most head_dim");
  fails([](attn::RotaryParams& p) { p.rotary_dim = 0; },
        "rotary: rotary_dim must be even, at least 2 and at most head_dim");
  fails([](attn::RotaryParams& p) { p.rotary_dim = 18; },
        "rotary: rotary_dim must be even, at least 2 and at most head_dim");
  fails([](attn::RotaryParams& p) { p.out = nullptr; }, "rotary: in and out are required");
  fails([&](attn::RotaryParams& p) { p.cos = table.data(); }, "rotary: cos and sin tables go together");
  fails([](attn::RotaryParams& p) { p.base = 0; }, "rotary: base must be finite and positive");
  fails([](attn::RotaryParams& p) { p.base = std::nan(""); }, "rotary: base must be finite and positive");
  fails([](attn::RotaryParams& p) { p.position_offset = std::int64_t{1} << 53; },
        "rotary: position_offset is out of range");
  auto with_table = [&](attn::RotaryParams& p) {
    p.cos = p.sin = table.data();
    p.table_positions = 2;  // [2 positions, 4 pairs]
  };
  fails([&](attn::RotaryParams& p) { with_table(p); }, "rotary: a position is outside the cos/sin tables");
  fails(
      [&](attn::RotaryParams& p) {
        with_table(p);
        p.table_positions = 0;
      },
      "rotary: table_positions must be positive with tables");
  fails(
      [&](attn::RotaryParams& p) {
        with_table(p);
        p.seq = 2;
        p.position_offset = -1;
      },
      "rotary: a position is outside the cos/sin tables");
  fails(
      [&](attn::RotaryParams& p) {
        with_table(p);
        p.positions = positions.data();
      },
      "rotary: a position is outside the cos/sin tables");
  {
    attn::RotaryParams p = base_params();
    with_table(p);
    p.seq = 2;  // positions 0 and 1: inside
    p.x = p.o = attn::dense_bhsd(1, 2, 16);
    REQUIRE(attn::rotary(p) == nullptr);
  }
}

TEST_CASE("rotary: the small sincos is within 3 ulp of long-double sin/cos for |x| < 2^31", "[rotary]") {
  // The kernel's own sin/cos (src/layer/sincos.h) replaces libc's to keep the wasm small; check it
  // directly on random angles over every binade up to 2^31 and near multiples of π/2, where the
  // reduction loses the most.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  auto ulps = [](double got, long double want) {
    const double w = static_cast<double>(want);
    const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
    return std::fabs(static_cast<long double>(got) - want) / ulp;
  };
  double worst = 0.0;
  auto check = [&](double x) {
    double s, c;
    attn::trig::sincos(x, &s, &c);
    // Away from zeros of the function an absolute error of 1e-16 is below an ulp of 1 anyway;
    // near zeros ulps are of the tiny value, so compare against max(|f|, 2^-30).
    auto err = [&](double got, long double want) {
      return std::fabs(static_cast<double>(want)) < 0x1p-30 ? std::fabs(static_cast<long double>(got) - want) / 0x1p-82L
                                                            : ulps(got, want);
    };
    const double e = std::max(static_cast<double>(err(s, sinl(static_cast<long double>(x)))),
                              static_cast<double>(err(c, cosl(static_cast<long double>(x)))));
    worst = std::max(worst, e);
    if (e > 3.0) FAIL_CHECK("x = " << x << ": " << e << " ulp");
  };
  for (int e = -20; e <= 31; ++e)
    for (int i = 0; i < 2000; ++i) check(std::ldexp(unit(rng), e));
  for (long long n = 1; n < (1ll << 31); n = n * 3 + 1)
    for (double d : {-1e-9, 0.0, 1e-9}) check(static_cast<double>(n) * 1.5707963267948966 + d);
  INFO("worst " << worst << " ulp");
  CHECK(worst <= 3.0);
  // Beyond 2^31 (only a base below 1 gets there) the error stays tiny in absolute terms.
  double worst_abs = 0.0;
  for (int e = 31; e <= 52; ++e)
    for (int i = 0; i < 500; ++i) {
      const double x = std::ldexp(unit(rng), e);
      double s, c;
      attn::trig::sincos(x, &s, &c);
      worst_abs = std::max({worst_abs, static_cast<double>(std::fabs(s - sinl(static_cast<long double>(x)))),
                            static_cast<double>(std::fabs(c - cosl(static_cast<long double>(x))))});
    }
  INFO("worst absolute error beyond 2^31: " << worst_abs);
  CHECK(worst_abs <= 0x1p-30);  // far below the float32 rounding (2^−25) of the tables
}

TEST_CASE("rotary: the small exp and log and the powers built on them are within 1 ulp", "[rotary]") {
  // src/layer/exp_log.h replaces libc's pow (and its tables) for the rotary frequencies and
  // Adam's bias corrections; checked against long double on random arguments over their ranges.
  // Only where long double is x87's 64-bit mantissa: wasm's is 113 bits, for which Emscripten's
  // musl logl, expl and powl just call log, exp and pow, a reference no more exact than the code.
#if LDBL_MANT_DIG == 64
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto ulps = [](double got, long double want) {
    const double w = std::fabs(static_cast<double>(want));
    return static_cast<double>(std::fabs(static_cast<long double>(got) - want)) / (std::nextafter(w, INFINITY) - w);
  };
  double worst_log = 0, worst_exp = 0, worst_power = 0, worst_adam = 0;
  for (int e = -1000; e <= 1000; e += 7)
    for (int i = 0; i < 50; ++i) {
      const double x = std::ldexp(1 + unit(rng), e);
      worst_log = std::max(worst_log, ulps(attn::math::log(x), logl(x)));
    }
  for (int i = 0; i < 20000; ++i) {  // around 1, where ln x is small
    const double x = 0.7 + 0.6 * unit(rng);
    worst_log = std::max(worst_log, ulps(attn::math::log(x), logl(x)));
  }
  for (int e = -1074; e < -1022; ++e)  // subnormal arguments
    for (int i = 0; i < 20; ++i) {
      const double x = std::ldexp(1 + unit(rng), e);
      worst_log = std::max(worst_log, ulps(attn::math::log(x), logl(x)));
    }
  auto check_exp = [&](double x) { worst_exp = std::max(worst_exp, ulps(attn::math::exp(x), expl(x))); };
  for (int i = 0; i < 20000; ++i) check_exp(-708 + 1417 * unit(rng));
  for (int i = 0; i < 2000; ++i) check_exp(-745 + 37 * unit(rng));  // subnormal results
  for (int i = 0; i < 2000; ++i) check_exp(709.44 + 0.34 * unit(rng));  // 2^1024·y, y < 1
  // θ_c = base^(−2c/d): common bases and head sizes, then random bases in [e^−23, e^23].
  auto check_power = [&](double base, double y) {
    const double e = ulps(attn::math::power(base, y), powl(base, y));
    worst_power = std::max(worst_power, e);
    if (e > 1) FAIL_CHECK(base << "^" << y << ": " << e << " ulp");
  };
  for (double base : {1.0001, 1.5, 2.0, 10000.0, 500000.0, 1e6, 1e9, 0.5})
    for (int d : {2, 6, 32, 48, 64, 80, 96, 128, 160, 256, 1024})
      for (int c = 0; c < d / 2; ++c) check_power(base, -2.0 * c / d);
  for (int i = 0; i < 20000; ++i) check_power(std::exp(46 * unit(rng) - 23), -unit(rng));
  // Adam's 1 − β^step is rounded to float: β^step within 2^−45 relative is far below that.
  for (double beta : {0.5, 0.9, 0.99, 0.999, 0.9999, static_cast<double>(0.9f)})
    for (int step = 1; step < (1 << 30); step = step * 2 + 1) {
      const long double want = powl(beta, step);
      if (want < 0x1p-1000L) continue;  // 0 in float long before
      worst_adam = std::max(worst_adam, static_cast<double>(std::fabs(attn::math::power(beta, step) - want) / want));
    }
  INFO("worst: log " << worst_log << ", exp " << worst_exp << ", power " << worst_power << " ulp; beta^step "
                     << worst_adam << " relative");
  CHECK(worst_log <= 1.0);
  CHECK(worst_exp <= 1.0);
  CHECK(worst_power <= 1.0);
  CHECK(worst_adam <= 0x1p-45);
#endif
  CHECK(attn::math::log(1.0) == 0.0);
  CHECK(attn::math::exp(0.0) == 1.0);
  CHECK(attn::math::log(0.0) == -INFINITY);
  CHECK(attn::math::exp(-800.0) == 0.0);
  CHECK(attn::math::exp(710.0) == INFINITY);
  CHECK(attn::math::power(0.0, 3.0) == 0.0);  // Adam's β = 0
  CHECK(attn::math::power(1.0, -0.5) == 1.0);
  CHECK(attn::math::power(0.0, 0.0) == 1.0);  // as pow: Adam's β = 0 at step 0
  CHECK(attn::math::power(0.0, -1.0) == INFINITY);
}
