// A multi-head attention layer with learned projections, as torch.nn.MultiheadAttention computes
// it (batch-first): Q = xq·Wqᵀ + bq, K = xk·Wkᵀ + bk, V = xv·Wvᵀ + bv, attention per head
// (grouped K/V heads allowed), then y = concat(heads)·Woᵀ + bo; as wide as current models make
// it (a head size of its own, any scale, a bias per projection), with their options: rotary
// embeddings on the projected Q and K (Llama), a sliding window (Mistral), logit softcapping
// (Gemma 2), ALiBi (BLOOM) and learned sinks (gpt-oss). A KvCache keeps projected (and rotated) K
// and V of earlier positions in place for incremental decoding, or, for cross-attention (the
// decoders of Whisper, T5, BART), K and V projected once from the encoder's output.
#pragma once

#include <cstdint>
#include <memory>

#include "cache/cache_rule.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"
#include "layer/linear.h"

namespace attn {

// Which of the four projections (q, k, v, o) have a bias, as each nn.Linear's bias= says
// (Qwen2: no o bias; Whisper: no k bias). From one bool: all or none.
struct Biases {
  Biases(bool all = true) : has{all, all, all, all} {}  // NOLINT(runtime/explicit): MhaConfig{…, true}
  Biases(bool q, bool k, bool v, bool o) : has{q, k, v, o} {}
  bool operator[](int i) const { return has[i]; }
  bool has[4];
};

struct MhaConfig {
  int embed_dim = 0;     // E: features of the query input and of the output
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads; K and V have num_kv_heads · head_dim features
  int kdim = 0;          // features of the key input
  int vdim = 0;          // features of the value input
  Biases bias;
  // Features per head: 0 = embed_dim / num_heads (E a multiple of num_heads); else any, and Q and
  // the attention output have num_heads · head_dim features, which may differ from E (Qwen3, Gemma).
  int head_dim = 0;
  float scale = 0.0f;  // of Q·Kᵀ: 0 = 1/√head_dim (T5: 1)
  // Rotary embeddings on Q and K after projection (rotary.h): 0 = none, else the rotated dims
  // (even, <= head_dim), angles from rotary_base or from set_rotary_tables().
  int rotary_dim = 0;
  double rotary_base = 10000.0;
  bool rotary_interleaved = false;
  // Score variants as in AttentionParams: a local window, softcap (0 = off), and a learned
  // sink logit per head (a parameter like the weights: set_weights(a.sinks), gradients, steps).
  int window_left = kNoLimit, window_right = kNoLimit;
  float softcap = 0.0f;
  bool sinks = false;
};

// Returns nullptr if the config is usable, else a static message.
const char* validate(const MhaConfig& c);

class MultiHeadAttention;

enum class Projection : int { q = 0, k = 1, v = 2, o = 3 };
// 0…3 for a valid projection, else −1.
inline int projection_index(Projection which) {
  const int i = static_cast<int>(which);
  return i >= 0 && i < 4 ? i : -1;
}

// What a training forward keeps for backward(): copies of the inputs and masks, and the
// projected Q, K, V and attention output. Owned by the caller; refilled by each training forward
// (all-or-nothing: a failed one leaves the tape as it was). It is valid for the layer that
// filled it only while that layer's weights stay unchanged (see backward()).
class MhaTape {
 public:
  bool filled() const { return filled_; }

 private:
  friend class MultiHeadAttention;
  bool filled_ = false, key_given_ = false, value_given_ = false, causal_ = false;
  Align align_ = Align::lower_right;
  int batch_ = 0, seq_q_ = 0, seq_k_ = 0;
  std::ptrdiff_t positions_batch_stride_ = 0;
  HeapBuffer<std::int32_t> positions_;  // the forward's rotary positions, if it was given some
  MaskType mask_type_ = MaskType::none;
  MaskShape mask_shape_ = MaskShape::plane;
  FloatBuffer xq_, xk_, xv_, q_, k_, v_, a_, lse_;
  ByteBuffer mask_, key_padding_;
  const MultiHeadAttention* layer_ = nullptr;  // the layer whose forward filled it
  std::uint64_t weights_version_ = 0;          // that layer's weights_version() then
};

// The four projections' arrays in set_weight layout: w[i] [out × in], b[i] [out] (null when
// projection i has no bias); i = q, k, v, o.
struct ProjectionArrays {
  const float* w[4] = {nullptr, nullptr, nullptr, nullptr};
  const float* b[4] = {nullptr, nullptr, nullptr, nullptr};
  const float* sinks = nullptr;  // [num_heads], iff the layer has sinks
};

// Gradients from backward(): of the inputs that were given (d_key and d_value null when the
// key or value defaulted: their share is added to the query's or key's), and of the weights,
// in setWeights layout. Bias gradients are written only for the projections with a bias.
struct MhaGrads {
  float* d_query = nullptr;
  float* d_key = nullptr;
  float* d_value = nullptr;
  float* d_w[4] = {nullptr, nullptr, nullptr, nullptr};  // q, k, v, o: [out × in]
  float* d_b[4] = {nullptr, nullptr, nullptr, nullptr};
  float* d_sinks = nullptr;  // [num_heads], iff the layer has sinks
};

struct MhaForward {
  const float* query = nullptr;  // [batch, seq_q, embed_dim]
  const float* key = nullptr;    // [batch, seq_k, kdim]; null: the query (self-attention)
  const float* value = nullptr;  // [batch, seq_k, vdim]; null: the key input
  float* out = nullptr;          // [batch, seq_q, embed_dim]
  // Optional softmax weights: [batch, num_heads, seq_q, seq_k_total], or with average_weights
  // their mean over the heads, [batch, seq_q, seq_k_total] (PyTorch's need_weights=True with
  // average_attn_weights=True).
  float* weights = nullptr;
  bool average_weights = false;
  int batch = 1, seq_q = 1, seq_k = 1;  // seq_k is ignored with a cache (keys come from it)
  // As in AttentionParams, broadcast to [batch, heads, seq_q, seq_k_total].
  const void* mask = nullptr;
  MaskType mask_type = MaskType::none;
  MaskShape mask_shape = MaskShape::plane;
  const std::uint8_t* key_padding = nullptr;  // [batch, seq_k_total], nonzero = ignore that key
  bool causal = false;                        // always on with a cache (decoding)
  Align align = Align::lower_right;           // of causal, window and ALiBi (upper_left: not with a cache)
  // Rotary positions of the new rows, [seq_q] or [batch, seq_q] (positions_batch_stride 0 or
  // seq_q), used for the queries and (self-attention, or a cache) the keys alike. Default: with
  // a cache, its length + t; else keys at t and queries at t + off (off as for causal).
  const std::int32_t* positions = nullptr;
  std::ptrdiff_t positions_batch_stride = 0;
  // Append seq_q positions projected from the query and attend to everything cached; the
  // cache's kv_heads, head_dim and value_dim must be the layer's and its batch f.batch.
  KvCache* cache = nullptr;
  // Or attend to the keys and values of a cross-attention cache (fill_cross_cache): nothing is
  // projected or appended, and the score rule is the call's (causal, align) as for keys given
  // as arrays, so the result is forward() with key and value the input the cache was filled
  // from. No positions (its keys were rotated when it was filled).
  const KvCache* cross = nullptr;
  MhaTape* tape = nullptr;   // training: keep what backward() needs (not with a cache)
};

class MultiHeadAttention {
 public:
  // Returns nullptr or an error message; the layer is unusable until configured.
  const char* configure(const MhaConfig& config);
  // w is [out × in] (nn.Linear), b [out] or null (required iff config.bias). On failure the
  // projection keeps its weights.
  const char* set_weight(Projection which, const float* w, const float* b);
  // All four at once, all-or-nothing: on failure no projection changed.
  const char* set_weights(const ProjectionArrays& a);
  bool ready() const;  // configured and all four weights (and the sinks) set
  // Rotary tables [positions, rotary_dim / 2] used in place of rotary_base (Llama 3 scaling, YaRN),
  // copied; cos == nullptr goes back to rotary_base. All-or-nothing.
  const char* set_rotary_tables(const float* cos, const float* sin, int positions);
  // ALiBi slopes [num_heads], copied; nullptr removes them. All-or-nothing.
  const char* set_alibi(const float* slopes);
  // The sink logits [num_heads] (layers with sinks).
  const char* get_sinks(float* out) const;
  // The weights of `which` in set_weight layout (b only when the layer has biases).
  const char* get_weight(Projection which, float* w, float* b) const;
  // Counts changes of the weights (set_weight(s), sgd_step, adam_step, set_adam_state): a tape
  // filled at another count is stale.
  std::uint64_t weights_version() const { return weights_version_; }

  // Computes f.out (and f.weights). With a cache, appends f.seq_q positions and attends
  // causally to everything cached; the cache is unchanged if this fails.
  const char* forward(const MhaForward& f) const;
  // Cross-attention over keys and values projected once (the decoders of Whisper, T5, BART, as
  // Hugging Face's EncoderDecoderCache keeps them): projects key [batch, seq_k, kdim] and value
  // [batch, seq_k, vdim] (null: the key) by Wk and Wv (rotary: keys at 0 … seq_k − 1, where
  // forward() puts given keys) into `cache`, which must be of cache_config(batch, ≥ seq_k), linear
  // and empty. Every forward with f.cross = &cache then attends to them. All-or-nothing: on
  // failure the cache stays empty.
  const char* fill_cross_cache(KvCache& cache, const float* key, const float* value, int batch, int seq_k) const;
  // What forward(f) allocates for the call at most, in bytes, from f's sizes, causal and align
  // alone (f.cache, f.cross: resolved against it; no tensor is read): its work buffer (Q, the
  // attention output, K and V — none over a cross-attention cache —, the per-head weights when
  // f.weights gets their mean, the projections' scratch) and the kernel's workspace; with f.tape,
  // also the tape it fills (kept after the call: the rows' log-sum-exps, held with the kernel's
  // workspace, and the copies, made once that is given back; a refill makes a whole new tape
  // before the old one is given back). Not counted: the rotary step's small per-thread tables.
  // 0 when forward(f) would fail before allocating.
  double forward_workspace_bytes(const MhaForward& f) const;
  // What each call below allocates, in bytes, from the layer's sizes and state and the call's
  // sizes alone (no array is read; the call's arrays assumed given as the layer needs them):
  // 0 when the call allocates nothing or would fail before allocating. Summed in 64 bits.
  // fill_cross_cache: its work buffer (K, V, the projections' scratch). Not counted: the rotary
  // step's small per-thread tables.
  double fill_cross_cache_bytes(const KvCache& cache, int batch, int seq_k) const;
  // set_weights: the four projections packed anew and the sinks, held with the old until swapped in.
  double set_weights_bytes() const;
  // set_rotary_tables: the copies of cos and sin.
  double rotary_tables_bytes(const float* cos, const float* sin, int positions) const;
  // set_alibi: the copy of the slopes.
  double alibi_bytes(const float* slopes) const;
  // backward(tape, …): its work buffer (the unpacked weights, dA, dQ, dK, dV) and the kernel's
  // backward workspace. Not counted: the rotary step's small per-thread tables.
  double backward_workspace_bytes(const MhaTape& tape) const;
  // adam_step: the moments it makes on the first step (then kept) and the largest group's update.
  double adam_step_bytes() const;
  // set_adam_state(m, …): both new moments of every parameter group, held with the old until
  // swapped in (nothing when m.w[0] is null: a fresh optimizer). sgd_step allocates nothing.
  double set_adam_state_bytes(const ProjectionArrays& m) const;

  // Gradients of L given dL/d(out) (`d_out`, [batch, seq_q, embed_dim]) for the forward that
  // filled `tape`. Returns nullptr or an error message: also when the tape is from another
  // layer, or the weights changed since it was filled (its gradients would match neither the
  // old nor the new weights).
  const char* backward(const MhaTape& tape, const float* d_out, const MhaGrads& g) const;

  // Optimizer steps on the packed weights, from gradients in setWeights layout (d_b may be null).
  // adam_step keeps its moments in the layer; `step` counts from 1. Both are all-or-nothing:
  // on failure (out of memory) no weight and no moment changed.
  void sgd_step(const MhaGrads& g, float lr);
  const char* adam_step(const MhaGrads& g, float lr, double beta1, double beta2, float eps, int step);

  // Adam's moments (first m, second v) in set_weight layout; there are none before the first
  // adam_step. get_adam_state copies those of `which` (biases only with biases). set_adam_state
  // replaces all of them at once, the sinks' too (all-or-nothing); m.w[0] == nullptr clears
  // them (a fresh optimizer). Sizes are the weights' sizes.
  bool has_adam_state() const { return adam_m_[0].get() != nullptr; }
  const char* get_adam_state(Projection which, float* m_w, float* m_b, float* v_w, float* v_b) const;
  const char* get_adam_sinks(float* m, float* v) const;  // the sinks' moments (layers with sinks)
  const char* set_adam_state(const ProjectionArrays& m, const ProjectionArrays& v);

  const MhaConfig& config() const { return config_; }  // as configured, head_dim and scale resolved
  // The config of a KV cache this layer can decode with (or fill for cross-attention).
  KvCacheConfig cache_config(int batch, int max_seq, KvType dtype = KvType::f32, int window = 0) const {
    KvCacheConfig c;
    c.batch = batch;
    c.kv_heads = config_.num_kv_heads;
    c.head_dim = c.value_dim = head_dim();
    c.max_seq = max_seq;
    c.dtype = dtype;
    c.window = window;
    return c;
  }
  // Whether a cache of config c can serve this layer's forward (cache_rule.h): its sizes, and a
  // ring's window against the layer's (a ring must keep every key the layer's window sees).
  // The batch is the forward's and is checked there.
  CacheCheck check_cache(const KvCacheConfig& c) const;
  int head_dim() const { return config_.head_dim; }  // resolved by configure()
  int q_features() const { return config_.num_heads * head_dim(); }  // of Q and of the attention output
  int kv_features() const { return config_.num_kv_heads * head_dim(); }

 private:
  MhaConfig config_;
  bool configured_ = false;
  // A training forward's tape of f, as forward() and record() allocate it: the rows'
  // log-sum-exps (forward(), before the attention call) and the copies record() makes after it.
  struct TapeWork {
    std::uint64_t lse = 0;         // floats: [batch, heads, seq_q]
    std::uint64_t query = 0;       // floats: the query input
    std::uint64_t q = 0, kv = 0;   // floats: Q and the attention output (q each); K and V (kv each)
    std::uint64_t key = 0, value = 0;  // floats: the key and value inputs (0: not given)
    std::uint64_t mask = 0, key_padding = 0;  // bytes (0: not given)
    std::uint64_t positions = 0;   // int32s (0: not given)
    std::uint64_t copies_bytes() const {
      return 4 * (query + 2 * q + 2 * kv + key + value) + mask + key_padding + 4 * positions;
    }
  };
  TapeWork tape_work(const MhaForward& f) const;
  // Copies what backward() needs into the tape (training forward), w = tape_work(f).
  const char* record(MhaTape& t, const MhaForward& f, const TapeWork& w, const float* q, const float* k, const float* v,
                     const float* a) const;

  std::size_t weight_floats(int i) const;  // of projection i (i = 4: the sinks): weights then bias
  int param_groups() const { return config_.sinks ? 5 : 4; }  // the projections, then the sinks
  // Whether adam_step has group i's moments already (else it makes them, zero).
  bool adam_moments_kept(int i) const;
  // Projection i's packed shape [out × in] (q, k, v, o), as set_weight(s) packs it.
  struct Shape {
    int out = 0, in = 0;
  };
  Shape projection_shape(int i) const;
  // Why b cannot be projection i's bias (given iff config.bias[i]); nullptr: it can.
  const char* bias_refusal(int i, const float* b) const;
  std::uint64_t rotary_table_floats(int positions) const {  // of each of cos and sin
    return std::uint64_t(positions) * std::uint64_t(config_.rotary_dim / 2);
  }
  // Why backward(t, …) refuses the tape (nullptr: it does not).
  const char* tape_refusal(const MhaTape& t) const;
  // The attention call of backward(t, …) with the tape's tensors (out and the gradients not set).
  void backward_params(const MhaTape& t, AttentionParams& p) const;
  // A backward's work buffer, in floats: the four unpacked weights, dA and dQ (da each), dK and
  // dV (dk each).
  struct BackwardWork {
    std::uint64_t w = 0, da = 0, dk = 0;
    std::uint64_t floats() const { return w + 2 * da + 2 * dk; }
  };
  BackwardWork backward_work(const MhaTape& t) const;
  // Rotates rows [batch, seq, heads, head_dim] (bshd) in place by their positions (inverse: back).
  const char* rotate(float* x, int batch, int seq, int heads, const std::int32_t* positions,
                     std::ptrdiff_t positions_batch_stride, std::int64_t offset, bool inverse) const;
  // The attention params every forward and backward shares: sizes, scale and the variants, and
  // the score rule (causal with this alignment, and the layer's window).
  void attention_variants(AttentionParams& p, bool causal, Align align) const;
  // The attention call of forward(f) without its tensors: the variants, sizes and (with a cache,
  // resolved against it as if f.seq_q positions were staged; with a cross-attention cache, its
  // keys) where the keys are. nullptr, or the cache's refusal.
  const char* forward_params(const MhaForward& f, AttentionParams& p) const;
  // Why `cache` cannot serve as a cross-attention cache for `batch` (nullptr: it can).
  const char* cross_cache_refusal(const KvCacheConfig& c, int batch) const;
  // A forward's work buffer, in floats: Q and the attention output (q each), K and V (kv each,
  // which a cache then stores), the per-head weights when f.weights is their mean, and the
  // projections' scratch (the largest of the four).
  struct ForwardWork {
    std::uint64_t q = 0, kv = 0, weights = 0, scratch = 0;
    std::uint64_t floats() const { return 2 * q + 2 * kv + weights + scratch; }
  };
  // rows_k: the rows of keys projected (0 over a cross-attention cache); keys: every key attended to.
  ForwardWork forward_work(const MhaForward& f, std::int64_t rows_k, int keys) const;
  // The mean over the heads of per-head weights [batch, heads, seq_q, keys] into [batch, seq_q, keys].
  void average_heads(const float* per_head, int batch, int seq_q, int keys, float* mean) const;
  // fill_cross_cache's work buffer, in floats: K and V of `rows` rows and the projections' scratch.
  std::uint64_t cross_fill_floats(std::uint64_t rows) const;
  // K = key·Wkᵀ + bk and V = value·Wvᵀ + bv for `rows` rows into k and v ([rows, kv_features]),
  // then K rotated ([batch, seq, kv_heads, head_dim]) at `positions`, or offset + t.
  const char* project_kv(const float* key, const float* value, int batch, int seq, const std::int32_t* positions,
                         std::ptrdiff_t positions_batch_stride, std::int64_t offset, float* k, float* v,
                         float* scratch) const;

  PackedLinear proj_[4];  // q, k, v, o
  FloatBuffer sinks_;     // [num_heads] when config_.sinks
  FloatBuffer rotary_cos_, rotary_sin_, alibi_;
  int rotary_positions_ = 0;
  FloatBuffer adam_m_[5], adam_v_[5];  // Adam moments per projection (weights then bias), then the sinks
  std::uint64_t weights_version_ = 0;
};

}  // namespace attn
