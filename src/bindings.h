// What the two Embind units share. bindings.cpp registers every call a web app makes to run
// attention (attention over arrays and caches, the KV cache, linear, rotary, the module) and is in
// every build; bindings_layers.cpp registers the multi-head layer and the attention backward, and
// is linked only into the layers builds (loadAttention({ layers: true })), so the inference builds
// hold none of that code. Both units compile once per kernel and link into either module.
#pragma once

#include <emscripten/val.h>

#include <cstddef>
#include <cstdint>

#include "cache/cache_rule.h"
#include "cache/kv_cache.h"
#include "kernel/attention.h"

namespace attn_js {

using emscripten::val;

template <class T>
T* ptr(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// What a core call that returned `err` (nullptr or its message) answers: undefined, or
// out_of_memory when an allocation failed while it ran (runtime/buffer.h counts them; `failures`:
// the count before it ran), float16_overflow or int4_not_finite when `cache` refused a value,
// otherwise invalid. Never inlined, as over_budget: every entry calls them, and inlined in each
// they took 3.8 KB more.
val answer_to(const char* err, std::uint64_t failures, const attn::KvCache* cache);

// The answer to run(), a core call.
template <class Run>
val answer(Run&& run, const attn::KvCache* cache = nullptr) {
  const std::uint64_t failures = attn::g_failed_allocations;
  return answer_to(run(), failures, cache);
}

// What an entry whose workspace exceeds its budget answers (see within_budget).
val over_budget(double needed);

// The memory check of a call, in the same crossing as the call: JS passes the bytes wasm32 has
// left once it has staged the call's arguments (`budget`), and an entry whose workspace (sized by
// the code that allocates it: `needed`) exceeds them answers over_budget with those bytes, before
// allocating anything. JS (a staged call's error() in src/js/heap.mjs) turns that into the
// RangeError of its own memory check.
template <class Run>
val within_budget(double needed, double budget, Run&& run, const attn::KvCache* cache = nullptr) {
  return needed > budget ? over_budget(needed) : answer(run, cache);
}

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
inline const JsAttentionCall& attention_call(std::uintptr_t address) { return *ptr<const JsAttentionCall>(address); }

// The kernel's parameters of a call (attention, its backward).
attn::AttentionParams to_params(const JsAttentionCall& c);

// A cache's sizes, as newCache() in src/js/kvcache.mjs (for createKVCache() and the layer's
// createCache()) passes them.
struct JsKvCacheConfig {
  int batch = 1, kvHeads = 1, headDim = 1, valueDim = 1, maxSeq = 1;
  attn::KvType dtype = attn::KvType::f32;
  int window = 0;
};

attn::KvCacheConfig to_cache_config(const JsKvCacheConfig& c);

// A cache check's answer, for JS to word the message (lib.attention over a cache,
// MultiHeadAttention.createCache): the conflict (attn::CacheConflict), its two values (the call's
// and the cache's) written into the call block's JsCacheCall at `address` (src/js/call-block.mjs).
int answer_check(const attn::CacheCheck& check, std::uintptr_t address);

}  // namespace attn_js
