// How the kernel reads keys and values of each storage type (KvType): one (batch, kv head) at a
// time, converting in registers. The direct (decode) path takes dot products and axpys straight
// from the stored rows; the blocked path packs blocks of them into float32 panels (see
// attention_blocks.h). Adding a storage type means a Stored<T> specialisation here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attention.h"
#include "half.h"
#include "simd.h"

namespace attn::kv {

using simd::vfloat;
using simd::W;

// W stored elements -> W floats, and one element -> a float.
template <class T>
struct Stored;

template <>
struct Stored<float> {
  static vfloat load(const float* p) { return simd::load(p); }
  static float one(const float* p) { return *p; }
};

template <>
struct Stored<std::uint16_t> {
  static vfloat load(const std::uint16_t* p) { return half::load(p); }
  static float one(const std::uint16_t* p) { return half::to_float(*p); }
};

template <>
struct Stored<std::int8_t> {
#if defined(ATTN_SCALAR)
  static vfloat load(const std::int8_t* p) { return static_cast<float>(*p); }
#else
  static vfloat load(const std::int8_t* p) {
    std::int32_t four;
    std::memcpy(&four, p, sizeof four);
    return vfloat(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(four))));
  }
#endif
  static float one(const std::int8_t* p) { return static_cast<float>(*p); }
};

// a·x over n elements, x stored as T (two vector chains, scalar tail).
template <class T>
inline float dot(const float* a, const T* x, int n) {
  vfloat a0(0.0f), a1(0.0f);
  int c = 0;
  for (; c + 2 * W <= n; c += 2 * W) {
    a0 = simd::madd(simd::load(a + c), Stored<T>::load(x + c), a0);
    a1 = simd::madd(simd::load(a + c + W), Stored<T>::load(x + c + W), a1);
  }
  for (; c + W <= n; c += W) a0 = simd::madd(simd::load(a + c), Stored<T>::load(x + c), a0);
  float sum = simd::reduce_add(a0 + a1);
  for (; c < n; ++c) sum += a[c] * Stored<T>::one(x + c);
  return sum;
}

// y += alpha · x over n elements, x stored as T.
template <class T>
inline void axpy(float alpha, const T* x, float* y, int n) {
  const vfloat va(alpha);
  int c = 0;
  for (; c + W <= n; c += W) simd::store(y + c, simd::madd(va, Stored<T>::load(x + c), simd::load(y + c)));
  for (; c < n; ++c) y[c] += alpha * Stored<T>::one(x + c);
}

// The K and V rows of one (batch, kv head), as stored (type erased: the typed readers below
// take the element type as a template argument). Row j of the logical key sequence lives in
// physical row ("slot") j, or j % ring for a ring buffer; the scales are 1 except for int8.
struct Head {
  KvType type = KvType::f32;
  const void* key = nullptr;
  const void* value = nullptr;
  std::ptrdiff_t key_row = 0, value_row = 0;
  const float* key_scale = nullptr;  // int8 only: per slot
  const float* value_scale = nullptr;
  std::ptrdiff_t key_scale_row = 0, value_scale_row = 0;
  int ring = 0;

  int slot(int j) const { return ring ? j % ring : j; }
  template <class T>
  const T* key_at_slot(int s) const { return static_cast<const T*>(key) + s * key_row; }
  template <class T>
  const T* value_at_slot(int s) const { return static_cast<const T*>(value) + s * value_row; }
  float key_scale_at_slot(int s) const { return key_scale ? key_scale[s * key_scale_row] : 1.0f; }
  float value_scale_at_slot(int s) const { return value_scale ? value_scale[s * value_scale_row] : 1.0f; }
};

// Calls fn(j0, j1, s0) for the contiguous physical pieces of logical keys [begin, end): keys
// j0..j1-1 are in slots s0..s0+(j1-j0)-1 (at most two pieces for a ring).
template <class Fn>
inline void for_each_piece(const Head& h, int begin, int end, Fn&& fn) {
  for (int j = begin; j < end;) {
    const int s = h.slot(j);
    const int n = h.ring ? std::min(end - j, h.ring - s) : end - j;
    fn(j, j + n, s);
    j += n;
  }
}

// Calls fn(T{}) with T the element type of `type` (float, uint16_t or int8_t).
template <class Fn>
inline void with_type(KvType type, Fn&& fn) {
  switch (type) {
    case KvType::f16: fn(std::uint16_t{}); break;
    case KvType::i8: fn(std::int8_t{}); break;
    default: fn(float{}); break;
  }
}

inline Head head(const AttentionParams& p, int b, int kvh) {
  Head h;
  h.type = p.kv_type;
  const std::size_t bytes = p.kv_type == KvType::f32 ? 4 : p.kv_type == KvType::f16 ? 2 : 1;
  const auto at = [bytes](const void* base, std::ptrdiff_t elements) {
    return static_cast<const void*>(static_cast<const char*>(base) + elements * static_cast<std::ptrdiff_t>(bytes));
  };
  h.key = at(p.key, b * p.k.batch + kvh * p.k.head);
  h.value = p.value ? at(p.value, b * p.v.batch + kvh * p.v.head) : nullptr;
  h.key_row = p.k.row;
  h.value_row = p.v.row;
  if (p.kv_type == KvType::i8) {
    h.key_scale = p.key_scale + b * p.ks.batch + kvh * p.ks.head;
    h.value_scale = p.value_scale ? p.value_scale + b * p.vs.batch + kvh * p.vs.head : nullptr;
    h.key_scale_row = p.ks.row;
    h.value_scale_row = p.vs.row;
  }
  h.ring = p.kv_ring;
  return h;
}

// max |k| over logical keys [begin, end) (an upper bound for int8 and float16).
inline float key_abs_max(const Head& h, int begin, int end, int head_dim) {
  float m = 0.0f;
  if (begin >= end) return m;
  if (h.type == KvType::f16) return 65504.0f;
  for_each_piece(h, begin, end, [&](int j0, int j1, int s0) {
    for (int s = s0; s < s0 + (j1 - j0); ++s) {
      if (h.type == KvType::i8) {
        m = std::max(m, 128.0f * std::abs(h.key_scale_at_slot(s)));
        continue;
      }
      const float* k = h.key_at_slot<float>(s);
      vfloat vm(0.0f);
      int c = 0;
      for (; c + W <= head_dim; c += W) vm = simd::vmax(vm, simd::vabs(simd::load(k + c)));
      m = std::max(m, simd::reduce_max(vm));
      for (; c < head_dim; ++c) m = std::max(m, std::abs(k[c]));
    }
  });
  return m;
}

}  // namespace attn::kv
