// The layer: four packed projections around the attention kernel, and its weights. Activations
// are batch-first, so projected Q, K, V and the attention output are [batch, seq, heads,
// head_dim] ("bshd") and reach the kernel through strides, never copied; with a cache, the new
// K and V are staged into it. Training (tape, backward, optimizer steps): mha_training.cpp.
#include "layer/mha.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "kernel/score_rule.h"
#include "layer/rotary.h"
#include "runtime/parallel.h"

namespace attn {

const char* validate(const MhaConfig& c) {
  if (c.embed_dim < 1 || c.num_heads < 1 || c.num_kv_heads < 1 || c.kdim < 1 || c.vdim < 1 || c.head_dim < 0)
    return "multi-head attention: sizes must be positive";
  if (c.head_dim == 0 && c.embed_dim % c.num_heads != 0)
    return "multi-head attention: embed_dim must be a multiple of num_heads (or head_dim given)";
  if (c.num_heads % c.num_kv_heads != 0) return "multi-head attention: num_heads must be a multiple of num_kv_heads";
  const int hd = c.head_dim ? c.head_dim : c.embed_dim / c.num_heads;
  if (std::int64_t(c.num_heads) * hd > INT_MAX) return "multi-head attention: num_heads * head_dim is too large";
  if (!(c.scale >= 0.0f) || std::isinf(c.scale))
    return "multi-head attention: scale must be finite and >= 0 (0: 1/sqrt(head_dim))";
  if (c.rotary_dim < 0 || c.rotary_dim % 2 != 0 || c.rotary_dim > hd)
    return "multi-head attention: rotary_dim must be 0 or even and at most head_dim";
  if (c.rotary_dim && !(c.rotary_base > 0.0)) return "multi-head attention: rotary_base must be positive";
  if (c.window_left < kNoLimit || c.window_right < kNoLimit)
    return "multi-head attention: window sides must be >= 0 or kNoLimit";
  if (!(c.softcap >= 0.0f) || std::isinf(c.softcap)) return "multi-head attention: softcap must be finite and >= 0";
  return nullptr;
}

const char* MultiHeadAttention::configure(const MhaConfig& config) {
  if (const char* err = validate(config)) return err;
  config_ = config;
  if (!config_.head_dim) config_.head_dim = config.embed_dim / config.num_heads;
  if (config_.scale == 0.0f) config_.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  configured_ = true;
  return nullptr;
}

const char* MultiHeadAttention::set_rotary_tables(const float* cos, const float* sin, int positions) {
  if (!configured_ || config_.rotary_dim == 0) return "multi-head attention: the layer has no rotary embeddings";
  if (!cos) {
    rotary_cos_ = FloatBuffer();
    rotary_sin_ = FloatBuffer();
    rotary_positions_ = 0;
    return nullptr;
  }
  if (!sin || positions < 1) return "multi-head attention: rotary tables need cos, sin and positions >= 1";
  FloatBuffer c, sn;
  const std::uint64_t n = rotary_table_floats(positions);
  if (!c.allocate(n) || !sn.allocate(n)) return "multi-head attention: out of memory for the rotary tables";
  std::memcpy(c.get(), cos, c.size * sizeof(float));
  std::memcpy(sn.get(), sin, sn.size * sizeof(float));
  rotary_cos_ = std::move(c);
  rotary_sin_ = std::move(sn);
  rotary_positions_ = positions;
  return nullptr;
}

double MultiHeadAttention::rotary_tables_bytes(const float* cos, const float* sin, int positions) const {
  if (!configured_ || config_.rotary_dim == 0 || !cos || !sin || positions < 1) return 0;
  return 4.0 * 2.0 * double(rotary_table_floats(positions));
}

const char* MultiHeadAttention::set_alibi(const float* slopes) {
  if (!configured_) return "multi-head attention: not configured";
  if (!slopes) {
    alibi_ = FloatBuffer();
    return nullptr;
  }
  FloatBuffer a;
  if (!a.allocate(config_.num_heads)) return "multi-head attention: out of memory for the ALiBi slopes";
  std::memcpy(a.get(), slopes, config_.num_heads * sizeof(float));
  alibi_ = std::move(a);
  return nullptr;
}

double MultiHeadAttention::alibi_bytes(const float* slopes) const {
  return configured_ && slopes ? 4.0 * config_.num_heads : 0;
}

const char* MultiHeadAttention::get_sinks(float* out) const {
  if (!config_.sinks) return "multi-head attention: this layer has no sinks";
  if (!sinks_.get()) return "multi-head attention: weights are not set";
  if (!out) return "multi-head attention: missing output buffers";
  std::memcpy(out, sinks_.get(), config_.num_heads * sizeof(float));
  return nullptr;
}

const char* MultiHeadAttention::rotate(float* x, int batch, int seq, int heads, const std::int32_t* positions,
                                       std::ptrdiff_t positions_batch_stride, std::int64_t offset, bool inverse) const {
  if (config_.rotary_dim == 0) return nullptr;
  RotaryParams r;
  r.in = r.out = x;
  r.x = r.o = dense_bshd(heads, seq, head_dim());
  r.batch = batch;
  r.heads = heads;
  r.seq = seq;
  r.head_dim = head_dim();
  r.rotary_dim = config_.rotary_dim;
  r.interleaved = config_.rotary_interleaved;
  r.positions = positions;
  r.positions_batch_stride = positions_batch_stride;
  r.position_offset = offset;
  r.base = config_.rotary_base;
  r.cos = rotary_cos_.get();
  r.sin = rotary_sin_.get();
  r.table_positions = rotary_positions_;
  r.inverse = inverse;
  return rotary(r);
}

void MultiHeadAttention::attention_variants(AttentionParams& p, bool causal, Align align) const {
  p.heads = config_.num_heads;
  p.kv_heads = config_.num_kv_heads;
  p.head_dim = p.value_dim = head_dim();
  p.scale = config_.scale;
  p.causal = causal;
  p.align = align;
  p.window_left = config_.window_left;
  p.window_right = config_.window_right;
  p.softcap = config_.softcap;
  p.alibi_slopes = alibi_.get();
  p.alibi_batch_stride = 0;
  p.sinks = config_.sinks ? sinks_.get() : nullptr;
}

const char* MultiHeadAttention::set_weight(Projection which, const float* w, const float* b) {
  if (!configured_) return "multi-head attention: not configured";
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (const char* err = bias_refusal(i, b)) return err;
  const Shape shape = projection_shape(i);
  if (const char* err = proj_[i].pack(w, b, shape.out, shape.in)) return err;
  ++weights_version_;
  return nullptr;
}

MultiHeadAttention::Shape MultiHeadAttention::projection_shape(int i) const {
  const int e = config_.embed_dim, qf = q_features();
  const Shape shapes[4] = {{qf, e}, {kv_features(), config_.kdim}, {kv_features(), config_.vdim}, {e, qf}};
  return shapes[i];
}

const char* MultiHeadAttention::bias_refusal(int i, const float* b) const {
  static const char* const needs[4] = {
      "multi-head attention: the q projection needs a bias", "multi-head attention: the k projection needs a bias",
      "multi-head attention: the v projection needs a bias", "multi-head attention: the o projection needs a bias"};
  static const char* const has_none[4] = {
      "multi-head attention: the q projection has no bias", "multi-head attention: the k projection has no bias",
      "multi-head attention: the v projection has no bias", "multi-head attention: the o projection has no bias"};
  if (config_.bias[i] == (b != nullptr)) return nullptr;
  return config_.bias[i] ? needs[i] : has_none[i];
}

const char* MultiHeadAttention::set_weights(const ProjectionArrays& a) {
  if (!configured_) return "multi-head attention: not configured";
  // Pack into a copy of the projections, then swap them in: on failure nothing changed.
  PackedLinear packed[4];
  for (int i = 0; i < 4; ++i) {
    if (const char* err = bias_refusal(i, a.b[i])) return err;
    const Shape shape = projection_shape(i);
    if (const char* err = packed[i].pack(a.w[i], a.b[i], shape.out, shape.in)) return err;
  }
  if (config_.sinks != (a.sinks != nullptr))
    return config_.sinks ? "multi-head attention: this layer needs sinks"
                         : "multi-head attention: this layer has no sinks";
  FloatBuffer sinks;
  if (a.sinks) {
    if (!sinks.allocate(config_.num_heads)) return "multi-head attention: out of memory for the sinks";
    std::memcpy(sinks.get(), a.sinks, config_.num_heads * sizeof(float));
  }
  for (int i = 0; i < 4; ++i) proj_[i] = std::move(packed[i]);
  if (a.sinks) sinks_ = std::move(sinks);
  ++weights_version_;
  return nullptr;
}

double MultiHeadAttention::set_weights_bytes() const {
  if (!configured_) return 0;
  std::uint64_t floats = config_.sinks ? config_.num_heads : 0;
  for (int i = 0; i < 4; ++i) {
    const Shape shape = projection_shape(i);
    floats += packed_linear_floats(shape.out, shape.in);
  }
  return 4.0 * double(floats);
}

bool MultiHeadAttention::ready() const {
  return configured_ && std::all_of(proj_, proj_ + 4, [](const PackedLinear& l) { return l.packed(); }) &&
         (!config_.sinks || sinks_.get());
}

const char* MultiHeadAttention::get_weight(Projection which, float* w, float* b) const {
  const int i = projection_index(which);
  if (i < 0) return "multi-head attention: unknown projection";
  if (!proj_[i].packed()) return "multi-head attention: weights are not set";
  if (!w || (config_.bias[i] && !b)) return "multi-head attention: missing output buffers";
  proj_[i].unpack(w, b);
  return nullptr;
}

CacheCheck MultiHeadAttention::check_cache(const KvCacheConfig& c) const {
  AttentionParams p;
  attention_variants(p, true, Align::lower_right);  // decoding: causal over every position
  CacheCall call = cache_call(p);
  call.batch = 0;  // the forward's, checked there
  return check_config(call, c);
}

const char* MultiHeadAttention::cross_cache_refusal(const KvCacheConfig& c, int batch) const {
  if (c.window > 0) return "multi-head attention: a cross-attention cache is linear, not a ring";
  if (c.batch != batch) return "multi-head attention: the call's batch differs from the cross-attention cache's";
  if (c.kv_heads != config_.num_kv_heads || c.head_dim != head_dim() || c.value_dim != head_dim())
    return "multi-head attention: the cross-attention cache's kv_heads, head_dim and value_dim must be the layer's";
  return nullptr;
}

const char* MultiHeadAttention::forward_params(const MhaForward& f, AttentionParams& p) const {
  attention_variants(p, f.cache != nullptr || f.causal, f.align);
  p.batch = f.batch;
  p.seq_q = f.seq_q;
  if (f.cross) {  // keys of another sequence: the call's score rule over them, as over arrays
    if (!f.cross->allocated()) return "multi-head attention: the cross-attention cache is not allocated";
    if (const char* err = cross_cache_refusal(f.cross->config(), f.batch)) return err;
    if (f.cross->length() == 0) return "multi-head attention: the cross-attention cache is empty";
    f.cross->describe(p);
    return nullptr;
  }
  if (!f.cache) {
    p.seq_k = f.seq_k;
    return nullptr;
  }
  p.seq_k = 0;  // every position the cache holds, and the new ones
  if (const CacheCheck check = resolve(cache_call(p, f.seq_q), *f.cache, p); !check.ok()) return message(check);
  return nullptr;
}

MultiHeadAttention::ForwardWork MultiHeadAttention::forward_work(const MhaForward& f, std::int64_t rows_k,
                                                                 int keys) const {
  ForwardWork w;
  const std::int64_t rows_q = std::int64_t(f.batch) * f.seq_q;
  w.q = std::uint64_t(rows_q) * std::uint64_t(q_features());
  w.kv = std::uint64_t(rows_k) * std::uint64_t(kv_features());
  if (f.weights && f.average_weights) w.weights = std::uint64_t(rows_q) * config_.num_heads * std::uint64_t(keys);
  // The projections' inputs: the query's and the attention output's rows, and the keys' (if any).
  w.scratch = std::max(linear_scratch_floats(rows_q, config_.embed_dim), linear_scratch_floats(rows_q, q_features()));
  if (rows_k)
    for (int in : {config_.kdim, config_.vdim}) w.scratch = std::max(w.scratch, linear_scratch_floats(rows_k, in));
  return w;
}

const char* MultiHeadAttention::project_kv(const float* key, const float* value, int batch, int seq,
                                           const std::int32_t* positions, std::ptrdiff_t positions_batch_stride,
                                           std::int64_t offset, float* k, float* v, float* scratch) const {
  const int rows = batch * seq, kv = kv_features();
  proj_[1].apply(key, config_.kdim, rows, k, kv, scratch);
  proj_[2].apply(value, config_.vdim, rows, v, kv, scratch);
  return rotate(k, batch, seq, config_.num_kv_heads, positions, positions_batch_stride, offset, false);
}

double MultiHeadAttention::forward_workspace_bytes(const MhaForward& f) const {
  AttentionParams p;
  const bool keys_given = !f.cache && !f.cross;
  if (!ready() || f.batch < 1 || f.seq_q < 1 || (keys_given && f.seq_k < 1) || (!keys_given && f.tape) ||
      (f.cache && f.cross) || forward_params(f, p))
    return 0;
  if (keys_given) p.key = p.value = this;  // given: the estimate reads no tensor (a cache's are set)
  const std::int64_t rows_k = std::int64_t(f.batch) * (f.cache ? f.seq_q : f.cross ? 0 : f.seq_k);
  const double work = 4.0 * double(forward_work(f, rows_k, p.seq_k).floats());
  const double kernel = attention_workspace_bytes(p);
  if (!f.tape) return work + kernel;
  // The tape's log-sum-exps are held with the kernel's workspace; its copies are made after that
  // is given back, into a new tape (the old one, if any, is given back only at the end).
  const TapeWork t = tape_work(f);
  return work + 4.0 * double(t.lse) + std::max(kernel, double(t.copies_bytes()));
}

const char* MultiHeadAttention::forward(const MhaForward& f) const {
  if (!ready()) return "multi-head attention: weights are not set";
  const bool keys_given = !f.cache && !f.cross;  // K and V projected from f.key and f.value (or the query)
  if (!f.query || !f.out || f.batch < 1 || f.seq_q < 1 || (keys_given && f.seq_k < 1) ||
      (f.average_weights && !f.weights))
    return "multi-head attention: invalid forward arguments";
  const int e = config_.embed_dim, qf = q_features(), hd = head_dim();
  KvCache* cache = f.cache;
  if (cache && f.cross) return "multi-head attention: a cache and a cross-attention cache exclude each other";
  if (cache) {
    if (f.key || f.value) return "multi-head attention: with a cache, key and value come from the query";
    if (config_.kdim != e || config_.vdim != e) return "multi-head attention: a cache needs kdim == vdim == embed_dim";
  }
  if (f.cross) {
    if (f.key || f.value) return "multi-head attention: with a cross-attention cache, key and value come from it";
    if (f.positions)
      return "multi-head attention: positions do not apply to a cross-attention cache (its keys were rotated when "
             "it was filled)";
  }
  if (!keys_given && f.tape) return "multi-head attention: training (a tape) does not work with a cache";
  const float* key = f.key ? f.key : f.query;
  const float* value = f.value ? f.value : key;
  if (keys_given && ((!f.key && config_.kdim != e) || (!f.value && (f.key ? config_.kdim : e) != config_.vdim)))
    return "multi-head attention: key and value are required when kdim and vdim differ from the input's features";
  if (f.positions && keys_given && f.key && f.seq_k != f.seq_q)
    return "multi-head attention: positions need seq_k == seq_q (they are used for queries and keys alike)";
  const int seq_k = cache ? f.seq_q : f.cross ? 0 : f.seq_k;  // the keys projected here

  // The score rule: the layer's (causal always with a cache: decoding), which a cache only
  // checks (cache_rule.h), never changes; with a cache it also says where the keys are.
  AttentionParams p;
  if (const char* err = forward_params(f, p)) return err;
  const int keys = p.seq_k;  // every key attended to
  const int rows_q = f.batch * f.seq_q;

  const ForwardWork w = forward_work(f, std::int64_t(f.batch) * seq_k, keys);
  FloatBuffer work;
  if (!work.allocate(w.floats())) return "multi-head attention: out of memory";
  float* q_buf = work.get();
  float* a_buf = q_buf + w.q;
  float* k_buf = a_buf + w.q;
  float* v_buf = k_buf + w.kv;
  float* head_weights = v_buf + w.kv;  // per head, when f.weights is their mean
  float* scratch = head_weights + w.weights;

  // Rotary positions, unless given (then for both): queries at score::offset + t, the positions
  // the score rule puts them at; keys at 0…, or with a cache at the queries' (they are the same
  // new positions, after the cached ones). A cross-attention cache's keys sit at 0… too.
  proj_[0].apply(f.query, e, rows_q, q_buf, qf, scratch);
  const std::int64_t query_offset = score::offset(p);
  if (const char* err = rotate(q_buf, f.batch, f.seq_q, config_.num_heads, f.positions, f.positions_batch_stride,
                               f.positions ? 0 : query_offset, false))
    return err;
  if (seq_k) {
    const std::int64_t key_offset = f.positions ? 0 : cache ? query_offset : 0;
    if (const char* err = project_kv(key, value, f.batch, seq_k, f.positions, f.positions_batch_stride, key_offset,
                                     k_buf, v_buf, scratch))
      return err;
  }
  const Strides kv_strides = dense_bshd(config_.num_kv_heads, seq_k, hd);
  if (cache) {  // the new positions join the cached ones (kept only if everything succeeds)
    if (const char* err = cache->stage(k_buf, kv_strides, v_buf, kv_strides, f.seq_q)) return err;
  } else if (keys_given) {
    p.key = k_buf;
    p.value = v_buf;
    p.k = p.v = kv_strides;
  }
  p.query = q_buf;
  p.out = a_buf;
  p.weights = f.average_weights ? head_weights : f.weights;
  p.mask = f.mask;
  p.mask_type = f.mask_type;
  p.key_padding = f.key_padding;
  p.key_padding_batch_stride = keys;
  p.q = p.o = dense_bshd(config_.num_heads, f.seq_q, hd);
  p.w = dense_bhsd(config_.num_heads, f.seq_q, keys);
  p.m = mask_strides(f.mask_shape, config_.num_heads, f.seq_q, keys);
  MhaTape tape;  // filled here, moved into *f.tape only when complete
  const TapeWork tw = f.tape ? tape_work(f) : TapeWork{};
  if (f.tape) {  // keep each row's log-sum-exp: the backward pass then skips a forward
    if (!tape.lse_.allocate(tw.lse)) return "multi-head attention: out of memory for the training tape";
    p.lse = tape.lse_.get();
    p.l = dense_bhsd(config_.num_heads, f.seq_q, 1);
  }
  if (const char* err = attention(p)) return err;
  if (f.weights && f.average_weights) average_heads(head_weights, f.batch, f.seq_q, keys, f.weights);
  if (f.tape) {
    if (const char* err = record(tape, f, tw, q_buf, k_buf, v_buf, a_buf)) return err;
  }

  proj_[3].apply(a_buf, qf, rows_q, f.out, e, scratch);
  if (cache) cache->commit(f.seq_q);
  if (f.tape) *f.tape = std::move(tape);
  return nullptr;
}

void MultiHeadAttention::average_heads(const float* per_head, int batch, int seq_q, int keys, float* mean) const {
  const int heads = config_.num_heads;
  const std::size_t plane = std::size_t(seq_q) * keys;
  for (int b = 0; b < batch; ++b) {
    float* m = mean + b * plane;
    const float* w = per_head + b * heads * plane;
    std::copy(w, w + plane, m);
    for (int h = 1; h < heads; ++h)
      for (std::size_t j = 0; j < plane; ++j) m[j] += w[h * plane + j];
    for (std::size_t j = 0; j < plane; ++j) m[j] /= float(heads);
  }
}

std::uint64_t MultiHeadAttention::cross_fill_floats(std::uint64_t rows) const {
  const std::int64_t r = std::int64_t(rows);
  return 2 * rows * std::uint64_t(kv_features()) +
         std::max(linear_scratch_floats(r, config_.kdim), linear_scratch_floats(r, config_.vdim));
}

double MultiHeadAttention::fill_cross_cache_bytes(const KvCache& cache, int batch, int seq_k) const {
  if (!ready() || batch < 1 || seq_k < 1 || !cache.allocated() || cache.length() != 0 ||
      cross_cache_refusal(cache.config(), batch) || seq_k > cache.config().max_seq)
    return 0;
  return 4.0 * double(cross_fill_floats(std::uint64_t(batch) * std::uint64_t(seq_k)));
}

const char* MultiHeadAttention::fill_cross_cache(KvCache& cache, const float* key, const float* value, int batch,
                                                 int seq_k) const {
  if (!ready()) return "multi-head attention: weights are not set";
  if (!key || batch < 1 || seq_k < 1) return "multi-head attention: invalid cross-attention cache arguments";
  if (!value && config_.kdim != config_.vdim)
    return "multi-head attention: a value is required when vdim differs from kdim";
  if (!cache.allocated()) return "multi-head attention: the cross-attention cache is not allocated";
  if (const char* err = cross_cache_refusal(cache.config(), batch)) return err;
  if (cache.length() != 0) return "multi-head attention: the cross-attention cache is not empty";
  if (seq_k > cache.config().max_seq) return "multi-head attention: the cross-attention cache has too few positions";
  const std::uint64_t rows = std::uint64_t(batch) * std::uint64_t(seq_k), kv = rows * std::uint64_t(kv_features());
  FloatBuffer work;
  if (!work.allocate(cross_fill_floats(rows))) return "multi-head attention: out of memory";
  float* k = work.get();
  float* v = k + kv;
  if (const char* err = project_kv(key, value ? value : key, batch, seq_k, nullptr, 0, 0, k, v, v + kv)) return err;
  const Strides s = dense_bshd(config_.num_kv_heads, seq_k, head_dim());
  return cache.append(k, s, v, s, seq_k);
}

}  // namespace attn
