// attention-wasm: scaled dot-product attention, out = softmax(scale · Q Kᵀ + mask) · V, with the
// score variants of current models (causal alignments, sliding windows, softcap, ALiBi, sinks)
// and keys and values stored as float32, float16, bfloat16, int8 or int4.
//
// This is the one public C++ header. The kernel knows nothing about JavaScript: the Embind
// translation unit (bindings.cpp) fills an AttentionParams from the JS side's heap arena.
//
// Tensors are described by a base pointer and element strides, so one kernel serves the
// [batch, heads, seq, dim] layout, the [batch, seq, heads, dim] layout, grouped K/V heads and
// a KV cache whose rows live inside a larger buffer (or a ring of slots), all without copies.
// The last dimension (head_dim or value_dim, or seq_k for masks and weights) is always contiguous.
//
// Each score goes through the same steps, in this order (the score rule, src/kernel/score_rule.h):
//   s = scale·q·k → s = softcap·tanh(s / softcap) → s += alibi → masks (the additive mask is
//   added; boolean mask, key padding, causal and window set −∞) → softmax, with the sink in the
//   denominator.
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
  boolean = 2,   // const uint8_t*: nonzero = may attend, 0 = masked (PyTorch SDPA's bool attn_mask)
  block = 3,     // const uint8_t*: nonzero = masked (torch.nn.MultiheadAttention's bool attn_mask)
};

// How keys and values are stored. Strides count elements of the storage type (int4: bytes).
enum class KvType : int {
  f32 = 0,  // const float*
  f16 = 1,   // const uint16_t*: IEEE binary16 bits
  i8 = 2,    // const int8_t*: x = scale · q, one float scale per (batch, kv head, row)
  bf16 = 3,  // const uint16_t*: bfloat16 bits (the top half of a float32)
  // const uint8_t*: x = scale · q, q ∈ [−7, 7], a bfloat16 scale per block of 32 values of a
  // row; a row of n values is ceil(n / 32) blocks of 16 bytes and then their scales (layout:
  // kv::Int4 in kernel/kv_storage.h). Rows at least that many bytes apart.
  i4 = 4,
};

// Which query position a key position is compared with, for causal, windows and ALiBi:
// query row i sits at key position i + off, off = seq_k − seq_q (lower_right, flash-attention's
// convention and a KV cache's: the queries are the last seq_q positions) or 0 (upper_left:
// torch.tril of the [seq_q, seq_k] matrix, PyTorch SDPA's is_causal=True).
enum class Align : int { lower_right = 0, upper_left = 1 };

constexpr int kNoLimit = -1;  // a window side without limit

struct AttentionParams {
  // Query head h reads K/V head h / (heads / kv_heads) (PyTorch repeat_interleave).
  const float* query = nullptr;  // [batch, heads,    seq_q, head_dim]
  const void* key = nullptr;     // [batch, kv_heads, seq_k, head_dim], of kv_type
  const void* value = nullptr;   // [batch, kv_heads, seq_k, value_dim], of kv_type; null: weights only
  float* out = nullptr;          // [batch, heads,    seq_q, value_dim]; null iff value is null
  float* weights = nullptr;      // optional softmax matrix [batch, heads, seq_q, seq_k]
  const void* mask = nullptr;    // optional [batch, heads, seq_q, seq_k] (read with m), see MaskType
  MaskType mask_type = MaskType::none;
  // Optional [batch, seq_k] bytes, nonzero = padding: that key is ignored by every query of its
  // batch entry (PyTorch key_padding_mask polarity). Combines with mask and causal.
  const std::uint8_t* key_padding = nullptr;
  std::ptrdiff_t key_padding_batch_stride = 0;

  int batch = 1, heads = 1, kv_heads = 1, seq_q = 1, seq_k = 1, head_dim = 1, value_dim = 1;
  Strides q, k, v, o, w, m;

  // Key and value storage. For i8, key_scale/value_scale hold one float per stored row,
  // addressed with ks/vs (col unused).
  KvType kv_type = KvType::f32;
  // f16 only: true promises that no element of K or V is ±∞ or NaN (exponent 31), as the KV
  // cache knows of what it stored; the kernel then widens without checking each element for that
  // case (a broken promise reads such an element as a finite value of magnitude ≥ 65536).
  bool kv_finite = false;
  const float* key_scale = nullptr;
  const float* value_scale = nullptr;
  Strides ks, vs;
  // 0, or the number of slots of a ring buffer: key position j is then stored in row
  // j % kv_ring (of K, V and their scales), and positions below seq_k − kv_ring are gone
  // (treated as masked). Masks, key padding and ALiBi still use positions.
  int kv_ring = 0;
  // Key positions below this one are not held (treated as masked), e.g. a truncated ring.
  int kv_first = 0;

  // Optional output for training: each row's log-sum-exp of its scaled, masked scores (natural
  // log, the sink included; −∞ for a row with no visible key and no sink), [batch, heads, seq_q]
  // with strides l (col unused).
  float* lse = nullptr;
  Strides l;

  float scale = 1.0f;   // multiplies Q·Kᵀ (0 is allowed)
  bool causal = false;  // query row i attends key j iff j <= i + off (see Align)
  Align align = Align::lower_right;
  // Local attention (flash-attention's window_size): query i sees key j iff
  // i + off − window_left <= j <= i + off + window_right; kNoLimit = unbounded. Intersects causal.
  int window_left = kNoLimit, window_right = kNoLimit;
  // > 0: scores become softcap·tanh(score / softcap) (Gemma 2); 0: off.
  float softcap = 0.0f;
  // Optional ALiBi slopes, one per query head: adds −slope·|i + off − j| to the score. Read as
  // alibi_slopes[b · alibi_batch_stride + h] (stride 0: the same slopes for every batch entry).
  const float* alibi_slopes = nullptr;
  std::ptrdiff_t alibi_batch_stride = 0;
  // Optional per-query-head sink logits [heads] (gpt-oss): each joins its rows' softmax
  // denominator, w_ij = exp(s_ij) / (exp(sink_h) + Σ_k exp(s_ik)), without contributing a value.
  const float* sinks = nullptr;
};

// Which of the dimensions batch, heads and seq_q a mask has; one it lacks is broadcast (stride 0),
// as PyTorch broadcasts a mask of shape [batch, 1, 1, seq_k] (padding) or [heads, seq_q, seq_k]
// (a position bias) to [batch, heads, seq_q, seq_k]. seq_k it always has, contiguous.
struct MaskShape {
  bool batch = false, heads = false, rows = true;
  static const MaskShape plane, per_batch, per_head;
};
inline constexpr MaskShape MaskShape::plane{false, false, true};     // [seq_q, seq_k]
inline constexpr MaskShape MaskShape::per_batch{true, false, true};  // [batch, 1, seq_q, seq_k]
inline constexpr MaskShape MaskShape::per_head{true, true, true};    // [batch, heads, seq_q, seq_k]
constexpr bool operator==(MaskShape a, MaskShape b) {
  return a.batch == b.batch && a.heads == b.heads && a.rows == b.rows;
}
constexpr bool operator!=(MaskShape a, MaskShape b) { return !(a == b); }

// The strides that read a dense mask of that shape as [batch, heads, seq_q, seq_k], and its
// elements (64-bit: a count that may pass size_t's range in wasm32).
Strides mask_strides(MaskShape shape, int heads, int seq_q, int seq_k);
std::uint64_t mask_elements(MaskShape shape, int batch, int heads, int seq_q, int seq_k);

// Strides of a dense tensor stored as [batch, heads, rows, cols] ("bhsd").
Strides dense_bhsd(int heads, int rows, int cols);
// Strides of a dense tensor stored as [batch, rows, heads, cols] ("bshd").
Strides dense_bshd(int heads, int rows, int cols);

// Checks the sizes and pointers of p. Returns nullptr if p is usable, else a static message.
const char* validate(const AttentionParams& p);

// Computes out (and weights and lse, when asked). A query row whose every key is masked yields
// zeros in out and weights. Key blocks that no row of a block can see (causal, window) are
// skipped. Extra memory per thread is one kv head's K and V packed as float32
// (seq_k · (head_dim + value_dim)) for float32 storage, one key block of them for float16 and
// int8 (dequantised block by block), plus small blocks; never seq_q × seq_k. A step of up to 32
// query rows per kv head reads K and V in place and, over more than 1024 keys, keeps each chunk of
// 1024 keys' softmax statistics until they are merged: ceil(seq_k / 1024) × (value_dim + 2) floats
// per output row.
//
// Finite inputs never give NaN, whatever the scale, as long as the dot products themselves fit
// in float32 (head_dim · max|q| · max|k| < 3.4e38) and so do the sums of values
// (256 · seq_k · max|v|): scores that overflow become ±∞, and +∞ scores share the weight.
// Returns nullptr on success, else a static message (invalid params, or out of memory); on
// failure out, weights and lse are left in an unspecified state.
const char* attention(const AttentionParams& p);

// Gradients of a loss L with respect to query, key and value, given dL/d(out). Layouts as in
// AttentionParams (d_out like out, d_query like query, d_key like key, d_value like value).
struct AttentionGrads {
  const float* d_out = nullptr;
  float* d_query = nullptr;
  float* d_key = nullptr;    // summed over the query heads that share each kv head
  float* d_value = nullptr;  // likewise
  Strides d_o, d_q, d_k, d_v;
  // Optional [heads]: dL/d(sinks), summed over batch and rows (required iff p.sinks is given).
  float* d_sinks = nullptr;
  // Optional, from the forward pass: lse as AttentionParams::lse (read with p.l) and its output
  // (read with p.o). With both, the backward skips recomputing them (about 2/7 of its work).
  const float* lse = nullptr;
  const float* out = nullptr;
};

// The most memory attention(p) (or, with backward, attention_backward(p, ·)) allocates for
// itself, in bytes, on num_threads() threads: every work item that may run at once holds its
// workspace, plus the few-rows path's per-chunk statistics (or the backward's d_sinks parts).
// Reads only the sizes, the score rule's key ranges and whether p.value and p.sinks are null:
// no tensor, so a call can be sized before its data is staged (0 for sizes the kernel refuses).
// A double, exact below 2^53, so no size wraps in wasm32's 32-bit size_t.
double attention_workspace_bytes(const AttentionParams& p, bool backward = false);

// The backward pass of attention(p) for float32 keys and values: fills g.d_query, g.d_key,
// g.d_value (all three required) and g.d_sinks; p.out and p.weights are ignored, p.value is
// required. The probabilities are recomputed block by block from the saved (or recomputed)
// log-sum-exp, so extra memory is O(seq_k) per thread, never seq_q × seq_k. Masked keys and
// fully masked rows get zero gradient. Returns nullptr or a static error message.
const char* attention_backward(const AttentionParams& p, const AttentionGrads& g);

// "relaxed-simd", "simd128", "sse4.1", ... or "scalar": the instruction set of this build.
const char* simd_name();

}  // namespace attn
