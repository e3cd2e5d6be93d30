// libFuzzer target (built with clang, ASan and UBSan) for the C++ entry points: attention() and
// attention_backward() on arbitrary shapes, layouts, strides, masks, score variants (causal
// alignment, windows, softcap, ALiBi, sinks), K/V storage (float32, float16, bfloat16, int8,
// rings), scales and values (NaN, ±Inf, denormals, huge), PackedLinear, and validate() on garbage
// params. Any crash, out-of-bounds access or UB fails. Properties checked as well: a valid call
// succeeds; finite inputs give no NaN whatever the scale; on ordinary inputs the outputs are
// finite and every weights row sums to 1 (at most 1 with sinks) or is all zeros.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel/attention.h"
#include "kernel/half.h"
#include "kernel/kv_storage.h"
#include "layer/linear.h"

namespace {

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
  int range(int lo, int hi) { return lo + u8() % (hi - lo + 1); }
  float any_float() {
    std::uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits = bits << 8 | u8();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // Mostly ordinary values, sometimes the special ones.
  float value() {
    const std::uint8_t kind = u8();
    switch (kind % 16) {
      case 0: return std::numeric_limits<float>::quiet_NaN();
      case 1: return std::numeric_limits<float>::infinity();
      case 2: return -std::numeric_limits<float>::infinity();
      case 3: return 1e-40f;   // denormal
      case 4: return 3e38f;    // huge
      case 5: return any_float();
      default: return (static_cast<int>(u8()) - 128) / 64.0f;
    }
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

// A failed property: say which, with the call's parameters, then crash (libFuzzer saves the input).
[[noreturn]] void fail(const char* what, const attn::AttentionParams& p) {
  std::fprintf(stderr,
               "property failed: %s\n  batch %d heads %d/%d seq %dx%d dims %d/%d scale %g causal %d align %d "
               "window [%d, %d] softcap %g alibi %d sinks %d kv_type %d ring %d mask %d padding %d weights %d lse %d\n",
               what, p.batch, p.heads, p.kv_heads, p.seq_q, p.seq_k, p.head_dim, p.value_dim, p.scale, p.causal,
               int(p.align), p.window_left, p.window_right, p.softcap, p.alibi_slopes != nullptr, p.sinks != nullptr,
               int(p.kv_type), p.kv_ring, int(p.mask_type), p.key_padding != nullptr, p.weights != nullptr,
               p.lse != nullptr);
  __builtin_trap();
}

bool finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

void fuzz_attention(Reader& r) {
  attn::AttentionParams p;
  p.batch = r.range(1, 2);
  p.kv_heads = r.range(1, 3);
  p.heads = p.kv_heads * r.range(1, 3);
  p.seq_q = r.range(1, 40);
  p.seq_k = r.range(1, 140);
  p.head_dim = r.range(1, 40);
  p.value_dim = r.range(1, 40);
  const bool bshd = r.u8() & 1, weights_only = (r.u8() % 8) == 0, want_weights = r.u8() & 1;
  const int extra = r.range(0, 3);  // KV rows inside a larger buffer ("cache" layout)
  p.causal = r.u8() & 1;
  const std::uint8_t scale_kind = r.u8();
  p.scale = scale_kind % 4 == 0 ? r.any_float() : 1.0f / std::sqrt(float(p.head_dim));
  const bool specials = r.u8() % 4 == 0;
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = specials ? r.value() : (static_cast<int>(r.u8()) - 128) / 64.0f;
  };

  const auto dense = bshd ? attn::dense_bshd : attn::dense_bhsd;
  const int max_k = p.seq_k + extra;
  std::vector<float> q(std::size_t(p.batch) * p.heads * p.seq_q * p.head_dim);
  std::vector<float> k(std::size_t(p.batch) * p.kv_heads * max_k * p.head_dim);
  std::vector<float> v(std::size_t(p.batch) * p.kv_heads * max_k * p.value_dim);
  fill(q);
  fill(k);
  fill(v);
  p.q = dense(p.heads, p.seq_q, p.head_dim);
  p.k = dense(p.kv_heads, max_k, p.head_dim);
  p.v = dense(p.kv_heads, max_k, p.value_dim);
  p.query = q.data();
  p.key = k.data();
  std::vector<float> out(std::size_t(p.batch) * p.heads * p.seq_q * p.value_dim);
  if (!weights_only) {
    p.value = v.data();
    p.out = out.data();
    p.o = dense(p.heads, p.seq_q, p.value_dim);
  }
  std::vector<float> w;
  if (want_weights || weights_only) {
    w.resize(std::size_t(p.batch) * p.heads * p.seq_q * p.seq_k);
    p.weights = w.data();
    p.w = attn::dense_bhsd(p.heads, p.seq_q, p.seq_k);
  }
  const int mask_kind = r.u8() % 4;
  const int dims = r.u8() % 8;  // which of batch, heads, rows the mask has (the rest broadcast)
  const attn::MaskShape shape{(dims & 4) != 0, (dims & 2) != 0, (dims & 1) != 0};
  std::vector<float> fmask(attn::mask_elements(shape, p.batch, p.heads, p.seq_q, p.seq_k));
  std::vector<std::uint8_t> bmask(fmask.size());
  if (mask_kind == 1 || mask_kind == 3) {
    for (auto& m : bmask) m = r.u8() % 4 != 0;
    p.mask = bmask.data();
    p.mask_type = mask_kind == 1 ? attn::MaskType::boolean : attn::MaskType::block;
  } else if (mask_kind == 2) {
    for (auto& m : fmask) m = r.u8() % 4 == 0 ? -std::numeric_limits<float>::infinity() : r.value();
    p.mask = fmask.data();
    p.mask_type = attn::MaskType::additive;
  }
  p.m = attn::mask_strides(shape, p.heads, p.seq_q, p.seq_k);
  std::vector<std::uint8_t> pad(std::size_t(p.batch) * p.seq_k);
  if (r.u8() & 1) {
    for (auto& x : pad) x = r.u8() % 5 == 0;
    p.key_padding = pad.data();
    p.key_padding_batch_stride = p.seq_k;
  }

  // Score variants.
  p.align = (r.u8() & 1) ? attn::Align::upper_left : attn::Align::lower_right;
  if (r.u8() % 3 == 0) p.window_left = r.range(0, 150);
  if (r.u8() % 3 == 0) p.window_right = r.range(0, 150);
  if (r.u8() % 4 == 0) p.softcap = r.u8() % 8 == 0 ? std::abs(r.any_float()) : float(r.range(1, 60));
  if (!std::isfinite(p.softcap)) p.softcap = 0.0f;
  std::vector<float> slopes(std::size_t(p.batch) * p.heads), sinks(p.heads);
  if (r.u8() % 4 == 0) {
    fill(slopes);
    p.alibi_slopes = slopes.data();
    p.alibi_batch_stride = (r.u8() & 1) ? p.heads : 0;
  }
  if (r.u8() % 4 == 0) {
    fill(sinks);
    p.sinks = sinks.data();
  }
  const bool inputs_finite = finite(q) && finite(k) && finite(v) && finite(slopes) && finite(sinks) &&
                             (mask_kind != 2 || finite(fmask)) && std::isfinite(p.scale);

  // K/V storage: float32 as filled, or float16 / bfloat16 / int8 copies or int4 rows, optionally
  // in a ring.
  const int storage = r.u8() % 6;  // 0, 1: float32; 2: float16; 3: int8; 4: bfloat16; 5: int4
  std::vector<std::uint16_t> k16(k.size()), v16(v.size());
  std::vector<std::int8_t> k8(k.size()), v8(v.size());
  std::vector<float> ks(std::size_t(p.batch) * p.kv_heads * max_k), vs(ks.size());
  if (r.u8() % 4 == 0) p.kv_ring = r.range(1, max_k);
  if (storage == 2) {
    for (std::size_t i = 0; i < k.size(); ++i) k16[i] = attn::half::from_float(k[i]);
    for (std::size_t i = 0; i < v.size(); ++i) v16[i] = attn::half::from_float(v[i]);
    p.kv_type = attn::KvType::f16;
    p.key = k16.data();
    if (p.value) p.value = v16.data();
  } else if (storage == 4) {
    for (std::size_t i = 0; i < k.size(); ++i) k16[i] = static_cast<std::uint16_t>(attn::bfloat16::from_float(k[i]));
    for (std::size_t i = 0; i < v.size(); ++i) v16[i] = static_cast<std::uint16_t>(attn::bfloat16::from_float(v[i]));
    p.kv_type = attn::KvType::bf16;
    p.key = k16.data();
    if (p.value) p.value = v16.data();
  } else if (storage == 3) {
    for (auto& x : k8) x = static_cast<std::int8_t>(r.u8());
    for (auto& x : v8) x = static_cast<std::int8_t>(r.u8());
    for (float& x : ks) x = specials ? r.value() : r.range(0, 255) / 1000.0f;
    for (float& x : vs) x = specials ? r.value() : r.range(0, 255) / 1000.0f;
    p.kv_type = attn::KvType::i8;
    p.key = k8.data();
    if (p.value) p.value = v8.data();
    p.key_scale = ks.data();
    p.value_scale = vs.data();
    p.ks = attn::dense_bhsd(p.kv_heads, max_k, 1);
    p.vs = p.ks;
  }
  // int4 rows: random 4-bit values, each block's bfloat16 scale like int8's (kv::Int4's layout).
  const auto int4_rows = [&](int dim, std::vector<std::uint8_t>& bytes) {
    const int blocks = attn::kv::int4_blocks(dim), row = int(attn::kv::int4_row_bytes(dim));
    bytes.resize(std::size_t(p.batch) * p.kv_heads * max_k * row);
    for (std::size_t at = 0; at < bytes.size(); at += row) {
      for (int i = 0; i < 16 * blocks; ++i) bytes[at + i] = r.u8();
      for (int b = 0; b < blocks; ++b) {
        const auto bits =
            static_cast<std::uint16_t>(attn::bfloat16::from_float(specials ? r.value() : r.range(0, 255) / 1000.0f));
        bytes[at + 16 * blocks + 2 * b] = std::uint8_t(bits & 0xff);
        bytes[at + 16 * blocks + 2 * b + 1] = std::uint8_t(bits >> 8);
      }
    }
    return dense(p.kv_heads, max_k, row);
  };
  std::vector<std::uint8_t> k4, v4;
  if (storage == 5) {
    p.kv_type = attn::KvType::i4;
    p.k = int4_rows(p.head_dim, k4);
    p.v = int4_rows(p.value_dim, v4);
    p.key = k4.data();
    if (p.value) p.value = v4.data();
  }
  std::vector<float> lse(std::size_t(p.batch) * p.heads * p.seq_q);
  if (r.u8() & 1) {
    p.lse = lse.data();
    p.l = attn::dense_bhsd(p.heads, p.seq_q, 1);
  }

  if (const char* err = attn::attention(p)) fail(err, p);  // valid params must succeed

  // Ordinary magnitudes (so q·k and Σ v fit in float32) and any finite scale or softcap: no NaN.
  if (inputs_finite && !specials) {
    for (float x : out)
      if (std::isnan(x)) fail("NaN in out from finite inputs", p);
    for (float x : w)
      if (std::isnan(x)) fail("NaN in weights from finite inputs", p);
    for (float x : lse)
      if (std::isnan(x)) fail("NaN in lse from finite inputs", p);
  }
  // Ordinary inputs (no specials, a moderate scale, no additive mask with special values):
  // finite outputs, and weights rows that sum to 1 (or are all zero when fully masked).
  const bool ordinary = !specials && std::abs(p.scale) < 1e6f && (mask_kind != 2 || finite(fmask));
  if (ordinary) {
    if (!weights_only && !finite(out)) fail("non-finite out from ordinary inputs", p);
    for (std::size_t row = 0; row < w.size() / p.seq_k; ++row) {
      double sum = 0;
      for (int j = 0; j < p.seq_k; ++j) sum += w[row * p.seq_k + j];
      const bool ok = p.sinks ? sum <= 1 + 1e-4 : (std::abs(sum - 1) < 1e-4 || sum == 0);
      if (!ok) fail("a weights row does not sum to 1 (at most 1 with sinks) or 0", p);
    }
  }

  // The backward of the same call (float32 keys and values, no ring).
  if (storage < 2 && p.kv_ring == 0 && p.value && (r.u8() & 1)) {
    std::vector<float> dout(out.size()), dq(q.size()), dk(k.size()), dv(v.size()), dsinks(p.heads);
    fill(dout);
    attn::AttentionGrads g;
    g.d_out = dout.data();
    g.d_query = dq.data();
    g.d_key = dk.data();
    g.d_value = dv.data();
    g.d_sinks = p.sinks ? dsinks.data() : nullptr;
    g.d_o = p.o;
    g.d_q = p.q;
    g.d_k = p.k;
    g.d_v = p.v;
    if (p.lse && (r.u8() & 1)) {
      g.lse = lse.data();
      g.out = out.data();
    }
    if (const char* err = attn::attention_backward(p, g)) fail(err, p);
  }
}

void fuzz_linear(Reader& r) {
  const int rows = r.range(1, 9), in = r.range(1, 300), out = r.range(1, 40);
  std::vector<float> x(std::size_t(rows) * in), w(std::size_t(out) * in), b(out);
  for (float& e : x) e = r.value();
  for (float& e : w) e = r.value();
  for (float& e : b) e = r.value();
  attn::PackedLinear lin;
  if (lin.pack(w.data(), (r.u8() & 1) ? b.data() : nullptr, out, in) != nullptr) __builtin_trap();
  std::vector<float> scratch(lin.scratch_floats(rows)), y(std::size_t(rows) * out);
  lin.apply(x.data(), in, rows, y.data(), out, scratch.data());
}

void fuzz_validate(Reader& r) {
  attn::AttentionParams p;
  float dummy[4] = {};
  p.batch = r.range(-2, 5) * (r.u8() % 2 ? 1 : 100000);
  p.heads = r.range(-2, 5);
  p.kv_heads = r.range(-2, 5);
  p.seq_q = r.range(-2, 5);
  p.seq_k = r.range(-2, 5);
  p.head_dim = r.range(-2, 5);
  p.value_dim = r.range(-2, 5);
  p.query = (r.u8() & 1) ? dummy : nullptr;
  p.key = (r.u8() & 1) ? dummy : nullptr;
  p.mask_type = static_cast<attn::MaskType>(r.range(0, 5));
  attn::validate(p);  // garbage params: a message or nullptr, never a crash
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  switch (r.u8() % 4) {
    case 0: fuzz_linear(r); break;
    case 1: fuzz_validate(r); break;
    default: fuzz_attention(r); break;
  }
  return 0;
}
