// This machine's WebAssembly SIMD128 multiply-add peak (SIMD128 has no fused multiply-add):
// 7 chains of f32x4.mul and 7 chains of f32x4.add, all independent (14 of V8's 15 usable vector
// registers, plus one constant), so the issue rate of multiplies and adds limits it rather than
// their latency, as in a well-fed matmul micro-kernel. 56 flops per iteration.
#include <wasm_simd128.h>

constexpr int kChains = 7;

extern "C" __attribute__((used)) float simd_peak(int iterations, float seed) {
  v128_t m[kChains], a[kChains];
  for (int i = 0; i < kChains; ++i) {
    m[i] = wasm_f32x4_splat(seed + float(i));
    a[i] = wasm_f32x4_splat(seed - float(i));
  }
  const v128_t c = wasm_f32x4_splat(0.999999f);
  for (int n = 0; n < iterations; ++n) {
    for (int i = 0; i < kChains; ++i) {
      m[i] = wasm_f32x4_mul(m[i], c);
      a[i] = wasm_f32x4_add(a[i], c);
    }
  }
  v128_t s = wasm_f32x4_add(m[0], a[0]);
  for (int i = 1; i < kChains; ++i) s = wasm_f32x4_add(s, wasm_f32x4_add(m[i], a[i]));
  return wasm_f32x4_extract_lane(s, 0);
}
