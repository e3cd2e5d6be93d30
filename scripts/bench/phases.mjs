// The phases of one attention call, recognised from the kernel's function names (src/attention.cpp,
// src/microkernel.h) in profiles of the profiling builds (scripts/profile.sh). First match wins;
// update the patterns when the kernel's functions are renamed.
export const PHASES = [
  ['pack K (transpose into panels)', /pack_transposed|pack_keys_transposed/],
  ['pack V', /pack_values/],
  ['pack Q (scale)', /pack_queries/],
  ['Q·Kᵀ (micro-kernel)', /gemm_rows<\(attn::kernel::Init\)0|gemm_rows<attn::kernel::Init::zero|gemm_rows.*Init\)0/],
  ['P·V (micro-kernel)', /gemm_rows<\(attn::kernel::Init\)1|gemm_rows<attn::kernel::Init::load|gemm_rows.*Init\)1/],
  ['mask, max, exp2, sum (softmax_update)', /softmax_update|mask_scores|exp2/],
  ['normalise and write rows (finish_rows)', /finish_rows/],
  ['direct path (few rows)', /attend_direct|axpy|\bdot\b/],
  ['block driver', /attend_block|fill_row_block|attention\(|parallel_for|Workspace/],
  ['memcpy / memset', /memcpy|memset|memmove/],
  ['malloc / free', /malloc|free|sbrk/],
  ['embind and the JS API (validation, copies in and out)', /.*/],  // JS frames, set(), subarray() …
];

// Frames outside the wasm module (JS, V8's runtime, '(program)') are the JS API's share.
export function phaseOf(name, url) {
  if (!url?.startsWith('wasm://')) return PHASES.at(-1)[0];
  return PHASES.find(([, re]) => re.test(name))[0];
}

