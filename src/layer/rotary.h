// Rotary position embeddings (RoPE): each pair of dimensions (x1, x2) of a query or key row at
// position p is rotated by the angle p·θ_c,
//   (x1, x2) → (x1·cos − x2·sin, x1·sin + x2·cos),   θ_c = base^(−2c / rotary_dim),
// for c in [0, rotary_dim / 2). Dimensions from rotary_dim on pass through unchanged (partial
// rotary: GPT-NeoX, Phi). Pairing:
//   - half (default): dimension c with c + rotary_dim/2, as Hugging Face transformers'
//     rotate_half (Llama, Mistral, Qwen, Gemma, GPT-NeoX);
//   - interleaved: 2c with 2c + 1, as GPT-J and Meta's original Llama code.
//
// Tensors are described like AttentionParams' (attention.h): a base pointer and element
// strides [batch, head, row], the last dimension contiguous, so one call serves [batch, heads,
// seq, head_dim], [batch, seq, heads, head_dim], a layer's projected Q or K, or a slice of a KV
// cache, in place or not.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel/attention.h"

namespace attn {

struct RotaryParams {
  const float* in = nullptr;  // [batch, heads, seq, head_dim] through strides x
  float* out = nullptr;       // same shape through strides o; may equal in (in place)
  Strides x, o;
  int batch = 1, heads = 1, seq = 1, head_dim = 1;
  int rotary_dim = 0;         // even, 2 ≤ rotary_dim ≤ head_dim
  bool interleaved = false;   // pairing: false = rotate_half (c, c + rotary_dim/2); true = (2c, 2c+1)

  // Position of row t in batch entry b: positions[b · positions_batch_stride + t] when positions
  // is set (stride 0: one [seq] array for every batch entry), else position_offset + t.
  const std::int32_t* positions = nullptr;
  std::ptrdiff_t positions_batch_stride = 0;
  std::int64_t position_offset = 0;

  // Angles from base (θ_c above), or, when cos and sin are set, tables [table_positions,
  // rotary_dim / 2] used exactly as given (Llama 3 scaling, YaRN, anything precomputed): row p
  // holds cos and sin of position p. Every position must then be in [0, table_positions).
  double base = 10000.0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  int table_positions = 0;

  // Rotate by −angle instead: the inverse rotation, which is also the backward pass (a rotation's
  // Jacobian is the rotation itself, so dL/dx = R(−angle)·dL/d(out)).
  bool inverse = false;
};

// Checks sizes, pointers and positions. Returns nullptr if p is usable, else a static message.
const char* validate(const RotaryParams& p);

// Computes out. Without tables, θ_c and the angle p·θ_c are formed in double precision (the
// angle's absolute error is ≤ |p·θ_c|·2⁻⁵³, below float resolution for any position under 2²⁹)
// and its cos and sin are rounded to float once; the rotation itself is in float, so each
// output is within 2⁻²²·(|x1| + |x2|) of the exact rotation of the double angle. Work is split over blocks of rows,
// which parallel_for may run on several threads, bit-identically. Returns nullptr or a static message (invalid params,
// out of memory); on failure out is unspecified.
const char* rotary(const RotaryParams& p);

// What rotary(p) allocates at most, in bytes, on num_threads() threads: the angles' step tables
// (none when cos/sin tables are given) and, for every block of rows that may run at once, its
// cos/sin table and angle state. 0 for params rotary() refuses.
double rotary_workspace_bytes(const RotaryParams& p);

}  // namespace attn
