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

// While one lives, the pool jobs this thread starts run on it alone, cut in the same items
// as on all threads (so results are bit-equal), and counted as serial jobs. Scoped to the
// thread: another session sharing the pool is not affected.
class SerialJobs {
 public:
  explicit SerialJobs(bool on);
  ~SerialJobs();
  SerialJobs(const SerialJobs&) = delete;
  SerialJobs& operator=(const SerialJobs&) = delete;

 private:
  bool previous_;
};

// While one lives (on): flush-to-zero and denormals-are-zero on this thread (x86 MXCSR
// FTZ|DAZ, aarch64 FPCR.FZ), and every pool job this thread starts runs so on the workers
// too, as PTHREADPOOL_FLAG_DISABLE_DENORMALS jobs do. The thread's own setting comes back
// at destruction. Scoped to the thread, as SerialJobs.
class FlushDenormals {
 public:
  explicit FlushDenormals(bool on);
  ~FlushDenormals();
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  bool on_, previous_;
  uint64_t saved_ = 0;
};

// Whether a partition's runs should share the pool or run on the caller alone, chosen from
// wall times of both, measured as it runs. Two threads pay off only when the cores hand
// data to each other cheaply: on a host that moves its vCPUs between a near and a far
// placement for minutes at a time, a small model's every op reading the other core's output
// made 2 threads slower than 1 (bench/README.md, "Why the 2-thread figures moved").
// A round of exploration times kSamples runs each way, alternating (one each when the
// caller alone is far slower); the faster mode (the caller alone only if clearly faster)
// then runs until kMinRuns runs and kSettleShare times the round's time have passed, and
// a new round starts (the placement may have moved).
class ParallelChoice {
 public:
  static constexpr int kSamples = 3;
  static constexpr int kMinRuns = 256;
  static constexpr double kSettleShare = 40;
  static constexpr double kSerialMargin = 0.95;  // the caller alone must be 5% faster
  static constexpr double kSerialFarSlower = 1.25;  // a first pair this far apart ends the round

  // Whether the next run should use the pool's threads.
  bool parallel() const;
  // The wall time of the run just made, in the mode parallel() gave for it.
  void record(double ms);
  bool exploring() const { return exploring_; }
  uint64_t rounds() const { return rounds_; }

 private:
  bool exploring_ = true;
  bool chosen_parallel_ = true;
  bool cold_ = true;  // the first run (page faults, first touches) is not a sample
  int sampled_ = 0;   // runs timed in this round: even ones parallel, odd ones serial
  double parallel_ms_[kSamples] = {}, serial_ms_[kSamples] = {};
  double round_ms_ = 0;    // wall time of this round's runs
  double settled_ms_ = 0;  // since the last round ended
  int settled_runs_ = 0;
  double last_round_ms_ = 0;
  uint64_t rounds_ = 0;
};

}  // namespace nn
