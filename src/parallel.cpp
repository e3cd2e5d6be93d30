// The worker pool behind parallel_for: workers sleep on a condition variable, each job hands out
// item indices through an atomic counter, and a job ends only when every worker has checked out
// of it, so no worker can still be inside one job when the next begins.
#include "parallel.h"

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

class Pool {
 public:
  ~Pool() { resize(0); }

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
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }

  void run(int count, const std::function<void(int)>& fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      fn_ = &fn;
      count_ = count;
      next_.store(0);
      active_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
    fn_ = nullptr;
  }

 private:
  void work() {
    for (int i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) (*fn_)(i);
  }

  void loop() {
    unsigned seen = 0;
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
  const std::function<void(int)>* fn_ = nullptr;
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

int g_threads = 1;

}  // namespace

void set_num_threads(int n) {
  g_threads = std::clamp(n, 1, 64);
  pool().resize(g_threads - 1);
}

int num_threads() { return g_threads; }

void parallel_for(int count, const std::function<void(int)>& fn) {
  if (g_threads == 1 || count <= 1) {
    for (int i = 0; i < count; ++i) fn(i);
    return;
  }
  pool().run(count, fn);
}

#else  // no threads in this build

void set_num_threads(int) {}
int num_threads() { return 1; }
void parallel_for(int count, const std::function<void(int)>& fn) {
  for (int i = 0; i < count; ++i) fn(i);
}

#endif

}  // namespace attn
