// One attention call described as a test case: sizes, layout, masks, score variants and K/V
// storage; make_run() fills params and random buffers, check_case() runs the kernel and compares
// every output with the double-precision reference (reference.h).
//
// Tolerance: inputs are uniform in [-1, 1) and outputs are convex combinations of value rows,
// so outputs are compared with |got − ref| <= tolerance + 1e-4·|ref| (float dot products over up
// to 128 terms plus the 2e-7 relative error of the vectorised exp2; default 2e-5). Cases with
// large logits scale the allowance by the score magnitude, since a float score of size |s|
// carries an absolute error of about |s|·2⁻²³·√head_dim that the softmax turns into a relative
// weight error. float16/bfloat16/int8/int4 storage is compared with the reference on the stored (rounded or
// quantised) values, so the same tolerance holds, but for int8 and int4 values: their P·V rounds each probability
// (times its value's scale) to int16, 2^-16 of the largest in its block (few_rows_int.h), which kIntegerPvTolerance
// allows for. Likewise the queries as the kernel reads them (queries_seen: int8 where relaxed-SIMD builds read int4
// keys by byte dot products).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernel/attention.h"
#include "kernel/attention_blocks.h"
#include "kernel/few_rows_int.h"
#include "kernel/half.h"
#include "reference.h"

namespace tcase {

// boolean: nonzero = may attend (SDPA's polarity); block: nonzero = masked (nn.MultiheadAttention's).
enum class Mask { none, additive, boolean, block };

struct Case {
  int batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 4, value_dim = -1;
  bool bshd = false, causal = false, weights = false, weights_only = false, lse = false;
  Mask mask = Mask::none;
  // Which of batch (4), heads (2) and query rows (1) the mask has; it broadcasts the others, e.g.
  // 7: [b, h, sq, sk], 5: [b, 1, sq, sk], 4: [b, 1, 1, sk], 3: [h, sq, sk], 1: [sq, sk].
  int mask_dims = 7;
  bool key_padding = false;  // the last key of each batch entry and every 7th are padding
  float input_scale = 1.0f;  // multiplies q and k: large values give large logits
  bool integer_inputs = false;  // round q and k to integers (exact float dot products)
  float query_scale = 1.0f;     // multiplies q again (after input_scale and rounding)
  float scale = -1.0f;       // < 0: 1/sqrt(head_dim)
  // Score variants (attention.h).
  attn::Align align = attn::Align::lower_right;
  int window_left = attn::kNoLimit, window_right = attn::kNoLimit;
  float softcap = 0.0f;
  int alibi = 0;   // 0 none, 1 slopes [heads], 2 slopes [batch, heads]
  bool sinks = false;
  // Storage of K and V.
  attn::KvType kv_type = attn::KvType::f32;
  int ring = 0;    // > 0: K and V stored in a ring of this many slots (positions ≥ seq_k − ring)
  bool kv_finite = false;  // float16: promise no stored ±∞ or NaN, as a KV cache does (kv_finite)
  double tolerance = 2e-5;
  std::uint32_t seed = 1;

  std::string describe() const {
    std::ostringstream s;
    s << "batch " << batch << " heads " << heads << "/" << kv_heads << " seq " << seq_q << "x" << seq_k << " dim "
      << head_dim << "/" << value_dim << (bshd ? " bshd" : " bhsd") << (causal ? " causal" : "")
      << (align == attn::Align::upper_left ? " upper-left" : "") << " mask " << int(mask) << "/" << mask_dims
      << (key_padding ? " padding" : "") << " window [" << window_left << "," << window_right << "] softcap " << softcap
      << " alibi " << alibi << (sinks ? " sinks" : "") << " kv_type " << int(kv_type) << " ring " << ring
      << (kv_finite ? " finite" : "") << " input_scale " << input_scale << " query_scale " << query_scale << " scale "
      << scale << " seed " << seed;
    return s.str();
  }
};

struct Run {
  attn::AttentionParams p;
  std::vector<float> q, k, v, out, weights, lse, fmask, slopes, sinks;
  std::vector<std::uint8_t> bmask, padding;
  // What the kernel reads when K/V are not plain float32: the stored values, their scales.
  std::vector<std::uint16_t> k16, v16;  // float16 or bfloat16 bits
  std::vector<std::int8_t> k8, v8;
  std::vector<float> kscale, vscale;
  // The values as the kernel sees them (rounded/quantised), in the logical [b, kvh, j, d] layout
  // of p.k/p.v, for the reference; equal to k/v for float32.
  std::vector<float> k_seen, v_seen;
  attn::AttentionParams ref_params;  // p with K/V as plain float32 logical tensors
};

// What integer P·V (int8 and int4 values on the few-rows path) adds to the tolerance of outputs: each
// probability is off by up to 2^-16 of its block's largest, times a value of up to 127 value scales.
constexpr double kIntegerPvTolerance = 2e-4;

// Symmetric int8 quantisation of one row: x ≈ scale · q, q = round(x / scale) ∈ [−127, 127].
inline float quantise_row(const float* x, int n, std::int8_t* q) {
  float m = 0.0f;
  for (int c = 0; c < n; ++c) m = std::max(m, std::fabs(x[c]));
  const float scale = m / 127.0f;
  for (int c = 0; c < n; ++c) q[c] = static_cast<std::int8_t>(scale == 0.0f ? 0 : std::lround(x[c] / scale));
  return scale;
}

// Symmetric int4 quantisation of one row of n values into kv::Int4's layout (bytes, written from its
// description, not the cache's code): per block of 32, scale = bfloat16(max |x| / 7), q = round(x / scale)
// (ties to even) ∈ [−7, 7], value 8k + l in bits 4k … 4k+3 of the block's 16-bit lane l; then the scales.
// Writes the values as seen into seen[0, n).
inline void quantise_row_i4(const float* x, int n, std::uint8_t* out, float* seen) {
  const int blocks = (n + 31) / 32;
  for (int b = 0; b < blocks; ++b) {
    float m = 0.0f;
    for (int e = b * 32; e < std::min(n, b * 32 + 32); ++e) m = std::max(m, std::fabs(x[e]));
    const attn::bfloat16::Bits bits = attn::bfloat16::from_float(m / 7.0f);
    const float scale = attn::bfloat16::to_float(bits);
    std::uint8_t* block = out + 16 * b;
    std::fill(block, block + 16, std::uint8_t{0});
    for (int e = b * 32; e < std::min(n, b * 32 + 32); ++e) {
      const int q = scale > 0.0f ? int(std::clamp(std::nearbyint(x[e] / scale), -7.0f, 7.0f)) : 0;
      const int i = e - b * 32, byte = 2 * (i % 8) + (i / 16), shift = 4 * ((i / 8) % 2);
      block[byte] = std::uint8_t(block[byte] | ((q & 0xf) << shift));
      seen[e] = float(q) * scale;
    }
    const std::uint16_t stored = scale > 0.0f ? std::uint16_t(bits) : 0;
    out[16 * blocks + 2 * b] = std::uint8_t(stored & 0xff);
    out[16 * blocks + 2 * b + 1] = std::uint8_t(stored >> 8);
  }
}

// Stores logical K or V rows [b, kvh, j, dim] (strides s) as the case's storage: a ring moves
// position j to slot j % ring of a [b, kvh, ring, dim] buffer. Returns the values as seen.
inline std::vector<float> store(const Case& c, const std::vector<float>& x, const attn::Strides& s, int dim,
                                std::vector<std::uint16_t>& x16, std::vector<std::int8_t>& x8,
                                std::vector<float>& scales, std::vector<float>& ring_f32, attn::Strides& stored,
                                attn::Strides& scale_strides) {
  const int slots = c.ring ? c.ring : c.seq_k;
  const int row_units = c.kv_type == attn::KvType::i4 ? 18 * ((dim + 31) / 32) : dim;  // int4: bytes
  stored = attn::dense_bhsd(c.kv_heads, slots, row_units);
  scale_strides = attn::dense_bhsd(c.kv_heads, slots, 1);
  const std::size_t n = std::size_t(c.batch) * c.kv_heads * slots * row_units;
  std::vector<float> seen = x;
  ring_f32.assign(n, NAN);
  x16.assign(n, 0x7e00);
  x8.assign(n, 0);
  scales.assign(std::size_t(c.batch) * c.kv_heads * slots, NAN);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.kv_heads; ++h)
      for (int j = std::max(0, c.seq_k - slots); j < c.seq_k; ++j) {
        const float* row = x.data() + b * s.batch + h * s.head + j * s.row;
        float* seen_row = seen.data() + b * s.batch + h * s.head + j * s.row;
        const std::ptrdiff_t at = b * stored.batch + h * stored.head + (j % slots) * stored.row;
        const std::ptrdiff_t sat = b * scale_strides.batch + h * scale_strides.head + (j % slots) * scale_strides.row;
        if (c.kv_type != attn::KvType::i4)
          for (int d = 0; d < dim; ++d) ring_f32[at + d] = row[d];
        if (c.kv_type == attn::KvType::f16) {
          for (int d = 0; d < dim; ++d) {
            x16[at + d] = attn::half::from_float(row[d]);
            seen_row[d] = attn::half::to_float(x16[at + d]);
          }
        } else if (c.kv_type == attn::KvType::bf16) {
          for (int d = 0; d < dim; ++d) {
            const attn::bfloat16::Bits b = attn::bfloat16::from_float(row[d]);
            x16[at + d] = static_cast<std::uint16_t>(b);
            seen_row[d] = attn::bfloat16::to_float(b);
          }
        } else if (c.kv_type == attn::KvType::i8) {
          scales[sat] = quantise_row(row, dim, x8.data() + at);
          for (int d = 0; d < dim; ++d) seen_row[d] = scales[sat] * float(x8[at + d]);
        } else if (c.kv_type == attn::KvType::i4) {
          quantise_row_i4(row, dim, reinterpret_cast<std::uint8_t*>(x8.data() + at), seen_row);
        }
      }
  return seen;
}

// Fills params and buffers for a case. Masks are random with ~25% masked entries, and row 0 of
// every mask slice is fully masked, so every masked case also covers an all-masked row.
inline Run make_run(Case c) {
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
  p.align = c.align;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.scale = c.scale < 0 ? 1.0f / std::sqrt(float(c.head_dim)) : c.scale;
  const auto dense = c.bshd ? attn::dense_bshd : attn::dense_bhsd;
  p.q = dense(c.heads, c.seq_q, c.head_dim);
  p.k = dense(c.kv_heads, c.seq_k, c.head_dim);
  p.v = dense(c.kv_heads, c.seq_k, c.value_dim);
  p.o = dense(c.heads, c.seq_q, c.value_dim);
  p.w = attn::dense_bhsd(c.heads, c.seq_q, c.seq_k);
  p.l = attn::dense_bhsd(c.heads, c.seq_q, 1);
  fill(r.q, std::size_t(c.batch) * c.heads * c.seq_q * c.head_dim, c.input_scale);
  fill(r.k, std::size_t(c.batch) * c.kv_heads * c.seq_k * c.head_dim, c.input_scale);
  if (c.integer_inputs) {
    for (auto& e : r.q) e = std::round(e);
    for (auto& e : r.k) e = std::round(e);
  }
  for (auto& e : r.q) e *= c.query_scale;
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
  if (c.lse) {
    r.lse.assign(std::size_t(c.batch) * c.heads * c.seq_q, NAN);
    p.lse = r.lse.data();
  }
  if (c.mask != Mask::none) {
    const bool has_b = c.mask_dims & 4, has_h = c.mask_dims & 2, has_q = c.mask_dims & 1;
    const int mb = has_b ? c.batch : 1, mh = has_h ? c.heads : 1, mq = has_q ? c.seq_q : 1;
    const std::size_t n = std::size_t(mb) * mh * mq * c.seq_k;
    p.m = attn::dense_bhsd(mh, mq, c.seq_k);
    if (!has_b) p.m.batch = 0;
    if (!has_h) p.m.head = 0;
    if (!has_q) p.m.row = 0;
    std::uniform_int_distribution<int> quarter(0, 3);
    std::vector<bool> keep(n);
    // A quarter of the keys masked, and the first query row of each plane entirely.
    for (std::size_t e = 0; e < n; ++e) keep[e] = quarter(rng) != 0 && (!has_q || (e / c.seq_k) % c.seq_q != 0);
    if (c.mask == Mask::boolean || c.mask == Mask::block) {
      const bool block = c.mask == Mask::block;
      r.bmask.resize(n);
      for (std::size_t e = 0; e < n; ++e) r.bmask[e] = keep[e] != block ? std::uint8_t(1 + e % 200) : 0;
      p.mask = r.bmask.data();
      p.mask_type = block ? attn::MaskType::block : attn::MaskType::boolean;
    } else {
      r.fmask.resize(n);
      for (std::size_t e = 0; e < n; ++e) r.fmask[e] = keep[e] ? uni(rng) : -std::numeric_limits<float>::infinity();
      p.mask = r.fmask.data();
      p.mask_type = attn::MaskType::additive;
    }
  }
  if (c.key_padding) {
    r.padding.assign(std::size_t(c.batch) * c.seq_k, 0);
    for (int b = 0; b < c.batch; ++b)
      for (int j = 0; j < c.seq_k; ++j) r.padding[b * c.seq_k + j] = j == c.seq_k - 1 || j % 7 == 3;
    p.key_padding = r.padding.data();
    p.key_padding_batch_stride = c.seq_k;
  }
  if (c.alibi) {
    const int n = c.alibi == 2 ? c.batch * c.heads : c.heads;
    for (int e = 0; e < n; ++e)
      r.slopes.push_back(std::pow(2.0f, -8.0f * float(e % c.heads + 1) / c.heads) * (1 + e / c.heads));
    p.alibi_slopes = r.slopes.data();
    p.alibi_batch_stride = c.alibi == 2 ? c.heads : 0;
  }
  if (c.sinks) {
    fill(r.sinks, std::size_t(c.heads), 2.0f);
    p.sinks = r.sinks.data();
  }

  r.k_seen = r.k;
  r.v_seen = r.v;
  r.ref_params = p;
  if (c.kv_type != attn::KvType::f32 || c.ring) {
    std::vector<float> kring, vring;
    attn::Strides ks, vs;
    const attn::Strides k_logical = p.k, v_logical = p.v;
    r.k_seen = store(c, r.k, k_logical, c.head_dim, r.k16, r.k8, r.kscale, kring, p.k, ks);
    r.v_seen = store(c, r.v, v_logical, c.value_dim, r.v16, r.v8, r.vscale, vring, p.v, vs);
    p.kv_type = c.kv_type;
    p.kv_finite = c.kv_type == attn::KvType::f16 && c.kv_finite;
    p.kv_ring = c.ring;
    r.ref_params.kv_ring = c.ring;  // the reference masks the positions a ring no longer holds
    if (c.kv_type == attn::KvType::f16 || c.kv_type == attn::KvType::bf16) {
      p.key = r.k16.data();
      p.value = c.weights_only ? nullptr : static_cast<const void*>(r.v16.data());
    } else if (c.kv_type == attn::KvType::i8) {
      p.key = r.k8.data();
      p.value = c.weights_only ? nullptr : static_cast<const void*>(r.v8.data());
      p.key_scale = r.kscale.data();
      p.value_scale = r.vscale.data();
      p.ks = ks;
      p.vs = vs;
    } else if (c.kv_type == attn::KvType::i4) {
      p.key = r.k8.data();
      p.value = c.weights_only ? nullptr : static_cast<const void*>(r.v8.data());
    } else {  // a float32 ring
      r.k = kring;
      r.v = vring;
      p.key = r.k.data();
      p.value = c.weights_only ? nullptr : static_cast<const void*>(r.v.data());
    }
  }
  r.ref_params.key = r.k_seen.data();
  r.ref_params.value = c.weights_only ? nullptr : r.v_seen.data();
  return r;
}

// Reads a kernel output stored with strides s as dense [batch, heads, rows, cols].
inline std::vector<float> gather(const std::vector<float>& x, const attn::Strides& s, int batch, int heads, int rows,
                                 int cols) {
  std::vector<float> d;
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < rows; ++i)
        for (int c = 0; c < cols; ++c) d.push_back(x[b * s.batch + h * s.head + i * s.row + c]);
  return d;
}

inline void expect_close(const std::vector<float>& got, const std::vector<double>& want, double atol,
                         const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool both_inf = std::isinf(want[i]) && double(got[i]) == want[i];
    const double err = both_inf ? 0.0 : std::abs(double(got[i]) - want[i]);
    const bool ok = err <= atol + 1e-4 * std::abs(want[i]);  // NaN fails here too
    if (!ok && bad++ == 0) first = i;
    if (!(err <= worst)) worst = err;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements off, worst error " << worst << ", first at " << first
            << " got " << (bad ? got[first] : 0.f) << " want " << (bad ? want[first] : 0.0));
  CHECK(bad == 0);
}

// The queries as the kernel reads them: as given, but where the few-rows path reads int4 keys by byte dot products
// (relaxed-SIMD builds, few_rows::kInt4ByteDot), each query row rounded to int8 times its scale, max |q| / 127 (a
// row with a non-finite element or max |q| < 2^-100 stays float), as few_rows::pack_query_i8 does.
inline std::vector<float> queries_seen(const Case& c, const Run& r) {
  std::vector<float> q = r.q;
  if (c.kv_type != attn::KvType::i4 || !attn::few_rows::kInt4ByteDot || !attn::blocks::takes_few_rows(r.p)) return q;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.seq_q; ++i) {
        float* row = q.data() + b * r.p.q.batch + h * r.p.q.head + i * r.p.q.row;
        float m = 0.0f;
        bool finite = true;
        for (int d = 0; d < c.head_dim; ++d) {
          finite = finite && std::isfinite(row[d]);
          m = std::max(m, std::fabs(row[d]));
        }
        if (!finite || (m != 0.0f && m < 0x1p-100f)) continue;
        const float scale = m / 127.0f, inv = m > 0.0f ? 127.0f / m : 0.0f;
        for (int d = 0; d < c.head_dim; ++d) row[d] = std::nearbyint(row[d] * inv) * scale;
      }
  return q;
}

// The reference's outputs (and weights and lse, where the case asks for them) for the queries as the kernel reads them.
inline std::vector<double> reference(const Case& c, const Run& r, std::vector<double>* weights,
                                     std::vector<double>* lse) {
  const std::vector<float> q = queries_seen(c, r);
  attn::AttentionParams p = r.ref_params;
  p.query = q.data();
  return ref::attention(p, weights, lse);
}

inline void check_run(const Case& c, Run& r) {
  INFO(c.describe());
  const char* err = attn::attention(r.p);
  INFO("error: " << (err ? err : "none"));
  REQUIRE(err == nullptr);
  std::vector<double> ref_weights, ref_lse;
  const std::vector<double> ref_out =
      reference(c, r, r.p.weights ? &ref_weights : nullptr, r.p.lse ? &ref_lse : nullptr);
  const bool integer_pv = c.kv_type == attn::KvType::i8 || c.kv_type == attn::KvType::i4;
  if (r.p.out)
    expect_close(gather(r.out, r.p.o, c.batch, c.heads, c.seq_q, r.p.value_dim), ref_out,
                 c.tolerance + (integer_pv ? kIntegerPvTolerance : 0.0), "out");
  if (r.p.weights) expect_close(r.weights, ref_weights, c.tolerance, "weights");
  if (r.p.lse) expect_close(r.lse, ref_lse, c.tolerance * 4, "lse");
}

inline void check_case(const Case& c) {
  Run r = make_run(c);
  check_run(c, r);
}

}  // namespace tcase
