// The worker pool behind parallel_for: workers sleep on a condition variable, each job hands out
// item indices through an atomic counter, and a job ends only when every worker has checked out
// of it, so no worker can still be inside one job when the next begins.
#include "runtime/parallel.h"

#include <algorithm>

#if ATTN_THREADS
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace attn {

#if ATTN_THREADS

namespace {

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

}  // namespace

void set_num_threads(int n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  g_threads = std::clamp(n, 1, 64);
  p.resize(g_threads - 1);
}

int num_threads() { return g_threads; }

void detail::parallel_for(int count, void (*call)(const void*, int), const void* fn) {
  if (g_threads == 1 || count <= 1 || t_in_job) {
    for (int i = 0; i < count; ++i) call(fn, i);
    return;
  }
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  if (g_threads == 1) {  // resized to 1 while this caller waited
    for (int i = 0; i < count; ++i) call(fn, i);
    return;
  }
  p.run(count, call, fn);
}

#else  // no threads in this build

void set_num_threads(int) {}
int num_threads() { return 1; }
void detail::parallel_for(int count, void (*call)(const void*, int), const void* fn) {
  for (int i = 0; i < count; ++i) call(fn, i);
}

#endif

}  // namespace attn
