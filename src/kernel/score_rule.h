// The score rule: everything that happens to a row's raw q·k scores before the softmax, in one
// place for the blocked forward, the few-rows path, the weights output and the backward:
//   s = scale·q·k → s = softcap·tanh(s / softcap) → s += alibi → masks (additive added; boolean,
//   key padding, causal, window and keys a ring no longer holds set −∞).
// Scores leave in log2 units (natural score × log2 e), the unit the online softmax's exp2 wants.
// The causal and window limits are a key range per row, so the drivers can skip whole blocks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernel/attention.h"
#include "runtime/simd.h"

namespace attn::score {

using simd::vfloat;
using simd::W;

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys [begin, end) a query row may see at all (causal, window, ring); empty when begin >= end.
struct KeyRange {
  int begin = 0, end = 0;
};

inline int offset(const AttentionParams& p) { return p.align == Align::upper_left ? 0 : p.seq_k - p.seq_q; }

inline KeyRange key_range(const AttentionParams& p, int qi) {
  const std::int64_t pos = std::int64_t(qi) + offset(p);
  std::int64_t begin = 0, end = p.seq_k;
  if (p.causal) end = std::min(end, pos + 1);
  if (p.window_left != kNoLimit) begin = std::max(begin, pos - p.window_left);
  if (p.window_right != kNoLimit) end = std::min(end, pos + p.window_right + 1);
  if (p.kv_ring > 0) begin = std::max(begin, std::int64_t(p.seq_k) - p.kv_ring);
  begin = std::max<std::int64_t>(begin, p.kv_first);
  begin = std::clamp<std::int64_t>(begin, 0, p.seq_k);
  end = std::clamp<std::int64_t>(end, begin, p.seq_k);
  return {static_cast<int>(begin), static_cast<int>(end)};
}

// How raw dot products become scores in log2 units. Normally the queries are packed already
// multiplied by `pack` (scale·log2 e, or scale/softcap), so the GEMM's output needs nothing more.
// When that product could overflow float32 (a huge scale or huge inputs: ∞·0 would be NaN), the
// queries are packed times a power of two that keeps them ≤ 1 instead, and the scores are
// multiplied afterwards by unit, unit2 and the scale, then divided by the softcap (or multiplied by
// log2 e), one finite operand at a time: finite, or ±∞, never NaN.
struct Scaling {
  float pack = 1.0f;
  bool post = false;
  float unit = 1.0f, unit2 = 1.0f, a = 1.0f;
  float divisor = 0.0f;  // post: divide by the softcap, or (0) multiply by log2 e
  float cap = 0.0f;  // softcap·log2 e when softcapped: s = cap·tanh(u)
};

// For queries whose largest |element| is q_max against keys whose largest is k_max.
inline Scaling scaling(const AttentionParams& p, float q_max, float k_max) {
  Scaling s;
  s.a = p.scale;
  s.divisor = p.softcap > 0.0f ? p.softcap : 0.0f;
  // Clamped so that cap·tanh(u) is never ∞·0 (a softcap near float32's limit).
  s.cap = p.softcap > 0.0f ? static_cast<float>(std::min(double(p.softcap) * kLog2e, 3.4e38)) : 0.0f;
  const double factor = p.softcap > 0.0f ? double(p.scale) / p.softcap : double(p.scale) * kLog2e;
  const double packed_max = double(q_max) * std::fabs(factor);
  const double bound = packed_max * std::max(1.0, double(k_max) * p.head_dim);
  if (std::fabs(factor) < 3e38 && bound < 1e36) {  // packed q and q·k finite
    s.pack = static_cast<float>(factor);
    return s;
  }
  int e = 0;
  if (q_max > 1.0f) std::frexp(q_max, &e);  // q_max·2^-e < 1
  s.pack = std::ldexp(1.0f, -e);
  s.unit = std::ldexp(1.0f, e / 2);  // 2^e in two factors: e may be 128
  s.unit2 = std::ldexp(1.0f, e - e / 2);
  s.post = true;
  return s;
}

// After `post`: ((s·unit)·unit2)·a, then / softcap or · log2 e.
inline float post_scale(const Scaling& sc, float s) {
  s = s * sc.unit * sc.unit2 * sc.a;
  return sc.divisor != 0.0f ? s / sc.divisor : s * kLog2e;
}

// For raw dot products multiplied by `pack` once computed (the few-rows path, whose queries
// carry it only when |pack| ≤ 1: few_queries in attention_forward.cpp): the factor itself when
// finite, else 1 and its parts afterwards.
inline Scaling few_rows_scaling(const AttentionParams& p) {
  Scaling s = scaling(p, 0.0f, 0.0f);  // bound 0: the factor itself whenever it is finite
  if (s.post) s.pack = s.unit = s.unit2 = 1.0f;
  return s;
}

// What one query row adds to the rule, filled by the drivers (attention_blocks.h).
struct RowRule {
  KeyRange keys;
  float pos = 0.0f;    // the row's position on the key axis (i + off), for ALiBi
  float alibi = 0.0f;  // −slope (natural units); 0 without ALiBi
  float sink = kNegInf;  // the sink logit × log2 e; −∞ without a sink
  const void* mask = nullptr;  // this row of the mask, or null
};

// Turns raw scores s[0, len) of keys kb … kb+len−1 of one row into log2-unit scores, in place.
// `cap_slope`, when not null, receives d(capped score)/d(uncapped score) = 1 − tanh² per key
// (the backward's softcap factor; 1 without softcap).
inline void apply(const AttentionParams& p, const Scaling& sc, const RowRule& r, const std::uint8_t* key_padding,
                  int kb, int len, float* s, float* cap_slope = nullptr) {
  int j;
  if (sc.post)
    for (j = 0; j < len; ++j) s[j] = post_scale(sc, s[j]);
  if (sc.cap != 0.0f) {
    const vfloat vcap(sc.cap);
    for (j = 0; j + W <= len; j += W) {
      const vfloat t = simd::tanh_rational(simd::load(s + j));
      simd::store(s + j, t * vcap);
      if (cap_slope) simd::store(cap_slope + j, vfloat(1.0f) - t * t);
    }
    for (; j < len; ++j) {
      const float t = simd::tanh_rational(s[j]);
      s[j] = t * sc.cap;
      if (cap_slope) cap_slope[j] = 1.0f - t * t;
    }
  } else if (cap_slope) {
    std::fill(cap_slope, cap_slope + len, 1.0f);
  }
  // ALiBi and an additive mask are added in natural units, then turned into log2 units: a
  // score that already overflowed to ±∞ stays (a finite bias cannot move it, and ∞ − ∞ would be
  // NaN), and a bias that overflows by itself (a huge slope or mask value) saturates to ±∞.
  if (r.alibi != 0.0f) {
    // −slope·|pos − key|: the distance is exact in float for positions below 2^24.
    const vfloat slope(r.alibi), log2e(kLog2e);
    alignas(16) float first[W];
    for (int l = 0; l < W; ++l) first[l] = r.pos - float(kb + l);
    vfloat dist = simd::load(first);
    for (j = 0; j + W <= len; j += W, dist = dist - vfloat(float(W)))
      simd::store(s + j, simd::add_unless_inf(simd::load(s + j), slope * simd::vabs(dist) * log2e));
    for (; j < len; ++j) {
      const float bias = r.alibi * std::fabs(r.pos - float(kb + j)) * kLog2e;
      s[j] = std::isinf(s[j]) ? s[j] : s[j] + bias;
    }
  }
  if (p.mask_type == MaskType::additive) {
    const float* m = static_cast<const float*>(r.mask) + kb;
    for (j = 0; j < len; ++j) s[j] = m[j] == kNegInf ? kNegInf : std::isinf(s[j]) ? s[j] : s[j] + m[j] * kLog2e;
  } else if (p.mask_type == MaskType::boolean) {
    const std::uint8_t* m = static_cast<const std::uint8_t*>(r.mask) + kb;
    for (j = 0; j < len; ++j)
      if (!m[j]) s[j] = kNegInf;
  } else if (p.mask_type == MaskType::block) {
    const std::uint8_t* m = static_cast<const std::uint8_t*>(r.mask) + kb;
    for (j = 0; j < len; ++j)
      if (m[j]) s[j] = kNegInf;
  }
  if (key_padding) {
    const std::uint8_t* pad = key_padding + kb;
    for (j = 0; j < len; ++j)
      if (pad[j]) s[j] = kNegInf;
  }
  for (j = 0; j < std::min(len, r.keys.begin - kb); ++j) s[j] = kNegInf;
  for (j = std::max(0, r.keys.end - kb); j < len; ++j) s[j] = kNegInf;
}

}  // namespace attn::score
