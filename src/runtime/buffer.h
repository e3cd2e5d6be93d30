// Every allocation of the C++ core goes through allocate_bytes() (mostly as a HeapBuffer; small
// calls' workspaces come from a thread's scratch instead, ScratchFloats below), so an
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

// Whether an allocation of `bytes` may be made (fail_after and the budget); counted as held if so.
inline bool admit(std::size_t bytes) { return !(fail_after.load() > 0 && fail_after.fetch_sub(1) == 1) && hold(bytes); }
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
  if (!fault::admit(bytes)) {
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

// A thread's scratch: the workspaces of small calls come from here, not from malloc and free per
// work item (2-3 % of a one-key decode step; in the threaded build dlmalloc's locks, USE_LOCKS,
// took 0.14 µs of 7.6 in a profile). It lives on the stack of whoever opens a ScratchScope (the
// kernel's entry points on the calling thread, each pool worker's loop), so it is neither heap
// nor static data: the JS side's heap-in-use figure, trim() and dispose() never see it, nothing
// is stranded, no thread holds memory for it between calls, and the .wasm carries no bytes for it
// (a 160 KiB thread_local array did: one build's TLS segment kept its zeros). Blocks are taken in
// stack order (a call's split partials, then an item's workspace inside it); one that does not
// fit in what is left, or on a thread without a scope, comes from allocate_bytes. 160 KiB holds a
// decode step's workspace over a cache of any dtype (int4's is 125 KiB for 64 dims, whatever the
// keys: scores for kFewRows rows) with its split's partials up to 16384 keys, and a blocked
// prefill's of 64 positions; the stacks are 5 MiB (main) and 2 MiB (workers) in wasm.
inline constexpr std::size_t kScratchBytes = 160 * 1024;

struct Scratch {
  alignas(kAlignment) unsigned char bytes[kScratchBytes];  // left uninitialised
  std::size_t top = 0;  // bytes taken, each block rounded up to kAlignment
  int live = 0;         // blocks not yet released (at 0 the whole scratch is free again)
};

// The scratch of this thread's outermost open scope (null: none).
inline thread_local Scratch* t_scratch = nullptr;

// Opens this thread's scratch for what runs until it closes; inside another scope, the outer
// one's stays in use (its blocks may still be held).
class ScratchScope {
 public:
  ScratchScope() : outer_(t_scratch != nullptr) {
    if (!outer_) t_scratch = &scratch_;
  }
  ~ScratchScope() {
    if (!outer_) t_scratch = nullptr;
  }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  bool outer_;
  Scratch scratch_;  // default-initialised: the bytes are not written
};

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

// n floats from this thread's scratch when they fit (a FloatBuffer's otherwise), for a block
// released on the same thread, inside the scope it was taken in: a work item's workspace, a
// call's partial results. Out of line (runtime/buffer.cpp): few places use it.
class ScratchFloats {
 public:
  ScratchFloats() = default;
  ~ScratchFloats();
  ScratchFloats(const ScratchFloats&) = delete;
  ScratchFloats& operator=(const ScratchFloats&) = delete;

  // Contents undefined; false (and empty) if out of memory, as FloatBuffer::allocate.
  bool allocate(std::uint64_t n);
  float* get() const { return scratch_ ? scratch_ : heap_.get(); }

 private:
  void release();
  float* scratch_ = nullptr;  // in t_scratch, of bytes_
  std::size_t bytes_ = 0;
  FloatBuffer heap_;
};

}  // namespace attn
