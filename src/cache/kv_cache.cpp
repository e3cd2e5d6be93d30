// The KV cache's storing side: appending converts each [dim] row to the storage type (float16
// and bfloat16 round to nearest even, in SIMD; int8 with a symmetric per-row scale, int4 with
// one per block of 32); reading is the kernel's (kv_storage.h) through describe().
#include "cache/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "kernel/half.h"
#include "kernel/kv_storage.h"
#include "runtime/simd.h"

namespace attn {

namespace {

using simd::vfloat;
using simd::W;

// Returns whether any stored half is ±∞ or NaN (stage() refuses finite values beyond half's range).
bool store_f16(const float* x, int n, std::uint16_t* out) {
  int c = 0;
  for (; c + W <= n; c += W) half::store(out + c, simd::load(x + c));
  ATTN_SCALAR_TAIL for (; c < n; ++c) out[c] = half::from_float(x[c]);
  bool special = false;
  for (c = 0; c < n; ++c) special |= (out[c] & 0x7c00) == 0x7c00;
  return special;
}

void store_bf16(const float* x, int n, bfloat16::Bits* out) {
  int c = 0;
  for (; c + W <= n; c += W) bfloat16::store(out + c, simd::load(x + c));
  ATTN_SCALAR_TAIL for (; c < n; ++c) out[c] = bfloat16::from_float(x[c]);
}

// Bytes of a stored row of dim values.
std::size_t row_bytes(KvType t, int dim) {
  if (t == KvType::i4) return static_cast<std::size_t>(kv::int4_row_bytes(dim));
  return std::size_t(dim) * (t == KvType::f32 ? 4 : t == KvType::i8 ? 1 : 2);
}

// x ≈ scale · q with q = round(x · 127 / max|x|) ∈ [−127, 127] (ties to even). A row of zeros
// (or one with a non-finite value: its scale is then ∞ or NaN, and so is every value read
// back) keeps the information that it was.
float store_i8(const float* x, int n, std::int8_t* out) {
  float m = 0.0f;
  bool finite = true;
  for (int c = 0; c < n; ++c) {
    m = std::max(m, std::fabs(x[c]));
    finite &= std::isfinite(x[c]);
  }
  if (!finite) {
    std::fill(out, out + n, std::int8_t{1});
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (m == 0.0f) {
    std::fill(out, out + n, std::int8_t{0});
    return 0.0f;
  }
  const float inv = 127.0f / m;
  for (int c = 0; c < n; ++c) {
    const float r = std::nearbyint(x[c] * inv);
    out[c] = static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return m / 127.0f;
}

// x ≈ scale · q per block of 32 (kv::Int4's layout): scale = max |x| / 7 rounded to bfloat16,
// q = round(x / scale) (ties to even; |x / scale| ≤ 7 · (1 + 2^-8), so within [−7, 7]). A block
// of zeros, or of values so small that the scale rounds to 0 (max |x| < 3e-40), stores zeros and
// a scale of 0. The values are finite (stage() refuses any other).
void store_i4(const float* x, int n, std::uint8_t* out) {
  const int blocks = kv::int4_blocks(n);
  auto* scales = reinterpret_cast<bfloat16::Bits*>(out + blocks * kv::kInt4BlockBytes);
  for (int b = 0; b < blocks; ++b) {
    const int e0 = b * kv::kInt4Block, e1 = std::min(n, e0 + kv::kInt4Block);
    float m = 0.0f;
    for (int e = e0; e < e1; ++e) m = std::max(m, std::fabs(x[e]));
    bfloat16::Bits bits = bfloat16::from_float(m / 7.0f);
    const float scale = bfloat16::to_float(bits);
    std::uint16_t lanes[8] = {};
    if (scale > 0.0f) {
      for (int e = e0; e < e1; ++e) {
        const int q = static_cast<int>(std::clamp(std::nearbyint(x[e] / scale), -7.0f, 7.0f));
        lanes[(e - e0) % 8] |= static_cast<std::uint16_t>((q & 0xf) << (4 * ((e - e0) / 8)));
      }
    } else {
      bits = bfloat16::Bits{0};
    }
    std::memcpy(&scales[b], &bits, sizeof bits);  // 2-byte aligned only when blocks is
    std::uint8_t* block = out + b * kv::kInt4BlockBytes;
    for (int l = 0; l < 8; ++l) {
      block[2 * l] = static_cast<std::uint8_t>(lanes[l] & 0xff);
      block[2 * l + 1] = static_cast<std::uint8_t>(lanes[l] >> 8);
    }
  }
}

}  // namespace

const char* validate(const KvCacheConfig& c) {
  if (c.batch < 1 || c.kv_heads < 1 || c.head_dim < 1 || c.value_dim < 1 || c.max_seq < 1)
    return "kv cache: batch, kv_heads, head_dim, value_dim and max_seq must be positive";
  if (std::find(std::begin(kCacheDtypes), std::end(kCacheDtypes), c.dtype) == std::end(kCacheDtypes))
    return "kv cache: unknown dtype";
  if (c.window < 0) return "kv cache: window must be 0 (none) or positive";
  if (c.window > 0 && c.max_seq < c.window) return "kv cache: max_seq must be at least the window";
  return nullptr;
}

KvCacheBytes cache_bytes(const KvCacheConfig& c) {
  const double rows = double(c.batch) * c.max_seq * c.kv_heads;
  return {rows * double(row_bytes(c.dtype, c.head_dim)), rows * double(row_bytes(c.dtype, c.value_dim)),
          c.dtype == KvType::i8 ? rows * sizeof(float) : 0.0};
}

const char* KvCache::allocate(const KvCacheConfig& c) {
  if (const char* err = validate(c)) return err;
  // The sizes come straight from the caller and size_t is 32 bits in wasm32: a size past its range
  // becomes SIZE_MAX, which no allocation can satisfy.
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  const auto count = [](double n) { return n < double(kMax) ? static_cast<std::size_t>(n) : kMax; };
  const KvCacheBytes b = cache_bytes(c);
  ByteBuffer k, v;
  FloatBuffer ks, vs;
  const bool scales = c.dtype == KvType::i8;
  const std::size_t scale_count = count(b.scales / sizeof(float));
  if (!k.allocate(count(b.key)) || !v.allocate(count(b.value)) ||
      (scales && (!ks.allocate(scale_count) || !vs.allocate(scale_count))))
    return "kv cache: out of memory";
  config_ = c;
  length_ = first_ = 0;
  special_ = false;
  k_ = std::move(k);
  v_ = std::move(v);
  k_scale_ = std::move(ks);
  v_scale_ = std::move(vs);
  return nullptr;
}

int KvCache::held() const { return length_ - first_; }

int KvCache::first_held(int staged) const {
  if (config_.window == 0) return first_;
  return static_cast<int>(std::max<std::int64_t>(first_, std::int64_t(length_) + staged - config_.max_seq));
}

int KvCache::room() const {
  const int kept = config_.window > 0 ? std::min(length_, config_.window - 1) : length_;
  return config_.max_seq - kept;
}

std::size_t KvCache::bytes() const { return k_.size + v_.size + 4 * (k_scale_.size + v_scale_.size); }

const char* KvCache::append(const float* key, const Strides& ks, const float* value, const Strides& vs, int seq) {
  if (const char* err = stage(key, ks, value, vs, seq)) return err;
  commit(seq);
  return nullptr;
}

namespace {

// The first value of rows [batch, kv_heads, seq, dim] (strides s) that `refuse` says the cache
// cannot store, if any.
template <class Refuse>
bool find_refused(const float* x, const Strides& s, const KvCacheConfig& c, int dim, int seq, Refuse&& refuse,
                  RefusedValue& at) {
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.kv_heads; ++h)
      for (int t = 0; t < seq; ++t) {
        const float* row = x + b * s.batch + h * s.head + t * s.row;
        for (int e = 0; e < dim; ++e)
          if (refuse(row[e])) {
            at.batch = b;
            at.head = h;
            at.row = t;
            at.element = e;
            at.value = row[e];
            return true;
          }
      }
  return false;
}

}  // namespace

const char* KvCache::stage(const float* key, const Strides& ks, const float* value, const Strides& vs, int seq) {
  if (!allocated()) return "kv cache: not allocated";
  if (!key || !value || seq < 1) return "kv cache: append needs key, value and seq >= 1";
  if (!has_room(seq)) return "kv cache: no room for these positions (max_seq)";
  const KvCacheConfig& c = config_;
  // Checked before anything is written: all-or-nothing.
  const auto refused = [&](auto&& refuse) {
    RefusedValue at;
    const bool in_key = find_refused(key, ks, c, c.head_dim, seq, refuse, at);
    if (!in_key && !find_refused(value, vs, c, c.value_dim, seq, refuse, at)) return false;
    at.key = in_key;
    refused_ = at;
    return true;
  };
  if (c.dtype == KvType::f16 && refused([](float x) { return std::fabs(x) >= kF16Overflow && std::isfinite(x); }))
    return kF16OverflowError;
  if (c.dtype == KvType::i4 && refused([](float x) { return !std::isfinite(x); })) return kInt4NotFiniteError;
  const std::size_t key_bytes = row_bytes(c.dtype, c.head_dim), value_bytes = row_bytes(c.dtype, c.value_dim);
  for (int b = 0; b < c.batch; ++b)
    for (int t = 0; t < seq; ++t) {
      for (int h = 0; h < c.kv_heads; ++h) {
        const std::size_t row = (static_cast<std::size_t>(b) * c.kv_heads + h) * c.max_seq + slot(length_ + t);
        for (int which = 0; which < 2; ++which) {
          const bool is_key = which == 0;
          const int dim = is_key ? c.head_dim : c.value_dim;
          const Strides& s = is_key ? ks : vs;
          const float* x = (is_key ? key : value) + b * s.batch + h * s.head + t * s.row;
          std::uint8_t* dst = (is_key ? k_ : v_).get() + row * (is_key ? key_bytes : value_bytes);
          if (c.dtype == KvType::f32) {
            simd::copy(x, dim, reinterpret_cast<float*>(dst));  // not memcpy: see simd::copy
          } else if (c.dtype == KvType::f16) {
            if (store_f16(x, dim, reinterpret_cast<std::uint16_t*>(dst))) special_ = true;
          } else if (c.dtype == KvType::bf16) {
            store_bf16(x, dim, reinterpret_cast<bfloat16::Bits*>(dst));
          } else if (c.dtype == KvType::i8) {
            (is_key ? k_scale_ : v_scale_).get()[row] = store_i8(x, dim, reinterpret_cast<std::int8_t*>(dst));
          } else {
            store_i4(x, dim, dst);
          }
        }
      }
    }
  first_ = first_held(seq);  // a ring's overwritten positions
  return nullptr;
}

const char* KvCache::truncate(int n) {
  if (n < 0 || n > length_) return "kv cache: truncate needs 0 <= n <= length";
  // A ring must still hold the window − 1 positions before n (the next append needs them).
  if (n > 0 && config_.window > 0 && std::max(0, n - (config_.window - 1)) < first_)
    return "kv cache: a ring cannot go back that far (the positions before it were overwritten)";
  length_ = n;
  if (n == 0) first_ = 0;
  return nullptr;
}

const char* KvCache::reorder(const int* indices) {
  if (!allocated()) return "kv cache: not allocated";
  const KvCacheConfig& c = config_;
  const int batch = c.batch;
  if (!indices) return "kv cache: reorder needs indices";
  for (int b = 0; b < batch; ++b)
    if (indices[b] < 0 || indices[b] >= batch) return "kv cache: reorder indices must be in [0, batch)";
  HeapBuffer<int> work;
  if (!work.allocate(3 * std::uint64_t(batch))) return "kv cache: out of memory";

  // What moves: the held slots [lo, hi) (a ring that has wrapped holds every slot; otherwise a
  // position's slot is the position itself) of each kv head in each array, laid out
  // [batch, kv_heads, slots, row]: fn(first byte of the span in entry 0, bytes per entry, bytes).
  std::uint8_t* const bases[4] = {k_.get(), v_.get(), reinterpret_cast<std::uint8_t*>(k_scale_.get()),
                                  reinterpret_cast<std::uint8_t*>(v_scale_.get())};
  const std::size_t row_size[4] = {row_bytes(c.dtype, c.head_dim), row_bytes(c.dtype, c.value_dim), sizeof(float),
                                   sizeof(float)};
  const bool wrapped = c.window > 0 && length_ > c.max_seq;
  const int lo = wrapped ? 0 : first_, hi = wrapped ? c.max_seq : length_;
  const auto each_span = [&](auto&& fn) {
    for (int a = 0; a < (c.dtype == KvType::i8 ? 4 : 2); ++a)
      for (int h = 0; h < c.kv_heads; ++h)
        fn(bases[a] + (std::size_t(h) * c.max_seq + lo) * row_size[a],
           std::size_t(c.kv_heads) * c.max_seq * row_size[a], std::size_t(hi - lo) * row_size[a]);
  };
  const auto copy = [&](int to, int from) {
    each_span([&](std::uint8_t* s, std::size_t entry, std::size_t bytes) {
      std::memcpy(s + to * entry, s + from * entry, bytes);
    });
  };
  // The cycle start ← indices[start] ← … ← start, a piece at a time through `held`.
  const auto rotate = [&](int start) {
    alignas(16) std::uint8_t held[4096];
    each_span([&](std::uint8_t* s, std::size_t entry, std::size_t bytes) {
      for (std::size_t o = 0; o < bytes; o += sizeof held) {
        const std::size_t n = std::min(sizeof held, bytes - o);
        std::memcpy(held, s + start * entry + o, n);
        int to = start;
        for (int from = indices[to]; from != start; to = from, from = indices[to])
          std::memcpy(s + to * entry + o, s + from * entry + o, n);
        std::memcpy(s + to * entry + o, held, n);
      }
    });
  };

  // readers[r]: entries still to be written that read entry r (r itself not counted). An entry is
  // written once nothing it holds is still needed; what is left then are cycles.
  int *readers = work.get(), *ready = readers + batch, *done = ready + batch;
  std::fill(readers, readers + 3 * std::size_t(batch), 0);
  for (int b = 0; b < batch; ++b)
    if (indices[b] != b) ++readers[indices[b]];
  int top = 0;
  for (int b = 0; b < batch; ++b)
    if (indices[b] != b && readers[b] == 0) ready[top++] = b;
  while (top > 0) {
    const int b = ready[--top], from = indices[b];
    copy(b, from);
    done[b] = 1;
    if (--readers[from] == 0 && indices[from] != from) ready[top++] = from;
  }
  for (int b = 0; b < batch; ++b) {
    if (indices[b] == b || done[b]) continue;
    rotate(b);
    for (int e = b; !done[e]; e = indices[e]) done[e] = 1;
  }
  return nullptr;
}

void KvCache::describe(AttentionParams& p, int staged) const {
  const KvCacheConfig& c = config_;
  const std::ptrdiff_t slots = c.max_seq, kvh = c.kv_heads;
  p.key = k_.get();
  p.value = v_.get();
  p.kv_type = c.dtype;
  p.kv_finite = c.dtype == KvType::f16 && !special_;
  p.batch = c.batch;
  p.kv_heads = c.kv_heads;
  p.head_dim = c.head_dim;
  p.value_dim = c.value_dim;
  p.seq_k = length_ + staged;
  // Strides in elements of the storage type (int4: bytes, a row's row_bytes).
  const auto strides = [&](int dim) {
    const std::ptrdiff_t row = c.dtype == KvType::i4 ? kv::int4_row_bytes(dim) : dim;
    return Strides{kvh * slots * row, slots * row, row};
  };
  p.k = strides(c.head_dim);
  p.v = strides(c.value_dim);
  if (c.dtype == KvType::i8) {
    p.key_scale = k_scale_.get();
    p.value_scale = v_scale_.get();
    p.ks = p.vs = {kvh * slots, slots, 1};
  } else {
    p.key_scale = p.value_scale = nullptr;
  }
  p.kv_ring = c.window > 0 ? c.max_seq : 0;
  p.kv_first = first_held(staged);
}

}  // namespace attn
