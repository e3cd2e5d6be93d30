// The pool's choice of calls (runtime/pool_choice.h), driven with made-up timings: no clock is read.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/pool_choice.h"

namespace {

constexpr double kJob = 10000;  // the pool's cost of a job, ns

struct Counts {
  int pool = 0, timed = 0;
};

// `calls` calls of `estimated` ns, each taking caller_ns on the calling thread or pool_ns on the
// pool (per call, not per ns), recorded as parallel_for records them.
Counts drive(attn::PoolChoice& choice, int calls, double estimated, double caller_ns, double pool_ns) {
  Counts n;
  for (int i = 0; i < calls; ++i) {
    const attn::PoolChoice::Decision d = choice.decide(estimated);
    n.pool += d.pool;
    n.timed += d.size_class >= 0;
    choice.record(d, estimated, d.pool ? pool_ns : caller_ns);
  }
  return n;
}

// Calls until the class of `estimated` prefers the pool, where each takes caller_ns on the
// calling thread and pool_ns on the pool (-1: not within `limit` calls).
int calls_until_pool(attn::PoolChoice& choice, int limit, double estimated, double caller_ns, double pool_ns,
                     int size_class) {
  for (int i = 0; i < limit; ++i) {
    const attn::PoolChoice::Decision d = choice.decide(estimated);
    choice.record(d, estimated, d.pool ? pool_ns : caller_ns);
    if (choice.prefers_pool(size_class)) return i;
  }
  return -1;
}

}  // namespace

TEST_CASE("calls below half a job stay on the caller and from 16 jobs go to the pool, untimed", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  for (double ns : {0.0, 1.0, 0.49 * kJob}) {
    const auto d = choice.decide(ns);
    CHECK_FALSE(d.pool);
    CHECK(d.size_class == -1);
  }
  for (double ns : {16 * kJob, 1e9}) {
    const auto d = choice.decide(ns);
    CHECK(d.pool);
    CHECK(d.size_class == -1);
  }
  // However slow the pool was for the class below.
  drive(choice, 1000, 15 * kJob, 1, 1e9);
  CHECK(choice.decide(16 * kJob).pool);
  choice.reset(0);  // one thread: nothing to choose
  for (double ns : {0.0, 1e9}) CHECK(choice.decide(ns).size_class == -1);
  CHECK_FALSE(choice.decide(1e9).pool);
}

// The sizing's job cost moves between pages (25-45 µs in Chromium, on a 5 µs clock), and a call
// takes 2-4 times its estimate: a decode step over 1,024 keys, estimated at 34 µs, ran 1.4 times as
// fast on the pool, yet in a page whose job was timed at 35 µs it was below the timed range and
// never tried there. Calls from half a job are timed; below that none goes to the pool.
TEST_CASE("a call just under a job's cost goes to the pool where that wins, one under half a job never",
          "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  const double step = 34000 / 35000.0 * kJob;  // the decode step, in that page
  drive(choice, 2000, step, 1.9 * step, 1.35 * step);
  CHECK(drive(choice, 3200, step, 1.9 * step, 1.35 * step).pool == 3200 - 3200 / 32);
  // Where the pool loses (1.6 times the caller's time), it is tried in bursts only: 1 call in 32,
  // then, once the class has its pairs, 1 in 64.
  attn::PoolChoice loses;
  loses.reset(kJob);
  const Counts tried = drive(loses, 3200, step, 1.9 * step, 3 * step);
  CHECK(tried.pool > 3200 / 64);
  CHECK(tried.pool <= 3200 / 64 + 4);
  // Under half a job: never timed, never on the pool, however fast the pool would be.
  const Counts small = drive(choice, 3200, 0.49 * kJob, 1.9 * step, 0.1 * step);
  CHECK(small.pool == 0);
  CHECK(small.timed == 0);
}

TEST_CASE("a class where the pool loses stays on the caller, one where it wins goes to the pool", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  // 9 jobs' estimate (class 4): the old rule's pool, which is slower here (a worker that comes late).
  const double big = 9 * kJob;
  CHECK(choice.prefers_pool(4));
  Counts n = drive(choice, 2000, big, 3 * big, 3.3 * big);
  CHECK_FALSE(choice.prefers_pool(4));
  const Counts later = drive(choice, 3200, big, 3 * big, 3.3 * big);
  CHECK(later.pool == 3200 / 32);  // only the exploring calls
  CHECK(later.timed == 3200 - 3200 / 128);  // all but the first of each burst
  // 1.5 jobs' estimate (class 1): the old rule's caller, but the pool halves it.
  const double small = 1.5 * kJob;
  CHECK_FALSE(choice.prefers_pool(1));
  n = drive(choice, 2000, small, 3 * small, 1.5 * small);
  CHECK(choice.prefers_pool(1));
  // (the caller, twice as slow, tried in 4 calls of 512)
  CHECK(drive(choice, 3200, small, 3 * small, 1.5 * small).pool >= 3200 - 3200 / 128 - 8);
  // The classes are apart: class 4 still keeps to the caller.
  CHECK_FALSE(choice.prefers_pool(4));
  // A new pool forgets every class.
  choice.reset(kJob);
  CHECK(choice.prefers_pool(4));
  CHECK_FALSE(choice.prefers_pool(1));
}

TEST_CASE("the other way is tried in at most one call in 32 of a class, and a change is followed", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  const double est = 2 * kJob;  // class 2: the caller first
  std::vector<int> pooled;
  for (int i = 1; i <= 640; ++i) {
    const auto d = choice.decide(est);
    if (d.pool) pooled.push_back(i);
    choice.record(d, est, d.pool ? 4 * est : 3 * est);  // the pool loses
  }
  CHECK(pooled.size() == 640 / 32);
  for (int i : pooled) CHECK(i % 128 >= 124);  // in bursts of four
  // The pool becomes the faster way (the other core was busy and is free now): it is taken within
  // a thousand calls, which the exploring calls alone measure.
  const int switched_at = calls_until_pool(choice, 3000, est, 3 * est, 1.5 * est, 2);
  INFO("switched after " << switched_at << " calls");
  CHECK(switched_at >= 0);
  CHECK(switched_at < 1000);
}

// Trying the losing way costs its extra time in 4 calls of every burst: where the pool took 6 times
// as long (a worker that wakes late), 1 call in 32 cost the class 16 % of its time. The bursts
// come the rarer the more that way lost, so trying costs about 1 %; it is still tried, and a
// change is still followed.
TEST_CASE("the losing way is tried the more rarely the more it lost: about 1 % of a class's time", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  const double est = 2 * kJob;  // class 2: the caller first
  drive(choice, 2000, est, 3 * est, 18 * est);
  double spent = 0;
  int pooled = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto d = choice.decide(est);
    pooled += d.pool;
    spent += d.pool ? 18 * est : 3 * est;
    choice.record(d, est, d.pool ? 18 * est : 3 * est);
  }
  INFO(pooled << " of 20000 calls on the pool");
  CHECK(pooled > 0);
  CHECK(spent / (20000 * 3 * est) < 1.02);
  // The pool becomes twice as fast: followed, within the bursts' spacing.
  const int switched_at = calls_until_pool(choice, 40000, est, 3 * est, 1.5 * est, 2);
  INFO("switched after " << switched_at << " calls");
  CHECK(switched_at >= 0);
}

// The first call of a burst that goes to the pool finds its workers asleep for long, their caches
// cold: counted, it would make the pool look slower than it is where it wins by a little.
TEST_CASE("the first call of a burst the other way is not counted", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  // Class 2: the caller first; the pool wins by 10 %, but a call 8 or more calls after its last
  // takes 4 times as long.
  const double est = 2 * kJob;
  int since_pool = 1000;
  for (int i = 0; i < 2000; ++i) {
    const auto d = choice.decide(est);
    const bool cold = d.pool && since_pool >= 8;
    since_pool = d.pool ? 0 : since_pool + 1;
    if (cold) CHECK(d.size_class == -1);
    choice.record(d, est, d.pool ? (cold ? 12 * est : 2.7 * est) : 3 * est);
  }
  CHECK(choice.prefers_pool(2));
}

TEST_CASE("one paused call does not decide a class, and a coarse clock's ticks still add up", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  const double est = 9 * kJob;  // class 4
  drive(choice, 2000, est, 3 * est, 2 * est);  // the pool wins: 2 against 3 per estimated ns
  REQUIRE(choice.prefers_pool(4));
  // One of its calls was paused for 10 ms (about 55 calls' time): it counts as 4 times the pool's
  // time per ns at most, and the pool stays the choice.
  // (the call just before a burst, which pairs it: the class's 123rd call of 128)
  drive(choice, 122 + 128 * 16 - 2000, est, 3 * est, 2 * est);
  const attn::PoolChoice::Decision d = choice.decide(est);
  REQUIRE((d.pool && !d.explore));
  choice.record(d, est, 1e7);
  drive(choice, 256, est, 3 * est, 2 * est);
  CHECK(choice.prefers_pool(4));
  // A clock of 20 µs ticks reads a call of 30 µs on the caller as 20 or 40 µs, one of 40 µs on the
  // pool as 40 or 60, by where in a tick it starts. Paired sums still tell the caller is faster.
  attn::PoolChoice coarse;
  coarse.reset(kJob);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> phase(0, 1);
  const double tick = 20000, mid = 3 * kJob;  // class 2
  for (int i = 0; i < 6400; ++i) {
    const auto c = coarse.decide(mid);
    const double t = c.pool ? 40000 : 30000, start = phase(rng) * tick;
    coarse.record(c, mid, std::floor((start + t) / tick) * tick - std::floor(start / tick) * tick);
  }
  CHECK_FALSE(coarse.prefers_pool(2));
}

// A class holds calls of several shapes, which take turns (a model's layers, the benchmark's dtypes):
// each way is compared with the other on the calls next to it, not on whatever shapes it happened
// to run. Here the pool is 20 % faster on both shapes, one of which takes twice as long per ns.
TEST_CASE("shapes that take turns in a class: the ways are compared on neighbouring calls", "[pool_choice]") {
  attn::PoolChoice choice;
  choice.reset(kJob);
  const double est = 2 * kJob;  // class 2: the caller first
  int pooled = 0;
  for (int i = 0; i < 6000; ++i) {
    const double slow = (i / 200) % 2 ? 2 : 1;  // turns of 200 calls
    const auto d = choice.decide(est);
    pooled += i >= 3000 && d.pool;
    choice.record(d, est, (d.pool ? 2.4 : 3) * slow * est);
  }
  CHECK(pooled > 3000 * 9 / 10);
}
