// What a kernel call computes, for parallel_for's choice of threads (runtime/parallel.h): its
// floating-point operations and the bytes it reads and writes, from the shape alone.
#pragma once

#include "kernel/attention.h"
#include "runtime/parallel.h"

namespace attn {

// A forward call: Q·Kᵀ and P·V over the scores its rows can see (causal and windows counted),
// the softmax's passes over them, K and V read in their storage type, Q and the outputs.
Work forward_work(const AttentionParams& p);

// A backward call: P recomputed, dP, dS and the three gradient products (about 2.5 forwards),
// and the gradients written.
Work backward_work(const AttentionParams& p);

}  // namespace attn
