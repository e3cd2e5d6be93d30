// The KV cache (kv_cache.h): each dtype against the double-precision reference on the
// unquantised keys and values (float32 element-wise; float16, bfloat16, int8 and int4 by
// normalised mean squared error on normal data), int4's quantisation (rounding, extremes, blocks
// of zeros, partial blocks) and its refusal of ±∞ and NaN, chunked appends equal one append,
// truncate, reset, rings (wrap-around, exact sliding-window attention equal to a linear cache),
// GQA, both input layouts, errors that leave the cache as it was, sizes too large for one block or
// for size_t.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cache/cache_rule.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"
#include "kernel/half.h"
#include "kernel/kv_storage.h"
#include "reference.h"

namespace {

struct Data {
  int batch, kv_heads, heads, seq, head_dim, value_dim;
  std::vector<float> q, k, v;  // q [b, heads, seq, d]; k, v [b, kvh, seq, dim] ("bhsd")
};

Data make_data(int batch, int heads, int kv_heads, int seq, int head_dim, int value_dim, std::uint32_t seed) {
  Data d{batch, kv_heads, heads, seq, head_dim, value_dim, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  auto fill = [&](std::vector<float>& x, std::size_t n) {
    x.resize(n);
    for (auto& e : x) e = normal(rng);
  };
  fill(d.q, std::size_t(batch) * heads * seq * head_dim);
  fill(d.k, std::size_t(batch) * kv_heads * seq * head_dim);
  fill(d.v, std::size_t(batch) * kv_heads * seq * value_dim);
  return d;
}

attn::KvCacheConfig config_for(const Data& d, attn::KvType dtype, int max_seq, int window = 0) {
  attn::KvCacheConfig c;
  c.batch = d.batch;
  c.kv_heads = d.kv_heads;
  c.head_dim = d.head_dim;
  c.value_dim = d.value_dim;
  c.max_seq = max_seq;
  c.dtype = dtype;
  c.window = window;
  return c;
}

// Appends positions [from, from + n) of d (bhsd), or as bshd copies when `bshd`.
void append(attn::KvCache& cache, const Data& d, int from, int n, bool bshd = false) {
  std::vector<float> k, v;
  attn::Strides ks, vs;
  if (bshd) {
    k.resize(std::size_t(d.batch) * n * d.kv_heads * d.head_dim);
    v.resize(std::size_t(d.batch) * n * d.kv_heads * d.value_dim);
    ks = attn::dense_bshd(d.kv_heads, n, d.head_dim);
    vs = attn::dense_bshd(d.kv_heads, n, d.value_dim);
    for (int b = 0; b < d.batch; ++b)
      for (int h = 0; h < d.kv_heads; ++h)
        for (int t = 0; t < n; ++t) {
          for (int c = 0; c < d.head_dim; ++c)
            k[b * ks.batch + h * ks.head + t * ks.row + c] =
                d.k[((std::size_t(b) * d.kv_heads + h) * d.seq + from + t) * d.head_dim + c];
          for (int c = 0; c < d.value_dim; ++c)
            v[b * vs.batch + h * vs.head + t * vs.row + c] =
                d.v[((std::size_t(b) * d.kv_heads + h) * d.seq + from + t) * d.value_dim + c];
        }
    REQUIRE(cache.append(k.data(), ks, v.data(), vs, n) == nullptr);
    return;
  }
  const attn::Strides kd = attn::dense_bhsd(d.kv_heads, d.seq, d.head_dim),
                      vd = attn::dense_bhsd(d.kv_heads, d.seq, d.value_dim);
  REQUIRE(cache.append(d.k.data() + from * kd.row, kd, d.v.data() + from * vd.row, vd, n) == nullptr);
}

// Attention for the queries at positions [end − seq_q, end) of d (end: d.seq by default) over the
// cache, through resolve(); p brings the variants (causal, window, …).
std::vector<float> attend(const attn::KvCache& cache, const Data& d, int seq_q, attn::AttentionParams p = {},
                          int end = -1) {
  if (end < 0) end = d.seq;
  std::vector<float> out(std::size_t(d.batch) * d.heads * seq_q * d.value_dim, NAN);
  attn::CacheCall call;
  call.heads = d.heads;
  call.seq_q = seq_q;
  call.causal = p.causal;
  call.window_left = p.window_left;
  call.window_right = p.window_right;
  const attn::CacheCheck check = attn::resolve(call, cache, p);
  INFO("conflict " << int(check.conflict));
  REQUIRE(check.ok());
  p.heads = d.heads;
  p.q = attn::dense_bhsd(d.heads, d.seq, d.head_dim);  // rows of the full q, offset below
  p.query = d.q.data() + (end - seq_q) * p.q.row;
  p.out = out.data();
  p.o = attn::dense_bhsd(d.heads, seq_q, d.value_dim);
  p.scale = 1.0f / std::sqrt(float(d.head_dim));
  const char* err = attn::attention(p);
  INFO((err ? err : ""));
  REQUIRE(err == nullptr);
  return out;
}

// The double reference on the unquantised data, causal over positions [0, seq).
std::vector<double> reference(const Data& d, int seq_q, int window = 0) {
  attn::AttentionParams p;
  p.batch = d.batch;
  p.heads = d.heads;
  p.kv_heads = d.kv_heads;
  p.seq_q = seq_q;
  p.seq_k = d.seq;
  p.head_dim = d.head_dim;
  p.value_dim = d.value_dim;
  p.q = attn::dense_bhsd(d.heads, d.seq, d.head_dim);
  p.k = attn::dense_bhsd(d.kv_heads, d.seq, d.head_dim);
  p.v = attn::dense_bhsd(d.kv_heads, d.seq, d.value_dim);
  p.scale = 1.0f / std::sqrt(float(d.head_dim));
  p.causal = true;
  if (window) {
    p.window_left = window - 1;
    p.window_right = 0;
  }
  return ref::attention(p, d.q.data() + (d.seq - seq_q) * p.q.row, d.k.data(), d.v.data());
}

double nmse(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return err / norm;
}

}  // namespace

// NMSE bounds per dtype on normal data (measured below them: see docs/api.md's table).
double nmse_bound(attn::KvType t) {
  switch (t) {
    case attn::KvType::i4: return 3e-2;
    case attn::KvType::i8: return 1e-4;
    case attn::KvType::bf16: return 2e-5;
    case attn::KvType::f16: return 1e-6;
    default: return 1e-10;
  }
}

TEST_CASE("each dtype against the reference on the unquantised keys and values", "[cache]") {
  const auto dtype =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const auto dims = GENERATE(std::pair{64, 64}, std::pair{128, 96}, std::pair{13, 7});
  const Data d = make_data(2, 8, 2, 150, dims.first, dims.second, 7);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, dtype, 200)) == nullptr);
  append(cache, d, 0, d.seq);
  attn::AttentionParams causal;
  causal.causal = true;
  for (int seq_q : {1, 20}) {  // a decode step (few-rows path) and a prefill block
    const auto got = attend(cache, d, seq_q, causal);
    const auto want = reference(d, seq_q);
    const double e = nmse(got, want);
    INFO("dtype " << int(dtype) << " dims " << dims.first << "/" << dims.second << " seq_q " << seq_q << " nmse " << e);
    if (dtype == attn::KvType::f32) {
      for (std::size_t i = 0; i < got.size(); ++i)
        REQUIRE(std::abs(got[i] - want[i]) <= 2e-5 + 1e-4 * std::abs(want[i]));
    }
    CHECK(e <= nmse_bound(dtype));
  }
}

TEST_CASE("bytes: int4 < int8 < float16 = bfloat16 < float32, int8 at most 0.27 of float32, int4 0.15", "[cache]") {
  const Data d = make_data(1, 4, 4, 1, 128, 128, 1);
  attn::KvCache f32, f16, bf16, i8, i4;
  REQUIRE(f32.allocate(config_for(d, attn::KvType::f32, 100)) == nullptr);
  REQUIRE(f16.allocate(config_for(d, attn::KvType::f16, 100)) == nullptr);
  REQUIRE(bf16.allocate(config_for(d, attn::KvType::bf16, 100)) == nullptr);
  REQUIRE(i8.allocate(config_for(d, attn::KvType::i8, 100)) == nullptr);
  REQUIRE(i4.allocate(config_for(d, attn::KvType::i4, 100)) == nullptr);
  CHECK(f32.bytes() == std::size_t(100) * 4 * 128 * 2 * 4);
  CHECK(f16.bytes() * 2 == f32.bytes());
  CHECK(bf16.bytes() * 2 == f32.bytes());
  CHECK(double(i8.bytes()) <= 0.27 * f32.bytes());
  CHECK(i4.bytes() == std::size_t(100) * 4 * 2 * (4 * 16 + 4 * 2));  // 4 blocks of 16 bytes and their scales a row
  CHECK(double(i4.bytes()) <= 0.15 * f32.bytes());
}

TEST_CASE("cache_bytes, known before allocating, is what the cache holds: total and largest buffer", "[cache]") {
  const auto dtype =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const int window = GENERATE(0, 5);
  const Data d = make_data(3, 4, 2, 1, 12, 7, 1);
  const attn::KvCacheConfig c = config_for(d, dtype, 9, window);
  const attn::KvCacheBytes want = attn::cache_bytes(c);
  attn::KvCache cache;
  REQUIRE(cache.allocate(c) == nullptr);
  INFO("dtype " << int(dtype) << " window " << window);
  CHECK(want.total() == double(cache.bytes()));
  const double element = dtype == attn::KvType::f32 ? 4 : dtype == attn::KvType::i8 ? 1 : 2;
  const double key_row = dtype == attn::KvType::i4 ? 18 : 12 * element;  // int4: one block of 12 values
  CHECK(want.largest() == 3 * 9 * 2 * key_row);  // the keys (int4: as many bytes as the values')
  CHECK(want.scales == (dtype == attn::KvType::i8 ? 3 * 9 * 2 * 4 : 0));
  // Sizes past size_t's range in wasm32 (and far past any memory) are counted, not wrapped.
  attn::KvCacheConfig huge = c;
  huge.batch = huge.max_seq = huge.kv_heads = huge.head_dim = std::numeric_limits<int>::max();
  CHECK(attn::cache_bytes(huge).total() > 1e37);
}

TEST_CASE("room() is what an append can add: appends of room() fit, room() + 1 do not", "[cache]") {
  const int window = GENERATE(0, 1, 4);
  const Data d = make_data(1, 2, 1, 40, 4, 4, 5);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, attn::KvType::f32, 7, window)) == nullptr);
  const attn::Strides kd = attn::dense_bhsd(1, 40, 4);
  for (int length = 0; length < (window ? 30 : 7);) {
    const int room = cache.room();
    INFO("window " << window << " length " << length << " room " << room);
    CHECK(room == 7 - (window ? std::min(length, window - 1) : length));
    CHECK(cache.has_room(room));
    CHECK_FALSE(cache.has_room(room + 1));
    CHECK(cache.append(d.k.data(), kd, d.v.data(), kd, room + 1) != nullptr);
    const int n = std::min(room, 3);
    append(cache, d, length % 20, n);
    length += n;
    CHECK(cache.length() == length);
  }
}

TEST_CASE("a one-position float16 or bfloat16 cache returns exactly the stored value", "[cache]") {
  const auto dtype = GENERATE(attn::KvType::f16, attn::KvType::bf16);
  const Data d = make_data(1, 2, 1, 1, 8, 8, 3);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, dtype, 4)) == nullptr);
  append(cache, d, 0, 1);
  const auto out = attend(cache, d, 1);
  const auto stored = [dtype](float x) {
    return dtype == attn::KvType::f16 ? attn::half::to_float(attn::half::from_float(x))
                                      : attn::bfloat16::to_float(attn::bfloat16::from_float(x));
  };
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 8; ++c) {
      CHECK(out[h * 8 + c] == stored(d.v[c]));
      CHECK(stored(d.v[c]) != d.v[c]);  // the value was rounded (normal data: never exact in 16 bits)
    }
}

TEST_CASE("a float16 cache that stored ±∞ or NaN reads them as such, on both paths", "[cache]") {
  // The cache promises the kernel finite float16 (AttentionParams::kv_finite, read without the
  // exponent-31 case) only while no append stored ±∞ or NaN: the last position's values are ±∞
  // and NaN, so the last query row, which sees every position, gets them.
  Data d = make_data(1, 4, 2, 40, 16, 16, 21);
  for (int h = 0; h < d.kv_heads; ++h) {
    float* v = d.v.data() + (std::size_t(h) * d.seq + d.seq - 1) * d.value_dim;
    v[0] = INFINITY;
    v[1] = -INFINITY;
    v[2] = NAN;
  }
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, attn::KvType::f16, d.seq)) == nullptr);
  append(cache, d, 0, d.seq - 1);
  attn::AttentionParams causal;
  causal.causal = true;
  for (float x : attend(cache, d, 1, causal, d.seq - 1)) CHECK(std::isfinite(x));
  append(cache, d, d.seq - 1, 1);
  const auto check_last_row = [&](const std::vector<float>& out, int seq_q) {
    for (int h = 0; h < d.heads; ++h) {
      const float* o = out.data() + (std::size_t(h) * seq_q + seq_q - 1) * d.value_dim;
      INFO("head " << h << ", seq_q " << seq_q);
      CHECK(o[0] == INFINITY);
      CHECK(o[1] == -INFINITY);
      CHECK(std::isnan(o[2]));
      for (int c = 3; c < d.value_dim; ++c) CHECK(std::isfinite(o[c]));
    }
  };
  check_last_row(attend(cache, d, 1, causal), 1);            // one row per kv head group: direct
  check_last_row(attend(cache, d, d.seq, causal), d.seq);    // 80 rows per kv head: blocked
}

TEST_CASE("chunked appends (5, 1, 1, 3) equal one append, bit for bit, either input layout", "[cache]") {
  const auto dtype =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const Data d = make_data(2, 6, 3, 10, 16, 12, 11);
  attn::KvCache whole, chunks;
  REQUIRE(whole.allocate(config_for(d, dtype, 12)) == nullptr);
  REQUIRE(chunks.allocate(config_for(d, dtype, 12)) == nullptr);
  append(whole, d, 0, 10);
  int at = 0;
  for (int n : {5, 1, 1, 3}) {
    append(chunks, d, at, n, n == 1);
    at += n;
  }
  REQUIRE(chunks.length() == 10);
  CHECK(attend(whole, d, 3) == attend(chunks, d, 3));
  CHECK(attend(whole, d, 1) == attend(chunks, d, 1));
}

TEST_CASE("truncate then append, and reset", "[cache]") {
  const auto dtype = GENERATE(attn::KvType::i8, attn::KvType::i4);
  const Data d = make_data(1, 4, 2, 12, 8, 8, 5);
  attn::KvCache a, b;
  REQUIRE(a.allocate(config_for(d, dtype, 12)) == nullptr);
  REQUIRE(b.allocate(config_for(d, dtype, 12)) == nullptr);
  append(a, d, 0, 12);
  REQUIRE(a.truncate(7) == nullptr);
  CHECK(a.length() == 7);
  append(a, d, 7, 5);
  append(b, d, 0, 12);
  CHECK(attend(a, d, 2) == attend(b, d, 2));
  CHECK(a.truncate(13) != nullptr);
  CHECK(a.truncate(-1) != nullptr);
  a.reset();
  CHECK(a.length() == 0);
  append(a, d, 0, 12);
  CHECK(attend(a, d, 2) == attend(b, d, 2));
}

TEST_CASE("a full cache refuses an append and stays as it was", "[cache]") {
  const Data d = make_data(1, 2, 2, 8, 4, 4, 9);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, attn::KvType::f32, 6)) == nullptr);
  append(cache, d, 0, 5);
  const auto before = attend(cache, d, 1);  // (queries are position 7: only their values matter here)
  const attn::Strides kd = attn::dense_bhsd(2, 8, 4);
  CHECK(cache.append(d.k.data(), kd, d.v.data(), kd, 2) != nullptr);
  CHECK(cache.length() == 5);
  CHECK(attend(cache, d, 1) == before);
  append(cache, d, 5, 1);  // exactly full
  CHECK(cache.length() == 6);
}

TEST_CASE("rings: exact sliding-window attention over wrapped slots, equal to a linear cache", "[cache]") {
  const auto dtype =
      GENERATE(attn::KvType::f32, attn::KvType::f16, attn::KvType::bf16, attn::KvType::i8, attn::KvType::i4);
  const int window = GENERATE(1, 4, 9, 64);
  const Data d = make_data(2, 4, 2, 150, 8, 6, 13);
  attn::KvCache ring, linear;
  const int chunk = 3;
  REQUIRE(ring.allocate(config_for(d, dtype, window - 1 + chunk, window)) == nullptr);
  REQUIRE(linear.allocate(config_for(d, dtype, d.seq)) == nullptr);
  attn::AttentionParams windowed;
  windowed.causal = true;
  windowed.window_left = window - 1;
  windowed.window_right = 0;
  for (int at = 0; at < d.seq; at += chunk) {
    const int n = std::min(chunk, d.seq - at);
    append(ring, d, at, n);
    append(linear, d, at, n);
    const int seq_q = n;  // the queries are the positions just appended
    INFO("window " << window << " length " << at + n);
    REQUIRE(attend(ring, d, seq_q, windowed, at + n) == attend(linear, d, seq_q, windowed, at + n));
  }
  CHECK(ring.length() == d.seq);
  CHECK(ring.held() == window - 1 + chunk);
  // Against the reference (unquantised) for the last step.
  if (dtype == attn::KvType::f32) {
    const auto got = attend(ring, d, 1, windowed);
    const auto want = reference(d, 1, window);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 2e-5 + 1e-4 * std::abs(want[i]));
  }
}

TEST_CASE("a ring refuses appends and truncations that would lose the window", "[cache]") {
  const Data d = make_data(1, 2, 1, 40, 4, 4, 17);
  attn::KvCache ring;
  REQUIRE(ring.allocate(config_for(d, attn::KvType::f32, 6, 4)) == nullptr);  // window 4, 6 slots
  append(ring, d, 0, 6);  // min(0 + 6, 3 + 6) = 6 slots: fits at the start
  const attn::Strides kd = attn::dense_bhsd(1, 40, 4);
  CHECK(ring.append(d.k.data(), kd, d.v.data(), kd, 4) != nullptr);  // needs 3 + 4 = 7 slots
  CHECK(ring.length() == 6);
  for (int t = 6; t < 30; ++t) append(ring, d, t, 1);  // a decode step always fits
  CHECK(ring.held() == 6);
  CHECK(ring.first_held() == 24);
  CHECK(ring.first_held(2) == 26);  // two more would overwrite 24 and 25
  CHECK(ring.truncate(29) == nullptr);       // the 3 positions before 29 (26..28) are held
  CHECK(ring.truncate(26) != nullptr);       // would need 23..25, and 23 was overwritten
  CHECK(ring.length() == 29);
  append(ring, d, 29, 1);
  CHECK(ring.truncate(0) == nullptr);
  CHECK(ring.length() == 0);
}

TEST_CASE("validate rejects unusable cache configs", "[cache]") {
  attn::KvCacheConfig c;
  CHECK(attn::validate(c) == nullptr);
  c.window = 5;
  c.max_seq = 4;
  CHECK(attn::validate(c) != nullptr);
  c.window = -1;
  CHECK(attn::validate(c) != nullptr);
  c.window = 0;
  c.kv_heads = 0;
  CHECK(attn::validate(c) != nullptr);
  c.kv_heads = 1;
  c.dtype = static_cast<attn::KvType>(9);
  CHECK(attn::validate(c) != nullptr);
  attn::KvCache cache;
  CHECK(cache.allocate(c) != nullptr);
  CHECK_FALSE(cache.allocated());
}

TEST_CASE("a cache too large for one block, or whose bytes overflow size_t, is refused and changes nothing",
          "[cache]") {
  const Data d = make_data(1, 2, 2, 8, 4, 4, 21);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, attn::KvType::f32, 8)) == nullptr);
  append(cache, d, 0, 3);
  const auto before = attend(cache, d, 1);

  // Keys of kMaxBlockBytes + 1 bytes (2^31 in wasm32, 2^63 natively): float32, head_dim 1, the
  // rows split into factors that fit an int.
  attn::KvCacheConfig c;
  const std::size_t rows = (attn::kMaxBlockBytes + 1) / 4;
  c.batch = static_cast<int>(std::min<std::size_t>(rows, 1u << 30));
  c.max_seq = static_cast<int>(std::min<std::size_t>(rows / c.batch, 1u << 30));
  c.kv_heads = static_cast<int>(rows / c.batch / c.max_seq);
  REQUIRE(static_cast<std::size_t>(c.batch) * c.max_seq * c.kv_heads == rows);
  CHECK(std::string(cache.allocate(c)) == "kv cache: out of memory");
  CHECK(attn::g_last_failed_allocation == attn::kMaxBlockBytes + 1);

  // Every size at INT_MAX: the byte count overflows size_t (before: it wrapped, and a small
  // buffer was taken for a huge cache).
  const int most = std::numeric_limits<int>::max();
  c.batch = c.max_seq = c.kv_heads = c.head_dim = c.value_dim = most;
  CHECK(std::string(cache.allocate(c)) == "kv cache: out of memory");
  CHECK(attn::g_last_failed_allocation == std::numeric_limits<std::size_t>::max());

  CHECK(cache.length() == 3);
  CHECK(cache.config().max_seq == 8);
  CHECK(attend(cache, d, 1) == before);
}

TEST_CASE("a float16 cache refuses a finite value it would store as infinity, and appends nothing", "[cache]") {
  // The threshold is the converter's own rounding boundary.
  CHECK(attn::half::from_float(attn::kF16Overflow) == 0x7c00);
  CHECK(attn::half::from_float(std::nextafter(attn::kF16Overflow, 0.0f)) == 0x7bff);  // 65504
  CHECK(attn::half::from_float(-attn::kF16Overflow) == 0xfc00);
  const Data d = make_data(2, 2, 2, 6, 4, 3, 31);
  for (const int window : {0, 4}) {
    attn::KvCache cache;
    REQUIRE(cache.allocate(config_for(d, attn::KvType::f16, 5, window)) == nullptr);
    append(cache, d, 0, 4);
    attn::AttentionParams local;  // what a ring of window 4 serves
    local.window_left = 3;
    const auto before = attend(cache, d, 1, local, 4);
    const attn::Strides kd = attn::dense_bhsd(2, 6, 4), vd = attn::dense_bhsd(2, 6, 3);
    std::vector<float> k(d.k), v(d.v);
    v[(std::size_t(1) * 2 + 1) * 6 * 3 + 4 * 3 + 2] = -1e5f;  // value: batch 1, head 1, position 4, element 2
    const char* err = cache.append(k.data() + 4 * kd.row, kd, v.data() + 4 * vd.row, vd, 1);
    CHECK(err == attn::kF16OverflowError);  // the JS boundary tells it by its address
    CHECK(std::string(err) == "kv cache: a finite value is beyond float16's range (it would be stored as infinity)");
    const attn::RefusedValue& o = cache.refused();
    CHECK_FALSE(o.key);
    CHECK((o.batch == 1 && o.head == 1 && o.row == 0 && o.element == 2 && o.value == -1e5f));
    k[3] = 70000.0f;  // key: batch 0, head 0, position 0: not in this append
    k[4 * 4 + 1] = attn::kF16Overflow;  // position 4, element 1
    CHECK(cache.append(k.data() + 4 * kd.row, kd, v.data() + 4 * vd.row, vd, 1) == attn::kF16OverflowError);
    CHECK((cache.refused().key && cache.refused().row == 0 && cache.refused().element == 1));
    CHECK(cache.length() == 4);
    CHECK(attend(cache, d, 1, local, 4) == before);  // nothing written, in a ring nothing overwritten
    // The largest value that rounds to 65504, infinities and NaN are stored as they are.
    k = d.k;
    v = d.v;
    k[4 * 4] = std::nextafter(attn::kF16Overflow, 0.0f);
    v[4 * 3] = std::numeric_limits<float>::infinity();
    v[4 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
    CHECK(cache.append(k.data() + 4 * kd.row, kd, v.data() + 4 * vd.row, vd, 1) == nullptr);
    CHECK(cache.length() == 5);
  }
}

// Beam search: reorder(indices) makes batch entry b what entry indices[b] was. Checked against a
// cache built with the entries already in that order: the same stored bytes, so attention over
// the two is the same bit for bit, before and after more positions are appended; for every dtype
// a cache can hold (kCacheDtypes), linear and a ring that has wrapped, and index patterns that an
// in-place copy in order would get wrong (an entry read after it was overwritten).
TEST_CASE("reorder: entry b becomes entry indices[b], repeats allowed, every dtype, rings too", "[cache]") {
  const auto dtype = GENERATE(from_range(std::begin(attn::kCacheDtypes), std::end(attn::kCacheDtypes)));
  const int window = GENERATE(0, 6);
  const std::vector<std::vector<int>> patterns = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {1, 2, 3, 4, 0},
                                                  {0, 0, 0, 0, 0}, {1, 2, 2, 0, 3}, {3, 3, 1, 1, 4},
                                                  {2, 0, 1, 4, 4}, {4, 4, 4, 4, 3}, {1, 0, 3, 2, 2}};
  const int batch = 5, length = 31, more = 4;
  const int max_seq = window ? window - 1 + more : length + more;
  const Data d = make_data(batch, 4, 2, length + more, 12, 5, 41);
  for (const std::vector<int>& indices : patterns) {
    INFO("dtype " << int(dtype) << " window " << window << " indices " << indices[0] << indices[1] << indices[2]
                  << indices[3] << indices[4]);
    Data moved = d;  // entry b holds entry indices[b]'s keys and values
    const std::size_t kn = d.k.size() / batch, vn = d.v.size() / batch;
    for (int b = 0; b < batch; ++b) {
      std::copy_n(d.k.begin() + indices[b] * kn, kn, moved.k.begin() + b * kn);
      std::copy_n(d.v.begin() + indices[b] * vn, vn, moved.v.begin() + b * vn);
    }
    attn::KvCache cache, want;
    REQUIRE(cache.allocate(config_for(d, dtype, max_seq, window)) == nullptr);
    REQUIRE(want.allocate(config_for(d, dtype, max_seq, window)) == nullptr);
    for (int at = 0; at < length; at += 3) {  // a ring wraps several times
      append(cache, d, at, std::min(3, length - at));
      append(want, moved, at, std::min(3, length - at));
    }
    REQUIRE(cache.reorder(indices.data()) == nullptr);
    CHECK(cache.length() == length);
    attn::AttentionParams seen;  // what a ring of window W serves: the W − 1 positions before
    if (window) seen.window_left = window - 1;
    CHECK(attend(cache, moved, 1, seen, length) == attend(want, moved, 1, seen, length));
    append(cache, moved, length, more);  // decoding goes on in the new order
    append(want, moved, length, more);
    seen.causal = true;
    CHECK(attend(cache, moved, more, seen) == attend(want, moved, more, seen));
  }
}

TEST_CASE("reorder refuses indices outside 0 … batch − 1 and changes nothing", "[cache]") {
  const Data d = make_data(3, 2, 2, 6, 4, 4, 43);
  attn::KvCache cache;
  REQUIRE(cache.allocate(config_for(d, attn::KvType::f32, 8)) == nullptr);
  append(cache, d, 0, 6);
  const auto before = attend(cache, d, 1);
  for (const std::vector<int>& bad : {std::vector<int>{0, 1, 3}, std::vector<int>{-1, 0, 1}}) {
    CHECK(std::string(cache.reorder(bad.data())) == "kv cache: reorder indices must be in [0, batch)");
    CHECK(attend(cache, d, 1) == before);
  }
  CHECK(cache.reorder(nullptr) != nullptr);
  attn::KvCache empty;
  const int identity[3] = {0, 1, 2};
  CHECK(std::string(empty.reorder(identity)) == "kv cache: not allocated");
}

namespace {

// The int4 values and scales a cache holds for position `pos` of kv head 0, batch 0: its keys
// (or values) as q ∈ [−7, 7] and each block's scale, read through describe().
struct Int4Row {
  std::vector<int> q;
  std::vector<float> scale;
};

Int4Row stored_i4(const attn::KvCache& cache, int pos, bool values = false) {
  attn::AttentionParams p;
  cache.describe(p);
  const int n = values ? p.value_dim : p.head_dim;
  const auto* row = static_cast<const attn::kv::Int4*>(values ? p.value : p.key) + pos * (values ? p.v : p.k).row;
  Int4Row r;
  for (int e = 0; e < n; ++e) r.q.push_back(attn::kv::int4_value(row, e));
  for (int b = 0; b < attn::kv::int4_blocks(n); ++b)
    r.scale.push_back(attn::bfloat16::to_float(attn::kv::int4_scales(row, n)[b]));
  return r;
}

// A one-kv-head int4 cache of head_dim n (values: 4 dims), with `key` appended as its one position.
void append_key(attn::KvCache& cache, std::vector<float> key) {
  attn::KvCacheConfig c;
  c.head_dim = static_cast<int>(key.size());
  c.value_dim = 4;
  c.max_seq = 2;
  c.dtype = attn::KvType::i4;
  REQUIRE(cache.allocate(c) == nullptr);
  const std::vector<float> value(4, 7.0f);  // scale 1: stored exactly
  REQUIRE(cache.append(key.data(), attn::dense_bhsd(1, 1, c.head_dim), value.data(), attn::dense_bhsd(1, 1, 4), 1) ==
          nullptr);
}

}  // namespace

TEST_CASE("int4: a scale per block of 32 (max |x| / 7, as bfloat16), values rounded to nearest even in [-7, 7]",
          "[cache]") {
  // Block 0: max |x| = 7, scale 1: the extremes are ±7, ties go to even (2.5 → 2, 3.5 → 4,
  // −0.5 → 0, 6.5 → 6), the rest round to nearest. Block 1: max |x| = 0.7, scale 0.1 rounded to
  // bfloat16 (0.10009765625); its values are quantised with that scale, the largest still 7.
  // Block 2 (5 values, a partial block): zeros, scale 0.
  std::vector<float> key(69, 0.0f);
  const float block0[] = {7.0f, -7.0f, 2.5f, 3.5f, -0.5f, 6.5f, 1.49f, -2.51f, 0.0f, -6.9f};
  std::copy(std::begin(block0), std::end(block0), key.begin());
  for (int e = 32; e < 64; ++e) key[e] = 0.7f * float((e % 15) - 7) / 7.0f;  // −0.7 … 0.7
  attn::KvCache cache;
  append_key(cache, key);
  const Int4Row r = stored_i4(cache, 0);
  REQUIRE(r.scale.size() == 3);
  CHECK(r.scale[0] == 1.0f);
  const int want0[] = {7, -7, 2, 4, 0, 6, 1, -3, 0, -7};
  for (int e = 0; e < 10; ++e) CHECK(r.q[e] == want0[e]);
  for (int e = 10; e < 32; ++e) CHECK(r.q[e] == 0);
  const float s1 = attn::bfloat16::to_float(attn::bfloat16::from_float(0.7f / 7.0f));
  CHECK(r.scale[1] == s1);
  CHECK(s1 != 0.1f);
  for (int e = 32; e < 64; ++e) {
    INFO("element " << e);
    CHECK(r.q[e] == int(std::nearbyint(key[e] / s1)));
    CHECK(std::abs(r.q[e]) <= 7);
  }
  CHECK(r.q[45] == -7);  // (45 % 15) − 7 = −7: the largest magnitude
  CHECK(r.scale[2] == 0.0f);
  for (int e = 64; e < 69; ++e) CHECK(r.q[e] == 0);
}

TEST_CASE("int4: blocks of zeros, values too small for a scale, and the largest floats", "[cache]") {
  std::vector<float> key(96, 0.0f);
  for (int e = 32; e < 64; ++e) key[e] = (e % 2 ? 1.0f : -1.0f) * 1e-40f;  // max / 7 rounds to 0 in bfloat16
  key[64] = std::numeric_limits<float>::max();
  key[65] = -std::numeric_limits<float>::max() / 2;
  key[66] = std::numeric_limits<float>::denorm_min();
  attn::KvCache cache;
  append_key(cache, key);
  const Int4Row r = stored_i4(cache, 0);
  CHECK(r.scale[0] == 0.0f);
  CHECK(r.scale[1] == 0.0f);
  for (int e = 0; e < 64; ++e) CHECK(r.q[e] == 0);
  CHECK(std::isfinite(r.scale[2]));
  CHECK(r.q[64] == 7);
  CHECK(r.q[65] == -4);  // −max/2 ÷ (max/7) = −3.5 → −4 (ties to even)
  CHECK(r.q[66] == 0);
  // Attention over it is finite: a query that sees the huge key once scaled is +∞ at worst, never NaN.
  attn::AttentionParams p;
  attn::CacheCall call;
  REQUIRE(attn::resolve(call, cache, p).ok());
  std::vector<float> q(96, 0.0f), out(4, NAN);
  q[0] = 1.0f;
  p.query = q.data();
  p.q = attn::dense_bhsd(1, 1, 96);
  p.out = out.data();
  p.o = attn::dense_bhsd(1, 1, 4);
  REQUIRE(attn::attention(p) == nullptr);
  for (float x : out) CHECK(x == 7.0f);
}

TEST_CASE("int4 refuses ±∞ and NaN, naming where, and appends nothing", "[cache]") {
  const Data d = make_data(2, 4, 2, 6, 40, 33, 41);
  for (const int window : {0, 4}) {
    attn::KvCache cache;
    REQUIRE(cache.allocate(config_for(d, attn::KvType::i4, 6, window)) == nullptr);
    append(cache, d, 0, 4);
    attn::AttentionParams local;  // what a ring of window 4 serves
    local.window_left = 3;
    const auto before = attend(cache, d, 1, local, 4);
    const attn::Strides kd = attn::dense_bhsd(2, 6, 40), vd = attn::dense_bhsd(2, 6, 33);
    for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> k(d.k), v(d.v);
      v[(std::size_t(1) * 2 + 1) * 6 * 33 + 5 * 33 + 32] = bad;  // value: batch 1, head 1, position 5, element 32
      const char* err = cache.append(k.data() + 4 * kd.row, kd, v.data() + 4 * vd.row, vd, 2);
      CHECK(err == attn::kInt4NotFiniteError);  // the JS boundary tells it by its address
      CHECK(std::string(err) == "kv cache: int4 stores finite values only (a value is infinite or NaN)");
      const attn::RefusedValue& o = cache.refused();
      CHECK_FALSE(o.key);
      CHECK((o.batch == 1 && o.head == 1 && o.row == 1 && o.element == 32));
      CHECK((std::isnan(bad) ? std::isnan(o.value) : o.value == bad));
      k[(std::size_t(0) * 2 + 1) * 6 * 40 + 4 * 40 + 39] = bad;  // key: batch 0, head 1, position 4, element 39
      CHECK(cache.append(k.data() + 4 * kd.row, kd, v.data() + 4 * vd.row, vd, 2) == attn::kInt4NotFiniteError);
      CHECK((cache.refused().key && cache.refused().batch == 0 && cache.refused().head == 1 &&
             cache.refused().row == 0 && cache.refused().element == 39));
      CHECK(cache.length() == 4);
      CHECK(attend(cache, d, 1, local, 4) == before);  // nothing written, in a ring nothing overwritten
    }
    append(cache, d, 4, 1);
    CHECK(cache.length() == 5);
  }
}
