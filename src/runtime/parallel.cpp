// The worker pool behind parallel_for: workers sleep on a condition variable, each job hands out
// item indices through an atomic counter, and a job ends only when every worker has checked out
// of it, so no worker can still be inside one job when the next begins. Waking them and waiting
// for the last costs tens of microseconds (more in wasm, whose threads wake through the engine):
// measured when the pool is sized, it decides which calls are worth a job (threads_for).
#include "runtime/parallel.h"

#include <algorithm>

#if ATTN_THREADS
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace attn {

#if ATTN_THREADS

namespace {

// One thread's speed for the estimate of a call's time, the larger of its arithmetic's and its
// memory traffic's: the multiply-add peak of a core (59-69 GFLOP/s, docs/performance.md) and a
// read from cache. No call runs faster, so its time is underestimated (decode steps and prefills
// take 2-4 times the estimate on one thread).
constexpr double kFlopsPerNs = 64;
constexpr double kBytesPerNs = 32;

// A call goes to the pool when its estimated time is over kJobsWorth empty jobs. On two threads it
// then takes a job's fixed cost plus half its time, and a real job costs more than an empty one:
// each worker also allocates its workspace and reads inputs that are in the calling core's cache.
// Counted as twice the empty job, the pool pays from twice that (t/2 + 2·job ≤ t for t ≥ 4·job),
// which the benchmark's threads section checks (docs/performance.md).
constexpr double kJobsWorth = 4;

thread_local bool t_in_job = false;  // this thread is running items of a job

class Pool {
 public:
  ~Pool() { resize(0); }

  // Not while a job runs (callers hold job_mutex_).
  void resize(int workers) {
    if (workers == static_cast<int>(threads_.size())) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    stopping_ = false;
    // A new worker has seen every job so far: it must wait for the next generation, not take
    // the last one again (else it takes a stale pass, checked out of a job it never joined).
    const unsigned seen = generation_;
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, seen] { loop(seen); });
  }

  // The fixed cost of a job, in ns: the median of empty jobs (one item per thread) with a pause
  // before each, so the workers are asleep, as between real calls. The first few, which may wait
  // for a new worker to start, do not count. Not while a job runs (callers hold job_mutex_).
  double measure_job_ns() {
    using clock = std::chrono::steady_clock;
    constexpr int kSkipped = 4, kKept = 8;
    double ns[kKept];
    for (int j = 0; j < kSkipped + kKept; ++j) {
      for (const auto until = clock::now() + std::chrono::microseconds(50); clock::now() < until;) {
      }
      const auto start = clock::now();
      run(static_cast<int>(threads_.size()) + 1, [](const void*, int) {}, nullptr);
      if (j >= kSkipped) ns[j - kSkipped] = std::chrono::duration<double, std::nano>(clock::now() - start).count();
    }
    for (int i = 1; i < kKept; ++i)  // (a few values: an insertion sort is the least code)
      for (int k = i; k > 0 && ns[k] < ns[k - 1]; --k) std::swap(ns[k], ns[k - 1]);
    return ns[kKept / 2];
  }

  void run(int count, void (*call)(const void*, int), const void* fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      call_ = call;
      fn_ = fn;
      count_ = count;
      next_.store(0);
      active_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
    call_ = nullptr;
    fn_ = nullptr;
  }

  std::mutex job_mutex_;  // one job (or resize) at a time, whoever the caller

 private:
  // count_, call_ and fn_ are read here without the lock: they were written under it before
  // generation_ changed, and this thread has taken the lock since.
  void work() {
    t_in_job = true;
    for (int i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) call_(fn_, i);
    t_in_job = false;
  }

  void loop(unsigned seen) {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  void (*call_)(const void*, int) = nullptr;
  const void* fn_ = nullptr;
  int count_ = 0;
  std::atomic<int> next_{0};
  int active_ = 0;
  unsigned generation_ = 0;
  bool stopping_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

std::atomic<int> g_threads{1};
std::atomic<double> g_job_ns{0};  // the pool's fixed cost of a job (Pool::measure_job_ns)
std::atomic<unsigned> g_jobs{0};   // jobs run (detail::pool_jobs)
std::atomic<bool> g_every_call{false};

}  // namespace

void set_num_threads(int n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  const int threads = std::clamp(n, 1, 64);
  if (threads == g_threads && (threads == 1 || g_job_ns > 0)) return;
  g_threads = threads;
  p.resize(threads - 1);
  g_job_ns = threads > 1 ? p.measure_job_ns() : 0;
}

int num_threads() { return g_threads; }

int threads_for(const Work& work) {
  const int threads = g_threads;
  if (threads == 1 || g_every_call) return threads;
  const double ns = std::max(work.flops / kFlopsPerNs, work.bytes / kBytesPerNs);
  return ns > kJobsWorth * g_job_ns ? threads : 1;
}

void detail::parallel_for(int count, bool use_pool, void (*call)(const void*, int), const void* fn) {
  if (!use_pool || g_threads == 1 || count <= 1 || t_in_job) {
    for (int i = 0; i < count; ++i) call(fn, i);
    return;
  }
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  if (g_threads == 1) {  // resized to 1 while this caller waited
    for (int i = 0; i < count; ++i) call(fn, i);
    return;
  }
  ++g_jobs;
  p.run(count, call, fn);
}

unsigned detail::pool_jobs() { return g_jobs; }
void detail::set_pool_for_every_call(bool on) { g_every_call = on; }

#else  // no threads in this build

void set_num_threads(int) {}
int num_threads() { return 1; }
int threads_for(const Work&) { return 1; }
void detail::parallel_for(int count, bool, void (*call)(const void*, int), const void* fn) {
  for (int i = 0; i < count; ++i) call(fn, i);
}
unsigned detail::pool_jobs() { return 0; }
void detail::set_pool_for_every_call(bool) {}

#endif

}  // namespace attn
