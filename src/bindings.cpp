// The Embind unit of every build: each call a web app makes into the module, grouped by what it
// calls — attention, the KV cache (and attention over it), linear, rotary, the module itself. Each
// group keeps its call objects, its entries and their registration together. The multi-head layer
// and the attention backward are bindings_layers.cpp's, in the layers builds only (bindings.h).
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

#include "bindings.h"
#include "layer/linear.h"
#include "layer/rotary.h"
#include "runtime/parallel.h"

namespace attn_js {

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

[[gnu::noinline]] val over_budget(double needed) { return failed(Failure::over_budget, "", needed); }

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

}  // namespace attn_js

namespace {

using namespace attn_js;

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

// ---- attention: lib.attention, attentionWeights (src/js/api.mjs; the backward: bindings_layers.cpp) ----

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

}  // namespace

int attn_js::answer_check(const attn::CacheCheck& check, std::uintptr_t address) {
  JsCacheCall& c = *ptr<JsCacheCall>(address);
  c.call = static_cast<double>(check.call);
  c.cache = static_cast<double>(check.cache);
  return static_cast<int>(check.conflict);
}

namespace {

// The block every attention call is written into: one per module (calls are synchronous, and the
// entries copy what they read before anything can run), its address asked once (callBlock()).
struct alignas(8) JsCallBlock {
  JsAttentionCall attention;
  JsCacheCall cache;
};
static_assert(offsetof(JsCallBlock, cache) == 144, "src/js/call-block.mjs: CACHE_CALL_OFFSET");
JsCallBlock g_call_block;

double call_block() { return static_cast<double>(reinterpret_cast<std::uintptr_t>(&g_call_block)); }

// The forward kernel on p, unless its workspace exceeds `budget`.
val attend(const attn::AttentionParams& p, double budget) {
  return within_budget(attn::attention_workspace_bytes(p), budget, [&] { return attn::attention(p); });
}

// The entries take the address of a call written by src/js/call-block.mjs, and the budget.
val run_attention(std::uintptr_t call, double budget) { return attend(to_params(attention_call(call)), budget); }

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
}

// ---- the KV cache: KVCache, lib.createKVCache, lib.attention(query, cache, …) (src/js/kvcache.mjs) ----

// What a cache of config c will take (attn::cache_bytes), for the memory check before allocating.
struct JsCacheBytes {
  double total = 0, largest = 0;
};

JsCacheBytes cache_bytes_for(const JsKvCacheConfig& c) {
  const attn::KvCacheBytes b = attn::cache_bytes(to_cache_config(c));
  return {b.total(), b.largest()};
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
  return answer_check(attn::check_call(call, cache), address);
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
  // For tests only (not part of the library's API): every call of two or more items to the pool,
  // however small (tests/js/call-path.test.mjs).
  function("setPoolForEveryCall", &attn::detail::set_pool_for_every_call);
  // For probes only: the pool's jobs so far and its choice's state (runtime/parallel.h).
  function("poolJobs", &attn::detail::pool_jobs);
  function("poolChoiceState", &attn::detail::pool_choice_state);
}

}  // namespace