// The layer's training half: the tape a training forward fills (record), the backward pass
// through the output projection, attention and the input projections, and the optimizer steps
// (SGD, Adam with its moments) on the packed weights in place.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "layer/exp_log.h"
#include "layer/mha.h"
#include "runtime/parallel.h"

namespace attn {

namespace {

bool copy_into(FloatBuffer& dst, const float* src, std::uint64_t n) {
  if (!dst.allocate(n)) return false;
  std::memcpy(dst.get(), src, dst.size * sizeof(float));
  return true;
}

bool copy_bytes(ByteBuffer& dst, const void* src, std::uint64_t n) {
  if (!dst.allocate(n)) return false;
  std::memcpy(dst.get(), src, dst.size);
  return true;
}

// The work of one product of a [rows, out] by a [rows, in] or an [out, in] matrix.
Work product_work(int rows, int out, int in) {
  return {2.0 * rows * out * in, 4.0 * (double(rows) * (out + in) + double(out) * in)};
}

// dw[o] = Σ_r dy[r][o] · x[r] and db[o] = Σ_r dy[r][o] (db may be null); one output row per item.
void weight_gradients(const float* dy, const float* x, int rows, int out, int in, float* dw, float* db) {
  parallel_for(out, product_work(rows, out, in), [&](int o) {
    float* w = dw + static_cast<std::size_t>(o) * in;
    std::fill(w, w + in, 0.0f);
    float bias = 0.0f;
    for (int r = 0; r < rows; ++r) {
      const float g = dy[static_cast<std::size_t>(r) * out + o];
      bias += g;
      if (g != 0.0f)
        for (int k = 0; k < in; ++k) w[k] += g * x[static_cast<std::size_t>(r) * in + k];
    }
    if (db) db[o] = bias;
  });
}

// dx[r] += Σ_o dy[r][o] · w[o]; one input row per item.
void add_input_gradients(const float* dy, const float* w, int rows, int out, int in, float* dx) {
  parallel_for(rows, product_work(rows, out, in), [&](int r) {
    float* d = dx + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      const float g = dy[static_cast<std::size_t>(r) * out + o];
      if (g != 0.0f)
        for (int k = 0; k < in; ++k) d[k] += g * w[static_cast<std::size_t>(o) * in + k];
    }
  });
}

}  // namespace

MultiHeadAttention::TapeWork MultiHeadAttention::tape_work(const MhaForward& f) const {
  TapeWork w;
  const std::uint64_t rows_q = std::uint64_t(f.batch) * std::uint64_t(f.seq_q);
  const std::uint64_t rows_k = std::uint64_t(f.batch) * std::uint64_t(f.seq_k);
  w.lse = rows_q * std::uint64_t(config_.num_heads);
  w.query = rows_q * std::uint64_t(config_.embed_dim);
  w.q = rows_q * std::uint64_t(q_features());
  w.kv = rows_k * std::uint64_t(kv_features());
  if (f.key) w.key = rows_k * std::uint64_t(config_.kdim);
  if (f.value) w.value = rows_k * std::uint64_t(config_.vdim);
  if (f.mask) {
    w.mask = mask_elements(f.mask_shape, f.batch, config_.num_heads, f.seq_q, f.seq_k) *
             (f.mask_type == MaskType::additive ? sizeof(float) : 1);
  }
  if (f.key_padding) w.key_padding = rows_k;
  if (f.positions) w.positions = f.positions_batch_stride ? rows_q : std::uint64_t(f.seq_q);
  return w;
}

const char* MultiHeadAttention::record(MhaTape& t, const MhaForward& f, const TapeWork& w, const float* q,
                                       const float* k, const float* v, const float* a) const {
  t.filled_ = false;
  t.layer_ = this;
  t.weights_version_ = weights_version_;
  t.key_given_ = f.key != nullptr;
  t.value_given_ = f.value != nullptr;
  t.causal_ = f.causal;
  t.align_ = f.align;
  t.batch_ = f.batch;
  t.seq_q_ = f.seq_q;
  t.seq_k_ = f.seq_k;
  t.mask_type_ = f.mask_type;
  t.mask_shape_ = f.mask_shape;
  bool ok = copy_into(t.xq_, f.query, w.query) && copy_into(t.q_, q, w.q) && copy_into(t.k_, k, w.kv) &&
            copy_into(t.v_, v, w.kv) && copy_into(t.a_, a, w.q);
  if (ok && t.key_given_) ok = copy_into(t.xk_, f.key, w.key);
  if (ok && t.value_given_) ok = copy_into(t.xv_, f.value, w.value);
  if (ok && f.mask) ok = copy_bytes(t.mask_, f.mask, w.mask);
  else if (!f.mask) t.mask_.data.reset();
  if (ok && f.key_padding) ok = copy_bytes(t.key_padding_, f.key_padding, w.key_padding);
  else if (!f.key_padding) t.key_padding_.data.reset();
  t.positions_batch_stride_ = f.positions_batch_stride;
  if (ok && f.positions) {
    ok = t.positions_.allocate(w.positions);
    if (ok) std::memcpy(t.positions_.get(), f.positions, t.positions_.size * sizeof(std::int32_t));
  } else if (!f.positions) {
    t.positions_.data.reset();
  }
  if (!ok) return "multi-head attention: out of memory for the training tape";
  t.filled_ = true;
  return nullptr;
}

const char* MultiHeadAttention::tape_refusal(const MhaTape& t) const {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!t.filled_) return "multi-head attention: backward needs a training forward first";
  if (t.layer_ != this) return "multi-head attention: the tape was filled by another layer";
  if (t.weights_version_ != weights_version_)
    return "multi-head attention: the weights changed since the training forward that filled the tape; "
           "run it again (gradients of the old tape would match neither the old nor the new weights)";
  return nullptr;
}

void MultiHeadAttention::backward_params(const MhaTape& t, AttentionParams& p) const {
  const int hd = head_dim();
  p.query = t.q_.get();
  p.key = t.k_.get();
  p.value = t.v_.get();
  p.batch = t.batch_;
  p.seq_q = t.seq_q_;
  p.seq_k = t.seq_k_;
  p.q = p.o = dense_bshd(config_.num_heads, t.seq_q_, hd);
  p.k = p.v = dense_bshd(config_.num_kv_heads, t.seq_k_, hd);
  p.mask = t.mask_.get();
  p.mask_type = t.mask_.get() ? t.mask_type_ : MaskType::none;
  p.m = mask_strides(t.mask_shape_, config_.num_heads, t.seq_q_, t.seq_k_);
  p.key_padding = t.key_padding_.get();
  p.key_padding_batch_stride = t.seq_k_;
  attention_variants(p, t.causal_, t.align_);
  p.l = dense_bhsd(config_.num_heads, t.seq_q_, 1);
}

MultiHeadAttention::BackwardWork MultiHeadAttention::backward_work(const MhaTape& t) const {
  BackwardWork w;
  for (int i = 0; i < 4; ++i) {
    const Shape shape = projection_shape(i);
    w.w += std::uint64_t(shape.out) * std::uint64_t(shape.in);
  }
  w.da = std::uint64_t(t.batch_) * std::uint64_t(t.seq_q_) * std::uint64_t(q_features());
  w.dk = std::uint64_t(t.batch_) * std::uint64_t(t.seq_k_) * std::uint64_t(kv_features());
  return w;
}

double MultiHeadAttention::backward_workspace_bytes(const MhaTape& t) const {
  if (tape_refusal(t)) return 0;
  AttentionParams p;
  backward_params(t, p);
  return 4.0 * double(backward_work(t).floats()) + attention_workspace_bytes(p, true);
}

const char* MultiHeadAttention::backward(const MhaTape& t, const float* d_out, const MhaGrads& g) const {
  if (const char* err = tape_refusal(t)) return err;
  if (!d_out || !g.d_query || (t.key_given_ && !g.d_key) || (t.value_given_ && !g.d_value) ||
      (config_.sinks && !g.d_sinks))
    return "multi-head attention: missing gradient buffers";
  for (int i = 0; i < 4; ++i)
    if (!g.d_w[i] || (config_.bias[i] && !g.d_b[i])) return "multi-head attention: missing gradient buffers";
  const int e = config_.embed_dim, qf = q_features();
  const int rows_q = t.batch_ * t.seq_q_, rows_k = t.batch_ * t.seq_k_;
  int in[4], out[4];
  for (int i = 0; i < 4; ++i) {
    const Shape shape = projection_shape(i);
    out[i] = shape.out;
    in[i] = shape.in;
  }
  const BackwardWork bw = backward_work(t);
  FloatBuffer work;  // unpacked weights, then dA, dQ, dK, dV
  if (!work.allocate(bw.floats())) return "multi-head attention: out of memory";
  const std::size_t da_n = static_cast<std::size_t>(bw.da), dk_n = static_cast<std::size_t>(bw.dk);
  float* w[4];
  w[0] = work.get();
  for (int i = 1; i < 4; ++i) w[i] = w[i - 1] + static_cast<std::size_t>(out[i - 1]) * in[i - 1];
  for (int i = 0; i < 4; ++i) proj_[i].unpack(w[i], nullptr);
  float* da = work.get() + bw.w;
  float* dq = da + da_n;
  float* dk = dq + da_n;
  float* dv = dk + dk_n;

  // y = a·Woᵀ + bo
  weight_gradients(d_out, t.a_.get(), rows_q, e, qf, g.d_w[3], config_.bias[3] ? g.d_b[3] : nullptr);
  std::fill(da, da + da_n, 0.0f);
  add_input_gradients(d_out, w[3], rows_q, e, qf, da);

  // a = attention(q, k, v), laid out [batch, seq, heads, head_dim]
  AttentionParams p;
  backward_params(t, p);
  p.out = da;  // only checked for presence
  AttentionGrads ag;
  ag.lse = t.lse_.get();
  ag.out = t.a_.get();
  ag.d_out = da;
  ag.d_query = dq;
  ag.d_key = dk;
  ag.d_value = dv;
  ag.d_o = ag.d_q = p.q;
  ag.d_k = ag.d_v = p.k;
  ag.d_sinks = config_.sinks ? g.d_sinks : nullptr;
  if (const char* err = attention_backward(p, ag)) return err;
  // The rotation's gradient is the inverse rotation (of the positions the forward used).
  const std::int32_t* positions = t.positions_.get();
  const std::int64_t query_offset = t.align_ == Align::upper_left ? 0 : t.seq_k_ - t.seq_q_;
  if (const char* err = rotate(dq, t.batch_, t.seq_q_, config_.num_heads, positions, t.positions_batch_stride_,
                               positions ? 0 : query_offset, true))
    return err;
  if (const char* err =
          rotate(dk, t.batch_, t.seq_k_, config_.num_kv_heads, positions, t.positions_batch_stride_, 0, true))
    return err;

  // q, k, v = x·Wᵀ + b; a defaulted key is the query, a defaulted value the key input.
  const float* xk = t.key_given_ ? t.xk_.get() : t.xq_.get();
  const float* xv = t.value_given_ ? t.xv_.get() : xk;
  float* dxk = t.key_given_ ? g.d_key : g.d_query;
  float* dxv = t.value_given_ ? g.d_value : dxk;
  std::fill(g.d_query, g.d_query + static_cast<std::size_t>(rows_q) * e, 0.0f);
  if (t.key_given_) std::fill(g.d_key, g.d_key + static_cast<std::size_t>(rows_k) * config_.kdim, 0.0f);
  if (t.value_given_) std::fill(g.d_value, g.d_value + static_cast<std::size_t>(rows_k) * config_.vdim, 0.0f);
  const float* xs[3] = {t.xq_.get(), xk, xv};
  const float* dys[3] = {dq, dk, dv};
  float* dxs[3] = {g.d_query, dxk, dxv};
  const int rows[3] = {rows_q, rows_k, rows_k};
  for (int i = 0; i < 3; ++i) {
    weight_gradients(dys[i], xs[i], rows[i], out[i], in[i], g.d_w[i], config_.bias[i] ? g.d_b[i] : nullptr);
    add_input_gradients(dys[i], w[i], rows[i], out[i], in[i], dxs[i]);
  }
  return nullptr;
}

void MultiHeadAttention::sgd_step(const MhaGrads& g, float lr) {
  for (int i = 0; i < 4; ++i) proj_[i].add_scaled(g.d_w[i], config_.bias[i] ? g.d_b[i] : nullptr, -lr);
  if (config_.sinks && g.d_sinks)
    for (int h = 0; h < config_.num_heads; ++h) sinks_.get()[h] -= lr * g.d_sinks[h];
  ++weights_version_;
}

std::size_t MultiHeadAttention::weight_floats(int i) const {
  if (i == 4) return config_.sinks ? config_.num_heads : 0;
  return static_cast<std::size_t>(proj_[i].out_features()) * proj_[i].in_features() +
         (config_.bias[i] ? proj_[i].out_features() : 0);
}

bool MultiHeadAttention::adam_moments_kept(int i) const {
  const std::size_t n = weight_floats(i);
  return adam_m_[i].size == n && adam_v_[i].size == n;
}

double MultiHeadAttention::adam_step_bytes() const {
  if (!ready()) return 0;
  std::uint64_t moments = 0, most = 0;
  for (int i = 0; i < param_groups(); ++i) {
    const std::uint64_t n = weight_floats(i);
    most = std::max(most, n);
    if (!adam_moments_kept(i)) moments += 2 * n;
  }
  return 4.0 * double(moments + most);
}

double MultiHeadAttention::set_adam_state_bytes(const ProjectionArrays& m) const {
  if (!ready() || !m.w[0]) return 0;
  std::uint64_t floats = 0;
  for (int i = 0; i < param_groups(); ++i) floats += 2 * std::uint64_t(weight_floats(i));
  return 4.0 * double(floats);
}

const char* MultiHeadAttention::adam_step(const MhaGrads& g, float lr, double beta1, double beta2, float eps,
                                          int step) {
#if defined(__clang__)
#pragma clang fp contract(off)  // every operation on the moments rounded, as PyTorch's float tensors round it
#endif
  if (!ready()) return "multi-head attention: weights are not set";
  if (config_.sinks && !g.d_sinks) return "multi-head attention: missing gradient buffers";
  // Parameter groups: the four projections (weights then bias), then the sinks (i = 4, empty
  // without sinks). Everything this step needs is allocated before anything changes (the
  // failure it prevents: a moment allocated without its twin, or projections 0…i−1 stepped before i ran out of memory).
  const int groups = param_groups();
  FloatBuffer new_m[5], new_v[5], update;
  std::size_t most = 0;
  for (int i = 0; i < groups; ++i) {
    const std::size_t n = weight_floats(i);
    most = std::max(most, n);
    if (adam_moments_kept(i)) continue;
    if (!new_m[i].allocate(n) || !new_v[i].allocate(n))
      return "multi-head attention: out of memory for the optimizer state";
    std::fill(new_m[i].get(), new_m[i].get() + n, 0.0f);
    std::fill(new_v[i].get(), new_v[i].get() + n, 0.0f);
  }
  if (!update.allocate(most)) return "multi-head attention: out of memory for the optimizer step";
  for (int i = 0; i < groups; ++i) {
    if (!new_m[i].get()) continue;
    adam_m_[i] = std::move(new_m[i]);
    adam_v_[i] = std::move(new_v[i]);
  }

  // 1 − β and 1 − β^step in double from the caller's double β, as PyTorch's Adam computes them (in
  // Python floats), then rounded to float; the second moment decays by β2 rounded to float, as
  // PyTorch's float tensors do. So a β within 2⁻²⁵ of 1 (float(β) = 1) still has 1 − β > 0 and no 0/0.
  // The first moment is PyTorch's exp_avg.lerp_(grad, 1 − β1) (its Adam without fused=True):
  // ATen's lerp, from the nearer end: m + w·(g − m) for |w| < 0.5, else g − (g − m)·(1 − w).
  const float c1 = static_cast<float>(1.0 - math::power(beta1, step));
  const float c2 = static_cast<float>(1.0 - math::power(beta2, step));
  const float decay2 = static_cast<float>(beta2);
  const float w1 = static_cast<float>(1.0 - beta1), keep2 = static_cast<float>(1.0 - beta2);
  const bool from_m = std::fabs(w1) < 0.5f;
  const float rest1 = 1.0f - w1;
  for (int i = 0; i < groups; ++i) {
    const std::size_t nb = i < 4 && config_.bias[i] ? proj_[i].out_features() : 0;
    const std::size_t nw = weight_floats(i) - nb;
    const float* gw = i < 4 ? g.d_w[i] : g.d_sinks;
    float* m = adam_m_[i].get();
    float* v = adam_v_[i].get();
    float* u = update.get();
    for (std::size_t j = 0; j < nw + nb; ++j) {
      const float grad = j < nw ? gw[j] : g.d_b[i][j - nw];
      m[j] = from_m ? m[j] + w1 * (grad - m[j]) : grad - (grad - m[j]) * rest1;
      v[j] = decay2 * v[j] + keep2 * grad * grad;
      u[j] = -lr * (m[j] / c1) / (std::sqrt(v[j] / c2) + eps);
    }
    if (i < 4) proj_[i].add_scaled(u, nb ? u + nw : nullptr, 1.0f);
    else
      for (std::size_t j = 0; j < nw; ++j) sinks_.get()[j] += u[j];
  }
  ++weights_version_;
  return nullptr;
}

const char* MultiHeadAttention::get_adam_sinks(float* m, float* v) const {
  if (!config_.sinks) return "multi-head attention: this layer has no sinks";
  if (!has_adam_state()) return "multi-head attention: no optimizer state yet (no adam_step)";
  if (!m || !v) return "multi-head attention: missing output buffers";
  std::memcpy(m, adam_m_[4].get(), config_.num_heads * sizeof(float));
  std::memcpy(v, adam_v_[4].get(), config_.num_heads * sizeof(float));
  return nullptr;
}

const char* MultiHeadAttention::get_adam_state(Projection which, float* m_w, float* m_b, float* v_w, float* v_b) const {
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (!has_adam_state()) return "multi-head attention: no optimizer state yet (no adam_step)";
  if (!m_w || !v_w || (config_.bias[i] && (!m_b || !v_b))) return "multi-head attention: missing output buffers";
  const std::size_t nb = config_.bias[i] ? proj_[i].out_features() : 0, nw = weight_floats(i) - nb;
  std::memcpy(m_w, adam_m_[i].get(), nw * sizeof(float));
  std::memcpy(v_w, adam_v_[i].get(), nw * sizeof(float));
  if (nb) {
    std::memcpy(m_b, adam_m_[i].get() + nw, nb * sizeof(float));
    std::memcpy(v_b, adam_v_[i].get() + nw, nb * sizeof(float));
  }
  return nullptr;
}

const char* MultiHeadAttention::set_adam_state(const ProjectionArrays& m, const ProjectionArrays& v) {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!m.w[0]) {  // a fresh optimizer
    for (int i = 0; i < 5; ++i) {
      adam_m_[i] = FloatBuffer();
      adam_v_[i] = FloatBuffer();
    }
    ++weights_version_;
    return nullptr;
  }
  for (int i = 0; i < 4; ++i)
    if (!m.w[i] || !v.w[i] || (config_.bias[i] && (!m.b[i] || !v.b[i])))
      return "multi-head attention: missing optimizer state arrays";
  if (config_.sinks && (!m.sinks || !v.sinks)) return "multi-head attention: missing optimizer state arrays";
  const int groups = param_groups();
  FloatBuffer new_m[5], new_v[5];
  for (int i = 0; i < groups; ++i) {
    const std::size_t nb = i < 4 && config_.bias[i] ? proj_[i].out_features() : 0, nw = weight_floats(i) - nb;
    if (!new_m[i].allocate(nw + nb) || !new_v[i].allocate(nw + nb))
      return "multi-head attention: out of memory for the optimizer state";
    std::memcpy(new_m[i].get(), i < 4 ? m.w[i] : m.sinks, nw * sizeof(float));
    std::memcpy(new_v[i].get(), i < 4 ? v.w[i] : v.sinks, nw * sizeof(float));
    if (nb) {
      std::memcpy(new_m[i].get() + nw, m.b[i], nb * sizeof(float));
      std::memcpy(new_v[i].get() + nw, v.b[i], nb * sizeof(float));
    }
  }
  for (int i = 0; i < groups; ++i) {
    adam_m_[i] = std::move(new_m[i]);
    adam_v_[i] = std::move(new_v[i]);
  }
  ++weights_version_;
  return nullptr;
}

}  // namespace attn
