#include "runtime/pool_choice.h"

#include <algorithm>

namespace attn {

namespace {

// Before a class's two ways are both measured: the pool from four jobs' cost. On two threads a call
// then takes a job's cost plus half its time, and a real job costs about twice the timed one (each
// worker allocates its workspace and reads inputs in the calling core's cache): t/2 + 2·job ≤ t
// for t ≥ 4·job.
constexpr double kJobsWorth = 4;

}  // namespace

void PoolChoice::reset(double job_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  job_ns_.store(job_ns, std::memory_order_relaxed);
  std::fill(std::begin(classes_), std::end(classes_), SizeClass{});
}

bool PoolChoice::prefers_pool(const SizeClass& c, double estimated_ns) const {
  if (c.pairs < kEnough) return estimated_ns >= kJobsWorth * job_ns_.load(std::memory_order_relaxed);
  return c.pool.ns * c.caller.work < c.caller.ns * c.pool.work;  // pool.ns/pool.work < caller.ns/caller.work
}

bool PoolChoice::prefers_pool(int size_class) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const double lowest = job_ns_.load(std::memory_order_relaxed) * kFloor * static_cast<double>(1 << size_class);
  return prefers_pool(classes_[size_class], lowest);
}

bool PoolChoice::below_one_job(double estimated_ns) const {
  const double job = job_ns_.load(std::memory_order_relaxed);
  return job > 0 && estimated_ns < job;
}

PoolChoice::Sums PoolChoice::sums(int size_class) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const SizeClass& c = classes_[size_class];
  return {c.pairs, c.caller.ns, c.caller.work, c.pool.ns, c.pool.work};
}

PoolChoice::Decision PoolChoice::decide(double estimated_ns) {
  const double job = job_ns_.load(std::memory_order_relaxed);
  if (!(job > 0) || estimated_ns < kFloor * job) return {false, false, -1};
  if (estimated_ns >= kAmbiguous * job) return {true, false, -1};
  // floor(log2(jobs / kFloor)), by halving: std::log2 for doubles would add libm's to the .wasm
  int size_class = 0;
  for (double half_jobs = estimated_ns / (kFloor * job); half_jobs >= 2 && size_class < kClasses - 1; half_jobs /= 2)
    ++size_class;
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& c = classes_[size_class];
  const std::uint32_t turn = ++c.calls, burst = c.gap - kBurst;  // the burst: turns burst … gap − 1
  const bool explore = turn >= burst && turn < c.gap;
  const Decision d{prefers_pool(c, estimated_ns) != explore, explore, turn == burst ? -1 : size_class};
  if (turn >= c.gap) {  // the call after a burst: the next burst's spacing
    c.calls = 0;
    c.gap = gap_after(c);
  }
  return d;
}

// The bursts' spacing: kEvery calls, times how far the other way's time per estimated ns is above
// the preferred way's, in quarters (1.25 times: 128 calls, twice: 512), so that trying it costs the
// class about 1 % of its time (kBurst · (r − 1) / (kEvery · 4 · (r − 1))) up to kRarest quarters:
// a timed call counts at most kOutlier times the lower way's time, so the ratio read tops out at 4
// (a way 6 times as slow costs 1.3 %, 10 times 2.3 %). It is still tried, so a change (the other
// core freed) is followed, in more calls the more it had lost.
std::uint32_t PoolChoice::gap_after(const SizeClass& c) {
  if (c.pairs < kEnough || !(c.caller.work > 0) || !(c.pool.work > 0)) return kEvery;
  const double caller = c.caller.ns / c.caller.work, pool = c.pool.ns / c.pool.work;
  const double lower = std::min(caller, pool);
  if (!(lower > 0)) return kEvery;
  const double quarters = 4 * (std::max(caller, pool) / lower - 1);
  return kEvery * static_cast<std::uint32_t>(std::clamp(quarters, 1.0, static_cast<double>(kRarest)));
}

void PoolChoice::record(const Decision& d, double estimated_ns, double elapsed_ns) {
  if (d.size_class < 0 || !(estimated_ns > 0) || !(elapsed_ns >= 0)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  SizeClass& c = classes_[d.size_class];
  // A call the system paused (another process took the core) would outweigh many: it counts at most
  // kOutlier times the lower of the two ways' time per estimated ns so far. Not less: a coarse clock
  // (5 µs in a cross-origin-isolated page, more in some browsers) times most calls as 0 or a tick,
  // and only their sum is right.
  double per_ns = -1;
  for (const Time* w : {&c.caller, &c.pool})
    if (w->ns > 0 && (per_ns < 0 || w->ns / w->work < per_ns)) per_ns = w->ns / w->work;
  if (per_ns > 0) elapsed_ns = std::min(elapsed_ns, kOutlier * per_ns * estimated_ns);
  if (!d.explore) {  // kept until the next burst pairs it
    if (c.lasts == kBurst - 1) std::copy(c.last + 1, c.last + c.lasts--, c.last);
    c.last[c.lasts++] = {elapsed_ns, estimated_ns};
    return;
  }
  if (c.lasts == 0) return;  // nothing to pair it with
  const Time other = c.last[--c.lasts];
  Time& mine = d.pool ? c.pool : c.caller;
  Time& theirs = d.pool ? c.caller : c.pool;
  mine.ns += elapsed_ns;
  mine.work += estimated_ns;
  theirs.ns += other.ns;
  theirs.work += other.work;
  if (++c.pairs == kKept) {
    for (Time* w : {&c.caller, &c.pool}) *w = {w->ns / 2, w->work / 2};
    c.pairs /= 2;
  }
}

}  // namespace attn
