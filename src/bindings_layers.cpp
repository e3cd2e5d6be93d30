// The Embind unit of the layers builds only (loadAttention({ layers: true })): the multi-head
// layer (forward, backward, SGD and Adam) and the attention backward, over what bindings.cpp
// registers for every build (bindings.h: the answers, the call block, the cache's config).
#include <emscripten/bind.h>

#include <cstdint>
#include <limits>

#include "bindings.h"
#include "layer/mha.h"

namespace {

using namespace attn_js;

// ---- attention: lib.attentionBackward (src/js/api.mjs) ----

val run_attention_backward(std::uintptr_t call, double budget) {
  const JsAttentionCall& c = attention_call(call);
  const attn::AttentionParams p = to_params(c);
  attn::AttentionGrads g;
  g.d_out = ptr<const float>(c.dOut);
  g.d_query = ptr<float>(c.dQuery);
  g.d_key = ptr<float>(c.dKey);
  g.d_value = ptr<float>(c.dValue);
  g.d_sinks = ptr<float>(c.dSinks);
  g.d_o = p.o;
  g.d_q = p.q;
  g.d_k = p.k;
  g.d_v = p.v;
  g.lse = ptr<const float>(c.savedLse);
  g.out = ptr<const float>(c.savedOut);
  return within_budget(attn::attention_workspace_bytes(p, true), budget,
                       [&] { return attn::attention_backward(p, g); });
}

EMSCRIPTEN_BINDINGS(attention_backward) { emscripten::function("attentionBackward", &run_attention_backward); }

// ---- the multi-head layer: MultiHeadAttention (src/js/mha*.mjs) ----

// The layer's config, as configureCore() in src/js/mha-config.mjs builds it.
struct JsMhaConfig {
  int embedDim = 0, numHeads = 0, numKvHeads = 0, kdim = 0, vdim = 0;
  bool biasQ = true, biasK = true, biasV = true, biasO = true;
  int headDim = 0;     // 0: embedDim / numHeads
  float scale = 0.0f;  // 0: 1/√headDim
  int rotaryDim = 0;  // rotary embeddings (0: none), window sides (−1: no limit), softcap, sinks
  double rotaryBase = 10000.0;
  bool rotaryInterleaved = false;
  int windowLeft = -1, windowRight = -1;
  float softcap = 0.0f;
  bool sinks = false;
};

// A forward call of the layer, as forwardArgs() in src/js/mha-forward.mjs builds it.
struct JsMhaCall {
  std::uintptr_t query = 0, key = 0, value = 0, out = 0, weights = 0, mask = 0, keyPadding = 0;
  bool averageWeights = false;  // weights: the heads' mean
  attn::MaskType maskType = attn::MaskType::none;
  attn::MaskShape maskShape = attn::MaskShape::plane;
  int batch = 1, seqQ = 1, seqK = 1;
  bool causal = false;
  attn::Align align = attn::Align::lower_right;
  std::uintptr_t positions = 0;  // rotary positions, int32 [seqQ] or [batch, seqQ]
  int positionsBatchStride = 0;
  double budget = std::numeric_limits<double>::infinity();  // bytes the forward may take (within_budget)
};

// The four projections' arrays and the sinks in setWeights layout (src/js/mha-weights.mjs): the
// weights of setWeights, Adam's moments of setAdamState, the weights' gradients of backward and
// of the optimizer steps.
struct JsProjectionArrays {
  std::uintptr_t wq = 0, wk = 0, wv = 0, wo = 0, bq = 0, bk = 0, bv = 0, bo = 0, sinks = 0;
};

// The gradients of backward's tensors (src/js/mha-training.mjs): dL/d(out) in; the inputs'
// out (dKey and dValue 0 when the key or value defaulted).
struct JsMhaGrads {
  std::uintptr_t dOut = 0, dQuery = 0, dKey = 0, dValue = 0;
};

attn::MhaForward to_forward(const JsMhaCall& c) {
  attn::MhaForward f;
  f.query = ptr<const float>(c.query);
  f.key = ptr<const float>(c.key);
  f.value = ptr<const float>(c.value);
  f.out = ptr<float>(c.out);
  f.weights = ptr<float>(c.weights);
  f.average_weights = c.averageWeights;
  f.mask = ptr<const void>(c.mask);
  f.mask_type = c.maskType;
  f.mask_shape = c.maskShape;
  f.key_padding = ptr<const std::uint8_t>(c.keyPadding);
  f.batch = c.batch;
  f.seq_q = c.seqQ;
  f.seq_k = c.seqK;
  f.causal = c.causal;
  f.align = c.align;
  f.positions = ptr<const std::int32_t>(c.positions);
  f.positions_batch_stride = c.positionsBatchStride;
  return f;
}

attn::ProjectionArrays to_arrays(const JsProjectionArrays& c) {
  attn::ProjectionArrays a;
  const std::uintptr_t w[4] = {c.wq, c.wk, c.wv, c.wo}, b[4] = {c.bq, c.bk, c.bv, c.bo};
  for (int i = 0; i < 4; ++i) {
    a.w[i] = ptr<const float>(w[i]);
    a.b[i] = ptr<const float>(b[i]);
  }
  a.sinks = ptr<const float>(c.sinks);
  return a;
}

// The weights' gradients `weights` (written by backward, read by the steps) and the tensors' `d`.
attn::MhaGrads to_grads(const JsProjectionArrays& weights, const JsMhaGrads& d = {}) {
  attn::MhaGrads g;
  g.d_query = ptr<float>(d.dQuery);
  g.d_key = ptr<float>(d.dKey);
  g.d_value = ptr<float>(d.dValue);
  const std::uintptr_t w[4] = {weights.wq, weights.wk, weights.wv, weights.wo};
  const std::uintptr_t b[4] = {weights.bq, weights.bk, weights.bv, weights.bo};
  for (int i = 0; i < 4; ++i) {
    g.d_w[i] = ptr<float>(w[i]);
    g.d_b[i] = ptr<float>(b[i]);
  }
  g.d_sinks = ptr<float>(weights.sinks);
  return g;
}

val mha_configure(attn::MultiHeadAttention& m, const JsMhaConfig& c) {
  attn::MhaConfig config{c.embedDim, c.numHeads, c.numKvHeads,
                         c.kdim,     c.vdim,     attn::Biases(c.biasQ, c.biasK, c.biasV, c.biasO)};
  config.head_dim = c.headDim;
  config.scale = c.scale;
  config.rotary_dim = c.rotaryDim;
  config.rotary_base = c.rotaryBase;
  config.rotary_interleaved = c.rotaryInterleaved;
  config.window_left = c.windowLeft;
  config.window_right = c.windowRight;
  config.softcap = c.softcap;
  config.sinks = c.sinks;
  return answer([&] { return m.configure(config); });
}

val mha_set_rotary_tables(attn::MultiHeadAttention& m, std::uintptr_t cos, std::uintptr_t sin, int positions,
                          double budget) {
  const float *c = ptr<const float>(cos), *s = ptr<const float>(sin);
  return within_budget(m.rotary_tables_bytes(c, s, positions), budget,
                       [&] { return m.set_rotary_tables(c, s, positions); });
}

val mha_set_alibi(attn::MultiHeadAttention& m, std::uintptr_t slopes, double budget) {
  const float* a = ptr<const float>(slopes);
  return within_budget(m.alibi_bytes(a), budget, [&] { return m.set_alibi(a); });
}

val mha_set_weights(attn::MultiHeadAttention& m, const JsProjectionArrays& weights, double budget) {
  return within_budget(m.set_weights_bytes(), budget, [&] { return m.set_weights(to_arrays(weights)); });
}

val mha_get_weight(const attn::MultiHeadAttention& m, attn::Projection which, std::uintptr_t w, std::uintptr_t b) {
  return answer([&] { return m.get_weight(which, ptr<float>(w), ptr<float>(b)); });
}

val mha_get_sinks(const attn::MultiHeadAttention& m, std::uintptr_t out) {
  return answer([&] { return m.get_sinks(ptr<float>(out)); });
}

// The layer's forward f (with a cache or a tape, if set), unless what it allocates for itself
// (its work buffer, the kernel's workspace and a tape's buffers) exceeds `budget`.
val forward_within(const attn::MultiHeadAttention& m, const attn::MhaForward& f, double budget) {
  return within_budget(m.forward_workspace_bytes(f), budget, [&] { return m.forward(f); }, f.cache);
}

val mha_forward(const attn::MultiHeadAttention& m, const JsMhaCall& c) {
  return forward_within(m, to_forward(c), c.budget);
}

val mha_forward_cached(const attn::MultiHeadAttention& m, const JsMhaCall& c, attn::KvCache& cache) {
  attn::MhaForward f = to_forward(c);
  f.cache = &cache;
  return forward_within(m, f, c.budget);
}

val mha_forward_cross(const attn::MultiHeadAttention& m, const JsMhaCall& c, const attn::KvCache& cache) {
  attn::MhaForward f = to_forward(c);
  f.cross = &cache;
  return forward_within(m, f, c.budget);
}

// MultiHeadAttention.createCrossCache: key [batch, seqK, kdim] and value [batch, seqK, vdim] (0:
// the key) projected into an empty cache, unless the projection's buffers exceed `budget`.
val mha_fill_cross_cache(const attn::MultiHeadAttention& m, attn::KvCache& cache, std::uintptr_t key,
                         std::uintptr_t value, int batch, int seq_k, double budget) {
  return within_budget(
      m.fill_cross_cache_bytes(cache, batch, seq_k), budget,
      [&] { return m.fill_cross_cache(cache, ptr<const float>(key), ptr<const float>(value), batch, seq_k); }, &cache);
}

// MultiHeadAttention.createCache checks the layer against the cache's config here, answering as
// lib.attention's check of a call does (answer_check: the values into the call block at `address`).
int mha_check_cache(const attn::MultiHeadAttention& m, const JsKvCacheConfig& c, std::uintptr_t address) {
  return answer_check(m.check_cache(to_cache_config(c)), address);
}

val mha_forward_train(const attn::MultiHeadAttention& m, const JsMhaCall& c, attn::MhaTape& tape) {
  attn::MhaForward f = to_forward(c);
  f.tape = &tape;
  return forward_within(m, f, c.budget);
}

val mha_backward(const attn::MultiHeadAttention& m, const attn::MhaTape& tape, const JsMhaGrads& d,
                 const JsProjectionArrays& weights, double budget) {
  return within_budget(m.backward_workspace_bytes(tape), budget,
                       [&] { return m.backward(tape, ptr<const float>(d.dOut), to_grads(weights, d)); });
}

// Allocates nothing (so it takes no budget).
val mha_sgd_step(attn::MultiHeadAttention& m, const JsProjectionArrays& grads, float lr) {
  m.sgd_step(to_grads(grads), lr);
  return val::undefined();
}

val mha_adam_step(attn::MultiHeadAttention& m, const JsProjectionArrays& grads, float lr, double beta1, double beta2,
                  float eps, int step, double budget) {
  return within_budget(m.adam_step_bytes(), budget,
                       [&] { return m.adam_step(to_grads(grads), lr, beta1, beta2, eps, step); });
}

val mha_get_adam_state(const attn::MultiHeadAttention& m, attn::Projection which, std::uintptr_t m_w,
                       std::uintptr_t m_b, std::uintptr_t v_w, std::uintptr_t v_b) {
  return answer(
      [&] { return m.get_adam_state(which, ptr<float>(m_w), ptr<float>(m_b), ptr<float>(v_w), ptr<float>(v_b)); });
}

val mha_get_adam_sinks(const attn::MultiHeadAttention& m, std::uintptr_t m1, std::uintptr_t m2) {
  return answer([&] { return m.get_adam_sinks(ptr<float>(m1), ptr<float>(m2)); });
}

val mha_set_adam_state(attn::MultiHeadAttention& m, const JsProjectionArrays& moment1,
                       const JsProjectionArrays& moment2, double budget) {
  const attn::ProjectionArrays m1 = to_arrays(moment1);
  return within_budget(m.set_adam_state_bytes(m1), budget, [&] { return m.set_adam_state(m1, to_arrays(moment2)); });
}

EMSCRIPTEN_BINDINGS(multi_head_attention) {
  using namespace emscripten;
  enum_<attn::Projection>("Projection")  // named as setWeights() names the weights
      .value("wq", attn::Projection::q)
      .value("wk", attn::Projection::k)
      .value("wv", attn::Projection::v)
      .value("wo", attn::Projection::o);

  value_object<JsMhaConfig>("MhaConfig")
      .field("embedDim", &JsMhaConfig::embedDim)
      .field("numHeads", &JsMhaConfig::numHeads)
      .field("numKvHeads", &JsMhaConfig::numKvHeads)
      .field("kdim", &JsMhaConfig::kdim)
      .field("vdim", &JsMhaConfig::vdim)
      .field("biasQ", &JsMhaConfig::biasQ)
      .field("biasK", &JsMhaConfig::biasK)
      .field("biasV", &JsMhaConfig::biasV)
      .field("biasO", &JsMhaConfig::biasO)
      .field("headDim", &JsMhaConfig::headDim)
      .field("scale", &JsMhaConfig::scale)
      .field("rotaryDim", &JsMhaConfig::rotaryDim)
      .field("rotaryBase", &JsMhaConfig::rotaryBase)
      .field("rotaryInterleaved", &JsMhaConfig::rotaryInterleaved)
      .field("windowLeft", &JsMhaConfig::windowLeft)
      .field("windowRight", &JsMhaConfig::windowRight)
      .field("softcap", &JsMhaConfig::softcap)
      .field("sinks", &JsMhaConfig::sinks);
  value_object<JsMhaCall>("MhaCall")
      .field("query", &JsMhaCall::query)
      .field("key", &JsMhaCall::key)
      .field("value", &JsMhaCall::value)
      .field("out", &JsMhaCall::out)
      .field("weights", &JsMhaCall::weights)
      .field("averageWeights", &JsMhaCall::averageWeights)
      .field("mask", &JsMhaCall::mask)
      .field("keyPadding", &JsMhaCall::keyPadding)
      .field("maskType", &JsMhaCall::maskType)
      .field("maskShape", &JsMhaCall::maskShape)
      .field("batch", &JsMhaCall::batch)
      .field("seqQ", &JsMhaCall::seqQ)
      .field("seqK", &JsMhaCall::seqK)
      .field("causal", &JsMhaCall::causal)
      .field("align", &JsMhaCall::align)
      .field("positions", &JsMhaCall::positions)
      .field("positionsBatchStride", &JsMhaCall::positionsBatchStride)
      .field("budget", &JsMhaCall::budget);
  value_object<JsProjectionArrays>("ProjectionArrays")
      .field("wq", &JsProjectionArrays::wq)
      .field("wk", &JsProjectionArrays::wk)
      .field("wv", &JsProjectionArrays::wv)
      .field("wo", &JsProjectionArrays::wo)
      .field("bq", &JsProjectionArrays::bq)
      .field("bk", &JsProjectionArrays::bk)
      .field("bv", &JsProjectionArrays::bv)
      .field("bo", &JsProjectionArrays::bo)
      .field("sinks", &JsProjectionArrays::sinks);
  value_object<JsMhaGrads>("MhaGrads")
      .field("dOut", &JsMhaGrads::dOut)
      .field("dQuery", &JsMhaGrads::dQuery)
      .field("dKey", &JsMhaGrads::dKey)
      .field("dValue", &JsMhaGrads::dValue);

  class_<attn::MultiHeadAttention>("MultiHeadAttentionCore")
      .constructor<>()
      .function("configure", &mha_configure)
      .function("setRotaryTables", &mha_set_rotary_tables)
      .function("setAlibi", &mha_set_alibi)
      .function("setWeights", &mha_set_weights)
      .function("getWeight", &mha_get_weight)
      .function("getSinks", &mha_get_sinks)
      .function("forward", &mha_forward)
      .function("forwardCached", &mha_forward_cached)
      .function("forwardCross", &mha_forward_cross)
      .function("fillCrossCache", &mha_fill_cross_cache)
      .function("checkCache", &mha_check_cache)
      .function("forwardTrain", &mha_forward_train)
      .function("backward", &mha_backward)
      .function("sgdStep", &mha_sgd_step)
      .function("adamStep", &mha_adam_step)
      .function("hasAdamState", &attn::MultiHeadAttention::has_adam_state)
      .function("getAdamState", &mha_get_adam_state)
      .function("getAdamSinks", &mha_get_adam_sinks)
      .function("setAdamState", &mha_set_adam_state);
  class_<attn::MhaTape>("MhaTapeCore").constructor<>().function("filled", &attn::MhaTape::filled);
}

}  // namespace
