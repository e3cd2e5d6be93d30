// Rotary position embeddings (see rotary.h). Rows are taken in blocks of consecutive rows; each
// block first fills a small table with the cos and sin of its rows' angles, then rotates that
// row range of every head (and of every batch entry that shares the positions) with it, so the
// trigonometry is paid once per position, not once per head.
#include "layer/rotary.h"
#include "layer/exp_log.h"
#include "layer/sincos.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "runtime/buffer.h"
#include "runtime/parallel.h"
#include "runtime/simd.h"

namespace attn {
namespace {

using simd::load;
using simd::store;
using simd::vfloat;
using simd::W;

// Rows per block: one table of cos/sin, and at most this many steps of the angle recurrence.
constexpr int kRowsPerBlock = 32;

inline std::int64_t position_of(const RotaryParams& p, int group, int t) {
  return p.positions ? p.positions[group * p.positions_batch_stride + t] : p.position_offset + t;
}

// Floats per table row. half: [cos 0..h) then [sin 0..h). interleaved: both duplicated per pair,
// [c0 c0 c1 c1 …] then [−s0 s0 −s1 s1 …], so a row is x·C + swap_pairs(x)·S.
inline std::size_t table_row_floats(const RotaryParams& p) {
  return static_cast<std::size_t>(p.rotary_dim) * (p.interleaved ? 2 : 1);
}

// Per call, in double: θ_c = 1 / base^(2c / rotary_dim) (Hugging Face's inv_freq, but in double),
// and cos/sin of θ_c for stepping an angle from position p to p + 1.
struct Frequencies {
  HeapBuffer<double> data;  // theta, step_cos, step_sin: h each
  int h = 0;
  bool allocate_for(const RotaryParams& p) {
    h = p.rotary_dim / 2;
    if (p.cos) return true;  // tables given: no angles to compute
    if (!data.allocate(3 * static_cast<std::size_t>(h))) return false;
    const math::Sum ln_base = math::log_sum(p.base);
    for (int c = 0; c < h; ++c) {
      theta()[c] = math::power_of(ln_base, -2.0 * c / p.rotary_dim);
      trig::sincos(theta()[c], &step_sin()[c], &step_cos()[c]);
    }
    return true;
  }
  double* theta() const { return data.get(); }
  double* step_cos() const { return data.get() + h; }
  double* step_sin() const { return data.get() + 2 * h; }
};

// Writes table row `row` from cos/sin values (float or double) of one position.
template <class T>
void put_row(const RotaryParams& p, const T* cos_row, const T* sin_row, float* row) {
  const int h = p.rotary_dim / 2;
  const float sign = p.inverse ? -1.0f : 1.0f;
  if (!p.interleaved) {
    for (int c = 0; c < h; ++c) {
      row[c] = static_cast<float>(cos_row[c]);
      row[h + c] = sign * static_cast<float>(sin_row[c]);
    }
    return;
  }
  float* C = row;
  float* S = row + p.rotary_dim;
  for (int c = 0; c < h; ++c) {
    const float co = static_cast<float>(cos_row[c]), si = sign * static_cast<float>(sin_row[c]);
    C[2 * c] = co;
    C[2 * c + 1] = co;
    S[2 * c] = -si;
    S[2 * c + 1] = si;
  }
}

// Fills the table rows of [t0, t1) for positions of `group`. Without given tables the angle of
// a row that follows its predecessor's position by one is stepped by the angle-addition formulas
// in double (cos(a+θ) = cos a·cos θ − sin a·sin θ, …): at most kRowsPerBlock − 1 steps, each
// adding ~2⁻⁵² relative error, far below float's 2⁻²⁴. Any other row is computed directly.
void fill_table(const RotaryParams& p, const Frequencies& f, int group, int t0, int t1, float* table, double* cos_d,
                double* sin_d) {
  const int h = f.h;
  const std::size_t row_floats = table_row_floats(p);
  std::int64_t previous = 0;
  for (int t = t0; t < t1; ++t) {
    const std::int64_t pos = position_of(p, group, t);
    float* row = table + static_cast<std::size_t>(t - t0) * row_floats;
    if (p.cos) {
      const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(pos) * h;
      put_row(p, p.cos + at, p.sin + at, row);
      continue;
    }
    if (t > t0 && pos == previous + 1) {
      for (int c = 0; c < h; ++c) {
        const double co = cos_d[c], si = sin_d[c];
        cos_d[c] = co * f.step_cos()[c] - si * f.step_sin()[c];
        sin_d[c] = si * f.step_cos()[c] + co * f.step_sin()[c];
      }
    } else {
      for (int c = 0; c < h; ++c) {
        const double angle = static_cast<double>(pos) * f.theta()[c];
        trig::sincos(angle, &sin_d[c], &cos_d[c]);
      }
    }
    put_row(p, cos_d, sin_d, row);
    previous = pos;
  }
}

// rotate_half pairing: y[c] = x[c]·cos − x[c+h]·sin, y[c+h] = x[c]·sin + x[c+h]·cos. Both halves
// are loaded before either is stored, so y may be x.
void rotate_half(const float* x, float* y, const float* row, int h) {
  const float* co = row;
  const float* si = row + h;
  int c = 0;
  for (; c + W <= h; c += W) {
    const vfloat x1 = load(x + c), x2 = load(x + h + c), vc = load(co + c), vs = load(si + c);
    store(y + c, x1 * vc - x2 * vs);
    store(y + h + c, x1 * vs + x2 * vc);
  }
  ATTN_SCALAR_TAIL for (; c < h; ++c) {
    const float x1 = x[c], x2 = x[h + c];
    y[c] = x1 * co[c] - x2 * si[c];
    y[h + c] = x1 * si[c] + x2 * co[c];
  }
}

#if !defined(ATTN_SCALAR)
// [a b c d] → [b a d c]: each lane's partner in the interleaved pairing.
template <std::size_t... I>
vfloat swap_pairs(vfloat v, std::index_sequence<I...>) {
  using Mask = xsimd::batch_constant<xsimd::batch<std::uint32_t>, static_cast<std::uint32_t>(I ^ 1u)...>;
  return xsimd::swizzle(v, Mask{});
}
inline vfloat swap_pairs(vfloat v) { return swap_pairs(v, std::make_index_sequence<vfloat::size>{}); }
static_assert(vfloat::size % 2 == 0, "vectors hold whole pairs");
#endif

// Interleaved pairing on the duplicated table: y = x·C + swap_pairs(x)·S (S holds −sin, +sin).
void rotate_interleaved(const float* x, float* y, const float* row, int rotary_dim) {
  const float* C = row;
  const float* S = row + rotary_dim;
  int j = 0;
#if !defined(ATTN_SCALAR)
  for (; j + W <= rotary_dim; j += W) {
    const vfloat v = load(x + j);
    store(y + j, v * load(C + j) + swap_pairs(v) * load(S + j));
  }
#endif
  ATTN_SCALAR_TAIL for (; j < rotary_dim; j += 2) {
    const float x1 = x[j], x2 = x[j + 1];
    y[j] = x1 * C[j] + x2 * S[j];
    y[j + 1] = x2 * C[j + 1] + x1 * S[j + 1];
  }
}

}  // namespace

const char* validate(const RotaryParams& p) {
  if (p.batch < 1 || p.heads < 1 || p.seq < 1 || p.head_dim < 1)
    return "rotary: batch, heads, seq and head_dim must be positive";
  if (p.rotary_dim < 2 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    return "rotary: rotary_dim must be even, at least 2 and at most head_dim";
  if (!p.in || !p.out) return "rotary: in and out are required";
  if (!p.cos != !p.sin) return "rotary: cos and sin tables go together";
  if (p.positions_batch_stride < 0) return "rotary: positions_batch_stride must be ≥ 0";
  if (p.cos) {
    if (p.table_positions < 1) return "rotary: table_positions must be positive with tables";
  } else if (!(std::isfinite(p.base) && p.base > 0)) {
    return "rotary: base must be finite and positive";
  }
  // Positions must be exact in double (for the angle) and, with tables, inside them.
  constexpr std::int64_t kExact = std::int64_t{1} << 53;
  const std::int64_t lo = p.cos ? 0 : -kExact, hi = p.cos ? p.table_positions - 1 : kExact;
  const int groups = p.positions_batch_stride ? p.batch : 1;
  if (!p.positions) {
    if (p.position_offset < lo || p.position_offset > hi - (p.seq - 1))
      return p.cos ? "rotary: a position is outside the cos/sin tables" : "rotary: position_offset is out of range";
  } else {
    for (int g = 0; g < groups; ++g)
      for (int t = 0; t < p.seq; ++t) {
        const std::int64_t pos = position_of(p, g, t);
        if (pos < lo || pos > hi) return "rotary: a position is outside the cos/sin tables";
      }
  }
  return nullptr;
}

namespace {
// Batch entries share one table unless each has its own positions.
bool per_batch_tables(const RotaryParams& p) { return p.positions && p.positions_batch_stride != 0; }
int row_blocks(const RotaryParams& p) { return (p.seq + kRowsPerBlock - 1) / kRowsPerBlock; }
}  // namespace

double rotary_workspace_bytes(const RotaryParams& p) {
  if (validate(p)) return 0;
  const double h = p.rotary_dim / 2;
  const double frequencies = p.cos ? 0 : 3 * h * sizeof(double);
  const double block = double(kRowsPerBlock) * double(table_row_floats(p)) * sizeof(float) + 2 * h * sizeof(double);
  const std::int64_t items = std::int64_t(per_batch_tables(p) ? p.batch : 1) * row_blocks(p);
  return frequencies + double(std::min<std::int64_t>(items, num_threads())) * block;
}

const char* rotary(const RotaryParams& p) {
  if (const char* err = validate(p)) return err;
  Frequencies f;
  if (!f.allocate_for(p)) return "rotary: out of memory";
  const int h = p.rotary_dim / 2;
  const std::size_t row_floats = table_row_floats(p);
  const bool per_batch = per_batch_tables(p);
  const int groups = per_batch ? p.batch : 1;
  const int blocks = row_blocks(p);
  const std::size_t pass_bytes = static_cast<std::size_t>(p.head_dim - p.rotary_dim) * sizeof(float);
  std::atomic<const char*> error{nullptr};
  // The work: each table entry's angle (a product in double and its cos and sin, about 40
  // operations), then a multiply-add pair per element rotated, every element read and written.
  const double entries = double(groups) * p.seq * h, rows = double(p.batch) * p.heads * p.seq;
  const Work work{40 * entries + 3 * rows * p.rotary_dim, 8 * rows * p.head_dim};
  // Items never share output rows, and each computes its rows exactly as a serial run would.
  parallel_for(groups * blocks, work, [&](int item) {
    const int group = item / blocks, t0 = item % blocks * kRowsPerBlock;
    const int t1 = std::min(t0 + kRowsPerBlock, p.seq);
    FloatBuffer table;
    HeapBuffer<double> state;
    if (!table.allocate(static_cast<std::size_t>(kRowsPerBlock) * row_floats) ||
        !state.allocate(2 * static_cast<std::size_t>(h))) {
      error = "rotary: out of memory";
      return;
    }
    fill_table(p, f, group, t0, t1, table.get(), state.get(), state.get() + h);
    const int b_first = per_batch ? group : 0, b_last = per_batch ? group + 1 : p.batch;
    for (int b = b_first; b < b_last; ++b)
      for (int hd = 0; hd < p.heads; ++hd)
        for (int t = t0; t < t1; ++t) {
          const float* x = p.in + b * p.x.batch + hd * p.x.head + t * p.x.row;
          float* y = p.out + b * p.o.batch + hd * p.o.head + t * p.o.row;
          const float* row = table.get() + static_cast<std::size_t>(t - t0) * row_floats;
          if (p.interleaved) rotate_interleaved(x, y, row, p.rotary_dim);
          else rotate_half(x, y, row, h);
          if (x != y && pass_bytes) std::memcpy(y + p.rotary_dim, x + p.rotary_dim, pass_bytes);
        }
  });
  return error.load();
}

}  // namespace attn
