// Keys and values stored as float16, bfloat16, int8, int4 or in a ring of slots: the kernel
// against the double-precision reference on the stored values (so the float32 tolerances hold),
// on both paths; the float16 and bfloat16 conversions against their definitions; int4's readers
// (one value, a row, a block of 32 as int16) against its layout.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention_case.h"
#include "kernel/half.h"
#include "kernel/kv_storage.h"

using tcase::Case;
using tcase::check_case;
using tcase::Mask;

namespace {

// binary16 → double from the definition: (−1)^s · 2^(e−15) · (1 + m/1024), subnormals
// 2^−14 · m/1024, e = 31 is ∞ or NaN.
double half_value(std::uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m / 1024.0, -14) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1 + m / 1024.0, e - 15);
  return sign ? -v : v;
}

}  // namespace

TEST_CASE("float16 → float32 is exact for every half", "[half]") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const double want = half_value(std::uint16_t(h));
    const float got = attn::half::to_float(std::uint16_t(h));
    INFO("half 0x" << std::hex << h);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(double(got) == want);
      CHECK(std::signbit(got) == bool(h >> 15));
    }
  }
}

TEST_CASE("float32 → float16 rounds to nearest, ties to even", "[half]") {
  // Every half round-trips; midpoints between neighbours go to the even one; just above or below
  // a midpoint goes to the nearer one; overflow is ∞; NaN stays NaN.
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float x = attn::half::to_float(std::uint16_t(h));
    INFO("half 0x" << std::hex << h);
    REQUIRE(attn::half::from_float(x) == h);
    REQUIRE(attn::half::from_float(-x) == (h | 0x8000));
    if (h + 1 < 0x7c00) {
      const double mid = (half_value(std::uint16_t(h)) + half_value(std::uint16_t(h + 1))) / 2;
      const float midf = float(mid);  // exact: a half midpoint has 12 significant bits
      REQUIRE(double(midf) == mid);
      CHECK(attn::half::from_float(midf) == ((h & 1) ? h + 1 : h));
      CHECK(attn::half::from_float(std::nextafter(midf, 0.0f)) == h);
      CHECK(attn::half::from_float(std::nextafter(midf, 1e9f)) == h + 1);
    }
  }
  CHECK(attn::half::from_float(65504.0f) == 0x7bff);
  CHECK(attn::half::from_float(65519.0f) == 0x7bff);
  CHECK(attn::half::from_float(65520.0f) == 0x7c00);  // the midpoint to 2^16 rounds to ∞ (even)
  CHECK(attn::half::from_float(1e10f) == 0x7c00);
  CHECK(attn::half::from_float(-INFINITY) == 0xfc00);
  CHECK(std::isnan(attn::half::to_float(attn::half::from_float(NAN))));
  CHECK(attn::half::from_float(1e-9f) == 0);  // below half the smallest subnormal
}

TEST_CASE("vector float16 conversions equal the scalar ones", "[half]") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t u = bits(rng);
    if (i % 3 == 0) u = (u & 0x807fffffu) | ((100u + u % 50u) << 23);  // mostly within half range
    std::memcpy(&x[i], &u, 4);
  }
  std::vector<std::uint16_t> h(x.size());
  for (std::size_t i = 0; i + attn::simd::W <= x.size(); i += attn::simd::W)
    attn::half::store(h.data() + i, attn::simd::load(x.data() + i));
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x " << x[i]);
    const std::uint16_t want = attn::half::from_float(x[i]);
    if (std::isnan(x[i])) CHECK((h[i] & 0x7fff) > 0x7c00);
    else CHECK(h[i] == want);
  }
  std::vector<float> back(h.size());
  for (std::size_t i = 0; i + attn::simd::W <= h.size(); i += attn::simd::W)
    attn::simd::store(back.data() + i, attn::half::load(h.data() + i));
  for (std::size_t i = 0; i < h.size(); ++i) {
    const float want = attn::half::to_float(h[i]);
    if (std::isnan(want)) CHECK(std::isnan(back[i]));
    else CHECK(back[i] == want);
  }
}

TEST_CASE("bfloat16 → float32 is exact for every bfloat16", "[bfloat16]") {
  // The definition: the 16 bits are the top half of a float32.
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float got = attn::bfloat16::to_float(attn::bfloat16::Bits(b));
    std::uint32_t want_bits = b << 16, got_bits;
    std::memcpy(&got_bits, &got, 4);
    INFO("bfloat16 0x" << std::hex << b);
    REQUIRE(got_bits == want_bits);
  }
}

TEST_CASE("float32 → bfloat16 rounds to nearest, ties to even (PyTorch's rounding)", "[bfloat16]") {
  using attn::bfloat16::Bits;
  const auto from_bits = [](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  const auto bf = [](float f) { return static_cast<std::uint32_t>(attn::bfloat16::from_float(f)); };
  // Every finite bfloat16 (normals, subnormals, ±0) round-trips; the midpoint to its neighbour
  // goes to the even one of the two; one float32 ulp either side goes to the nearer one.
  for (std::uint32_t b = 0; b < 65536; ++b) {
    if ((b & 0x7f80) == 0x7f80) continue;  // ∞ and NaN: below
    INFO("bfloat16 0x" << std::hex << b);
    REQUIRE(bf(from_bits(b << 16)) == b);
    if ((b & 0x7fff) == 0x7f7f) continue;  // the largest finite: its upper neighbour is ∞, below
    const std::uint32_t mid = (b << 16) | 0x8000;
    REQUIRE(bf(from_bits(mid)) == ((b & 1) ? b + 1 : b));
    REQUIRE(bf(from_bits(mid - 1)) == b);
    REQUIRE(bf(from_bits(mid + 1)) == b + 1);
  }
  // Subnormal float32s round like any other (0x00008000 is a tie between 0 and 0x0001).
  CHECK(bf(from_bits(0x00000001)) == 0x0000);
  CHECK(bf(from_bits(0x00008000)) == 0x0000);
  CHECK(bf(from_bits(0x00018000)) == 0x0002);
  CHECK(bf(from_bits(0x807fffff)) == 0x8080);  // the largest subnormal rounds up to the smallest normal
  CHECK(bf(std::numeric_limits<float>::denorm_min()) == 0);
  CHECK(bf(-0.0f) == 0x8000);
  // ±∞ stay; the largest finite float32 (above the largest bfloat16 by more than half an ulp)
  // becomes ∞, as in PyTorch; the largest bfloat16 plus just under half an ulp stays finite.
  CHECK(bf(INFINITY) == 0x7f80);
  CHECK(bf(-INFINITY) == 0xff80);
  CHECK(bf(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(bf(-std::numeric_limits<float>::max()) == 0xff80);
  CHECK(bf(from_bits(0x7f7f7fff)) == 0x7f7f);
  CHECK(bf(from_bits(0x7f7f8000)) == 0x7f80);  // the midpoint to ∞ goes to the even one: ∞
  // NaN, of any sign and payload, becomes PyTorch's 0x7FC0 (a quiet NaN).
  for (std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0xff800001u, 0x7fbfffffu}) {
    INFO("nan 0x" << std::hex << nan);
    CHECK(bf(from_bits(nan)) == 0x7fc0);
  }
  CHECK(std::isnan(attn::bfloat16::to_float(attn::bfloat16::from_float(NAN))));
}

TEST_CASE("vector bfloat16 conversions equal the scalar ones", "[bfloat16]") {
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> x(4096);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t u = bits(rng);
    if (i % 5 == 0) u = (u & 0xffff0000u) | 0x8000u;       // ties
    if (i % 7 == 0) u = (u & 0x807fffffu) | 0x7f800000u;   // ∞ and NaN
    if (i % 11 == 0) u &= 0x807fffffu;                     // subnormals and zeros
    if (i % 13 == 0) u = (u & 0x80000000u) | (0x7f7f8000u + (u & 0x7fffu));  // next to the largest
    std::memcpy(&x[i], &u, 4);
  }
  std::vector<attn::bfloat16::Bits> b(x.size());
  for (std::size_t i = 0; i + attn::simd::W <= x.size(); i += attn::simd::W)
    attn::bfloat16::store(b.data() + i, attn::simd::load(x.data() + i));
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x " << x[i]);
    CHECK(b[i] == attn::bfloat16::from_float(x[i]));
  }
  std::vector<float> back(b.size());
  for (std::size_t i = 0; i + attn::simd::W <= b.size(); i += attn::simd::W)
    attn::simd::store(back.data() + i, attn::bfloat16::load(b.data() + i));
  for (std::size_t i = 0; i < b.size(); ++i) {
    const float want = attn::bfloat16::to_float(b[i]);
    if (std::isnan(want)) CHECK(std::isnan(back[i]));
    else CHECK(back[i] == want);
  }
}

TEST_CASE("the kernel's wide readers equal the one-element ones: every half and bfloat16, every int8", "[half]") {
  // half::load2 (8 halves → 2 vectors), its finite-only twin and the int8 chunk (16 → 4 vectors)
  // feed the decode path.
  using attn::kv::Stored;
  constexpr int W = attn::simd::W;
  std::vector<std::uint16_t> halves(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) halves[h] = std::uint16_t(h);
  constexpr int HV = Stored<std::uint16_t>::kVectors;
  std::vector<float> got(HV * W);
  for (std::size_t i = 0; i + HV * W <= halves.size(); i += HV * W) {
    attn::simd::vfloat v[HV];
    Stored<std::uint16_t>::load_chunk(halves.data() + i, v);
    for (int k = 0; k < HV; ++k) attn::simd::store(got.data() + k * W, v[k]);
    for (int j = 0; j < HV * W; ++j) {
      const float want = attn::half::to_float(halves[i + j]);
      INFO("half 0x" << std::hex << halves[i + j]);
      if (std::isnan(want)) {
        REQUIRE(std::isnan(got[j]));
      } else {
        REQUIRE(got[j] == want);
        REQUIRE(std::signbit(got[j]) == std::signbit(want));
      }
    }
  }
  // The reader of float16 known to be finite (AttentionParams::kv_finite): every half but the
  // 2048 of exponent 31, by chunks and by single vectors, bit for bit (signs of zeros too).
  std::vector<attn::half::Finite> finite;
  for (std::uint32_t h = 0; h < 65536; ++h)
    if ((h & 0x7c00) != 0x7c00) finite.push_back(attn::half::Finite(h));
  REQUIRE(finite.size() == 65536 - 2048);
  using FiniteReader = Stored<attn::half::Finite>;
  constexpr int FV = FiniteReader::kVectors;
  got.assign(FV * W, 0.0f);
  const auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; };
  for (std::size_t i = 0; i + FV * W <= finite.size(); i += FV * W) {
    attn::simd::vfloat v[FV];
    FiniteReader::load_chunk(finite.data() + i, v);
    for (int k = 0; k < FV; ++k) attn::simd::store(got.data() + k * W, v[k]);
    for (int j = 0; j < FV * W; ++j) {
      const auto h = static_cast<std::uint16_t>(finite[i + j]);
      INFO("half 0x" << std::hex << h);
      REQUIRE(same_bits(got[j], attn::half::to_float(h)));
      REQUIRE(double(got[j]) == half_value(h));
      REQUIRE(same_bits(FiniteReader::one(&finite[i + j]), got[j]));
    }
  }
  for (std::size_t i = 0; i + W <= finite.size(); i += W) {
    attn::simd::store(got.data(), FiniteReader::load(finite.data() + i));
    attn::simd::vfloat exact = Stored<std::uint16_t>::load(reinterpret_cast<const std::uint16_t*>(finite.data() + i));
    for (int j = 0; j < W; ++j) {
      INFO("half 0x" << std::hex << static_cast<std::uint16_t>(finite[i + j]));
      REQUIRE(same_bits(got[j], attn::half::to_float(static_cast<std::uint16_t>(finite[i + j]))));
    }
    attn::simd::store(got.data(), exact);
    for (int j = 0; j < W; ++j)
      REQUIRE(same_bits(got[j], attn::half::to_float(static_cast<std::uint16_t>(finite[i + j]))));
  }
  // Without the rebias (half::FiniteRaw): the same halves times 2^-112 exactly, signs of zeros
  // too, by chunks, single vectors and one by one.
  std::vector<attn::half::FiniteRaw> raw;
  for (const auto h : finite) raw.push_back(attn::half::FiniteRaw(static_cast<std::uint16_t>(h)));
  using RawReader = Stored<attn::half::FiniteRaw>;
  constexpr int RV = RawReader::kVectors;
  got.assign(RV * W, 0.0f);
  std::vector<float> single(W);
  for (std::size_t i = 0; i + RV * W <= raw.size(); i += RV * W) {
    attn::simd::vfloat v[RV];
    RawReader::load_chunk(raw.data() + i, v);
    for (int k = 0; k < RV; ++k) attn::simd::store(got.data() + k * W, v[k]);
    for (int j = 0; j < RV * W; ++j) {
      const auto h = static_cast<std::uint16_t>(raw[i + j]);
      INFO("half 0x" << std::hex << h);
      REQUIRE(std::ldexp(double(got[j]), 112) == half_value(h));
      REQUIRE(std::signbit(got[j]) == std::signbit(attn::half::to_float(h)));
      REQUIRE(same_bits(RawReader::one(&raw[i + j]), got[j]));
    }
    for (int k = 0; k < RV; ++k) {
      attn::simd::store(single.data(), RawReader::load(raw.data() + i + k * W));
      for (int j = 0; j < W; ++j) REQUIRE(same_bits(single[j], got[k * W + j]));
    }
  }
  std::vector<attn::bfloat16::Bits> bf16s(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) bf16s[h] = attn::bfloat16::Bits(h);
  constexpr int BV = Stored<attn::bfloat16::Bits>::kVectors;
  got.assign(BV * W, 0.0f);
  for (std::size_t i = 0; i + BV * W <= bf16s.size(); i += BV * W) {
    attn::simd::vfloat v[BV];
    Stored<attn::bfloat16::Bits>::load_chunk(bf16s.data() + i, v);
    for (int k = 0; k < BV; ++k) attn::simd::store(got.data() + k * W, v[k]);
    for (int j = 0; j < BV * W; ++j) {
      const float want = attn::bfloat16::to_float(bf16s[i + j]);
      INFO("bfloat16 0x" << std::hex << static_cast<unsigned>(bf16s[i + j]));
      REQUIRE(std::memcmp(&got[j], &want, 4) == 0);  // bit for bit, NaN payloads too
    }
  }
  std::vector<std::int8_t> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::int8_t(b - 128);
  constexpr int IV = Stored<std::int8_t>::kVectors;
  got.assign(IV * W, 0.0f);
  for (std::size_t i = 0; i + IV * W <= bytes.size(); i += IV * W) {
    attn::simd::vfloat v[IV];
    Stored<std::int8_t>::load_chunk(bytes.data() + i, v);
    for (int k = 0; k < IV; ++k) attn::simd::store(got.data() + k * W, v[k]);
    for (int j = 0; j < IV * W; ++j) REQUIRE(got[j] == float(bytes[i + j]));
  }
}

TEST_CASE("int4's readers: every nibble of every lane, one value, a row, a block as int16", "[kv]") {
  // Value 8k + l of a block is nibble k of its 16-bit lane l (little-endian bytes 2l, 2l + 1),
  // two's complement; the block's scale follows the row's blocks.
  std::mt19937 rng(5);
  const int n = 70, blocks = 3;  // a partial last block
  std::vector<std::uint8_t> row(attn::kv::int4_row_bytes(n));
  REQUIRE(row.size() == std::size_t(blocks) * 18);
  for (auto& b : row) b = std::uint8_t(rng());
  const float scales[blocks] = {0.5f, -3.0f, 0x1p-20f};  // bfloat16 exactly; a negative one reads as stored
  for (int b = 0; b < blocks; ++b) {
    const auto bits = static_cast<std::uint16_t>(attn::bfloat16::from_float(scales[b]));
    row[16 * blocks + 2 * b] = std::uint8_t(bits & 0xff);
    row[16 * blocks + 2 * b + 1] = std::uint8_t(bits >> 8);
  }
  const auto* r = reinterpret_cast<const attn::kv::Int4*>(row.data());
  std::vector<float> all(n);
  attn::kv::int4_to_floats(r, n, all.data());
  for (int e = 0; e < n; ++e) {
    const int b = e / 32, i = e % 32, lane = row[16 * b + 2 * (i % 8)] | (row[16 * b + 2 * (i % 8) + 1] << 8);
    const int nibble = (lane >> (4 * (i / 8))) & 15, q = nibble >= 8 ? nibble - 16 : nibble;
    INFO("element " << e);
    REQUIRE(attn::kv::int4_value(r, e) == q);
    REQUIRE(attn::kv::int4_one(r, n, e) == float(q) * scales[b]);
    REQUIRE(all[e] == float(q) * scales[b]);
  }
#if !defined(ATTN_SCALAR)
  // Every byte value in every position of a block: the SIMD decoder equals the one-value reader.
  for (int trial = 0; trial < 256; ++trial) {
    std::uint8_t block[16];
    for (int i = 0; i < 16; ++i) block[i] = std::uint8_t(trial + 37 * i);
    __m128i e[4];
    attn::kv::int4_block(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)), e);
    alignas(16) std::int16_t got[32];
    for (int k = 0; k < 4; ++k) _mm_store_si128(reinterpret_cast<__m128i*>(got + 8 * k), e[k]);
    for (int i = 0; i < 32; ++i)
      REQUIRE(got[i] == attn::kv::int4_value(reinterpret_cast<const attn::kv::Int4*>(block), i));
  }
#endif
}

TEST_CASE("float16, bfloat16, int8 and int4 keys and values", "[kv]") {
  const auto type = GENERATE(attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const int dim = GENERATE(1, 3, 4, 16, 31, 32, 33, 64, 65, 128);
  Case c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = 19;
  c.seq_k = 150;
  c.head_dim = dim;
  c.value_dim = dim == 64 ? 40 : dim == 33 ? 31 : dim;  // K and V dims that differ (int4: in blocks 2 and 1)
  c.kv_type = type;
  c.causal = dim % 2 == 0;
  c.weights = true;
  c.lse = true;
  check_case(c);
  c.heads = c.kv_heads;  // few-rows path
  c.seq_q = 2;
  check_case(c);
  c.weights_only = true;
  check_case(c);
}

TEST_CASE("int8 keys past the integer dot product's length, and tiny queries, stay exact in float", "[kv]") {
  // The few-rows path's int8 dot products run in integers up to kv::kMaxInt8Dot elements with
  // queries of max |q| ≥ 2^-100; beyond either it converts the keys to float.
  Case c;
  c.heads = c.kv_heads = 2;
  c.seq_q = 1;
  c.seq_k = 37;
  c.head_dim = attn::kv::kMaxInt8Dot + 9;
  c.value_dim = 5;
  c.kv_type = attn::KvType::i8;
  check_case(c);
  c.head_dim = 24;
  c.input_scale = 0x1p-105f;  // q and k: max |q| < 2^-100
  check_case(c);
}

// A decode (one position) or speculative (four, causal) step of 4 query heads over 2 kv heads of an
// int8 or int4 cache, for the integer paths' edge cases below.
namespace {
Case integer_step(attn::KvType type, int seq_q, int seq_k, int head_dim, int value_dim) {
  Case c;
  c.heads = 4;
  c.kv_heads = 2;
  c.seq_q = seq_q;
  c.seq_k = seq_k;
  c.head_dim = head_dim;
  c.value_dim = value_dim;
  c.kv_type = type;
  c.causal = seq_q > 1;
  return c;
}
}  // namespace

TEST_CASE("int8 and int4 keys and values with negative scales: the signs moved to the scales read the same", "[kv]") {
  // x = scale · q: a caller of the C++ API may store −q with −scale. The integer paths quantise
  // the probabilities times the values' scales by their magnitude, so the result is the same.
  const auto type = GENERATE(attn::KvType::i8, attn::KvType::i4);
  const Case c = integer_step(type, GENERATE(1, 4), 77, 40, 70);
  tcase::Run r = tcase::make_run(c);
  if (type == attn::KvType::i8) {
    for (auto& q : r.k8) q = static_cast<std::int8_t>(-q);
    for (auto& q : r.v8) q = static_cast<std::int8_t>(-q);
    for (float& s : r.kscale) s = -s;
    for (float& s : r.vscale) s = -s;
  } else {
    const auto negate = [](std::vector<std::int8_t>& bytes, int dim) {
      const int blocks = attn::kv::int4_blocks(dim), row = int(attn::kv::int4_row_bytes(dim));
      REQUIRE(bytes.size() % row == 0);
      for (std::size_t at = 0; at < bytes.size(); at += row) {
        auto* b = reinterpret_cast<std::uint8_t*>(bytes.data() + at);
        for (int i = 0; i < 16 * blocks; ++i)  // each nibble q → −q (q ∈ [−7, 7])
          b[i] = std::uint8_t((((-(b[i] & 15)) & 15)) | (((-(b[i] >> 4)) & 15) << 4));
        for (int k = 0; k < blocks; ++k) b[16 * blocks + 2 * k + 1] ^= 0x80;  // the scale's sign
      }
    };
    negate(r.k8, c.head_dim);
    negate(r.v8, c.value_dim);
  }
  tcase::check_run(c, r);
}

TEST_CASE("int4 keys at the ends of their nibbles (-8 and 7) against queries of one magnitude", "[kv]") {
  // The largest sums the integer Q·Kᵀ forms (few_rows_int.h): every query element ±max (±127 as int8 in relaxed-SIMD
  // builds, ±32767 as int16) against nibbles −8 (the C++ API may store them; append writes [−7, 7]) and 7.
  const Case c = integer_step(attn::KvType::i4, GENERATE(1, 4), 70, GENERATE(32, 100), 40);
  tcase::Run r = tcase::make_run(c);
  std::mt19937 rng(5);
  const int n = c.head_dim, row = int(attn::kv::int4_row_bytes(n));
  for (int h = 0; h < c.kv_heads; ++h)
    for (int j = 0; j < c.seq_k; ++j) {
      auto* bytes = reinterpret_cast<std::uint8_t*>(r.k8.data() + std::ptrdiff_t(h * c.seq_k + j) * row);
      for (int e = 0; e < n; ++e) {
        const int i = e % 32, byte = 16 * (e / 32) + 2 * (i % 8) + i / 16, shift = 4 * ((i / 8) % 2);
        bytes[byte] = std::uint8_t((bytes[byte] & ~(0xf << shift)) | ((rng() % 2 ? 0x8 : 0x7) << shift));
      }
      const auto* k = reinterpret_cast<const attn::kv::Int4*>(bytes);
      for (int e = 0; e < n; ++e) r.k_seen[std::size_t(h * c.seq_k + j) * n + e] = attn::kv::int4_one(k, n, e);
    }
  for (float& q : r.q) q = q < 0.0f ? -0.75f : 0.75f;
  tcase::check_run(c, r);
}

TEST_CASE("int8 and int4 values with tiny scales take the float path: the outputs scaled by 2^-115", "[kv]") {
  // Products p · scale below kP16Max · FLT_MIN would give the int16 quantisation a subnormal (or
  // zero) scale and an infinite inverse (0 · ∞: NaN); the float path takes them.
  const auto type = GENERATE(attn::KvType::i8, attn::KvType::i4);
  const Case c = integer_step(type, GENERATE(1, 4), 45, 16, 40);
  tcase::Run r = tcase::make_run(c);
  if (type == attn::KvType::i8) {
    for (float& s : r.vscale) s = std::ldexp(s, -115);
  } else {
    const int blocks = attn::kv::int4_blocks(c.value_dim), row = int(attn::kv::int4_row_bytes(c.value_dim));
    for (std::size_t at = 0; at < r.v8.size(); at += row)
      for (int k = 0; k < blocks; ++k) {
        auto* bits = reinterpret_cast<std::uint8_t*>(r.v8.data() + at + 16 * blocks + 2 * k);
        std::uint16_t b = std::uint16_t(bits[0] | (bits[1] << 8));
        if ((b & 0x7fff) != 0) b = std::uint16_t(b - (115 << 7));  // the exponent, 115 lower
        bits[0] = std::uint8_t(b & 0xff);
        bits[1] = std::uint8_t(b >> 8);
      }
  }
  REQUIRE(attn::attention(r.p) == nullptr);
  for (float& x : r.out) x = std::ldexp(x, 115);
  const std::vector<double> want = tcase::reference(c, r, nullptr, nullptr);
  tcase::expect_close(tcase::gather(r.out, r.p.o, c.batch, c.heads, c.seq_q, c.value_dim), want, c.tolerance, "out");
}

TEST_CASE("stored keys and values with every variant", "[kv]") {
  const auto type =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  Case c;
  c.heads = 6;
  c.kv_heads = 3;
  c.seq_q = 30;
  c.seq_k = 100;
  c.head_dim = 12;
  c.kv_type = type;
  c.causal = true;
  c.window_left = 40;
  c.softcap = 20.0f;
  c.alibi = 1;
  c.sinks = true;
  c.mask = Mask::additive;
  c.key_padding = true;
  c.bshd = true;
  c.tolerance = 3e-5;
  check_case(c);
  c.seq_q = 1;
  check_case(c);
}

TEST_CASE("ring buffers: exact sliding-window attention over wrapped slots", "[kv]") {
  const auto type =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const int window = GENERATE(1, 5, 64, 100);
  const int seq_q = GENERATE(1, 3, 40);
  for (int seq_k : {seq_q, window + 7, 3 * window + seq_q + 1, 300}) {
    if (seq_k < seq_q) continue;
    Case c;
    c.heads = 4;
    c.kv_heads = 2;
    c.seq_q = seq_q;
    c.seq_k = seq_k;
    c.head_dim = 8;
    c.kv_type = type;
    c.ring = window - 1 + seq_q;  // the slots an append of seq_q positions needs
    c.causal = true;
    c.window_left = window - 1;
    c.window_right = 0;
    c.alibi = 2;
    c.batch = 2;
    c.weights = true;
    c.lse = true;
    check_case(c);
  }
}

TEST_CASE("a ring drops what it no longer holds, even without a window", "[kv]") {
  Case c;
  c.heads = 2;
  c.kv_heads = 1;
  c.seq_q = 4;
  c.seq_k = 90;
  c.head_dim = 5;
  c.ring = 30;  // positions 60..89 are held; the reference masks the rest
  c.weights = true;
  check_case(c);
  c.causal = true;
  check_case(c);
}
