// Included first in every translation unit of scripts/profile.sh's wasm builds (-include): the
// kernel's blocks (micro-kernel, score rule, attention blocks, the few-rows loops) become
// noinline, so each phase stays a function V8's profiler can name, while what is included before
// the pragma (xsimd, the SIMD primitives, the per-element K/V readers) still inlines. Nothing in src/ changes; if the
// kernel's headers are renamed, update the lists.
#pragma once
#if defined(__clang__)
#include "kernel/attention.h"
#include "kernel/kv_storage.h"
#include "runtime/buffer.h"
#include "runtime/simd.h"
#pragma clang attribute push(__attribute__((noinline)), apply_to = function)
#include "kernel/attention_blocks.h"
#include "kernel/few_rows.h"
#include "kernel/microkernel.h"
#include "kernel/score_rule.h"
#pragma clang attribute pop
#endif
