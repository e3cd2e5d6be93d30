// The layer: four packed projections around the attention kernel. Activations are batch-first,
// so projected Q, K, V and the attention output are [batch, seq, heads, head_dim] ("bshd") and
// reach the kernel through strides, never copied; with a cache, K and V are projected straight
// into it.
#include "mha.h"

#include <algorithm>
#include <cmath>

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

const char* MultiHeadAttention::set_weight(Projection which, const float* w, const float* b) {
  if (!configured_) return "multi-head attention: not configured";
  if (config_.bias != (b != nullptr))
    return config_.bias ? "multi-head attention: this layer needs biases"
                        : "multi-head attention: this layer has no biases";
  const int e = config_.embed_dim;
  switch (which) {
    case Projection::q: return proj_[0].pack(w, b, e, e);
    case Projection::k: return proj_[1].pack(w, b, kv_features(), config_.kdim);
    case Projection::v: return proj_[2].pack(w, b, kv_features(), config_.vdim);
    case Projection::o: return proj_[3].pack(w, b, e, e);
  }
  return "multi-head attention: unknown projection";
}

bool MultiHeadAttention::ready() const {
  return configured_ && std::all_of(proj_, proj_ + 4, [](const PackedLinear& l) { return l.packed(); });
}

const char* KvCache::allocate(const MultiHeadAttention& layer, int batch, int max_seq) {
  if (!layer.ready()) return "kv cache: the layer's weights are not set";
  if (batch < 1 || max_seq < 1) return "kv cache: batch and max_seq must be positive";
  const std::size_t n = static_cast<std::size_t>(batch) * max_seq * layer.kv_features();
  if (!k_.allocate(n) || !v_.allocate(n)) {
    k_.data.reset();
    v_.data.reset();
    return "kv cache: out of memory";
  }
  owner_ = &layer;
  batch_ = batch;
  max_seq_ = max_seq;
  row_ = layer.kv_features();
  length_ = 0;
  return nullptr;
}

const char* MultiHeadAttention::forward(const MhaForward& f) const {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!f.query || !f.out || f.batch < 1 || f.seq_q < 1 || (!f.cache && f.seq_k < 1))
    return "multi-head attention: invalid forward arguments";
  const int e = config_.embed_dim, kv = kv_features(), hd = head_dim();
  KvCache* cache = f.cache;
  if (cache) {
    if (cache->owner_ != this) return "multi-head attention: the cache belongs to another layer";
    if (cache->batch_ != f.batch) return "multi-head attention: batch differs from the cache's";
    if (f.key || f.value) return "multi-head attention: with a cache, key and value come from the query";
    if (config_.kdim != e || config_.vdim != e)
      return "multi-head attention: a cache needs kdim == vdim == embed_dim";
    if (cache->length_ + f.seq_q > cache->max_seq_) return "multi-head attention: the cache is full";
  }
  const int seq_k = cache ? cache->length_ + f.seq_q : f.seq_k;
  const int rows_q = f.batch * f.seq_q;
  const int rows_k = cache ? f.seq_q : f.batch * seq_k;  // rows per K/V projection call

  // Workspace: Q and the attention output, K and V unless they go to the cache, and the
  // projections' scratch.
  std::size_t scratch_n = 0;
  for (const PackedLinear& l : proj_) scratch_n = std::max(scratch_n, l.scratch_floats(std::max(rows_q, rows_k)));
  const std::size_t q_n = static_cast<std::size_t>(rows_q) * e;
  const std::size_t kv_n = cache ? 0 : static_cast<std::size_t>(rows_k) * kv;
  FloatBuffer work;
  if (!work.allocate(2 * q_n + 2 * kv_n + scratch_n)) return "multi-head attention: out of memory";
  float* q_buf = work.get();
  float* a_buf = q_buf + q_n;
  float* k_buf = a_buf + q_n;
  float* v_buf = k_buf + kv_n;
  float* scratch = v_buf + kv_n;

  proj_[0].apply(f.query, e, rows_q, q_buf, e, scratch);
  AttentionParams p;
  if (cache) {
    const std::ptrdiff_t batch_stride = static_cast<std::ptrdiff_t>(cache->max_seq_) * kv;
    for (int b = 0; b < f.batch; ++b) {
      const float* x = f.query + static_cast<std::ptrdiff_t>(b) * f.seq_q * e;
      const std::ptrdiff_t at = b * batch_stride + static_cast<std::ptrdiff_t>(cache->length_) * kv;
      proj_[1].apply(x, e, f.seq_q, cache->k_.get() + at, kv, scratch);
      proj_[2].apply(x, e, f.seq_q, cache->v_.get() + at, kv, scratch);
    }
    p.key = cache->k_.get();
    p.value = cache->v_.get();
    p.k = p.v = Strides{batch_stride, hd, kv};
  } else {
    const float* key = f.key ? f.key : f.query;
    const float* value = f.value ? f.value : key;
    proj_[1].apply(key, config_.kdim, rows_k, k_buf, kv, scratch);
    proj_[2].apply(value, config_.vdim, rows_k, v_buf, kv, scratch);
    p.key = k_buf;
    p.value = v_buf;
    p.k = p.v = dense_bshd(config_.num_kv_heads, seq_k, hd);
  }
  p.query = q_buf;
  p.out = a_buf;
  p.weights = f.weights;
  p.mask = f.mask;
  p.mask_type = f.mask_type;
  p.key_padding = f.key_padding;
  p.key_padding_batch_stride = seq_k;
  p.batch = f.batch;
  p.heads = config_.num_heads;
  p.kv_heads = config_.num_kv_heads;
  p.seq_q = f.seq_q;
  p.seq_k = seq_k;
  p.head_dim = hd;
  p.value_dim = hd;
  p.q = p.o = dense_bshd(config_.num_heads, f.seq_q, hd);
  p.w = dense_bhsd(config_.num_heads, f.seq_q, seq_k);
  p.m = mask_strides(f.mask_shape, config_.num_heads, f.seq_q, seq_k);
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  p.causal = cache != nullptr || f.causal;
  if (const char* err = attention(p)) return err;

  proj_[3].apply(a_buf, e, rows_q, f.out, e, scratch);
  if (cache) cache->length_ += f.seq_q;
  return nullptr;
}

}  // namespace attn
