// A small fixed pool of worker threads for the kernel's independent work items. Builds without
// threads (the single-threaded wasm module, ATTN_THREADS=0) run every item on the calling thread.
//
// Work is split into items that are each computed entirely by one thread with the same code as a
// serial run, so results are bit-identical whatever the thread count.
#pragma once

#include <functional>

namespace attn {

// Threads used by parallel_for, the calling thread included (1 = serial). Clamped to [1, 64].
// Worker threads are started on first use after a change and reused.
void set_num_threads(int n);
int num_threads();

// Runs fn(i) for every i in [0, count) and returns when all are done; the calling thread takes
// items too. Not re-entrant: fn must not call parallel_for.
void parallel_for(int count, const std::function<void(int)>& fn);

}  // namespace attn
