// nnpipe's thread pool behind the pthreadpool C API (the calls XNNPACK and the native
// kernels make), defined here so that both run on it: the executables and the plugin link
// these definitions ahead of Debian's libpthreadpool, whose symbols they interpose.
//
// Why not Debian's pool: its workers and its caller spin (a million iterations) waiting for
// each other, and a job ends only when every worker has checked in. With more threads than
// free cores, a spinning thread holds the core a descheduled one needs, every op waits a
// scheduler slice, and inference collapses (bench/README.md, "Threads under contention",
// has the figures). Here:
//  - the caller runs chunks too, and a job ends when its chunks are done: a worker that is
//    not scheduled in time finds nothing left to claim and costs nothing;
//  - a waiting thread yields the core (sched_yield) for a short while, then sleeps (a
//    condition variable), so a spinning thread never holds a core someone needs;
//  - when jobs keep waiting long for stragglers (a worker preempted mid-chunk, twice in
//    quick succession), the pool runs the caller alone for a while (solo mode), then
//    tries its workers again;
//  - each thread first takes the chunks of its own contiguous share of the items (thread t
//    the t-th of T ranges), then steals from the far end of the others': consecutive ops
//    split alike (image rows) so a core mostly reads rows it wrote itself one op earlier,
//    where claiming from one shared counter interleaved the rows of both cores.
#include "runtime/thread_pool.h"

#include <pthreadpool.h>
#include <sched.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace nn {
namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_serial_jobs = false;  // SerialJobs on this thread
thread_local bool t_flush_denormals = false;  // FlushDenormals on this thread

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// How long an idle thread keeps checking before it sleeps: long enough to bridge the gap
// between one op and the next in a run. For the first kSpinWindow it only pauses (a small
// model's ops take microseconds: a yield that hands the core away for a slice loses the
// next op), after that it yields the core between checks.
constexpr auto kSpinWindow = std::chrono::microseconds(50);
constexpr auto kYieldWindow = std::chrono::microseconds(200);
// A job whose last chunk finished this long after the caller ran out of chunks had a
// straggler. kStrikes stragglers, the second within kStrikeWindow of the first, make the pool
// run alone for kSoloPeriod: a worker losing its core again and again (more threads than
// free cores). One straggler alone (a first run's page faults, a vCPU the host preempted
// once) had made every job of the next 200 ms serial on an idle machine, so a 2-thread run
// of a small model was either twice as fast or not at all, from one run to the next.
constexpr auto kStragglerWait = std::chrono::microseconds(500);
constexpr int kStrikes = 2;
constexpr auto kStrikeWindow = std::chrono::milliseconds(100);
constexpr auto kSoloPeriod = std::chrono::milliseconds(200);
// Chunks per thread: small enough that a late worker leaves little for the others and the
// threads end a job together (the last chunk is what one thread waits for), large enough
// that claiming is cheap next to the work. At 4 the caller of a large conv visibly waited
// for the other thread's last chunk (nnrun --profile's wait).
constexpr size_t kChunksPerThread = 8;

enum class Kind {
  k1d, k1dTile1d, k2d, k2dTile1d, k2dTile2d, k3d, k3dTile2d, k4d, k4dTile2d, k5d, k5dTile2d, k6dTile2d
};

// A job over up to 6 dims (leading dims of range 1), the last two tiled.
struct Job {
  Kind kind = Kind::k1d;
  void* fn = nullptr;
  void* ctx = nullptr;
  size_t range[6] = {1, 1, 1, 1, 1, 1};
  size_t tile[6] = {1, 1, 1, 1, 1, 1};
  size_t tiles[6] = {1, 1, 1, 1, 1, 1};
  size_t items = 0;       // product of tiles
  size_t chunk = 1;       // items per chunk
  uint32_t chunks = 0;    // chunks of the job
  uint32_t flags = 0;

  void run_item(size_t item) const {
    size_t s[6], z[6];
    for (int d = 5; d >= 0; --d) {
      const size_t t = item % tiles[d];
      item /= tiles[d];
      s[d] = t * tile[d];
      z[d] = std::min(tile[d], range[d] - s[d]);
    }
    switch (kind) {
      case Kind::k1d: reinterpret_cast<pthreadpool_task_1d_t>(fn)(ctx, s[5]); break;
      case Kind::k1dTile1d: reinterpret_cast<pthreadpool_task_1d_tile_1d_t>(fn)(ctx, s[5], z[5]); break;
      case Kind::k2d: reinterpret_cast<pthreadpool_task_2d_t>(fn)(ctx, s[4], s[5]); break;
      case Kind::k2dTile1d:
        reinterpret_cast<pthreadpool_task_2d_tile_1d_t>(fn)(ctx, s[4], s[5], z[5]);
        break;
      case Kind::k2dTile2d:
        reinterpret_cast<pthreadpool_task_2d_tile_2d_t>(fn)(ctx, s[4], s[5], z[4], z[5]);
        break;
      case Kind::k3d: reinterpret_cast<pthreadpool_task_3d_t>(fn)(ctx, s[3], s[4], s[5]); break;
      case Kind::k3dTile2d:
        reinterpret_cast<pthreadpool_task_3d_tile_2d_t>(fn)(ctx, s[3], s[4], s[5], z[4], z[5]);
        break;
      case Kind::k4d: reinterpret_cast<pthreadpool_task_4d_t>(fn)(ctx, s[2], s[3], s[4], s[5]); break;
      case Kind::k4dTile2d:
        reinterpret_cast<pthreadpool_task_4d_tile_2d_t>(fn)(ctx, s[2], s[3], s[4], s[5], z[4], z[5]);
        break;
      case Kind::k5d: reinterpret_cast<pthreadpool_task_5d_t>(fn)(ctx, s[1], s[2], s[3], s[4], s[5]); break;
      case Kind::k5dTile2d:
        reinterpret_cast<pthreadpool_task_5d_tile_2d_t>(fn)(ctx, s[1], s[2], s[3], s[4], s[5], z[4], z[5]);
        break;
      case Kind::k6dTile2d:
        reinterpret_cast<pthreadpool_task_6d_tile_2d_t>(fn)(ctx, s[0], s[1], s[2], s[3], s[4], s[5], z[4],
                                                            z[5]);
        break;
    }
  }
};

// The spin-wait hint, per ISA.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Flush-to-zero and denormals-are-zero for the job's duration (PTHREADPOOL_FLAG_DISABLE_DENORMALS):
// MXCSR's FTZ|DAZ on x86, FPCR.FZ on aarch64.
// Sets them on this thread; returns the control word to restore.
inline uint64_t flush_denormals_on() {
  uint64_t saved = 0;
#if defined(__x86_64__) || defined(__i386__)
  saved = _mm_getcsr(), _mm_setcsr(static_cast<unsigned>(saved) | 0x8040);
#elif defined(__aarch64__)  // inline asm: GCC's FPCR builtins are not in Clang (the NDK's compiler)
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(saved));
  const uint64_t fz = saved | (uint64_t(1) << 24);
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fz));
#endif
  return saved;
}
inline void restore_fp_control(uint64_t saved) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(static_cast<unsigned>(saved));
#elif defined(__aarch64__)
  __asm__ __volatile__("msr fpcr, %0" : : "r"(saved));
#else
  (void)saved;
#endif
}

class DenormalsOff {
 public:
  explicit DenormalsOff(bool on) : on_(on) {
    if (on_) saved_ = flush_denormals_on();
  }
  ~DenormalsOff() {
    if (on_) restore_fp_control(saved_);
  }

 private:
  bool on_;
  uint64_t saved_ = 0;
};

// A 32-bit word threads can sleep on until it changes, with a count of sleepers so that a
// change costs no lock or system call when nobody sleeps (the common case: sleeping is
// only for idle periods).
class WaitWord {
 public:
  uint32_t load() const { return v_.load(std::memory_order_acquire); }
  void store(uint32_t x) { v_.store(x, std::memory_order_seq_cst); }
  uint32_t add(uint32_t x) { return v_.fetch_add(x, std::memory_order_seq_cst) + x; }
  // Sleeps while the word still holds `old` (returns at once if it changed).
  void wait(uint32_t old) {
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return v_.load(std::memory_order_seq_cst) != old; });
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // After a change of the word: wakes its sleepers. A sleeper counted after the change
  // sees the new value before it sleeps; one counted before is waiting on the condition
  // variable, or will be once the lock taken here is free.
  void wake_all() {
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
    { std::lock_guard<std::mutex> lock(mutex_); }
    cv_.notify_all();
  }

 private:
  std::atomic<uint32_t> v_{0};
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace
}  // namespace nn

// The pool (the opaque struct of pthreadpool.h). Each thread's range word packs the job's
// generation (high 32 bits), the range's next chunk (16 bits) and its end (16 bits): its
// owner claims from the front, the others steal from the end, both by compare-and-swap.
// A job's chunks are all claimed before the next job is published, and the job's
// description stays put until every chunk is done.
struct pthreadpool {
  explicit pthreadpool(size_t threads) : threads_count(threads), ranges(new Range[threads]) {
    for (size_t t = 1; t < threads; ++t) workers.emplace_back([this, t] { worker_loop(t); });
  }
  ~pthreadpool() {
    stop.store(true, std::memory_order_seq_cst);
    epoch.add(1);
    epoch.wake_all();
    for (auto& w : workers) w.join();
  }

  void run(const nn::Job& j) {
    std::lock_guard<std::mutex> lock(mutex);
    jobs.fetch_add(1, std::memory_order_relaxed);
    const size_t items = j.items;
    if (items == 0) return;
    const bool profiled = profiling.load(std::memory_order_relaxed);
    const uint64_t entered = profiled ? nn::thread_cpu_ns() : 0;
    const bool solo = workers.empty() || items == 1 || nn::t_serial_jobs || nn::Clock::now() < solo_until;
    if (solo) {
      {
        nn::DenormalsOff denormals(j.flags & PTHREADPOOL_FLAG_DISABLE_DENORMALS);
        for (size_t i = 0; i < items; ++i) j.run_item(i);
      }
      serial_jobs.fetch_add(1, std::memory_order_relaxed);
      if (profiled) {
        const uint64_t spent = nn::thread_cpu_ns() - entered;
        ranges[0].busy_ns.fetch_add(spent, std::memory_order_relaxed);
        caller_in_jobs_ns.fetch_add(spent, std::memory_order_relaxed);
      }
      return;
    }
    job = j;
    // The caller already flushes (FlushDenormals); its workers follow for this job.
    if (nn::t_flush_denormals) job.flags |= PTHREADPOOL_FLAG_DISABLE_DENORMALS;
    const size_t wanted = std::min<size_t>(items, threads_count * nn::kChunksPerThread);
    job.chunk = (items + wanted - 1) / wanted;
    const uint32_t chunks = static_cast<uint32_t>((items + job.chunk - 1) / job.chunk);  // <= 65535
    job.chunks = chunks;
    const uint64_t gen = ++generation;
    done.store(0);
    for (size_t t = 0; t < threads_count; ++t) {
      const uint64_t first = chunks * t / threads_count, end = chunks * (t + 1) / threads_count;
      ranges[t].word.store(gen << 32 | first << 16 | end, std::memory_order_release);
    }
    epoch.add(1);
    epoch.wake_all();
    const auto published = nn::Clock::now();
    const size_t ran = run_chunks(0, profiled);
    // Wait for chunks still running on workers: yield the core a while, then sleep.
    const auto drained = nn::Clock::now();
    // A straggler is a chunk that ends well after a chunk's time.
    const auto straggling = std::max<nn::Clock::duration>(nn::kStragglerWait, 4 * (drained - published) / std::max<size_t>(1, ran));
    for (uint32_t d = done.load(); d != chunks; d = done.load()) {
      const auto waited = nn::Clock::now() - drained;
      if (waited < nn::kSpinWindow)
        nn::cpu_relax();
      else if (waited < nn::kYieldWindow)
        sched_yield();
      else
        done.wait(d);
    }
    const auto now = nn::Clock::now();
    if (profiled) {
      caller_in_jobs_ns.fetch_add(nn::thread_cpu_ns() - entered, std::memory_order_relaxed);
      caller_wait_ns.fetch_add(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(now - drained).count()),
                               std::memory_order_relaxed);
    }
    if (now - drained > straggling) {
      strikes = now - last_straggler < nn::kStrikeWindow ? strikes + 1 : 1;
      last_straggler = now;
      if (strikes >= nn::kStrikes) {
        strikes = 0;
        solo_until = now + nn::kSoloPeriod;
        solo_periods.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // Claims a chunk of thread `owner`'s range: its next one when `front` (the owner), else
  // its last one (a thief). -1 when the range is empty.
  int64_t claim(size_t owner, bool front) {
    std::atomic<uint64_t>& w = ranges[owner].word;
    uint64_t v = w.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t next = (v >> 16) & 0xffff, end = v & 0xffff;
      if (next >= end) return -1;
      const uint64_t taken = front ? v + (uint64_t(1) << 16) : v - 1;
      if (w.compare_exchange_weak(v, taken, std::memory_order_acq_rel, std::memory_order_acquire))
        return int64_t(front ? next : end - 1);
    }
  }

  // Runs chunks of the current job until none is left, its own range first, then the
  // others' from their ends; returns how many it ran.
  // `profiled`: adds each chunk's CPU time to the thread's busy count before the chunk is
  // counted done, so the caller sees it once the job has ended.
  size_t run_chunks(size_t self, bool profiled) {
    size_t ran = 0;
    for (size_t k = 0; k < threads_count; ++k) {
      const size_t owner = (self + k) % threads_count;
      for (int64_t c; (c = claim(owner, k == 0)) >= 0;) {
        const uint32_t chunks = job.chunks;
        const uint64_t started = profiled ? nn::thread_cpu_ns() : 0;
        {
          nn::DenormalsOff denormals(job.flags & PTHREADPOOL_FLAG_DISABLE_DENORMALS);
          const size_t begin = size_t(c) * job.chunk, end = std::min(job.items, begin + job.chunk);
          for (size_t i = begin; i < end; ++i) job.run_item(i);
        }
        if (profiled) ranges[self].busy_ns.fetch_add(nn::thread_cpu_ns() - started, std::memory_order_relaxed);
        ++ran;
        if (done.add(1) == chunks) done.wake_all();
      }
    }
    return ran;
  }

  void worker_loop(size_t self) {
    uint32_t seen = 0;  // the epoch at construction: a job or a stop before this thread ran still counts
    for (;;) {
      const auto idle = nn::Clock::now();
      while (epoch.load() == seen) {
        const auto waited = nn::Clock::now() - idle;
        if (waited < nn::kSpinWindow)
          nn::cpu_relax();
        else if (waited < nn::kYieldWindow)
          sched_yield();
        else
          epoch.wait(seen);
      }
      seen = epoch.load();
      if (stop.load(std::memory_order_acquire)) return;
      run_chunks(self, profiling.load(std::memory_order_relaxed));
    }
  }

  const size_t threads_count;
  std::mutex mutex;  // one job at a time, as pthreadpool
  nn::Job job;
  // Each on its own cache line: the range words, the done count and the epoch are written
  // by different threads at different moments of a job.
  struct alignas(64) Range {
    std::atomic<uint64_t> word{0};
    std::atomic<uint64_t> busy_ns{0};  // profiling: CPU time this thread spent in chunks
  };
  std::unique_ptr<Range[]> ranges;  // per thread (0: the caller)
  uint64_t generation = 0;
  alignas(64) nn::WaitWord done;   // chunks of the current job finished
  alignas(64) nn::WaitWord epoch;  // bumped per job (and at destruction): what idle workers sleep on
  alignas(64) char end_of_shared_lines = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> jobs{0};
  std::atomic<uint64_t> solo_periods{0};
  std::atomic<uint64_t> serial_jobs{0};
  std::atomic<bool> profiling{false};
  std::atomic<uint64_t> caller_in_jobs_ns{0};
  std::atomic<uint64_t> caller_wait_ns{0};
  nn::Clock::time_point solo_until{};
  nn::Clock::time_point last_straggler{};
  int strikes = 0;  // stragglers in a row, each within kStrikeWindow of the last
  std::vector<std::thread> workers;
};

namespace nn {

size_t usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {
// Busy and total jiffies of all CPUs (the "cpu" line of /proc/stat).
bool cpu_times(uint64_t* busy, uint64_t* total) {
  std::ifstream f("/proc/stat");
  std::string line;
  if (!std::getline(f, line) || line.rfind("cpu ", 0) != 0) return false;
  std::istringstream in(line.substr(4));
  uint64_t v, sum = 0, idle = 0;
  for (int field = 0; in >> v; ++field) {
    if (field == 3 || field == 4) idle += v;  // idle, iowait
    if (field < 8) sum += v;                  // guest time is counted in user already
  }
  *busy = sum - idle;
  *total = sum;
  return sum > 0;
}
}  // namespace

size_t free_cores() {
  const size_t cores = usable_cores();
  uint64_t busy0, total0, busy1, total1;
  if (!cpu_times(&busy0, &total0)) return cores;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!cpu_times(&busy1, &total1) || total1 <= total0) return cores;
  const double idle_share = 1.0 - double(busy1 - busy0) / double(total1 - total0);
  const size_t all = std::max(1u, std::thread::hardware_concurrency());
  const size_t idle = static_cast<size_t>(idle_share * double(all) + 0.5);
  return std::clamp<size_t>(idle, 1, cores);
}

void thread_pool_set_profiling(pthreadpool_t pool, bool on) {
  if (pool) pool->profiling.store(on, std::memory_order_relaxed);
}

ThreadPoolBusy thread_pool_busy(pthreadpool_t pool) {
  ThreadPoolBusy b;
  if (!pool) return b;
  for (size_t t = 0; t < pool->threads_count; ++t)
    b.chunk_ms.push_back(double(pool->ranges[t].busy_ns.load(std::memory_order_acquire)) / 1e6);
  b.caller_in_jobs_ms = double(pool->caller_in_jobs_ns.load(std::memory_order_relaxed)) / 1e6;
  b.caller_wait_ms = double(pool->caller_wait_ns.load(std::memory_order_relaxed)) / 1e6;
  b.jobs = pool->jobs.load(std::memory_order_relaxed);
  b.serial_jobs = pool->serial_jobs.load(std::memory_order_relaxed);
  return b;
}

double thread_cpu_ms() { return double(thread_cpu_ns()) / 1e6; }

SerialJobs::SerialJobs(bool on) : previous_(t_serial_jobs) { t_serial_jobs = previous_ || on; }
SerialJobs::~SerialJobs() { t_serial_jobs = previous_; }

FlushDenormals::FlushDenormals(bool on) : on_(on), previous_(t_flush_denormals) {
  if (!on_) return;
  saved_ = flush_denormals_on();
  t_flush_denormals = true;
}
FlushDenormals::~FlushDenormals() {
  if (!on_) return;
  t_flush_denormals = previous_;
  restore_fp_control(saved_);
}

bool ParallelChoice::parallel() const {
  if (!exploring_) return chosen_parallel_;
  return cold_ || sampled_ % 2 == 0;
}

void ParallelChoice::record(double ms) {
  if (cold_) {
    cold_ = false;
    return;
  }
  if (!exploring_) {
    settled_ms_ += ms;
    if (++settled_runs_ >= kMinRuns && settled_ms_ >= kSettleShare * last_round_ms_) {
      exploring_ = true;
      sampled_ = 0;
      round_ms_ = 0;
    }
    return;
  }
  (sampled_ % 2 == 0 ? parallel_ms_ : serial_ms_)[sampled_ / 2] = ms;
  round_ms_ += ms;
  ++sampled_;
  // The first pair already decides when the caller alone was far slower (a model that
  // scales): one run off the pool per round, not kSamples.
  const bool clear = sampled_ == 2 && serial_ms_[0] > kSerialFarSlower * parallel_ms_[0];
  if (sampled_ < 2 * kSamples && !clear) return;
  auto median = [](double* v) {
    std::sort(v, v + kSamples);
    return v[kSamples / 2];
  };
  chosen_parallel_ = clear || !(median(serial_ms_) < kSerialMargin * median(parallel_ms_));
  exploring_ = false;
  last_round_ms_ = round_ms_;
  settled_ms_ = 0;
  settled_runs_ = 0;
  ++rounds_;
}

ThreadPoolStats thread_pool_stats(pthreadpool_t pool) {
  if (!pool) return {};
  return {pool->jobs.load(std::memory_order_relaxed), pool->solo_periods.load(std::memory_order_relaxed)};
}

}  // namespace nn

// ---- the pthreadpool C API -------------------------------------------------------------

namespace {

nn::Job make_job(nn::Kind kind, void* fn, void* ctx, std::initializer_list<size_t> ranges,
                 std::initializer_list<size_t> tiles_last, uint32_t flags) {
  nn::Job j;
  j.kind = kind, j.fn = fn, j.ctx = ctx, j.flags = flags;
  size_t d = 6 - ranges.size();
  for (size_t r : ranges) j.range[d++] = r;
  d = 6 - tiles_last.size();
  for (size_t t : tiles_last) j.tile[d++] = std::max<size_t>(1, t);
  j.items = 1;
  for (int k = 0; k < 6; ++k) {
    j.tiles[k] = (j.range[k] + j.tile[k] - 1) / j.tile[k];
    j.items *= j.tiles[k];
  }
  return j;
}

void dispatch(pthreadpool_t pool, const nn::Job& j) {
  if (pool) {
    pool->run(j);
    return;
  }
  nn::DenormalsOff denormals(j.flags & PTHREADPOOL_FLAG_DISABLE_DENORMALS);
  for (size_t i = 0; i < j.items; ++i) j.run_item(i);
}

template <typename F>
void* as_ptr(F f) {
  return reinterpret_cast<void*>(f);
}

}  // namespace

#define NN_EXPORT __attribute__((visibility("default")))

extern "C" {

NN_EXPORT pthreadpool_t pthreadpool_create(size_t threads_count) {
  if (threads_count == 0) threads_count = nn::usable_cores();
  try {
    return new pthreadpool(threads_count);
  } catch (...) {
    return nullptr;
  }
}

NN_EXPORT void pthreadpool_destroy(pthreadpool_t pool) {
  delete pool;
}

NN_EXPORT size_t pthreadpool_get_threads_count(pthreadpool_t pool) {
  return pool ? pool->threads_count : 1;
}

NN_EXPORT void pthreadpool_parallelize_1d(pthreadpool_t pool, pthreadpool_task_1d_t f, void* ctx, size_t range,
                                uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k1d, as_ptr(f), ctx, {range}, {}, flags));
}

NN_EXPORT void pthreadpool_parallelize_1d_tile_1d(pthreadpool_t pool, pthreadpool_task_1d_tile_1d_t f, void* ctx,
                                        size_t range, size_t tile, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k1dTile1d, as_ptr(f), ctx, {range}, {tile}, flags));
}

NN_EXPORT void pthreadpool_parallelize_2d(pthreadpool_t pool, pthreadpool_task_2d_t f, void* ctx, size_t range_i,
                                size_t range_j, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k2d, as_ptr(f), ctx, {range_i, range_j}, {}, flags));
}

NN_EXPORT void pthreadpool_parallelize_2d_tile_1d(pthreadpool_t pool, pthreadpool_task_2d_tile_1d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t tile_j, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k2dTile1d, as_ptr(f), ctx, {range_i, range_j}, {tile_j}, flags));
}

NN_EXPORT void pthreadpool_parallelize_2d_tile_2d(pthreadpool_t pool, pthreadpool_task_2d_tile_2d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t tile_i, size_t tile_j,
                                        uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k2dTile2d, as_ptr(f), ctx, {range_i, range_j}, {tile_i, tile_j}, flags));
}

NN_EXPORT void pthreadpool_parallelize_3d(pthreadpool_t pool, pthreadpool_task_3d_t f, void* ctx, size_t range_i,
                                size_t range_j, size_t range_k, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k3d, as_ptr(f), ctx, {range_i, range_j, range_k}, {}, flags));
}

NN_EXPORT void pthreadpool_parallelize_3d_tile_2d(pthreadpool_t pool, pthreadpool_task_3d_tile_2d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t range_k, size_t tile_j,
                                        size_t tile_k, uint32_t flags) {
  dispatch(pool,
           make_job(nn::Kind::k3dTile2d, as_ptr(f), ctx, {range_i, range_j, range_k}, {tile_j, tile_k}, flags));
}

NN_EXPORT void pthreadpool_parallelize_4d(pthreadpool_t pool, pthreadpool_task_4d_t f, void* ctx, size_t range_i,
                                size_t range_j, size_t range_k, size_t range_l, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k4d, as_ptr(f), ctx, {range_i, range_j, range_k, range_l}, {}, flags));
}

NN_EXPORT void pthreadpool_parallelize_4d_tile_2d(pthreadpool_t pool, pthreadpool_task_4d_tile_2d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t range_k, size_t range_l,
                                        size_t tile_k, size_t tile_l, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k4dTile2d, as_ptr(f), ctx, {range_i, range_j, range_k, range_l},
                          {tile_k, tile_l}, flags));
}

NN_EXPORT void pthreadpool_parallelize_5d(pthreadpool_t pool, pthreadpool_task_5d_t f, void* ctx, size_t range_i,
                                size_t range_j, size_t range_k, size_t range_l, size_t range_m,
                                uint32_t flags) {
  dispatch(pool,
           make_job(nn::Kind::k5d, as_ptr(f), ctx, {range_i, range_j, range_k, range_l, range_m}, {}, flags));
}

NN_EXPORT void pthreadpool_parallelize_5d_tile_2d(pthreadpool_t pool, pthreadpool_task_5d_tile_2d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t range_k, size_t range_l,
                                        size_t range_m, size_t tile_l, size_t tile_m, uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k5dTile2d, as_ptr(f), ctx, {range_i, range_j, range_k, range_l, range_m},
                          {tile_l, tile_m}, flags));
}

NN_EXPORT void pthreadpool_parallelize_6d_tile_2d(pthreadpool_t pool, pthreadpool_task_6d_tile_2d_t f, void* ctx,
                                        size_t range_i, size_t range_j, size_t range_k, size_t range_l,
                                        size_t range_m, size_t range_n, size_t tile_m, size_t tile_n,
                                        uint32_t flags) {
  dispatch(pool, make_job(nn::Kind::k6dTile2d, as_ptr(f), ctx,
                          {range_i, range_j, range_k, range_l, range_m, range_n}, {tile_m, tile_n}, flags));
}

}  // extern "C"
