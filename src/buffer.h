// Every allocation of the C++ core goes through allocate_bytes() (mostly as a HeapBuffer), so an
// allocation failure is a null pointer to report, never an abort (the wasm build has no
// exceptions), and test builds can make any one allocation fail (ATTN_FAULT_INJECTION).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>

namespace attn {

// Bytes of the last allocation that failed (0: none yet), for out-of-memory messages.
inline std::atomic<std::size_t> g_last_failed_allocation{0};

#if ATTN_FAULT_INJECTION
// Test builds only (tests/cpp/test_faults.cpp): fail_after = n makes the n-th allocation from
// now fail (0: none); `live` counts allocations not yet released, `made` successful ones.
namespace fault {
inline std::atomic<long> fail_after{0};
inline std::atomic<long> live{0};
inline std::atomic<long> made{0};
}  // namespace fault
#endif

// The largest block: offsets within a block are ptrdiff_t, which in wasm32 is 32 bits wide while
// memory may reach 4 GiB (dlmalloc never grows it by 2 GiB at once anyway).
inline constexpr std::size_t kMaxBlockBytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

// malloc that never returns memory for 0 bytes as null; null means out of memory (or more than
// kMaxBlockBytes).
inline void* allocate_bytes(std::size_t bytes) {
  if (bytes > kMaxBlockBytes) {
    g_last_failed_allocation = bytes;
    return nullptr;
  }
#if ATTN_FAULT_INJECTION
  if (fault::fail_after.load() > 0 && fault::fail_after.fetch_sub(1) == 1) {
    g_last_failed_allocation = bytes;
    return nullptr;
  }
#endif
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) {
    g_last_failed_allocation = bytes;
    return nullptr;
  }
#if ATTN_FAULT_INJECTION
  ++fault::live;
  ++fault::made;
#endif
  return p;
}

inline void release_bytes(void* p) {
#if ATTN_FAULT_INJECTION
  if (p) --fault::live;
#endif
  std::free(p);
}

// An owning array of n T from allocate_bytes. Moving it moves ownership (commit a new buffer
// only once everything it needs has been allocated: all-or-nothing updates).
template <class T>
struct HeapBuffer {
  struct Free {  // for any unique_ptr of allocate_bytes memory
    template <class U>
    void operator()(U* p) const {
      release_bytes(p);
    }
  };
  std::unique_ptr<T, Free> data;
  std::size_t size = 0;

  // Contents undefined; false (and empty) if out of memory.
  bool allocate(std::size_t n) {
    size = 0;
    data.reset();
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      g_last_failed_allocation = std::numeric_limits<std::size_t>::max();
      return false;
    }
    data.reset(static_cast<T*>(allocate_bytes(n * sizeof(T))));
    if (!data) return false;
    size = n;
    return true;
  }
  T* get() const { return data.get(); }
};

using FloatBuffer = HeapBuffer<float>;
using ByteBuffer = HeapBuffer<std::uint8_t>;

}  // namespace attn
