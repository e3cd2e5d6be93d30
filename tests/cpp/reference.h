// The independent reference for the tests: plain double-precision attention, written from the
// definition, sharing no code with the kernel. Tensors are read through attn::Strides so the
// same reference checks every layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention.h"

namespace ref {

inline std::ptrdiff_t at(const attn::Strides& s, int b, int h, int row) {
  return b * s.batch + h * s.head + row * s.row;
}

// Returns out as dense [batch, heads, seq_q, value_dim] and fills weights (dense
// [batch, heads, seq_q, seq_k]) when asked. A row with no visible key gives zeros. Sizes,
// strides and masks come from p; q, k, v (floats or doubles) are read with p's strides.
template <class T>
std::vector<double> attention(const attn::AttentionParams& p, const T* query, const T* key,
                              const T* value, std::vector<double>* weights = nullptr) {
  const int group = p.heads / p.kv_heads;
  std::vector<double> out(static_cast<std::size_t>(p.batch) * p.heads * p.seq_q * p.value_dim, 0.0);
  if (weights) weights->assign(static_cast<std::size_t>(p.batch) * p.heads * p.seq_q * p.seq_k, 0.0);
  std::vector<double> score(p.seq_k);
  std::vector<bool> visible(p.seq_k);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seq_q; ++i) {
        const int kvh = h / group;
        const T* q = query + at(p.q, b, h, i);
        double max = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < p.seq_k; ++j) {
          const T* k = key + at(p.k, b, kvh, j);
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d) dot += double(q[d]) * double(k[d]);
          double s = double(p.scale) * dot;
          bool vis = !p.causal || j <= i + (p.seq_k - p.seq_q);
          const std::ptrdiff_t m = at(p.m, b, h, i) + j;
          if (p.mask_type == attn::MaskType::additive) s += static_cast<const float*>(p.mask)[m];
          if (p.mask_type == attn::MaskType::boolean && !static_cast<const std::uint8_t*>(p.mask)[m])
            vis = false;
          if (p.key_padding && p.key_padding[b * p.key_padding_batch_stride + j]) vis = false;
          if (std::isinf(s) && s < 0) vis = false;
          visible[j] = vis;
          score[j] = s;
          if (vis && s > max) max = s;
        }
        double sum = 0;
        for (int j = 0; j < p.seq_k; ++j) {
          score[j] = visible[j] ? std::exp(score[j] - max) : 0.0;
          sum += score[j];
        }
        if (sum == 0) continue;  // every key masked: zeros
        const std::size_t row = ((static_cast<std::size_t>(b) * p.heads + h) * p.seq_q + i);
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

inline std::vector<double> attention(const attn::AttentionParams& p,
                                     std::vector<double>* weights = nullptr) {
  return attention(p, p.query, p.key, p.value, weights);
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
