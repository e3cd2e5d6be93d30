// The worker pool behind parallel_for. A job hands out its items through one 64-bit ticket (the
// job's number and its next item), wakes only as many sleeping workers as it has items beyond the
// caller's first, and the calling thread takes items too. The caller waits for the items to be
// done, never for a worker: one the system has not scheduled yet, or that wakes after the items
// ran out, finds the ticket moved on (another job's number, or no item left) and sleeps again
// without touching the job. Waking a worker and hearing it finish costs tens of microseconds
// (more in wasm, whose threads wake through the engine), more when other work holds the cores:
// measured when the pool is sized and then in every job, it decides which calls are worth a job
// (threads_for).
#include "runtime/parallel.h"

#include <algorithm>

#if ATTN_THREADS
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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

// A call goes to the pool when its estimated time is over kJobsWorth times the cost of a job (the
// median of the last jobs', Pool::run). On two threads it then takes half its time plus a job's
// cost, but a job of many items hides up to half a worker's wake-up behind the caller's items,
// which a call of two items pays in full. Counted as twice the median, the pool pays from twice
// that (t/2 + 2·job ≤ t for t ≥ 4·job), which the benchmark's threads section checks
// (docs/performance.md).
constexpr double kJobsWorth = 4;

thread_local bool t_in_job = false;  // this thread is running items of a job (a worker: always)

std::atomic<void (*)()> g_worker_gate{nullptr};  // detail::set_worker_gate
std::atomic<double> g_job_ns{0};                 // the pool's cost of a job (Pool::note_cost; 0: none)

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
    stopping_ = false;  // (no worker is left to read it)
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }

  // Sizes the pool's cost of a job before any call ran on it: jobs of one item per thread, each
  // item `busy` ns of busy work, whose cost is what they take beyond `busy` — a worker's wake-up
  // and the caller hearing it finish when every worker took its item in time, `busy` when one did
  // not (the caller ran that item after its own). Each job follows a pause (the workers asleep, as
  // between calls); `busy` starts at kFirstBusy and doubles while the median cost is over half of
  // it (the workers woke too late for most jobs), up to kLastBusy. That median is the least the
  // cost will be (note_cost). First a job waits up to kStartWait for every worker to start (a
  // browser starts a Worker's thread when it gets to it), so a worker that has not started is not
  // timed as a late one. Not while a job runs (callers hold job_mutex_).
  void measure_job_cost() {
    using clock = std::chrono::steady_clock;
    constexpr std::chrono::microseconds kFirstBusy{25}, kLastBusy{800}, kPause{50};
    meet(std::chrono::milliseconds(2000));  // kStartWait
    for (clock::duration busy = kFirstBusy;; busy *= 2) {
      std::array<double, kCosts> costs;
      for (double& cost : costs) {
        for (const auto until = clock::now() + kPause; clock::now() < until;) {
        }
        const auto start = clock::now();
        run(
            static_cast<int>(threads_.size()) + 1,
            [](const void* b, int) {
              for (const auto until = clock::now() + *static_cast<const clock::duration*>(b); clock::now() < until;) {
              }
            },
            &busy);
        cost = std::chrono::duration<double, std::nano>(clock::now() - start - busy).count();
      }
      std::nth_element(costs.begin(), costs.begin() + kCosts / 2, costs.end());
      const double median = costs[kCosts / 2];
      if (median <= 0.5 * std::chrono::duration<double, std::nano>(busy).count() || busy >= kLastBusy)
        return set_cost(median);
    }
  }

  // Runs items [0, count) on the calling thread and on up to count - 1 workers; returns when every
  // item is done, with the job's cost to the call in ns: its time beyond an even split of its
  // items over the threads, an item taken to last what the caller's took on average. That is what
  // the pool added: a worker's wake-up, the caller hearing it finish, a worker's slower items.
  // When no worker came in time (the caller took every item), it is only a bound: the wake-up took
  // longer than the job, whose cost was then half its time (on two threads). -1 when the caller
  // took no item. Callers hold job_mutex_.
  struct Cost {
    double ns;
    bool bound;
  };
  Cost run(int count, void (*call)(const void*, int), const void* fn) {
    using clock = std::chrono::steady_clock;
    const int helpers = std::min(static_cast<int>(threads_.size()), count - 1);
    Job job{call, fn, count, 0};
    const auto start = clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job.id = ++last_id_;
      job_ = job;
      unfinished_.store(count, std::memory_order_relaxed);
      ticket_.store(std::uint64_t(job.id) << 32, std::memory_order_release);
      wanted_ = helpers;
    }
    for (int i = 0; i < helpers; ++i) wake_.notify_one();
    const auto own_start = clock::now();
    t_in_job = true;
    const int own = work(job, false);
    t_in_job = false;
    const auto own_end = clock::now();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wanted_ = 0;  // every item is taken: a worker that wakes from now on has nothing to do here
      done_.wait(lock, [this] { return unfinished_.load(std::memory_order_acquire) == 0; });
    }
    if (own == 0) return {-1, false};
    const auto ns = [](clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); };
    return {ns(clock::now() - start) - ns(own_end - own_start) / own * count / (helpers + 1), own == count};
  }

  // The pool's cost of a job (threads_for): the median of the last kCosts jobs' costs (run), or
  // the sizing's (measure_job_cost) if that is larger. So the cost follows what jobs cost calls
  // now — a pool that calls of some size stopped gaining from (other work holding the cores, an
  // engine's workers waking more slowly than in the sizing's jobs) soon stops taking them — but
  // never falls below what the sizing measured: a job's own figure is rough (the caller's items,
  // by which it is split, take longer when the system pauses the caller), and a cost too low
  // sends calls to the pool that it makes slower. A bound counts as that cost if larger (a job too
  // short for a worker to come says only that waking one takes longer). Callers hold job_mutex_.
  void note_cost(Cost cost) {
    if (cost.ns < 0) return;
    costs_[next_cost_++ % kCosts] = cost.bound ? std::max(cost.ns, g_job_ns.load(std::memory_order_relaxed)) : cost.ns;
    std::array<double, kCosts> sorted = costs_;
    std::nth_element(sorted.begin(), sorted.begin() + kCosts / 2, sorted.end());
    g_job_ns.store(std::max({sorted[kCosts / 2], least_cost_, 1.0}), std::memory_order_relaxed);
  }
  // As if the sizing had measured `ns` and every job since had cost as much (tests too).
  void set_cost(double ns) {
    least_cost_ = ns;
    costs_.fill(ns);
    note_cost({ns, false});
  }

  std::mutex job_mutex_;  // one job (or resize) at a time, whoever the caller

 private:
  struct Job {
    void (*call)(const void*, int);
    const void* fn;
    int count;
    std::uint32_t id;
  };

  // A job of one item per thread whose items wait for each other for up to `patience`: returns
  // once every worker has taken one (so has started), or the caller waited that long.
  void meet(std::chrono::steady_clock::duration patience) {
    struct Meeting {
      std::mutex mutex;
      std::condition_variable all_here;
      int arrived = 0, threads = 0;
      std::chrono::steady_clock::time_point until;
    };
    Meeting m;
    m.threads = static_cast<int>(threads_.size()) + 1;
    m.until = std::chrono::steady_clock::now() + patience;
    run(
        m.threads,
        [](const void* f, int) {
          Meeting& meeting = *const_cast<Meeting*>(static_cast<const Meeting*>(f));
          std::unique_lock<std::mutex> lock(meeting.mutex);
          if (++meeting.arrived == meeting.threads) return meeting.all_here.notify_all();
          meeting.all_here.wait_until(lock, meeting.until, [&] { return meeting.arrived == meeting.threads; });
        },
        &m);
  }

  // Takes items of `job` while it has some: a compare-exchange on the ticket, which fails once the
  // ticket belongs to another job, so a late worker never takes an item it was not given. Returns
  // how many it took.
  int work(const Job& job, bool worker) {
    int taken = 0;
    std::uint64_t ticket = ticket_.load(std::memory_order_acquire);
    for (;;) {
      const int item = static_cast<int>(static_cast<std::uint32_t>(ticket));
      if (static_cast<std::uint32_t>(ticket >> 32) != job.id || item >= job.count) return taken;
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acquire)) continue;
      job.call(job.fn, item);
      ++taken;
      // The last item done lets the caller return (release: what the item wrote is seen there).
      if (unfinished_.fetch_sub(1, std::memory_order_acq_rel) == 1 && worker) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
      ticket = ticket_.load(std::memory_order_acquire);
    }
  }

  void loop() {
    t_in_job = true;  // a parallel_for inside an item runs serially (it would wait for itself)
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || wanted_ > 0; });
      if (stopping_) return;
      --wanted_;
      const Job job = job_;
      lock.unlock();
      if (void (*gate)() = g_worker_gate.load(std::memory_order_acquire)) gate();
      work(job, true);
      lock.lock();
    }
  }

  static constexpr int kCosts = 9;
  // The last jobs' costs, a ring, and the sizing's (note_cost; job_mutex_ guards them).
  std::array<double, kCosts> costs_{};
  unsigned next_cost_ = 0;
  double least_cost_ = 0;
  std::vector<std::thread> threads_;
  std::mutex mutex_;  // guards job_, last_id_, wanted_, stopping_; the waits of wake_ and done_
  std::condition_variable wake_, done_;
  Job job_{};
  std::uint32_t last_id_ = 0;
  int wanted_ = 0;  // workers the current job may still take
  bool stopping_ = false;
  std::atomic<std::uint64_t> ticket_{0};  // the current job's id (high half) and next item (low)
  std::atomic<int> unfinished_{0};        // its items not yet done
};

Pool& pool() {
  static Pool p;
  return p;
}

std::atomic<int> g_threads{1};
std::atomic<unsigned> g_jobs{0};  // jobs run (detail::pool_jobs)
std::atomic<bool> g_every_call{false};

}  // namespace

void set_num_threads(int n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  const int threads = std::clamp(n, 1, 64);
  if (threads == g_threads && (threads == 1 || g_job_ns > 0)) return;
  g_threads = threads;
  p.resize(threads - 1);
  if (threads > 1) {
    p.measure_job_cost();
  } else {
    g_job_ns = 0;
  }
}

int num_threads() { return g_threads; }

// Relaxed loads: settings, read on every call, that need no ordering with the call's own data.
int threads_for(const Work& work) {
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (threads == 1 || g_every_call.load(std::memory_order_relaxed)) return threads;
  const double ns = std::max(work.flops / kFlopsPerNs, work.bytes / kBytesPerNs);
  return ns > kJobsWorth * g_job_ns.load(std::memory_order_relaxed) ? threads : 1;
}

void detail::parallel_for(int count, bool use_pool, void (*call)(const void*, int), const void* fn) {
  if (!use_pool || count <= 1 || t_in_job) {
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
  p.note_cost(p.run(count, call, fn));
}

unsigned detail::pool_jobs() { return g_jobs; }
double detail::job_ns() { return g_job_ns; }
void detail::set_job_ns(double ns) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  if (g_threads > 1) p.set_cost(ns);
}

void detail::set_pool_for_every_call(bool on) { g_every_call = on; }
void detail::set_worker_gate(void (*gate)()) { g_worker_gate = gate; }

#else  // no threads in this build

void set_num_threads(int) {}
int num_threads() { return 1; }
int threads_for(const Work&) { return 1; }
void detail::parallel_for(int count, bool, void (*call)(const void*, int), const void* fn) {
  for (int i = 0; i < count; ++i) call(fn, i);
}
unsigned detail::pool_jobs() { return 0; }
double detail::job_ns() { return 0; }
void detail::set_job_ns(double) {}
void detail::set_pool_for_every_call(bool) {}
void detail::set_worker_gate(void (*)()) {}

#endif

}  // namespace attn
