// The worker pool behind parallel_for. A job hands out its items through one 64-bit ticket (the
// job's number and its next item), wakes only as many sleeping workers as it has items beyond the
// caller's first, and the calling thread takes items too. The caller waits for the items to be
// done, never for a worker: one the system has not scheduled yet, or that wakes after the items
// ran out, finds the ticket moved on (another job's number, or no item left) and sleeps again
// without touching the job. Waking a worker and hearing it finish costs tens of microseconds
// (more in wasm, whose threads wake through the engine): measured when the pool is sized, it
// sets which calls may be worth a job, and calls of a size where that is unclear are timed
// (PoolChoice, runtime/pool_choice.h).
#include "runtime/parallel.h"

#include <algorithm>

#if ATTN_THREADS
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/pool_choice.h"
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

double estimated_ns(const Work& work) { return std::max(work.flops / kFlopsPerNs, work.bytes / kBytesPerNs); }

thread_local bool t_in_job = false;  // this thread is running items of a job (a worker: always)

std::atomic<void (*)()> g_worker_gate{nullptr};  // detail::set_worker_gate
std::atomic<double> g_test_tick_ns{0};             // detail::set_clock_tick
// A job's cost where the clock is too coarse to time one (1 ms or more): the middle of what the
// engines' pools read (7-36 µs in Firefox and Chromium, 15-43 in Node).
constexpr double kUntimedJob = 20e3;

// The pool's clock: steady_clock, or for tests that clock in ticks of g_test_tick_ns (a browser's).
std::chrono::steady_clock::time_point pool_clock() {
  using clock = std::chrono::steady_clock;
  const clock::time_point t = clock::now();
  const double tick = g_test_tick_ns.load(std::memory_order_relaxed);
  if (!(tick >= 1)) return t;
  const auto ticks =
      static_cast<std::int64_t>(std::chrono::duration<double, std::nano>(t.time_since_epoch()).count() / tick);
  return clock::time_point(std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double, std::nano>(static_cast<double>(ticks) * tick)));
}

// Reads the clock until it moves on from `from` (at most kMaxReads times: a clock that never moves
// must not hang the load); returns what it read last, and counts the reads in `reads`.
constexpr std::uint32_t kMaxReads = 1u << 24;
std::chrono::steady_clock::time_point next_tick(std::chrono::steady_clock::time_point from, std::uint32_t& reads) {
  auto t = pool_clock();
  for (reads = 1; t == from && reads < kMaxReads; ++reads) t = pool_clock();
  return t;
}

// The clock's tick and how many reads of the clock one lasts: the means of four, which Firefox's
// jitter spreads from near 0 to twice its 20 µs (the least would be far too short).
struct Tick {
  double ns;
  std::uint32_t reads;
};
Tick clock_tick() {
  std::uint32_t reads = 0, total = 0;
  const auto start = next_tick(pool_clock(), reads);  // (the first read may be mid-tick)
  auto t = start;
  int ticks = 0;
  while (ticks < 4) {
    t = next_tick(t, reads);
    total += reads;
    ++ticks;
    if (t - start > std::chrono::milliseconds(1)) break;  // a clock of a millisecond or more: enough
  }
  return {std::chrono::duration<double, std::nano>(t - start).count() / ticks,
          std::max<std::uint32_t>(total / ticks, 1)};
}

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

  // The fixed cost of a job, in ns: the mean of the faster half of 16 samples, each the mean of
  // `batch` jobs of one item per thread in which each item waits until every thread has taken one
  // (or 1 ms has passed) — a worker's wake-up and the caller's — with a pause before each, so the
  // workers are asleep, as between real calls. Not their median: a wake-up the system delays (V8
  // compiling the module on the other core while the pool is sized, another process) is the load
  // of the moment, which the timed calls see as it comes (PoolChoice), and in Chromium the median
  // of 8 came to 25-265 µs in pages a few seconds apart (the faster half's mean is finer). Only
  // jobs that every worker joined count: a new worker may take milliseconds to start (a browser
  // starts its thread when the Worker gets to it), and a job it missed, whose items the caller
  // took alone after waiting, measures that wait. So the first job waits up to kStartWait for every
  // worker, and a sample a worker missed is measured again, up to kTries; if none is complete, a
  // job is taken to cost the wait. Not while a job runs (callers hold job_mutex_).
  //
  // A browser's clock is coarse (5 µs in Chromium's cross-origin-isolated pages, 20 µs in
  // Firefox's) and a job costs 10-40 µs. The pause ends on a tick of that clock, so a job timed
  // right after it read as whole ticks rounded down: 0 in most Firefox pages, and a job's cost of
  // 0 kept every call off the pool. So each job starts a random part of a tick after the pause
  // (the phase uniform, a reading's mean is the job's time) and a sample adds up enough jobs to
  // span a few ticks (one job where the clock is fine, as in Node).
  double measure_job_ns() {
    constexpr int kKept = 16, kTries = 64;
    constexpr std::chrono::milliseconds kStartWait{2000}, kWait{1};
    const Tick tick = clock_tick();
    // A clock of a millisecond or more (privacy settings give 16.7 or 100 ms) times no job, and
    // waiting out its ticks would hold the load for seconds: the middle of what engines read.
    if (tick.ns > 1e6) return kUntimedJob;
    const int batch = std::clamp(static_cast<int>(tick.ns / 2500), 1, 8);
    double ns[kKept];
    int kept = 0;
    std::uint32_t random = 1;
    meet(kStartWait);
    for (int j = 0; j < kTries && kept < kKept; ++j) {
      double sum = 0;
      for (int b = 0; b < batch && sum >= 0; ++b) {
        const auto until = pool_clock() + std::chrono::microseconds(50);
        for (std::uint32_t r = 0; pool_clock() < until && r < kMaxReads; ++r) {
        }
        random = random * 1664525u + 1013904223u;  // (an LCG: std's engines would add their code)
        for (std::uint32_t r = (random >> 16) % tick.reads; r > 0; --r) pool_clock();
        const double t = meet(kWait);
        sum = t >= 0 ? sum + t : -1;
      }
      if (sum >= 0) ns[kept++] = sum / batch;
    }
    if (kept == 0) return std::chrono::duration<double, std::nano>(kWait).count();
    for (int i = 1; i < kept; ++i)  // (a few values: an insertion sort is the least code)
      for (int k = i; k > 0 && ns[k] < ns[k - 1]; --k) std::swap(ns[k], ns[k - 1]);
    const int faster = (kept + 1) / 2;
    double sum = 0;
    for (int i = 0; i < faster; ++i) sum += ns[i];
    // Not below half of what a sample's tick could hide (every reading 0: the jobs were well
    // under a tick; the faster half of readings in whole ticks leans low).
    return std::max(sum / faster, tick.ns / (2 * batch));
  }

  // Runs items [0, count) on the calling thread and on up to count - 1 workers; returns when every
  // item is done (callers hold job_mutex_).
  void run(int count, void (*call)(const void*, int), const void* fn) {
    const int helpers = std::min(static_cast<int>(threads_.size()), count - 1);
    Job job{call, fn, count, 0};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job.id = ++last_id_;
      job_ = job;
      unfinished_.store(count, std::memory_order_relaxed);
      ticket_.store(std::uint64_t(job.id) << 32, std::memory_order_release);
      wanted_ = helpers;
    }
    for (int i = 0; i < helpers; ++i) wake_.notify_one();
    t_in_job = true;
    work(job, false);
    t_in_job = false;
    std::unique_lock<std::mutex> lock(mutex_);
    wanted_ = 0;  // every item is taken: a worker that wakes from now on has nothing to do here
    done_.wait(lock, [this] { return unfinished_.load(std::memory_order_acquire) == 0; });
  }

  std::mutex job_mutex_;  // one job (or resize) at a time, whoever the caller

 private:
  struct Job {
    void (*call)(const void*, int);
    const void* fn;
    int count;
    std::uint32_t id;
  };

  // A job of one item per thread whose items wait for each other for up to `patience`: its time in
  // ns, or -1 if some worker took no item (the caller then ran it after waiting).
  double meet(std::chrono::steady_clock::duration patience) {
    using clock = std::chrono::steady_clock;  // (its time_point: the pool's clock reads it, rounded)
    struct Meeting {
      std::mutex mutex;
      std::condition_variable all_here;
      int arrived = 0, threads = 0, on_workers = 0;
      std::thread::id caller;
      clock::time_point until;
    };
    Meeting m;
    m.threads = static_cast<int>(threads_.size()) + 1;
    m.caller = std::this_thread::get_id();
    const auto start = pool_clock();
    m.until = start + patience;
    run(
        m.threads,
        [](const void* f, int) {
          Meeting& meeting = *const_cast<Meeting*>(static_cast<const Meeting*>(f));
          std::unique_lock<std::mutex> lock(meeting.mutex);
          if (std::this_thread::get_id() != meeting.caller) ++meeting.on_workers;
          if (++meeting.arrived == meeting.threads) return meeting.all_here.notify_all();
          meeting.all_here.wait_until(lock, meeting.until, [&] { return meeting.arrived == meeting.threads; });
        },
        &m);
    const double ns = std::chrono::duration<double, std::nano>(pool_clock() - start).count();
    return m.on_workers == m.threads - 1 ? ns : -1;
  }

  // Takes items of `job` while it has some: a compare-exchange on the ticket, which fails once the
  // ticket belongs to another job, so a late worker never takes an item it was not given.
  void work(const Job& job, bool worker) {
    std::uint64_t ticket = ticket_.load(std::memory_order_acquire);
    for (;;) {
      const int item = static_cast<int>(static_cast<std::uint32_t>(ticket));
      if (static_cast<std::uint32_t>(ticket >> 32) != job.id || item >= job.count) return;
      if (!ticket_.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acquire)) continue;
      job.call(job.fn, item);
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
    const ScratchScope scratch;  // this worker's, for the items' workspaces (runtime/buffer.h)
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
std::atomic<double> g_job_ns{0};  // the pool's fixed cost of a job (Pool::measure_job_ns)
std::atomic<unsigned> g_jobs{0};   // jobs run (detail::pool_jobs)
std::atomic<bool> g_every_call{false};
PoolChoice g_choice;  // which calls go to the pool (reset with the pool's size)

}  // namespace

void set_num_threads(int n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  const int threads = std::clamp(n, 1, 64);
  if (threads == g_threads && (threads == 1 || g_job_ns > 0)) return;
  g_threads = threads;
  p.resize(threads - 1);
  g_job_ns = threads > 1 ? p.measure_job_ns() : 0;
  g_choice.reset(g_job_ns);
}

int num_threads() { return g_threads; }

// Relaxed loads: settings, read on every call, that need no ordering with the call's own data.
int threads_for(const Work& work) {
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (threads == 1 || g_every_call.load(std::memory_order_relaxed)) return threads;
  return g_choice.below_one_job(estimated_ns(work)) ? 1 : threads;
}

namespace {

void serially(int count, void (*call)(const void*, int), const void* fn) {
  for (int i = 0; i < count; ++i) call(fn, i);
}

void on_pool(int count, void (*call)(const void*, int), const void* fn) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.job_mutex_);
  if (g_threads == 1) return serially(count, call, fn);  // resized to 1 while this caller waited
  ++g_jobs;
  p.run(count, call, fn);
}

}  // namespace

void detail::parallel_for(int count, const Work& work, void (*call)(const void*, int), const void* fn) {
  if (count <= 1 || t_in_job || g_threads.load(std::memory_order_relaxed) == 1) return serially(count, call, fn);
  if (g_every_call.load(std::memory_order_relaxed)) return on_pool(count, call, fn);
  const double ns = estimated_ns(work);
  const PoolChoice::Decision d = g_choice.decide(ns);
  const auto run = d.pool ? on_pool : serially;
  if (d.size_class < 0) return run(count, call, fn);
  const auto start = pool_clock();
  run(count, call, fn);
  g_choice.record(d, ns, std::chrono::duration<double, std::nano>(pool_clock() - start).count());
}

unsigned detail::pool_jobs() { return g_jobs; }
double detail::job_ns() { return g_job_ns; }
double detail::pool_choice_state(int field) {
  if (field == 0) return g_job_ns;
  if (field < 0 || field > 6 * PoolChoice::kClasses) return __builtin_nan("");
  const int size_class = (field - 1) / 6, k = (field - 1) % 6;
  if (k == 0) return g_choice.prefers_pool(size_class);
  const PoolChoice::Sums s = g_choice.sums(size_class);
  const double values[] = {double(s.pairs), s.caller_ns, s.caller_work, s.pool_ns, s.pool_work};
  return values[k - 1];
}
void detail::set_pool_for_every_call(bool on) { g_every_call = on; }
void detail::set_worker_gate(void (*gate)()) { g_worker_gate = gate; }
void detail::set_clock_tick(double ns) { g_test_tick_ns = ns; }

#else  // no threads in this build

void set_num_threads(int) {}
int num_threads() { return 1; }
int threads_for(const Work&) { return 1; }
void detail::parallel_for(int count, const Work&, void (*call)(const void*, int), const void* fn) {
  for (int i = 0; i < count; ++i) call(fn, i);
}
unsigned detail::pool_jobs() { return 0; }
double detail::job_ns() { return 0; }
double detail::pool_choice_state(int field) { return field == 0 ? 0 : __builtin_nan(""); }
void detail::set_pool_for_every_call(bool) {}
void detail::set_worker_gate(void (*)()) {}
void detail::set_clock_tick(double) {}

#endif

}  // namespace attn
