// A small fixed pool of worker threads for the kernel's independent work items. Builds without
// threads (the single-threaded wasm module, ATTN_THREADS=0) run every item on the calling thread.
//
// Work is split into items that are each computed entirely by one thread with the same code as a
// serial run, so results are bit-identical whatever the thread count — and whoever runs them: a
// call too small to gain from the pool runs its items on the calling thread (threads_for).
#pragma once

namespace attn {

// Threads used by parallel_for, the calling thread included (1 = serial). Clamped to [1, 64].
// Worker threads are started here and reused; waits for a job that is running to end first.
void set_num_threads(int n);
int num_threads();

// What a call computes, estimated from its shape: floating-point operations and bytes read or
// written. Only compared with the pool's cost of a job (threads_for), so rough is enough.
struct Work {
  double flops = 0;
  double bytes = 0;
};

// The threads `work` may use: num_threads(), or 1 when at a core's peak it would take a thread
// less time than one of the pool's jobs (waking a worker and hearing it finish; measured when the
// pool is sized, see parallel.cpp) — then the pool could not make it faster
// (PoolChoice::below_one_job). Whether a call of more goes to the pool is parallel_for's choice
// (runtime/pool_choice.h).
int threads_for(const Work& work);

namespace detail {
// fn is called as call(fn, i); no allocation, so a job can start even when memory is exhausted.
void parallel_for(int count, const Work& work, void (*call)(const void* fn, int i), const void* fn);

// For tests: the jobs the pool has run (a call whose items all ran on the calling thread is none),
// and a switch that sends every call of two or more items to the pool, however small (so that
// tests of thread-count independence reach the workers with small shapes).
unsigned pool_jobs();
double job_ns();  // the pool's fixed cost of a job as measured (0: one thread)
// The pool's choice as it stands (Module.poolChoiceState, for probes): field 0 the job's cost in
// ns; 1 + 6·class + k: k = 0 whether the class prefers the pool, 1 its pairs, 2-5 their sums (ns
// and estimated ns on the caller, then on the pool); NaN past the last.
double pool_choice_state(int field);
void set_pool_for_every_call(bool on);
// For tests: a function every worker calls when it wakes for a job, before it takes an item (null:
// none), to hold a worker back as if the system had not scheduled it.
void set_worker_gate(void (*gate)());
// For tests: the pool's clock reads in ticks of this many ns (0: as it is), as a browser's does.
void set_clock_tick(double ns);
}  // namespace detail

// Runs fn(i) for every i in [0, count) and returns when all are done — never waiting for a worker
// that took none; the calling thread takes items too, and takes them all, touching nothing of the
// pool, when `work` would take it under half a job's cost or calls of this size have run faster
// on it (PoolChoice).
// Safe from any thread: jobs of concurrent callers run one after the other, and a parallel_for
// inside fn runs its items serially on that thread.
template <class Fn>
void parallel_for(int count, const Work& work, const Fn& fn) {
  detail::parallel_for(count, work, [](const void* f, int i) { (*static_cast<const Fn*>(f))(i); }, &fn);
}

}  // namespace attn
