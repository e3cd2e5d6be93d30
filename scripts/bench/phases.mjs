// The phases of one attention call, recognised from the kernel's function names (src/kernel/attention_*,
// src/kernel/microkernel.h, src/kernel/score_rule.h) in profiles of the builds of scripts/profile.sh; what the
// compiler still inlined counts in its caller. First match wins; update the patterns when the kernel's
// functions are renamed (an unknown kernel function shows up as 'other kernel code').
const gemm = (init) => new RegExp(`(gemm_rows|micro_tile|tile_rows)<[^>]*\\(attn::kernel::Init\\)${init}`);
export const PHASES = [
  ['Q·Kᵀ (micro-kernel)', gemm(0)],
  ['P·V (micro-kernel)', gemm(1)],
  ['max, exp2, sum, rescale (softmax_update)', /softmax_update|rebase_row|exp2/],
  ['score rule: masks, softcap, ALiBi (score::apply)', /score::|mask_scores/],
  ['|K| maxima (overflow-safe scaling)', /key_abs_max/],
  ['pack K (transpose into panels)', /ensure_packed|transpose_keys|pack_key_block|block_rows/],
  ['pack V (panels)', /panel_values/],
  ['K/V rows to float (convert_rows)', /convert_rows|convert_block|with_type/],
  ['pack Q (scale, max |q|)', /pack_queries/],
  ['normalise and write rows (finish_rows, sinks)', /finish_rows|fold_sinks|start_rows/],
  ['few rows: Q·Kᵀ (few_rows::score_*, scores*)', /few_rows::(score_|scores)/],
  ['few rows: P·V (few_rows::value_*, values)', /few_rows::(value_|values)/],
  ['few rows: staging K/V rows as floats (few_rows::stage_*)', /few_rows::stage_/],
  // run_few_rows's lambda: attend_few_rows, few_scores and few_values (int8's scales) inline into it.
  ['few rows: driver (scales, what is inlined into it)', /run_few_rows|attend_few_rows|few_scores|few_values|\bdot\b|axpy/],
  ['block driver (and what is inlined into it)', /attend_block|fill_row_block|attention|parallel_for|Workspace|block_of|round_up|first_block|end_block|\brun\b/],
  ['memcpy / memset', /memcpy|memset|memmove/],
  ['malloc / free', /malloc|free|sbrk/],
  ['other kernel code', /attn::/],
  ['embind and the JS API (validation, copies in and out)', /.*/],  // JS frames, set(), subarray() …
];

// Frames outside the wasm module (JS, V8's runtime, '(program)') are the JS API's share.
export function phaseOf(name, url) {
  if (!url?.startsWith('wasm://')) return PHASES.at(-1)[0];
  return PHASES.find(([, re]) => re.test(name))[0];
}
