// Whether a call goes to the pool (runtime/parallel.cpp), decided by what calls of its size have
// cost. A call's work is estimated from its shape (Work), and the pool's fixed cost of a job is
// timed once, when the pool is sized; neither says well enough whether a call near a job's cost
// gains from the pool: calls take 2-4 times their estimate on one thread, a worker takes longer to
// come in some engines than the sizing saw, and the sizing's figure moves between pages (16-46 µs
// in Chromium pages of one build), which would move a call of about one job in or out of any
// fixed bound. So calls from half a job's cost to kAmbiguous jobs' cost are timed, per size
// class (a power of two of jobs), on whichever thread they ran. kBurst calls in every kEvery go the
// other way from the one the class prefers (in kEvery · k calls, k up to kRarest as that way has lost
// by more: trying a way that takes 6 times as long cost 16 % of the class's time at 1 in 32, 1.3 %
// now), and the class prefers the way whose time per estimated
// ns has been lower in pairs of calls next to each other: each call of a burst against one of the
// last calls before it. Paired, the two ways are timed on the same mix of calls and load (a class
// holds calls of several shapes, a model's layers take turns, the other core comes and goes). The
// first call of a burst is not counted: a worker woken after a long sleep, its caches cold, is
// slower than one in use, and counted it would keep the pool from a class it serves. Calls below
// that range stay on the calling thread and calls above go to the pool, untimed. The clock is not
// read here: the caller times what decide() says to time and reports it to record(), so the
// choice is testable without timing (tests/cpp/test_pool_choice.cpp). Safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace attn {

class PoolChoice {
 public:
  static constexpr double kFloor = 0.5;      // the timed range: [0.5, 16) jobs' cost of estimated time
  static constexpr double kAmbiguous = 16;
  static constexpr int kClasses = 5;        // its powers of two
  static constexpr int kEvery = 128;        // of every 128 calls of a class,
  static constexpr int kBurst = 4;          // 4 in a row go the other way (1 in 32),
  static constexpr int kRarest = 12;        // or of up to 12 times as many, the more that way lost
  static constexpr int kEnough = 4;         // pairs a class needs before they decide
  static constexpr int kKept = 16;          // pairs before their sums are halved (old pairs fade)
  static constexpr double kOutlier = 4;     // a call counts at most 4 times a way's time per ns

  struct Decision {
    bool pool = false;
    bool explore = false;  // the other way from the one the class prefers
    int size_class = -1;   // the class to record() the call's time in; -1: not timed
  };

  // Forgets every call: a new pool, whose job costs job_ns (0: no pool, every call on the caller).
  void reset(double job_ns);
  // Whether a call of this estimated time costs less than one job: threads_for gives it one
  // thread's items (decide() times it from kFloor jobs all the same).
  bool below_one_job(double estimated_ns) const;
  Decision decide(double estimated_ns);
  void record(const Decision& d, double estimated_ns, double elapsed_ns);
  // For tests: whether the class's calls go to the pool now (its bursts aside).
  bool prefers_pool(int size_class) const;
  // For tests and probes (detail::pool_choice_state): a class's pairs and their sums, ns and
  // estimated ns, on the caller and on the pool.
  struct Sums {
    int pairs;
    double caller_ns, caller_work, pool_ns, pool_work;
  };
  Sums sums(int size_class) const;

 private:
  struct Time {
    double ns = 0, work = 0;  // calls' time and their estimated time
  };
  struct SizeClass {
    Time caller, pool;  // the pairs' sums
    int pairs = 0;
    Time last[kBurst - 1];  // the latest calls the preferred way ran, newest last
    int lasts = 0;
    std::uint32_t calls = 0;     // since the call after the last burst
    std::uint32_t gap = kEvery;  // the burst is calls gap − kBurst … gap − 1 of them
  };
  static std::uint32_t gap_after(const SizeClass& c);
  bool prefers_pool(const SizeClass& c, double estimated_ns) const;

  std::atomic<double> job_ns_{0};
  mutable std::mutex mutex_;  // guards classes_
  SizeClass classes_[kClasses];
};

}  // namespace attn
