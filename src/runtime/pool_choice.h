// Whether a call goes to the pool (runtime/parallel.cpp), decided by what calls of its size have
// cost. A call's work is estimated from its shape (Work), and the pool's fixed cost of a job is
// timed once, when the pool is sized; neither says well enough whether a call somewhat larger than
// a job gains from the pool (a worker takes longer to come in some engines than the sizing saw).
// So calls from one job's cost to kAmbiguous jobs' cost are timed, per size class (a power of two
// of jobs), on whichever thread they ran: each class goes the way whose time per estimated ns has
// been lower, and kBurst calls in every kEvery go the other way, to follow a change; the first of
// them is not counted (a worker woken after a long sleep, its caches cold, is slower than one in
// use: counted, it would keep the pool from a class it serves). Calls below that range stay on
// the calling thread and calls above go to the pool, untimed. The clock is not read here: the
// caller times what decide() says to time and reports it to record(), so the choice is testable
// without timing (tests/cpp/test_pool_choice.cpp). Safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace attn {

class PoolChoice {
 public:
  static constexpr double kAmbiguous = 16;  // the timed range: [1, 16) jobs' cost of estimated time
  static constexpr int kClasses = 4;        // its powers of two
  static constexpr int kEvery = 128;        // of every 128 calls of a class,
  static constexpr int kBurst = 4;          // 4 in a row go the other way (1 in 32)
  static constexpr int kEnough = 4;         // calls a way needs before its time is compared
  static constexpr int kKept = 16;          // a way's calls before its sums are halved (old calls fade)
  static constexpr double kOutlier = 4;     // a call counts at most 4 times a way's time per ns

  struct Decision {
    bool pool = false;
    int size_class = -1;  // the class to record() the call's time in; -1: not timed
  };

  // Forgets every call: a new pool, whose job costs job_ns (0: no pool, every call on the caller).
  void reset(double job_ns);
  Decision decide(double estimated_ns);
  void record(const Decision& d, double estimated_ns, double elapsed_ns);
  // For tests: whether the class's calls go to the pool now (its exploring call aside).
  bool prefers_pool(int size_class) const;

 private:
  struct Way {
    double ns = 0, work = 0;  // the calls' time and their estimated time
    int calls = 0;
  };
  struct SizeClass {
    Way caller, pool;
    std::uint32_t calls = 0;
  };
  bool prefers_pool(const SizeClass& c, double estimated_ns) const;

  std::atomic<double> job_ns_{0};
  mutable std::mutex mutex_;  // guards classes_
  SizeClass classes_[kClasses];
};

}  // namespace attn
