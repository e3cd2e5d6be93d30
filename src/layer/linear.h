// A linear layer y = x·Wᵀ + b with W stored [out_features × in_features] row-major (PyTorch's
// nn.Linear convention), its weights packed once for the micro-kernel in microkernel.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/buffer.h"

namespace attn {

class PackedLinear {
 public:
  // Packs w [out × in] and, if not null, b [out]. Returns nullptr or an error message; on
  // failure the weights packed before stay.
  const char* pack(const float* w, const float* b, int out_features, int in_features);

  // y[rows × out] = x[rows × in] · Wᵀ + b, rows of x are ldx apart and rows of y ldy apart.
  // `scratch` must hold scratch_floats(rows) floats (linear_scratch_floats(rows, in_features())).
  void apply(const float* x, std::ptrdiff_t ldx, int rows, float* y, std::ptrdiff_t ldy, float* scratch) const;
  std::uint64_t scratch_floats(int rows) const;

  int out_features() const { return out_; }
  int in_features() const { return in_; }
  bool packed() const { return packed_.get() != nullptr; }
  bool has_bias() const { return has_bias_; }

  // W back in [out × in] layout (for gradients), and b into `b` when the layer has a bias.
  void unpack(float* w, float* b) const;
  // W += alpha · dw (dw [out × in]) and b += alpha · db (db may be null): an optimizer step
  // applied directly to the packed weights.
  void add_scaled(const float* dw, const float* db, float alpha);

 private:
  int out_ = 0, in_ = 0;
  bool has_bias_ = false;
  FloatBuffer packed_;  // Wᵀ in panels of kPanel columns: [out / kPanel][in][kPanel], zero-padded
  FloatBuffer bias_;    // [out rounded up to kPanel], zero when the layer has no bias
};

// Floats of PackedLinear::apply's scratch for `rows` rows of `in_features` (x in tiles, and one
// tile of the last, partly filled panel). 64-bit: no size wraps in wasm32's size_t.
std::uint64_t linear_scratch_floats(std::int64_t rows, int in_features);

// Floats PackedLinear::pack(w, b, out_features, in_features) allocates: the packed weights and
// the bias, out_features rounded up to whole panels (the bias buffer is there without a bias too).
std::uint64_t packed_linear_floats(int out_features, int in_features);

// The bytes linear(…, rows, in_features, out_features) allocates: the packed weights and bias
// (out_features rounded up to whole panels) and the scratch, all held at once.
double linear_workspace_bytes(int rows, int in_features, int out_features);

// y[rows × out] = x[rows × in] · Wᵀ + b once: packs W, applies it, frees. Returns nullptr or an
// error message (y is then unspecified).
const char* linear(const float* x, const float* w, const float* b, float* y, int rows, int in_features,
                   int out_features);

}  // namespace attn
