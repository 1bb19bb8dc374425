// 64-byte aligned, zeroed buffers with XNNPACK's read slack past the end: what the
// session and the CPU delegate hand to kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nn {

// XNNPACK kernels may read (never write) up to this many bytes past an input tensor.
inline constexpr size_t kTensorSlackBytes = 16;  // == XNN_EXTRA_BYTES, checked in cpu_delegate.cpp

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) : size_(bytes) {
    size_t padded = (bytes + kTensorSlackBytes + 63) / 64 * 64;
    // Large buffers (a session's arena) in transparent huge pages where the kernel offers
    // them on request: zeroing a fresh buffer is one fault per 4 KB page otherwise, and
    // on VMs with costly faults that was most of a session's open time.
    constexpr size_t kHuge = size_t(2) << 20;
    const bool huge = padded >= kHuge;
    if (huge) padded = (padded + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(huge ? kHuge : 64, padded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && huge) madvise(p, padded, MADV_HUGEPAGE);  // a hint: failure changes nothing
#endif
    if (p) std::memset(p, 0, padded);
    data_.reset(static_cast<uint8_t*>(p));
  }
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool ok() const { return data_ != nullptr || size_ == 0; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

}  // namespace nn
