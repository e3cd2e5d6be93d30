// An owning buffer from malloc, so an allocation failure is a null pointer to report, never an
// abort (the wasm build has no exceptions). Used for every scratch and weight buffer.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory>

namespace attn {

struct FloatBuffer {
  struct Free {
    template <class T>
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  std::size_t size = 0;

  // Contents undefined; false (and empty) if out of memory.
  bool allocate(std::size_t n) {
    size = 0;
    data.reset();
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(float)) return false;
    data.reset(static_cast<float*>(std::malloc((n ? n : 1) * sizeof(float))));
    if (!data) return false;
    size = n;
    return true;
  }
  float* get() const { return data.get(); }
};

}  // namespace attn
