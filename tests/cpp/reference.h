// The independent reference for the tests: plain double-precision attention, written from the
// definition, sharing no code with the kernel. Tensors are read through attn::Strides so the
// same reference checks every layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel/attention.h"

namespace ref {

inline std::ptrdiff_t at(const attn::Strides& s, int b, int h, int row) {
  return b * s.batch + h * s.head + row * s.row;
}

// Returns out as dense [batch, heads, seq_q, value_dim] and fills weights (dense
// [batch, heads, seq_q, seq_k]) and lse (dense [batch, heads, seq_q]) when asked. Follows the
// score rule of attention.h from its definition: scale·q·k, softcap·tanh(s/softcap), −slope·|i +
// off − j|, masks, causal and window limits, keys a ring no longer holds, the sink in the
// denominator. A row with no visible key and no sink gives zeros (lse −∞). q, k, v (floats or
// doubles) are read with p's strides; for float16/int8 storage pass the stored values as floats
// (with kv_type f32 strides).
template <class T>
std::vector<double> attention(const attn::AttentionParams& p, const T* query, const T* key, const T* value,
                              std::vector<double>* weights = nullptr, std::vector<double>* lse = nullptr) {
  const int group = p.heads / p.kv_heads;
  const double inf = std::numeric_limits<double>::infinity();
  const long off = p.align == attn::Align::upper_left ? 0 : long(p.seq_k) - p.seq_q;
  std::vector<double> out(static_cast<std::size_t>(p.batch) * p.heads * p.seq_q * p.value_dim, 0.0);
  if (weights) weights->assign(static_cast<std::size_t>(p.batch) * p.heads * p.seq_q * p.seq_k, 0.0);
  if (lse) lse->assign(static_cast<std::size_t>(p.batch) * p.heads * p.seq_q, -inf);
  std::vector<double> score(p.seq_k);
  std::vector<bool> visible(p.seq_k);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seq_q; ++i) {
        const int kvh = h / group;
        const T* q = query + at(p.q, b, h, i);
        const long pos = i + off;
        const double sink = p.sinks ? double(p.sinks[h]) : -inf;
        double max = sink;
        for (int j = 0; j < p.seq_k; ++j) {
          const T* k = key + at(p.k, b, kvh, j);
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d) dot += double(q[d]) * double(k[d]);
          double s = double(p.scale) * dot;
          if (p.softcap > 0) s = double(p.softcap) * std::tanh(s / double(p.softcap));
          if (p.alibi_slopes) s -= double(p.alibi_slopes[b * p.alibi_batch_stride + h]) * std::fabs(double(pos - j));
          bool vis = !p.causal || j <= pos;
          if (p.window_left != attn::kNoLimit && j < pos - p.window_left) vis = false;
          if (p.window_right != attn::kNoLimit && j > pos + p.window_right) vis = false;
          if (p.kv_ring > 0 && j < p.seq_k - p.kv_ring) vis = false;
          if (j < p.kv_first) vis = false;
          const std::ptrdiff_t m = at(p.m, b, h, i) + j;
          if (p.mask_type == attn::MaskType::additive) s += static_cast<const float*>(p.mask)[m];
          if (p.mask_type == attn::MaskType::boolean && !static_cast<const std::uint8_t*>(p.mask)[m]) vis = false;
          if (p.mask_type == attn::MaskType::block && static_cast<const std::uint8_t*>(p.mask)[m]) vis = false;
          if (p.key_padding && p.key_padding[b * p.key_padding_batch_stride + j]) vis = false;
          if (std::isinf(s) && s < 0) vis = false;
          visible[j] = vis;
          score[j] = s;
          if (vis && s > max) max = s;
        }
        double sum = sink == -inf ? 0.0 : std::exp(sink - max);
        for (int j = 0; j < p.seq_k; ++j) {
          score[j] = visible[j] ? std::exp(score[j] - max) : 0.0;
          sum += score[j];
        }
        if (sum == 0) continue;  // every key masked: zeros
        const std::size_t row = ((static_cast<std::size_t>(b) * p.heads + h) * p.seq_q + i);
        if (lse) (*lse)[row] = max + std::log(sum);
        for (int j = 0; j < p.seq_k; ++j) {
          const double w = score[j] / sum;
          if (weights) (*weights)[row * p.seq_k + j] = w;
          if (!value) continue;
          const T* v = value + at(p.v, b, kvh, j);
          for (int c = 0; c < p.value_dim; ++c) out[row * p.value_dim + c] += w * double(v[c]);
        }
      }
  return out;
}

inline std::vector<double> attention(const attn::AttentionParams& p, std::vector<double>* weights = nullptr,
                                     std::vector<double>* lse = nullptr) {
  return attention(p, p.query, static_cast<const float*>(p.key), static_cast<const float*>(p.value), weights, lse);
}

// Rotary embeddings, in place, on rows [batch, seq, heads, head_dim] ("bshd") of doubles, from
// the definition: pair (c, c + rotary_dim/2) (rotate_half) or (2c, 2c + 1) (interleaved) of the
// row at position pos(b, t) turns by pos · base^(−2c/rotary_dim) (or −that, inverse).
template <class Position>
void rotary_bshd(std::vector<double>& x, int batch, int seq, int heads, int head_dim, int rotary_dim, bool interleaved,
                 double base, Position pos, bool inverse = false) {
  const int half = rotary_dim / 2;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h) {
        double* row = x.data() + ((static_cast<std::size_t>(b) * seq + t) * heads + h) * head_dim;
        for (int c = 0; c < half; ++c) {
          const double angle = (inverse ? -1.0 : 1.0) * double(pos(b, t)) * std::pow(base, -2.0 * c / rotary_dim);
          const int i1 = interleaved ? 2 * c : c, i2 = interleaved ? 2 * c + 1 : c + half;
          const double x1 = row[i1], x2 = row[i2];
          row[i1] = x1 * std::cos(angle) - x2 * std::sin(angle);
          row[i2] = x1 * std::sin(angle) + x2 * std::cos(angle);
        }
      }
}

// y[rows × out] = x[rows × in] · Wᵀ + b with W [out × in] (nn.Linear); b may be null.
template <class T>
std::vector<double> linear(const T* x, int rows, int in, const float* w, const float* b, int out) {
  std::vector<double> y(static_cast<std::size_t>(rows) * out);
  for (int i = 0; i < rows; ++i)
    for (int o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (int k = 0; k < in; ++k) s += double(x[i * in + k]) * double(w[o * in + k]);
      y[static_cast<std::size_t>(i) * out + o] = s;
    }
  return y;
}

}  // namespace ref
