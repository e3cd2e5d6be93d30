// Every allocation of the C++ core goes through allocate_bytes() (mostly as a HeapBuffer), so an
// allocation failure is a null pointer to report, never an abort (the wasm build has no
// exceptions), and test builds can make any one allocation fail (ATTN_FAULT_INJECTION). Large
// blocks start on a 64-byte cache line (kAlignment).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

namespace attn {

// Where a block of kAlignedFrom bytes or more (the workspaces and caches that the kernel's loops
// stream through) starts: a multiple of 64 bytes, a cache line. Emscripten's malloc gives 8, and a
// 16-byte vector load or store across two lines costs two (the few-rows loops' query tiles,
// accumulators and 512-byte cache rows all sat 8 bytes off a line: a decode step over a float32
// cache took 1.08-1.27x the time, docs/performance.md, Design notes). Smaller blocks, which would
// pay the kAlignment bytes it takes more, are malloc's.
inline constexpr std::size_t kAlignment = 64;
inline constexpr std::size_t kAlignedFrom = 16384;

// Allocations that failed so far, and the bytes of the last: a call whose count moved failed for
// want of memory (the JS boundary says so by kind, src/bindings.cpp), and the bytes go in the message.
inline std::atomic<std::uint64_t> g_failed_allocations{0};
inline std::atomic<std::size_t> g_last_failed_allocation{0};

inline void note_failed_allocation(std::size_t bytes) {
  g_last_failed_allocation = bytes;
  ++g_failed_allocations;
}

#if ATTN_FAULT_INJECTION
// Test builds only (tests/cpp/test_faults.cpp): fail_after = n makes the n-th allocation from
// now fail (0: none); `live` counts allocations not yet released, `made` successful ones.
// Bytes too (tests/cpp/test_workspace.cpp): `live_bytes` are held now, `peak_bytes` the most held
// at once since it was last reset, and an allocation that would take live_bytes past
// `budget_bytes` (0: no budget) fails.
namespace fault {
inline std::atomic<long> fail_after{0};
inline std::atomic<long> live{0};
inline std::atomic<long> made{0};
inline std::atomic<std::size_t> live_bytes{0};
inline std::atomic<std::size_t> peak_bytes{0};
inline std::atomic<std::size_t> budget_bytes{0};
// Each block starts with its size, so release_bytes() knows what it gives back; the header is
// kAlignment wide and every block aligned, so the caller's pointer stays as aligned.
constexpr std::size_t kHeader = kAlignment;

// Counts `bytes` as held; false (nothing counted) if that would exceed the budget.
inline bool hold(std::size_t bytes) {
  const std::size_t now = live_bytes.fetch_add(bytes) + bytes;
  const std::size_t budget = budget_bytes.load();
  if (budget && now > budget) {
    live_bytes -= bytes;
    return false;
  }
  std::size_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return true;
}
}  // namespace fault
#endif

// The largest block: offsets within a block are ptrdiff_t, which in wasm32 is 32 bits wide while
// memory may reach 4 GiB (dlmalloc never grows it by 2 GiB at once anyway).
inline constexpr std::size_t kMaxBlockBytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

// malloc at kAlignment, or null: kAlignment bytes more, moved up to the next line, with malloc's
// pointer kept just before it for aligned_free. (posix_memalign's blocks vary by a few bytes with
// where the line falls, which the JS side's count of the heap in use would see: a block replaced
// by one of the same size must leave it as it was.)
inline void* aligned_malloc(std::size_t bytes) {
  void* raw = std::malloc(bytes + kAlignment);  // bytes ≤ kMaxBlockBytes: no wrap
  if (!raw) return nullptr;
  auto* p = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + kAlignment) & ~(kAlignment - 1));
  std::memcpy(p - sizeof raw, &raw, sizeof raw);  // malloc aligns to at least sizeof raw
  return p;
}

inline void aligned_free(void* p) {
  if (!p) return;
  void* raw;
  std::memcpy(&raw, static_cast<unsigned char*>(p) - sizeof raw, sizeof raw);
  std::free(raw);
}

// malloc (at kAlignment from kAlignedFrom bytes) that never returns memory for 0 bytes as null;
// null means out of memory (or more than kMaxBlockBytes).
inline void* allocate_bytes(std::size_t bytes) {
  if (bytes > kMaxBlockBytes) {
    note_failed_allocation(bytes);
    return nullptr;
  }
#if ATTN_FAULT_INJECTION
  if ((fault::fail_after.load() > 0 && fault::fail_after.fetch_sub(1) == 1) || !fault::hold(bytes)) {
    note_failed_allocation(bytes);
    return nullptr;
  }
  auto* block = static_cast<unsigned char*>(aligned_malloc(fault::kHeader + bytes));
  if (!block) {
    fault::live_bytes -= bytes;
    note_failed_allocation(bytes);
    return nullptr;
  }
  *reinterpret_cast<std::size_t*>(block) = bytes;
  ++fault::live;
  ++fault::made;
  return block + fault::kHeader;
#else
  void* p = bytes >= kAlignedFrom ? aligned_malloc(bytes) : std::malloc(bytes ? bytes : 1);
  if (!p) {
    note_failed_allocation(bytes);
    return nullptr;
  }
  return p;
#endif
}

// Gives back a block of `bytes` from allocate_bytes.
inline void release_bytes(void* p, [[maybe_unused]] std::size_t bytes) {
#if ATTN_FAULT_INJECTION
  if (!p) return;
  auto* block = static_cast<unsigned char*>(p) - fault::kHeader;
  fault::live_bytes -= *reinterpret_cast<const std::size_t*>(block);
  --fault::live;
  aligned_free(block);
#else
  if (bytes >= kAlignedFrom) {
    aligned_free(p);
  } else {
    std::free(p);
  }
#endif
}

// An owning array of n T from allocate_bytes. Moving it moves ownership (commit a new buffer
// only once everything it needs has been allocated: all-or-nothing updates).
template <class T>
struct HeapBuffer {
  struct Free {  // for a unique_ptr of allocate_bytes memory, of that many bytes
    std::size_t bytes = 0;
    template <class U>
    void operator()(U* p) const {
      release_bytes(p, bytes);
    }
  };
  std::unique_ptr<T, Free> data;
  std::size_t size = 0;

  // Contents undefined; false (and empty) if out of memory. n is 64-bit, so a size computed
  // in 64 bits is refused whole instead of wrapping in wasm32's 32-bit size_t.
  bool allocate(std::uint64_t n) {
    size = 0;
    data.reset();
    if (n > kMaxBlockBytes / sizeof(T)) {
      const std::uint64_t most = std::numeric_limits<std::size_t>::max();
      note_failed_allocation(static_cast<std::size_t>(n > most / sizeof(T) ? most : n * sizeof(T)));
      return false;
    }
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
    data = std::unique_ptr<T, Free>(static_cast<T*>(allocate_bytes(bytes)), Free{bytes});
    if (!data) return false;
    size = static_cast<std::size_t>(n);
    return true;
  }
  T* get() const { return data.get(); }
};

using FloatBuffer = HeapBuffer<float>;
using ByteBuffer = HeapBuffer<std::uint8_t>;

}  // namespace attn
