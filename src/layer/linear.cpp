// y = x·Wᵀ + b as a packed, blocked GEMM: Wᵀ is packed once into panels of kPanel columns, x is
// packed per call into tiles of kTileRows rows, and the micro-kernel runs over K in blocks of
// kDepth so a panel block and the x tiles it meets stay in cache.
#include "layer/linear.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernel/microkernel.h"
#include "runtime/parallel.h"

namespace attn {
namespace {

using kernel::Init;
using kernel::kTileRows;
using simd::round_up;
constexpr int kPanel = kernel::kTileCols;  // output columns per packed panel
constexpr int kDepth = 256;                           // K per block: a panel block is 8 KiB

// Floats of the packed weights and of the bias: out_features rounded up to whole panels.
std::uint64_t packed_floats(int out_features, int in_features) {
  return round_up(static_cast<std::uint64_t>(out_features), kPanel) * std::uint64_t(in_features);
}

template <Init I>
void panel_tiles(int rows, const float* xpack, std::ptrdiff_t x_tile, const float* panel, int k_len, float* y,
                 std::ptrdiff_t ldy, const float* bias) {
  for (int i0 = 0; i0 < rows; i0 += kTileRows) {
    kernel::tile_rows<kernel::kTileVecs, I, 1, kTileRows>(std::min(kTileRows, rows - i0),
                                                          xpack + (i0 / kTileRows) * x_tile, panel, kPanel, k_len,
                                                          y + i0 * ldy, ldy, bias);
  }
}

}  // namespace

const char* PackedLinear::pack(const float* w, const float* b, int out_features, int in_features) {
  if (!w || out_features < 1 || in_features < 1) return "linear: invalid weight shape";
  // Into new buffers: on failure the layer keeps its old weights.
  FloatBuffer packed, bias;
  if (!packed.allocate(packed_floats(out_features, in_features)) || !bias.allocate(packed_floats(out_features, 1)))
    return "linear: out of memory for the packed weights";
  const std::size_t out_pad = bias.size;
  const std::size_t out = out_features;
  float* dst = packed.get();
  for (std::size_t p = 0; p < out_pad / kPanel; ++p)
    for (int k = 0; k < in_features; ++k)
      for (int c = 0; c < kPanel; ++c, ++dst) {
        const std::size_t row = p * kPanel + c;
        *dst = row < out ? w[row * in_features + k] : 0.0f;
      }
  for (std::size_t c = 0; c < out_pad; ++c) bias.get()[c] = b && c < out ? b[c] : 0.0f;
  packed_ = std::move(packed);
  bias_ = std::move(bias);
  out_ = out_features;
  in_ = in_features;
  has_bias_ = b != nullptr;
  return nullptr;
}

// Element (o, k) of W lives at panel o / kPanel, row k, column o % kPanel.
static inline std::size_t packed_index(int o, int k, int in) {
  return (static_cast<std::size_t>(o / kPanel) * in + k) * kPanel + o % kPanel;
}

void PackedLinear::unpack(float* w, float* b) const {
  for (int o = 0; o < out_; ++o)
    for (int k = 0; k < in_; ++k) w[static_cast<std::size_t>(o) * in_ + k] = packed_.get()[packed_index(o, k, in_)];
  if (b && has_bias_) std::memcpy(b, bias_.get(), out_ * sizeof(float));
}

void PackedLinear::add_scaled(const float* dw, const float* db, float alpha) {
  for (int o = 0; o < out_; ++o)
    for (int k = 0; k < in_; ++k)
      packed_.get()[packed_index(o, k, in_)] += alpha * dw[static_cast<std::size_t>(o) * in_ + k];
  if (db && has_bias_)
    for (int o = 0; o < out_; ++o) bias_.get()[o] += alpha * db[o];
}

std::uint64_t linear_scratch_floats(std::int64_t rows, int in_features) {
  return round_up(static_cast<std::uint64_t>(rows), kTileRows) * std::uint64_t(in_features) + kTileRows * kPanel;
}

std::uint64_t PackedLinear::scratch_floats(int rows) const { return linear_scratch_floats(rows, in_); }

void PackedLinear::apply(const float* x, std::ptrdiff_t ldx, int rows, float* y, std::ptrdiff_t ldy,
                         float* scratch) const {
  // x tiles: [tile][in][kTileRows], rows past the end zero.
  const std::ptrdiff_t x_tile = static_cast<std::ptrdiff_t>(in_) * kTileRows;
  for (int i0 = 0; i0 < rows; i0 += kTileRows) {
    float* tile = scratch + (i0 / kTileRows) * x_tile;
    for (int i = 0; i < kTileRows; ++i) {
      const float* xr = i0 + i < rows ? x + (i0 + i) * ldx : nullptr;
      for (int k = 0; k < in_; ++k) tile[k * kTileRows + i] = xr ? xr[k] : 0.0f;
    }
  }
  float* partial = scratch + round_up(static_cast<std::size_t>(rows), kTileRows) * in_;

  // One work item per full panel, each over the whole depth in kDepth blocks (in the same
  // order for every thread count, so results do not depend on it).
  const int full_panels = out_ / kPanel;
  const double mac = double(rows) * in_ * out_;
  parallel_for(full_panels, Work{2 * mac, 4 * (double(in_) * out_ + double(rows) * (in_ + out_))}, [&](int p) {
    float* yp = y + p * kPanel;
    for (int kb = 0; kb < in_; kb += kDepth) {
      const int k_len = std::min(kDepth, in_ - kb);
      const float* panel = packed_.get() + (static_cast<std::ptrdiff_t>(p) * in_ + kb) * kPanel;
      if (kb == 0)
        panel_tiles<Init::bias>(rows, scratch + kb * kTileRows, x_tile, panel, k_len, yp, ldy,
                                bias_.get() + p * kPanel);
      else panel_tiles<Init::load>(rows, scratch + kb * kTileRows, x_tile, panel, k_len, yp, ldy, nullptr);
    }
  });
  // The last, partly filled panel: whole K at once into a small tile, then its valid columns.
  if (const int cols = out_ - full_panels * kPanel) {
    const float* panel = packed_.get() + static_cast<std::ptrdiff_t>(full_panels) * in_ * kPanel;
    for (int i0 = 0; i0 < rows; i0 += kTileRows) {
      const int r = std::min(kTileRows, rows - i0);
      kernel::tile_rows<kernel::kTileVecs, Init::bias, 1, kTileRows>(r, scratch + (i0 / kTileRows) * x_tile, panel,
                                                                     kPanel, in_, partial, kPanel,
                                                                     bias_.get() + full_panels * kPanel);
      for (int i = 0; i < r; ++i)
        std::memcpy(y + (i0 + i) * ldy + full_panels * kPanel, partial + i * kPanel, cols * sizeof(float));
    }
  }
}

std::uint64_t packed_linear_floats(int out_features, int in_features) {
  return packed_floats(out_features, in_features) + packed_floats(out_features, 1);
}

double linear_workspace_bytes(int rows, int in_features, int out_features) {
  return 4.0 * double(packed_linear_floats(out_features, in_features) + linear_scratch_floats(rows, in_features));
}

const char* linear(const float* x, const float* w, const float* b, float* y, int rows, int in_features,
                   int out_features) {
  if (!x || !y || rows < 1) return "linear: invalid input shape";
  PackedLinear layer;
  if (const char* err = layer.pack(w, b, out_features, in_features)) return err;
  FloatBuffer scratch;
  if (!scratch.allocate(layer.scratch_floats(rows))) return "linear: out of memory";
  layer.apply(x, in_features, rows, y, out_features, scratch.get());
  return nullptr;
}

}  // namespace attn
