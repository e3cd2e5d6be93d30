// The parts of the public API that are not the kernel: stride helpers, parameter checks and the
// build's instruction-set name.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernel/attention.h"
#include "kernel/score_rule.h"
#include "kernel/work.h"
#include "runtime/simd.h"

namespace attn {

Strides dense_bhsd(int heads, int rows, int cols) {
  return {static_cast<std::ptrdiff_t>(heads) * rows * cols, static_cast<std::ptrdiff_t>(rows) * cols, cols};
}

Strides dense_bshd(int heads, int rows, int cols) {
  return {static_cast<std::ptrdiff_t>(rows) * heads * cols, cols, static_cast<std::ptrdiff_t>(heads) * cols};
}

Strides mask_strides(MaskShape shape, int heads, int seq_q, int seq_k) {
  const std::ptrdiff_t row = shape.rows ? seq_k : 0;
  const std::ptrdiff_t head = shape.heads ? (shape.rows ? seq_q : 1) * std::ptrdiff_t(seq_k) : 0;
  const std::ptrdiff_t batch =
      shape.batch ? (shape.heads ? heads : 1) * (shape.rows ? seq_q : 1) * std::ptrdiff_t(seq_k) : 0;
  return {batch, head, row};
}

std::uint64_t mask_elements(MaskShape shape, int batch, int heads, int seq_q, int seq_k) {
  return (shape.batch ? std::uint64_t(batch) : 1) * (shape.heads ? std::uint64_t(heads) : 1) *
         (shape.rows ? std::uint64_t(seq_q) : 1) * std::uint64_t(seq_k);
}

Work forward_work(const AttentionParams& p) {
  // Visible keys per row: the mean of the first and the last row's (exact where causal and
  // windows make them grow linearly).
  const score::KeyRange first = score::key_range(p, 0), last = score::key_range(p, p.seq_q - 1);
  const double keys = 0.5 * (std::max(0, first.end - first.begin) + std::max(0, last.end - last.begin));
  const double rows = double(p.batch) * p.heads * p.seq_q;
  const double dv = p.value ? p.value_dim : 0;
  const double stored = p.kv_type == KvType::f32 ? 4 : p.kv_type == KvType::i8 ? 1 : 2;  // bytes an element
  Work w;
  w.flops = rows * keys * (2.0 * p.head_dim + 2 * dv + 8);
  w.bytes = double(p.batch) * p.kv_heads * p.seq_k * (p.head_dim + dv) * stored + 4 * rows * (p.head_dim + dv) +
            (p.weights ? 4 * rows * p.seq_k : 0);
  return w;
}

Work backward_work(const AttentionParams& p) {
  const Work forward = forward_work(p);
  return {2.5 * forward.flops, 2 * forward.bytes};
}

const char* validate(const AttentionParams& p) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seq_q < 1 || p.seq_k < 1 || p.head_dim < 1)
    return "attention: batch, heads, kv_heads, seq_q, seq_k and head_dim must be positive";
  if (p.heads % p.kv_heads != 0) return "attention: heads must be a multiple of kv_heads";
  if (!p.query || !p.key) return "attention: query and key are required";
  if (!p.value != !p.out) return "attention: value and out must be given together";
  if (!p.value && !p.weights) return "attention: nothing to compute (no out and no weights)";
  if (p.value && p.value_dim < 1) return "attention: value_dim must be positive";
  if ((p.mask_type == MaskType::none) != (p.mask == nullptr)) return "attention: mask and mask_type disagree";
  if (p.mask_type != MaskType::none && p.mask_type != MaskType::additive && p.mask_type != MaskType::boolean &&
      p.mask_type != MaskType::block)
    return "attention: unknown mask_type";
  if (p.kv_type != KvType::f32 && p.kv_type != KvType::f16 && p.kv_type != KvType::i8 && p.kv_type != KvType::bf16 &&
      p.kv_type != KvType::i4)
    return "attention: unknown kv_type";
  if (p.kv_type == KvType::i8 && (!p.key_scale || (p.value && !p.value_scale)))
    return "attention: int8 keys and values need key_scale and value_scale";
  if (p.kv_ring < 0 || p.kv_first < 0) return "attention: kv_ring and kv_first must be 0 or positive";
  if (p.align != Align::lower_right && p.align != Align::upper_left) return "attention: unknown align";
  if (p.window_left < kNoLimit || p.window_right < kNoLimit) return "attention: window sides must be >= 0 or kNoLimit";
  if (!(p.softcap >= 0.0f) || std::isinf(p.softcap)) return "attention: softcap must be finite and >= 0";
  // Rows of the group are indexed with int; keep that product in range.
  if (static_cast<std::int64_t>(p.seq_q) * (p.heads / p.kv_heads) > std::numeric_limits<int>::max())
    return "attention: seq_q × heads/kv_heads is too large";
  return nullptr;
}

const char* simd_name() {
#if defined(ATTN_SCALAR)
  return "scalar";
#elif defined(__wasm_relaxed_simd__)
  return "relaxed-simd";
#elif defined(__EMSCRIPTEN__)
  return "simd128";
#else
  return xsimd::default_arch::name();
#endif
}

}  // namespace attn
