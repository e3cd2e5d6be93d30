// The layer: four packed projections around the attention kernel. Activations are batch-first,
// so projected Q, K, V and the attention output are [batch, seq, heads, head_dim] ("bshd") and
// reach the kernel through strides, never copied; with a cache, K and V are projected straight
// into it.
#include "mha.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "parallel.h"

namespace attn {

const char* validate(const MhaConfig& c) {
  if (c.embed_dim < 1 || c.num_heads < 1 || c.num_kv_heads < 1 || c.kdim < 1 || c.vdim < 1)
    return "multi-head attention: sizes must be positive";
  if (c.embed_dim % c.num_heads != 0)
    return "multi-head attention: embed_dim must be a multiple of num_heads";
  if (c.num_heads % c.num_kv_heads != 0)
    return "multi-head attention: num_heads must be a multiple of num_kv_heads";
  return nullptr;
}

const char* MultiHeadAttention::configure(const MhaConfig& config) {
  if (const char* err = validate(config)) return err;
  config_ = config;
  configured_ = true;
  return nullptr;
}

namespace {

int projection_index(Projection which) {
  const int i = static_cast<int>(which);
  return i >= 0 && i < 4 ? i : -1;
}

}  // namespace

const char* MultiHeadAttention::set_weight(Projection which, const float* w, const float* b) {
  if (!configured_) return "multi-head attention: not configured";
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (config_.bias != (b != nullptr))
    return config_.bias ? "multi-head attention: this layer needs biases"
                        : "multi-head attention: this layer has no biases";
  const int e = config_.embed_dim;
  const int out[4] = {e, kv_features(), kv_features(), e};
  const int in[4] = {e, config_.kdim, config_.vdim, e};
  if (const char* err = proj_[i].pack(w, b, out[i], in[i])) return err;
  ++weights_version_;
  return nullptr;
}

const char* MultiHeadAttention::set_weights(const ProjectionArrays& a) {
  if (!configured_) return "multi-head attention: not configured";
  // Pack into a copy of the projections, then swap them in: on failure nothing changed.
  PackedLinear packed[4];
  const int e = config_.embed_dim;
  const int out[4] = {e, kv_features(), kv_features(), e};
  const int in[4] = {e, config_.kdim, config_.vdim, e};
  for (int i = 0; i < 4; ++i) {
    if (config_.bias != (a.b[i] != nullptr))
      return config_.bias ? "multi-head attention: this layer needs biases"
                          : "multi-head attention: this layer has no biases";
    if (const char* err = packed[i].pack(a.w[i], a.b[i], out[i], in[i])) return err;
  }
  for (int i = 0; i < 4; ++i) proj_[i] = std::move(packed[i]);
  ++weights_version_;
  return nullptr;
}

bool MultiHeadAttention::ready() const {
  return configured_ && std::all_of(proj_, proj_ + 4, [](const PackedLinear& l) { return l.packed(); });
}

const char* MultiHeadAttention::get_weight(Projection which, float* w, float* b) const {
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (!proj_[i].packed()) return "multi-head attention: weights are not set";
  if (!w || (config_.bias && !b)) return "multi-head attention: missing output buffers";
  proj_[i].unpack(w, b);
  return nullptr;
}

const char* MultiHeadAttention::forward(const MhaForward& f) const {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!f.query || !f.out || f.batch < 1 || f.seq_q < 1 || (!f.cache && f.seq_k < 1))
    return "multi-head attention: invalid forward arguments";
  const int e = config_.embed_dim, kv = kv_features(), hd = head_dim();
  KvCache* cache = f.cache;
  if (cache) {
    const KvCacheConfig& c = cache->config();
    if (!cache->allocated()) return "multi-head attention: the cache is not allocated";
    if (c.kv_heads != config_.num_kv_heads || c.head_dim != hd || c.value_dim != hd)
      return "multi-head attention: the cache's kv_heads, head_dim or value_dim differ from the layer's";
    if (c.batch != f.batch) return "multi-head attention: batch differs from the cache's";
    if (f.key || f.value) return "multi-head attention: with a cache, key and value come from the query";
    if (config_.kdim != e || config_.vdim != e)
      return "multi-head attention: a cache needs kdim == vdim == embed_dim";
    if (!cache->has_room(f.seq_q)) return "multi-head attention: the cache is full";
  }
  if (cache && f.tape) return "multi-head attention: training (a tape) does not work with a cache";
  const int seq_k = cache ? f.seq_q : f.seq_k;  // the keys projected here
  const int rows_q = f.batch * f.seq_q;
  const int rows_k = f.batch * seq_k;

  // Workspace: Q and the attention output, K and V (which a cache then stores), and the
  // projections' scratch.
  std::size_t scratch_n = 0;
  for (const PackedLinear& l : proj_) scratch_n = std::max(scratch_n, l.scratch_floats(std::max(rows_q, rows_k)));
  const std::size_t q_n = static_cast<std::size_t>(rows_q) * e;
  const std::size_t kv_n = static_cast<std::size_t>(rows_k) * kv;
  FloatBuffer work;
  if (!work.allocate(2 * q_n + 2 * kv_n + scratch_n)) return "multi-head attention: out of memory";
  float* q_buf = work.get();
  float* a_buf = q_buf + q_n;
  float* k_buf = a_buf + q_n;
  float* v_buf = k_buf + kv_n;
  float* scratch = v_buf + kv_n;

  proj_[0].apply(f.query, e, rows_q, q_buf, e, scratch);
  AttentionParams p;
  const float* key = f.key ? f.key : f.query;
  const float* value = f.value ? f.value : key;
  proj_[1].apply(key, config_.kdim, rows_k, k_buf, kv, scratch);
  proj_[2].apply(value, config_.vdim, rows_k, v_buf, kv, scratch);
  p.key = k_buf;
  p.value = v_buf;
  p.k = p.v = dense_bshd(config_.num_kv_heads, seq_k, hd);
  if (cache) {  // the new positions join the cached ones (kept only if everything succeeds)
    if (const char* err = cache->stage(k_buf, p.k, v_buf, p.v, f.seq_q)) return err;
    cache->describe(p, f.seq_q);
  }
  const int keys = p.seq_k = cache ? p.seq_k : seq_k;  // every key attended to
  p.query = q_buf;
  p.out = a_buf;
  p.weights = f.weights;
  p.mask = f.mask;
  p.mask_type = f.mask_type;
  p.key_padding = f.key_padding;
  p.key_padding_batch_stride = keys;
  p.batch = f.batch;
  p.heads = config_.num_heads;
  p.kv_heads = config_.num_kv_heads;
  p.seq_q = f.seq_q;
  p.head_dim = hd;
  p.value_dim = hd;
  p.q = p.o = dense_bshd(config_.num_heads, f.seq_q, hd);
  p.w = dense_bhsd(config_.num_heads, f.seq_q, keys);
  p.m = mask_strides(f.mask_shape, config_.num_heads, f.seq_q, keys);
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  p.causal = cache != nullptr || f.causal;
  MhaTape tape;  // filled here, moved into *f.tape only when complete
  if (f.tape) {  // keep each row's log-sum-exp: the backward pass then skips a forward
    if (!tape.lse_.allocate(static_cast<std::size_t>(f.batch) * config_.num_heads * f.seq_q))
      return "multi-head attention: out of memory for the training tape";
    p.lse = tape.lse_.get();
    p.l = dense_bhsd(config_.num_heads, f.seq_q, 1);
  }
  if (const char* err = attention(p)) return err;
  if (f.tape) {
    if (const char* err = record(tape, f, q_buf, k_buf, v_buf, a_buf)) return err;
  }

  proj_[3].apply(a_buf, e, rows_q, f.out, e, scratch);
  if (cache) cache->commit(f.seq_q);
  if (f.tape) *f.tape = std::move(tape);
  return nullptr;
}

namespace {

bool copy_into(FloatBuffer& dst, const float* src, std::size_t n) {
  if (!dst.allocate(n)) return false;
  std::memcpy(dst.get(), src, n * sizeof(float));
  return true;
}

bool copy_bytes(ByteBuffer& dst, const void* src, std::size_t n) {
  if (!dst.allocate(n)) return false;
  std::memcpy(dst.get(), src, n);
  return true;
}

// dw[o] = Σ_r dy[r][o] · x[r] and db[o] = Σ_r dy[r][o] (db may be null); one output row per item.
void weight_gradients(const float* dy, const float* x, int rows, int out, int in, float* dw, float* db) {
  parallel_for(out, [&](int o) {
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
  parallel_for(rows, [&](int r) {
    float* d = dx + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      const float g = dy[static_cast<std::size_t>(r) * out + o];
      if (g != 0.0f)
        for (int k = 0; k < in; ++k) d[k] += g * w[static_cast<std::size_t>(o) * in + k];
    }
  });
}

}  // namespace

const char* MultiHeadAttention::record(MhaTape& t, const MhaForward& f, const float* q,
                                       const float* k, const float* v, const float* a) const {
  const std::size_t e = config_.embed_dim, kv = kv_features();
  const std::size_t rows_q = static_cast<std::size_t>(f.batch) * f.seq_q;
  const std::size_t rows_k = static_cast<std::size_t>(f.batch) * f.seq_k;
  t.filled_ = false;
  t.layer_ = this;
  t.weights_version_ = weights_version_;
  t.key_given_ = f.key != nullptr;
  t.value_given_ = f.value != nullptr;
  t.causal_ = f.causal;
  t.batch_ = f.batch;
  t.seq_q_ = f.seq_q;
  t.seq_k_ = f.seq_k;
  t.mask_type_ = f.mask_type;
  t.mask_shape_ = f.mask_shape;
  bool ok = copy_into(t.xq_, f.query, rows_q * e) && copy_into(t.q_, q, rows_q * e) &&
            copy_into(t.k_, k, rows_k * kv) && copy_into(t.v_, v, rows_k * kv) &&
            copy_into(t.a_, a, rows_q * e);
  if (ok && t.key_given_) ok = copy_into(t.xk_, f.key, rows_k * config_.kdim);
  if (ok && t.value_given_) ok = copy_into(t.xv_, f.value, rows_k * config_.vdim);
  if (ok && f.mask) {
    const std::size_t slices = f.mask_shape == MaskShape::plane       ? 1
                               : f.mask_shape == MaskShape::per_batch ? f.batch
                                                                      : std::size_t(f.batch) * config_.num_heads;
    const std::size_t bytes = slices * f.seq_q * f.seq_k * (f.mask_type == MaskType::additive ? sizeof(float) : 1);
    ok = copy_bytes(t.mask_, f.mask, bytes);
  } else {
    t.mask_.data.reset();
  }
  if (ok && f.key_padding) ok = copy_bytes(t.key_padding_, f.key_padding, rows_k);
  else if (!f.key_padding) t.key_padding_.data.reset();
  if (!ok) return "multi-head attention: out of memory for the training tape";
  t.filled_ = true;
  return nullptr;
}

const char* MultiHeadAttention::backward(const MhaTape& t, const float* d_out, const MhaGrads& g) const {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!t.filled_) return "multi-head attention: backward needs a training forward first";
  if (t.layer_ != this) return "multi-head attention: the tape was filled by another layer";
  if (t.weights_version_ != weights_version_)
    return "multi-head attention: the weights changed since the training forward that filled the tape; "
           "run it again (gradients of the old tape would match neither the old nor the new weights)";
  if (!d_out || !g.d_query || (t.key_given_ && !g.d_key) || (t.value_given_ && !g.d_value))
    return "multi-head attention: missing gradient buffers";
  for (int i = 0; i < 4; ++i)
    if (!g.d_w[i] || (config_.bias && !g.d_b[i])) return "multi-head attention: missing gradient buffers";
  const int e = config_.embed_dim, kv = kv_features(), hd = head_dim();
  const int rows_q = t.batch_ * t.seq_q_, rows_k = t.batch_ * t.seq_k_;
  const int in[4] = {e, config_.kdim, config_.vdim, e};
  const int out[4] = {e, kv, kv, e};
  std::size_t w_n = 0;
  for (int i = 0; i < 4; ++i) w_n += static_cast<std::size_t>(out[i]) * in[i];
  FloatBuffer work;  // unpacked weights, then dA, dQ, dK, dV
  const std::size_t da_n = static_cast<std::size_t>(rows_q) * e, dk_n = static_cast<std::size_t>(rows_k) * kv;
  if (!work.allocate(w_n + 2 * da_n + 2 * dk_n)) return "multi-head attention: out of memory";
  float* w[4];
  w[0] = work.get();
  for (int i = 1; i < 4; ++i) w[i] = w[i - 1] + static_cast<std::size_t>(out[i - 1]) * in[i - 1];
  for (int i = 0; i < 4; ++i) proj_[i].unpack(w[i], nullptr);
  float* da = w[3] + static_cast<std::size_t>(e) * e;
  float* dq = da + da_n;
  float* dk = dq + da_n;
  float* dv = dk + dk_n;

  // y = a·Woᵀ + bo
  weight_gradients(d_out, t.a_.get(), rows_q, e, e, g.d_w[3], config_.bias ? g.d_b[3] : nullptr);
  std::fill(da, da + da_n, 0.0f);
  add_input_gradients(d_out, w[3], rows_q, e, e, da);

  // a = attention(q, k, v), laid out [batch, seq, heads, head_dim]
  AttentionParams p;
  p.query = t.q_.get();
  p.key = t.k_.get();
  p.value = t.v_.get();
  p.out = da;  // only checked for presence
  p.batch = t.batch_;
  p.heads = config_.num_heads;
  p.kv_heads = config_.num_kv_heads;
  p.seq_q = t.seq_q_;
  p.seq_k = t.seq_k_;
  p.head_dim = p.value_dim = hd;
  p.q = p.o = dense_bshd(config_.num_heads, t.seq_q_, hd);
  p.k = p.v = dense_bshd(config_.num_kv_heads, t.seq_k_, hd);
  p.mask = t.mask_.get();
  p.mask_type = t.mask_.get() ? t.mask_type_ : MaskType::none;
  p.m = mask_strides(t.mask_shape_, config_.num_heads, t.seq_q_, t.seq_k_);
  p.key_padding = t.key_padding_.get();
  p.key_padding_batch_stride = t.seq_k_;
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  p.causal = t.causal_;
  p.l = dense_bhsd(config_.num_heads, t.seq_q_, 1);
  AttentionGrads ag;
  ag.lse = t.lse_.get();
  ag.out = t.a_.get();
  ag.d_out = da;
  ag.d_query = dq;
  ag.d_key = dk;
  ag.d_value = dv;
  ag.d_o = ag.d_q = p.q;
  ag.d_k = ag.d_v = p.k;
  if (const char* err = attention_backward(p, ag)) return err;

  // q, k, v = x·Wᵀ + b; a defaulted key is the query, a defaulted value the key input.
  const float* xk = t.key_given_ ? t.xk_.get() : t.xq_.get();
  const float* xv = t.value_given_ ? t.xv_.get() : xk;
  float* dxk = t.key_given_ ? g.d_key : g.d_query;
  float* dxv = t.value_given_ ? g.d_value : dxk;
  std::fill(g.d_query, g.d_query + da_n, 0.0f);
  if (t.key_given_) std::fill(g.d_key, g.d_key + static_cast<std::size_t>(rows_k) * config_.kdim, 0.0f);
  if (t.value_given_) std::fill(g.d_value, g.d_value + static_cast<std::size_t>(rows_k) * config_.vdim, 0.0f);
  const float* xs[3] = {t.xq_.get(), xk, xv};
  const float* dys[3] = {dq, dk, dv};
  float* dxs[3] = {g.d_query, dxk, dxv};
  const int rows[3] = {rows_q, rows_k, rows_k};
  for (int i = 0; i < 3; ++i) {
    weight_gradients(dys[i], xs[i], rows[i], out[i], in[i], g.d_w[i], config_.bias ? g.d_b[i] : nullptr);
    add_input_gradients(dys[i], w[i], rows[i], out[i], in[i], dxs[i]);
  }
  return nullptr;
}

void MultiHeadAttention::sgd_step(const MhaGrads& g, float lr) {
  for (int i = 0; i < 4; ++i) proj_[i].add_scaled(g.d_w[i], config_.bias ? g.d_b[i] : nullptr, -lr);
  ++weights_version_;
}

std::size_t MultiHeadAttention::weight_floats(int i) const {
  return static_cast<std::size_t>(proj_[i].out_features()) * proj_[i].in_features() +
         (config_.bias ? proj_[i].out_features() : 0);
}

const char* MultiHeadAttention::adam_step(const MhaGrads& g, float lr, float beta1, float beta2,
                                          float eps, int step) {
  if (!ready()) return "multi-head attention: weights are not set";
  // Everything this step needs is allocated before anything changes (issue 16: a moment
  // allocated without its twin, or projections 0…i−1 stepped before i ran out of memory).
  FloatBuffer new_m[4], new_v[4], update;
  std::size_t most = 0;
  for (int i = 0; i < 4; ++i) {
    const std::size_t n = weight_floats(i);
    most = std::max(most, n);
    if (adam_m_[i].size == n && adam_v_[i].size == n) continue;
    if (!new_m[i].allocate(n) || !new_v[i].allocate(n))
      return "multi-head attention: out of memory for the optimizer state";
    std::fill(new_m[i].get(), new_m[i].get() + n, 0.0f);
    std::fill(new_v[i].get(), new_v[i].get() + n, 0.0f);
  }
  if (!update.allocate(most)) return "multi-head attention: out of memory for the optimizer step";
  for (int i = 0; i < 4; ++i) {
    if (!new_m[i].get()) continue;
    adam_m_[i] = std::move(new_m[i]);
    adam_v_[i] = std::move(new_v[i]);
  }

  const float c1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  for (int i = 0; i < 4; ++i) {
    const std::size_t nb = config_.bias ? proj_[i].out_features() : 0;
    const std::size_t nw = weight_floats(i) - nb;
    float* m = adam_m_[i].get();
    float* v = adam_v_[i].get();
    float* u = update.get();
    for (std::size_t j = 0; j < nw + nb; ++j) {
      const float grad = j < nw ? g.d_w[i][j] : g.d_b[i][j - nw];
      m[j] = beta1 * m[j] + (1.0f - beta1) * grad;
      v[j] = beta2 * v[j] + (1.0f - beta2) * grad * grad;
      u[j] = -lr * (m[j] / c1) / (std::sqrt(v[j] / c2) + eps);
    }
    proj_[i].add_scaled(u, nb ? u + nw : nullptr, 1.0f);
  }
  ++weights_version_;
  return nullptr;
}

const char* MultiHeadAttention::get_adam_state(Projection which, float* m_w, float* m_b, float* v_w,
                                               float* v_b) const {
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (!has_adam_state()) return "multi-head attention: no optimizer state yet (no adam_step)";
  if (!m_w || !v_w || (config_.bias && (!m_b || !v_b))) return "multi-head attention: missing output buffers";
  const std::size_t nb = config_.bias ? proj_[i].out_features() : 0, nw = weight_floats(i) - nb;
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
    for (int i = 0; i < 4; ++i) {
      adam_m_[i] = FloatBuffer();
      adam_v_[i] = FloatBuffer();
    }
    ++weights_version_;
    return nullptr;
  }
  for (int i = 0; i < 4; ++i)
    if (!m.w[i] || !v.w[i] || (config_.bias && (!m.b[i] || !v.b[i])))
      return "multi-head attention: missing optimizer state arrays";
  FloatBuffer new_m[4], new_v[4];
  for (int i = 0; i < 4; ++i) {
    const std::size_t nb = config_.bias ? proj_[i].out_features() : 0, nw = weight_floats(i) - nb;
    if (!new_m[i].allocate(nw + nb) || !new_v[i].allocate(nw + nb))
      return "multi-head attention: out of memory for the optimizer state";
    std::memcpy(new_m[i].get(), m.w[i], nw * sizeof(float));
    std::memcpy(new_v[i].get(), v.w[i], nw * sizeof(float));
    if (nb) {
      std::memcpy(new_m[i].get() + nw, m.b[i], nb * sizeof(float));
      std::memcpy(new_v[i].get() + nw, v.b[i], nb * sizeof(float));
    }
  }
  for (int i = 0; i < 4; ++i) {
    adam_m_[i] = std::move(new_m[i]);
    adam_v_[i] = std::move(new_v[i]);
  }
  ++weights_version_;
  return nullptr;
}

}  // namespace attn
