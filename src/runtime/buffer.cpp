// A thread's scratch (runtime/buffer.h).
#include "runtime/buffer.h"

namespace attn {

namespace {
std::size_t rounded(std::size_t bytes) { return (bytes + kAlignment - 1) & ~(kAlignment - 1); }
}  // namespace

bool ScratchFloats::allocate(std::uint64_t n) {
  release();
  Scratch* s = t_scratch;
  if (!s || n > kScratchBytes / sizeof(float) || n * sizeof(float) > kScratchBytes - s->top) return heap_.allocate(n);
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
#if ATTN_FAULT_INJECTION
  if (!fault::admit(bytes)) {  // counted as held like any block; `made` counts malloc's only
    note_failed_allocation(bytes);
    return false;
  }
  ++fault::live;
#endif
  scratch_ = reinterpret_cast<float*>(s->bytes + s->top);
  bytes_ = bytes;
  s->top += rounded(bytes);  // ≤ kScratchBytes, a multiple of kAlignment
  ++s->live;
  return true;
}

ScratchFloats::~ScratchFloats() { release(); }

void ScratchFloats::release() {
  heap_ = FloatBuffer();
  if (!scratch_) return;
  Scratch* s = t_scratch;
  const auto offset = static_cast<std::size_t>(reinterpret_cast<unsigned char*>(scratch_) - s->bytes);
#if ATTN_FAULT_INJECTION
  fault::live_bytes -= bytes_;
  --fault::live;
#endif
  if (--s->live == 0) {
    s->top = 0;
  } else if (offset + rounded(bytes_) == s->top) {  // the top block (others, out of order, wait for 0)
    s->top = offset;
  }
  scratch_ = nullptr;
}

}  // namespace attn
