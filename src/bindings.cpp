// The only Embind translation unit: every call into the module, grouped by what it calls —
// attention, the KV cache (and attention over it), linear, rotary, the multi-head layer, the
// module itself. Each group keeps its call objects, its entries and their registration together.
// The JS side (src/js/) validates every argument, copies the tensors into its heap arena and
// passes their addresses here; these entries turn them into the core's parameter structs. A call
// answers undefined, or a CallError saying by kind why it failed, so no C++ exception ever has to
// cross into JS and no JS reads a message to learn what happened.
#include <emscripten/bind.h>
#include <emscripten/heap.h>
#include <emscripten/val.h>
#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "cache/cache_rule.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"
#include "layer/linear.h"
#include "layer/mha.h"
#include "layer/rotary.h"
#include "runtime/parallel.h"

namespace {

// ---- what every entry shares: addresses, and its answer ----

using emscripten::val;

template <class T>
T* ptr(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// Where the value a float16 or int4 cache refused is (KVCache.append and the layer's forward say it).
struct JsRefusedValue {
  bool key = true;
  int batch = 0, head = 0, row = 0, element = 0;
  float value = 0.0f;
};

JsRefusedValue to_js(const attn::RefusedValue& o) { return {o.key, o.batch, o.head, o.row, o.element, o.value}; }

// Why a call failed. The JS side words each kind (src/js/heap.mjs: coreError and a staged call's
// error(); a refused value its caller), and never reads the core's message to tell them apart.
enum class Failure { invalid, out_of_memory, over_budget, float16_overflow, int4_not_finite };

// What a call that failed answers; one that succeeded answers undefined (a value object crosses
// field by field, microseconds a call, which every tiny call would pay).
struct JsCallError {
  Failure kind = Failure::invalid;
  std::string message;     // the core's (invalid, out_of_memory, float16_overflow, int4_not_finite)
  double bytes = 0;        // over_budget: what the call needs; out_of_memory: the allocation that failed
  JsRefusedValue refused;  // float16_overflow, int4_not_finite: where the refused value is
};

val failed(Failure kind, const char* message, double bytes = 0, const JsRefusedValue& refused = {}) {
  return val(JsCallError{kind, message, bytes, refused});
}

// What a core call that returned `err` (nullptr or its message) answers: undefined, or
// out_of_memory when an allocation failed while it ran (runtime/buffer.h counts them; `failures`:
// the count before it ran), float16_overflow or int4_not_finite when `cache` refused a value,
// otherwise invalid. Never inlined, as over_budget: every entry calls them, and inlined in each
// they took 3.8 KB more.
[[gnu::noinline]] val answer_to(const char* err, std::uint64_t failures, const attn::KvCache* cache) {
  if (!err) return val::undefined();
  if (attn::g_failed_allocations != failures)
    return failed(Failure::out_of_memory, err, static_cast<double>(attn::g_last_failed_allocation.load()));
  if (cache && err == attn::kF16OverflowError)
    return failed(Failure::float16_overflow, err, 0, to_js(cache->refused()));
  if (cache && err == attn::kInt4NotFiniteError)
    return failed(Failure::int4_not_finite, err, 0, to_js(cache->refused()));
  return failed(Failure::invalid, err);
}

// The answer to run(), a core call.
template <class Run>
val answer(Run&& run, const attn::KvCache* cache = nullptr) {
  const std::uint64_t failures = attn::g_failed_allocations;
  return answer_to(run(), failures, cache);
}

[[gnu::noinline]] val over_budget(double needed) { return failed(Failure::over_budget, "", needed); }

// The memory check of a call, in the same crossing as the call: JS passes the bytes wasm32 has
// left once it has staged the call's arguments (`budget`), and an entry whose workspace (sized by
// the code that allocates it: `needed`) exceeds them answers over_budget with those bytes, before
// allocating anything. JS (a staged call's error() in src/js/heap.mjs) turns that into the
// RangeError of its own memory check.
template <class Run>
val within_budget(double needed, double budget, Run&& run, const attn::KvCache* cache = nullptr) {
  return needed > budget ? over_budget(needed) : answer(run, cache);
}

EMSCRIPTEN_BINDINGS(answers) {
  using namespace emscripten;
  enum_<Failure>("Failure")
      .value("invalid", Failure::invalid)
      .value("outOfMemory", Failure::out_of_memory)
      .value("overBudget", Failure::over_budget)
      .value("float16Overflow", Failure::float16_overflow)
      .value("int4NotFinite", Failure::int4_not_finite);
  value_object<JsRefusedValue>("RefusedValue")
      .field("key", &JsRefusedValue::key)
      .field("batch", &JsRefusedValue::batch)
      .field("head", &JsRefusedValue::head)
      .field("row", &JsRefusedValue::row)
      .field("element", &JsRefusedValue::element)
      .field("value", &JsRefusedValue::value);
  value_object<JsCallError>("CallError")
      .field("kind", &JsCallError::kind)
      .field("message", &JsCallError::message)
      .field("bytes", &JsCallError::bytes)
      .field("refused", &JsCallError::refused);
}

// ---- attention: lib.attention, attentionWeights, attentionBackward (src/js/api.mjs) ----

// The forward call, as src/js/call-block.mjs writes it into wasm memory: 32-bit fields only, each
// at 4 × its index in CALL_FIELDS there (the order here), so that JS writes a call with a few
// stores instead of crossing an Embind value object field by field (in a threaded build each of
// those reads shared memory's buffer again: microseconds a call). Addresses are byte offsets into
// the wasm heap (0 = absent), sizes and options those of attn::AttentionParams, whose strides
// follow from the sizes and the layout; the backward's fields (attn::AttentionGrads) are 0 in a
// forward call.
struct JsAttentionCall {
  std::uint32_t query, key, value, out, weights, mask;
  std::uint32_t lse;         // each row's log-sum-exp [batch, heads, seqQ], when asked for
  std::uint32_t keyPadding;  // [batch, seqK] bytes, nonzero = padding
  std::int32_t maskType;     // attn::MaskType
  std::int32_t maskBatch, maskHeads, maskRows;  // attn::MaskShape: the dimensions the mask has (the rest broadcast)
  std::int32_t batch, heads, kvHeads, seqQ, seqK, headDim, valueDim;
  std::int32_t bshd;  // layout of query, key, value and out: [batch, seq, heads, dim]
  float scale;
  std::int32_t causal, align;  // align: attn::Align
  std::int32_t windowLeft, windowRight;
  float softcap;
  std::uint32_t alibi, sinks;  // alibi [heads] or [batch, heads] (alibiBatchStride 0 or heads)
  std::int32_t alibiBatchStride;
  std::uint32_t dOut, dQuery, dKey, dValue, dSinks, savedLse, savedOut;  // the backward's
};
// Each field at the byte the JS writes it to, so that a field added, dropped or swapped on one side
// (even two of one type, which the struct's size cannot tell) fails to compile.
#define ATTN_JS_FIELD_AT(S, field, byte) \
  static_assert(offsetof(S, field) == (byte), #S "::" #field " is at byte " #byte " in the JS that writes it")
ATTN_JS_FIELD_AT(JsAttentionCall, query, 0);
ATTN_JS_FIELD_AT(JsAttentionCall, key, 4);
ATTN_JS_FIELD_AT(JsAttentionCall, value, 8);
ATTN_JS_FIELD_AT(JsAttentionCall, out, 12);
ATTN_JS_FIELD_AT(JsAttentionCall, weights, 16);
ATTN_JS_FIELD_AT(JsAttentionCall, mask, 20);
ATTN_JS_FIELD_AT(JsAttentionCall, lse, 24);
ATTN_JS_FIELD_AT(JsAttentionCall, keyPadding, 28);
ATTN_JS_FIELD_AT(JsAttentionCall, maskType, 32);
ATTN_JS_FIELD_AT(JsAttentionCall, maskBatch, 36);
ATTN_JS_FIELD_AT(JsAttentionCall, maskHeads, 40);
ATTN_JS_FIELD_AT(JsAttentionCall, maskRows, 44);
ATTN_JS_FIELD_AT(JsAttentionCall, batch, 48);
ATTN_JS_FIELD_AT(JsAttentionCall, heads, 52);
ATTN_JS_FIELD_AT(JsAttentionCall, kvHeads, 56);
ATTN_JS_FIELD_AT(JsAttentionCall, seqQ, 60);
ATTN_JS_FIELD_AT(JsAttentionCall, seqK, 64);
ATTN_JS_FIELD_AT(JsAttentionCall, headDim, 68);
ATTN_JS_FIELD_AT(JsAttentionCall, valueDim, 72);
ATTN_JS_FIELD_AT(JsAttentionCall, bshd, 76);
ATTN_JS_FIELD_AT(JsAttentionCall, scale, 80);
ATTN_JS_FIELD_AT(JsAttentionCall, causal, 84);
ATTN_JS_FIELD_AT(JsAttentionCall, align, 88);
ATTN_JS_FIELD_AT(JsAttentionCall, windowLeft, 92);
ATTN_JS_FIELD_AT(JsAttentionCall, windowRight, 96);
ATTN_JS_FIELD_AT(JsAttentionCall, softcap, 100);
ATTN_JS_FIELD_AT(JsAttentionCall, alibi, 104);
ATTN_JS_FIELD_AT(JsAttentionCall, sinks, 108);
ATTN_JS_FIELD_AT(JsAttentionCall, alibiBatchStride, 112);
ATTN_JS_FIELD_AT(JsAttentionCall, dOut, 116);
ATTN_JS_FIELD_AT(JsAttentionCall, dQuery, 120);
ATTN_JS_FIELD_AT(JsAttentionCall, dKey, 124);
ATTN_JS_FIELD_AT(JsAttentionCall, dValue, 128);
ATTN_JS_FIELD_AT(JsAttentionCall, dSinks, 132);
ATTN_JS_FIELD_AT(JsAttentionCall, savedLse, 136);
ATTN_JS_FIELD_AT(JsAttentionCall, savedOut, 140);
static_assert(sizeof(JsAttentionCall) == 36 * 4, "src/js/call-block.mjs: CALL_FIELDS has 36 entries");

// What attention(query, cache, …) asks of a cache (attn::CacheCall), from src/js/api.mjs: sizes
// 0 = not given (the cache's); `call` and `cache` are written back, the two values of a conflict.
struct JsCacheCall {
  double call, cache;
  std::int32_t batch, heads, kvHeads, headDim, valueDim, seqK, seqQ, causal, align, windowLeft, windowRight;
  std::int32_t padding;  // to the doubles' alignment, named so that a field added after windowRight changes the size
};
// src/js/call-block.mjs: the two doubles, then CACHE_FIELDS at byte 16 + 4 × their index.
ATTN_JS_FIELD_AT(JsCacheCall, call, 0);
ATTN_JS_FIELD_AT(JsCacheCall, cache, 8);
ATTN_JS_FIELD_AT(JsCacheCall, batch, 16);
ATTN_JS_FIELD_AT(JsCacheCall, heads, 20);
ATTN_JS_FIELD_AT(JsCacheCall, kvHeads, 24);
ATTN_JS_FIELD_AT(JsCacheCall, headDim, 28);
ATTN_JS_FIELD_AT(JsCacheCall, valueDim, 32);
ATTN_JS_FIELD_AT(JsCacheCall, seqK, 36);
ATTN_JS_FIELD_AT(JsCacheCall, seqQ, 40);
ATTN_JS_FIELD_AT(JsCacheCall, causal, 44);
ATTN_JS_FIELD_AT(JsCacheCall, align, 48);
ATTN_JS_FIELD_AT(JsCacheCall, windowLeft, 52);
ATTN_JS_FIELD_AT(JsCacheCall, windowRight, 56);
ATTN_JS_FIELD_AT(JsCacheCall, padding, 60);  // CACHE_CALL_BYTES: the JS writes none past it
static_assert(sizeof(JsCacheCall) == 64, "src/js/call-block.mjs: CACHE_CALL_BYTES and the padding");

// The block every attention call is written into: one per module (calls are synchronous, and the
// entries copy what they read before anything can run), its address asked once (callBlock()).
struct alignas(8) JsCallBlock {
  JsAttentionCall attention;
  JsCacheCall cache;
};
static_assert(offsetof(JsCallBlock, cache) == 144, "src/js/call-block.mjs: CACHE_CALL_OFFSET");
JsCallBlock g_call_block;

double call_block() { return static_cast<double>(reinterpret_cast<std::uintptr_t>(&g_call_block)); }

const JsAttentionCall& attention_call(std::uintptr_t address) { return *ptr<const JsAttentionCall>(address); }

attn::AttentionParams to_params(const JsAttentionCall& c) {
  attn::AttentionParams p;
  p.query = ptr<const float>(c.query);
  p.key = ptr<const float>(c.key);
  p.value = ptr<const float>(c.value);
  p.out = ptr<float>(c.out);
  p.weights = ptr<float>(c.weights);
  p.mask = ptr<const void>(c.mask);
  p.mask_type = static_cast<attn::MaskType>(c.maskType);
  p.key_padding = ptr<const std::uint8_t>(c.keyPadding);
  p.key_padding_batch_stride = c.seqK;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kvHeads;
  p.seq_q = c.seqQ;
  p.seq_k = c.seqK;
  p.head_dim = c.headDim;
  p.value_dim = c.valueDim;
  p.scale = c.scale;
  p.causal = c.causal != 0;
  p.align = static_cast<attn::Align>(c.align);
  p.window_left = c.windowLeft;
  p.window_right = c.windowRight;
  p.softcap = c.softcap;
  p.alibi_slopes = ptr<const float>(c.alibi);
  p.alibi_batch_stride = c.alibiBatchStride;
  p.sinks = ptr<const float>(c.sinks);

  const auto dense = c.bshd ? attn::dense_bshd : attn::dense_bhsd;
  p.q = dense(c.heads, c.seqQ, c.headDim);
  p.k = dense(c.kvHeads, c.seqK, c.headDim);
  p.v = dense(c.kvHeads, c.seqK, c.valueDim);
  p.o = dense(c.heads, c.seqQ, c.valueDim);
  p.w = attn::dense_bhsd(c.heads, c.seqQ, c.seqK);  // mask and weights are always bhsd
  p.m = attn::mask_strides({c.maskBatch != 0, c.maskHeads != 0, c.maskRows != 0}, c.heads, c.seqQ, c.seqK);
  p.lse = ptr<float>(c.lse);
  p.l = attn::dense_bhsd(c.heads, c.seqQ, 1);
  return p;
}

// The forward kernel on p, unless its workspace exceeds `budget`.
val attend(const attn::AttentionParams& p, double budget) {
  return within_budget(attn::attention_workspace_bytes(p), budget, [&] { return attn::attention(p); });
}

// The entries take the address of a call written by src/js/call-block.mjs, and the budget.
val run_attention(std::uintptr_t call, double budget) { return attend(to_params(attention_call(call)), budget); }

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

EMSCRIPTEN_BINDINGS(attention) {
  using namespace emscripten;
  // The enums by the names the JS side uses for them (the layer's calls take them too).
  enum_<attn::MaskType>("MaskType")
      .value("none", attn::MaskType::none)
      .value("additive", attn::MaskType::additive)
      .value("boolean", attn::MaskType::boolean)
      .value("block", attn::MaskType::block);
  value_object<attn::MaskShape>("MaskShape")
      .field("batch", &attn::MaskShape::batch)
      .field("heads", &attn::MaskShape::heads)
      .field("rows", &attn::MaskShape::rows);
  enum_<attn::Align>("Align").value("lowerRight", attn::Align::lower_right).value("upperLeft", attn::Align::upper_left);
  function("callBlock", &call_block);
  function("attention", &run_attention);
  function("attentionBackward", &run_attention_backward);
}

// ---- the KV cache: KVCache, lib.createKVCache, lib.attention(query, cache, …) (src/js/kvcache.mjs) ----

// A cache's sizes, as newCache() in src/js/kvcache.mjs (for createKVCache() and the layer's
// createCache()) passes them.
struct JsKvCacheConfig {
  int batch = 1, kvHeads = 1, headDim = 1, valueDim = 1, maxSeq = 1;
  attn::KvType dtype = attn::KvType::f32;
  int window = 0;
};

attn::KvCacheConfig to_cache_config(const JsKvCacheConfig& c) {
  attn::KvCacheConfig config;
  config.batch = c.batch;
  config.kv_heads = c.kvHeads;
  config.head_dim = c.headDim;
  config.value_dim = c.valueDim;
  config.max_seq = c.maxSeq;
  config.dtype = c.dtype;
  config.window = c.window;
  return config;
}

// What a cache of config c will take (attn::cache_bytes), for the memory check before allocating.
struct JsCacheBytes {
  double total = 0, largest = 0;
};

JsCacheBytes cache_bytes_for(const JsKvCacheConfig& c) {
  const attn::KvCacheBytes b = attn::cache_bytes(to_cache_config(c));
  return {b.total(), b.largest()};
}

// attn::CacheCheck for JS, which words the message: call and cache are the two values.
struct JsCacheCheck {
  attn::CacheConflict conflict = attn::CacheConflict::none;
  double call = 0, cache = 0;
};

JsCacheCheck to_js(const attn::CacheCheck& c) {
  return {c.conflict, static_cast<double>(c.call), static_cast<double>(c.cache)};
}

val cache_allocate(attn::KvCache& cache, const JsKvCacheConfig& c) {
  return answer([&] { return cache.allocate(to_cache_config(c)); });
}

// key and value: [batch, kvHeads, seq, dim] or, with bshd, [batch, seq, kvHeads, dim].
val cache_append(attn::KvCache& cache, std::uintptr_t key, std::uintptr_t value, int seq, bool bshd) {
  const attn::KvCacheConfig& c = cache.config();
  const auto dense = bshd ? attn::dense_bshd : attn::dense_bhsd;
  const float *k = ptr<const float>(key), *v = ptr<const float>(value);
  return answer(
      [&] { return cache.append(k, dense(c.kv_heads, seq, c.head_dim), v, dense(c.kv_heads, seq, c.value_dim), seq); },
      &cache);
}

val cache_truncate(attn::KvCache& cache, int n) {
  return answer([&] { return cache.truncate(n); });
}
// indices: int32 [batch] (KVCache.reorder checks them first; the cache checks them again).
val cache_reorder(attn::KvCache& cache, std::uintptr_t indices) {
  return answer([&] { return cache.reorder(ptr<const int>(indices)); });
}
double cache_bytes(const attn::KvCache& cache) { return static_cast<double>(cache.bytes()); }
// Where its keys start in wasm memory (tests check caches placed past 2 GiB).
double cache_address(const attn::KvCache& cache) { return static_cast<double>(cache.key_address()); }

// lib.attention(query, cache, …) checks its options here before anything is staged: the
// JsCacheCall at `address`, whose call and cache it fills; answers the conflict (attn::CacheConflict).
int cache_check(const attn::KvCache& cache, std::uintptr_t address) {
  JsCacheCall& c = *ptr<JsCacheCall>(address);
  attn::CacheCall call;
  call.batch = c.batch;
  call.heads = c.heads;
  call.kv_heads = c.kvHeads;
  call.head_dim = c.headDim;
  call.value_dim = c.valueDim;
  call.seq_k = c.seqK;
  call.seq_q = c.seqQ;
  call.causal = c.causal != 0;
  call.align = static_cast<attn::Align>(c.align);
  call.window_left = c.windowLeft;
  call.window_right = c.windowRight;
  const attn::CacheCheck check = attn::check_call(call, cache);
  c.call = static_cast<double>(check.call);
  c.cache = static_cast<double>(check.cache);
  return static_cast<int>(check.conflict);
}

// attention() over a cache: the call's query, outputs, masks and variants; K, V from the cache,
// the score rule the call's own once resolve() has checked it against the cache.
val run_attention_cached(std::uintptr_t address, const attn::KvCache& cache, double budget) {
  attn::AttentionParams p = to_params(attention_call(address));
  const attn::CacheCheck check = attn::resolve(attn::cache_call(p), cache, p);
  if (!check.ok()) return failed(Failure::invalid, attn::message(check));  // JS checks it before staging
  return attend(p, budget);  // sized with the keys where the cache has them
}

EMSCRIPTEN_BINDINGS(kv_cache) {
  using namespace emscripten;
  enum_<attn::KvType>("KvType")  // the dtype names of createKVCache()
      .value("float32", attn::KvType::f32)
      .value("float16", attn::KvType::f16)
      .value("bfloat16", attn::KvType::bf16)
      .value("int8", attn::KvType::i8)
      .value("int4", attn::KvType::i4);
  enum_<attn::CacheConflict>("CacheConflict")
      .value("none", attn::CacheConflict::none)
      .value("notAllocated", attn::CacheConflict::not_allocated)
      .value("batch", attn::CacheConflict::batch)
      .value("kvHeads", attn::CacheConflict::kv_heads)
      .value("headDim", attn::CacheConflict::head_dim)
      .value("valueDim", attn::CacheConflict::value_dim)
      .value("heads", attn::CacheConflict::heads)
      .value("seqK", attn::CacheConflict::seq_k)
      .value("empty", attn::CacheConflict::empty)
      .value("seqQ", attn::CacheConflict::seq_q)
      .value("upperLeft", attn::CacheConflict::upper_left)
      .value("windowUnbounded", attn::CacheConflict::window_unbounded)
      .value("windowWider", attn::CacheConflict::window_wider)
      .value("overwritten", attn::CacheConflict::overwritten)
      .value("noRoom", attn::CacheConflict::no_room);

  value_object<JsKvCacheConfig>("KvCacheConfig")
      .field("batch", &JsKvCacheConfig::batch)
      .field("kvHeads", &JsKvCacheConfig::kvHeads)
      .field("headDim", &JsKvCacheConfig::headDim)
      .field("valueDim", &JsKvCacheConfig::valueDim)
      .field("maxSeq", &JsKvCacheConfig::maxSeq)
      .field("dtype", &JsKvCacheConfig::dtype)
      .field("window", &JsKvCacheConfig::window);
  value_object<JsCacheBytes>("CacheBytes")
      .field("total", &JsCacheBytes::total)
      .field("largest", &JsCacheBytes::largest);
  value_object<JsCacheCheck>("CacheCheck")
      .field("conflict", &JsCacheCheck::conflict)
      .field("call", &JsCacheCheck::call)
      .field("cache", &JsCacheCheck::cache);
  function("cacheBytes", &cache_bytes_for);
  class_<attn::KvCache>("KvCacheCore")
      .constructor<>()
      .function("allocate", &cache_allocate)
      .function("append", &cache_append)
      .function("reset", &attn::KvCache::reset)
      .function("truncate", &cache_truncate)
      .function("reorder", &cache_reorder)
      .function("length", &attn::KvCache::length)
      .function("held", &attn::KvCache::held)
      .function("room", &attn::KvCache::room)
      .function("bytes", &cache_bytes)
      .function("address", &cache_address)
      .function("check", &cache_check);
  function("attentionCached", &run_attention_cached);
}

// ---- linear: lib.linear (src/js/api.mjs) ----

val run_linear(std::uintptr_t x, std::uintptr_t w, std::uintptr_t b, std::uintptr_t y, int rows, int in_features,
               int out_features, double budget) {
  return within_budget(attn::linear_workspace_bytes(rows, in_features, out_features), budget, [&] {
    return attn::linear(ptr<const float>(x), ptr<const float>(w), ptr<const float>(b), ptr<float>(y), rows, in_features,
                        out_features);
  });
}

EMSCRIPTEN_BINDINGS(linear) { emscripten::function("linear", &run_linear); }

// ---- rotary: lib.rotary (src/js/rotary.mjs) ----

// One chunk of rows of rotary() in src/js/rotary.mjs, rotated in place, as src/js/call-block.mjs
// writes it into the module's rotary block (the fields in this order; why a block, not a value
// object: JsAttentionCall).
struct JsRotaryCall {
  double positionOffset, base;
  std::uint32_t x, positions, cos, sin;
  std::int32_t batch, heads, seq, headDim, rotaryDim, tablePositions;
  std::int32_t positionsBatchStride;  // 0: one [seq] array for every batch entry
  std::int32_t bshd, interleaved;
  std::int32_t padding;  // to the doubles' alignment, named so that a field added after interleaved changes the size
};
// src/js/call-block.mjs: the two doubles, then ROTARY_FIELDS at byte 16 + 4 × their index, then the padding.
ATTN_JS_FIELD_AT(JsRotaryCall, positionOffset, 0);
ATTN_JS_FIELD_AT(JsRotaryCall, base, 8);
ATTN_JS_FIELD_AT(JsRotaryCall, x, 16);
ATTN_JS_FIELD_AT(JsRotaryCall, positions, 20);
ATTN_JS_FIELD_AT(JsRotaryCall, cos, 24);
ATTN_JS_FIELD_AT(JsRotaryCall, sin, 28);
ATTN_JS_FIELD_AT(JsRotaryCall, batch, 32);
ATTN_JS_FIELD_AT(JsRotaryCall, heads, 36);
ATTN_JS_FIELD_AT(JsRotaryCall, seq, 40);
ATTN_JS_FIELD_AT(JsRotaryCall, headDim, 44);
ATTN_JS_FIELD_AT(JsRotaryCall, rotaryDim, 48);
ATTN_JS_FIELD_AT(JsRotaryCall, tablePositions, 52);
ATTN_JS_FIELD_AT(JsRotaryCall, positionsBatchStride, 56);
ATTN_JS_FIELD_AT(JsRotaryCall, bshd, 60);
ATTN_JS_FIELD_AT(JsRotaryCall, interleaved, 64);
ATTN_JS_FIELD_AT(JsRotaryCall, padding, 68);  // ROTARY_BYTES: the JS writes none past it
static_assert(sizeof(JsRotaryCall) == 2 * 8 + 13 * 4 + 4, "src/js/call-block.mjs: ROTARY_FIELDS and the padding");
JsRotaryCall g_rotary_call;

double rotary_block() { return static_cast<double>(reinterpret_cast<std::uintptr_t>(&g_rotary_call)); }

// `budget`: the bytes the kernel may allocate (its tables), as attention() passes it.
val run_rotary(std::uintptr_t call, double budget) {
  const JsRotaryCall& c = *ptr<const JsRotaryCall>(call);
  attn::RotaryParams p;
  p.in = p.out = ptr<float>(c.x);
  p.batch = c.batch;
  p.heads = c.heads;
  p.seq = c.seq;
  p.head_dim = c.headDim;
  p.rotary_dim = c.rotaryDim;
  p.x = p.o = (c.bshd ? attn::dense_bshd : attn::dense_bhsd)(c.heads, c.seq, c.headDim);
  p.interleaved = c.interleaved != 0;
  p.positions = ptr<const std::int32_t>(c.positions);
  p.positions_batch_stride = c.positionsBatchStride;
  p.position_offset = static_cast<std::int64_t>(c.positionOffset);
  p.base = c.base;
  p.cos = ptr<const float>(c.cos);
  p.sin = ptr<const float>(c.sin);
  p.table_positions = c.tablePositions;
  return within_budget(attn::rotary_workspace_bytes(p), budget, [&] { return attn::rotary(p); });
}

EMSCRIPTEN_BINDINGS(rotary) {
  using namespace emscripten;
  function("rotaryBlock", &rotary_block);
  function("rotary", &run_rotary);
}

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

// MultiHeadAttention.createCache checks the layer against the cache's config here.
JsCacheCheck mha_check_cache(const attn::MultiHeadAttention& m, const JsKvCacheConfig& c) {
  return to_js(m.check_cache(to_cache_config(c)));
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

// ---- the module: version, memory, threads, SIMD level (src/js/api.mjs, loader.mjs) ----

std::string version() { return ATTN_VERSION; }
// Bytes currently allocated by malloc in this module (leak checks in the tests). mallinfo's
// fields are declared int but hold dlmalloc's size_t: read unsigned, or past 2 GiB it is negative.
double heap_in_use() { return static_cast<double>(static_cast<std::uint32_t>(mallinfo().uordblks)); }
// The most the heap can grow to (-sMAXIMUM_MEMORY: 4 GiB less one 64 KiB page).
double heap_max() { return static_cast<double>(emscripten_get_heap_max()); }
// lib.info.simd: 'simd128' or 'relaxed-simd'.
std::string simd_name() { return attn::simd_name(); }

EMSCRIPTEN_BINDINGS(runtime) {
  using namespace emscripten;
  function("version", &version);
  function("heapInUse", &heap_in_use);
  function("heapMax", &heap_max);
  function("setNumThreads", &attn::set_num_threads);
  function("numThreads", &attn::num_threads);
  function("simdName", &simd_name);
}

}  // namespace
