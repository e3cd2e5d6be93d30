// For tests that compare results or allocations on 1, 2 and 3 threads: their shapes are small,
// and a small call runs on the calling thread whatever the thread count (runtime/parallel.h,
// threads_for). While one of these lives, every call of two or more items goes to the pool.
#pragma once

#include "runtime/parallel.h"

struct PoolForEveryCall {
  PoolForEveryCall() { attn::detail::set_pool_for_every_call(true); }
  ~PoolForEveryCall() { attn::detail::set_pool_for_every_call(false); }
  PoolForEveryCall(const PoolForEveryCall&) = delete;
  PoolForEveryCall& operator=(const PoolForEveryCall&) = delete;
};
