// A small fixed pool of worker threads for the kernel's independent work items. Builds without
// threads (the single-threaded wasm module, ATTN_THREADS=0) run every item on the calling thread.
//
// Work is split into items that are each computed entirely by one thread with the same code as a
// serial run, so results are bit-identical whatever the thread count.
#pragma once

namespace attn {

// Threads used by parallel_for, the calling thread included (1 = serial). Clamped to [1, 64].
// Worker threads are started here and reused; waits for a job that is running to end first.
void set_num_threads(int n);
int num_threads();

namespace detail {
// fn is called as call(fn, i); no allocation, so a job can start even when memory is exhausted.
void parallel_for(int count, void (*call)(const void* fn, int i), const void* fn);
}  // namespace detail

// Runs fn(i) for every i in [0, count) and returns when all are done; the calling thread takes
// items too. Safe from any thread: jobs of concurrent callers run one after the other, and a
// parallel_for inside fn runs its items serially on that thread.
template <class Fn>
void parallel_for(int count, const Fn& fn) {
  detail::parallel_for(count, [](const void* f, int i) { (*static_cast<const Fn*>(f))(i); }, &fn);
}

}  // namespace attn
