// attention-wasm: scaled dot-product attention, out = softmax(scale · Q Kᵀ + mask) · V.
//
// This is the one public C++ header. The kernel knows nothing about JavaScript: the Embind
// translation unit (bindings.cpp) fills an AttentionParams from the JS side's heap arena.
//
// Tensors are described by a base pointer and element strides, so one kernel serves the
// [batch, heads, seq, dim] layout, the [batch, seq, heads, dim] layout, grouped K/V heads and
// a KV cache whose rows live inside a larger buffer, all without copies. The last dimension
// (head_dim or value_dim, or seq_k for masks and weights) is always contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn {

// Element strides of a 4-D tensor [batch, head, row, col]; the col stride is 1.
// A stride of 0 broadcasts along that dimension (used by masks).
struct Strides {
  std::ptrdiff_t batch = 0;
  std::ptrdiff_t head = 0;
  std::ptrdiff_t row = 0;
};

enum class MaskType : int {
  none = 0,
  additive = 1,  // const float*: added to the scaled scores; -INFINITY masks a key
  boolean = 2,   // const uint8_t*: nonzero = may attend, 0 = masked (PyTorch SDPA polarity)
};

struct AttentionParams {
  // Query head h reads K/V head h / (heads / kv_heads) (PyTorch repeat_interleave).
  const float* query = nullptr;  // [batch, heads,    seq_q, head_dim]
  const float* key = nullptr;    // [batch, kv_heads, seq_k, head_dim]
  const float* value = nullptr;  // [batch, kv_heads, seq_k, value_dim]; null: weights only
  float* out = nullptr;          // [batch, heads,    seq_q, value_dim]; null iff value is null
  float* weights = nullptr;      // optional softmax matrix [batch, heads, seq_q, seq_k]
  const void* mask = nullptr;    // optional [batch, heads, seq_q, seq_k], see MaskType
  MaskType mask_type = MaskType::none;
  // Optional [batch, seq_k] bytes, nonzero = padding: that key is ignored by every query of its
  // batch entry (PyTorch key_padding_mask polarity). Combines with mask and causal.
  const std::uint8_t* key_padding = nullptr;
  std::ptrdiff_t key_padding_batch_stride = 0;

  int batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 1, value_dim = 1;
  Strides q, k, v, o, w, m;

  // Optional output for training: each row's log-sum-exp of its scaled, masked scores (natural
  // log; −∞ for a row with no visible key), [batch, heads, seq_q] with strides l (col unused).
  float* lse = nullptr;
  Strides l;

  float scale = 1.0f;   // multiplies Q·Kᵀ before the mask is added (0 is allowed)
  bool causal = false;  // bottom-right aligned: query i attends key j iff j <= i + seq_k - seq_q
};

// The three shapes a mask may have, and the strides that broadcast it to
// [batch, heads, seq_q, seq_k].
enum class MaskShape : int {
  plane = 0,      // [seq_q, seq_k]
  per_batch = 1,  // [batch, 1, seq_q, seq_k]
  per_head = 2,   // [batch, heads, seq_q, seq_k]
};
Strides mask_strides(MaskShape shape, int heads, int seq_q, int seq_k);

// Strides of a dense tensor stored as [batch, heads, rows, cols] ("bhsd").
Strides dense_bhsd(int heads, int rows, int cols);
// Strides of a dense tensor stored as [batch, rows, heads, cols] ("bshd").
Strides dense_bshd(int heads, int rows, int cols);

// Checks the sizes and pointers of p. Returns nullptr if p is usable, else a static message.
const char* validate(const AttentionParams& p);

// Computes out (and weights, when asked). A query row whose every key is masked yields zeros
// in out and weights. Extra memory per thread is one kv head's K and V, packed
// (seq_k · (head_dim + value_dim)), plus small blocks; never seq_q × seq_k. Returns nullptr on
// success, else a static message (invalid params, or out of memory); on failure out and weights
// are left in an unspecified state.
const char* attention(const AttentionParams& p);

// Gradients of a loss L with respect to query, key and value, given dL/d(out). Layouts as in
// AttentionParams (d_out like out, d_query like query, d_key like key, d_value like value).
struct AttentionGrads {
  const float* d_out = nullptr;
  float* d_query = nullptr;
  float* d_key = nullptr;    // summed over the query heads that share each kv head
  float* d_value = nullptr;  // likewise
  Strides d_o, d_q, d_k, d_v;
  // Optional, from the forward pass: lse as AttentionParams::lse (read with p.l) and its output
  // (read with p.o). With both, the backward skips recomputing them (about 2/7 of its work).
  const float* lse = nullptr;
  const float* out = nullptr;
};

// The backward pass of attention(p): fills g.d_query, g.d_key and g.d_value (all three
// required; p.out and p.weights are ignored, p.value is required). The probabilities are
// recomputed row by row, so extra memory is O(seq_k) per thread, never seq_q × seq_k. Masked
// keys and fully masked rows get zero gradient. Returns nullptr or a static error message.
const char* attention_backward(const AttentionParams& p, const AttentionGrads& g);

// "simd128", "sse4.1", ... or "scalar": the instruction set this build was compiled for.
const char* simd_name();

}  // namespace attn
