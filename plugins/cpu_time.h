// CPU time of the calling thread, for the elements' CPU-per-frame stats: unlike wall time
// it does not grow while the thread waits or is preempted.
#pragma once

#include <time.h>

namespace nn::plugins {

inline double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

}  // namespace nn::plugins
