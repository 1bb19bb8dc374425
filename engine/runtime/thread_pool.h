// nnpipe's thread pool: the pthreadpool C API (pthreadpool.h) implemented so that waiting
// threads yield and sleep instead of spinning (thread_pool.cpp says why), and how many
// cores a session may use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// Where a pool's threads spent CPU time, cumulative since profiling was turned on: what
// `nnrun --profile` shows per step at 2+ threads (a step's share of each is the difference
// of two readings around it). CPU time, not wall time: a thread that was descheduled or
// still waking up shows as idle, however busy the machine is.
struct ThreadPoolBusy {
  std::vector<double> chunk_ms;    // per thread (0: the caller): CPU time running job items
  double caller_in_jobs_ms = 0;    // the caller's CPU time inside parallelize calls (items + waiting)
  double caller_wait_ms = 0;       // wall time the caller waited for other threads' items after its own
  uint64_t jobs = 0;               // parallelize calls
  uint64_t serial_jobs = 0;        // of those, run on the caller alone (one item, or solo mode)
};
// Profiling costs two thread-CPU clock reads per chunk: off unless asked for.
void thread_pool_set_profiling(pthreadpool_t pool, bool on);
ThreadPoolBusy thread_pool_busy(pthreadpool_t pool);

// The calling thread's CPU time in ms (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_ms();

}  // namespace nn
