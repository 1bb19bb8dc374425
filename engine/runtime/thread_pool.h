// nnpipe's thread pool: the pthreadpool C API (pthreadpool.h) implemented so that waiting
// threads yield and sleep instead of spinning (thread_pool.cpp says why), and how many
// cores a session may use.
#pragma once

#include <cstddef>
#include <cstdint>

typedef struct pthreadpool* pthreadpool_t;

namespace nn {

// CPUs this process may run on (its affinity mask).
size_t usable_cores();

// Of those, how many are idle now (sampled over 50 ms from /proc/stat), at least 1: what
// SessionOptions::threads = 0 uses.
size_t free_cores();

struct ThreadPoolStats {
  uint64_t jobs = 0;          // parallelize calls, XNNPACK's and the native kernels'
  uint64_t solo_periods = 0;  // times a straggling worker made the caller run alone a while
};
ThreadPoolStats thread_pool_stats(pthreadpool_t pool);

}  // namespace nn
