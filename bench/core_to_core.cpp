// nncores: what handing data from one core to another costs on this machine, the bound on
// how well a small model scales to a second thread (every op's output is read by the next
// op, partly on the other core). Two threads pinned to the first two allowed CPUs:
// - round trip: one cache line bounced between them (a release store, an acquire spin);
// - cross-core read: the first thread reads 1 MiB the second has just written, beside the
//   same read of 1 MiB it wrote itself (both GB/s).
// - a pthreadpool job on two threads: 64 items of busy-waiting, 20 us of it in all, timed
//   (what one parallel op of that size costs, hand-offs included; 10 us would be free).
// Prints {"round_trip_ns": ..., "cross_read_gbps": ..., "local_read_gbps": ...,
// "pool_job_20us_us": ...}; with fewer than two CPUs allowed, the figures are null.
#include <pthread.h>
#include <pthreadpool.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double round_trip_ns(int a, int b) {
  alignas(64) static std::atomic<long> line{0};
  constexpr long kTrips = 100'000;
  line.store(0);
  std::thread other([&] {
    pin_to(b);
    for (long i = 0; i < kTrips; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin_to(a);
  const auto t0 = Clock::now();
  for (long i = 0; i < kTrips; ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kTrips;
  other.join();
  return ns;
}

// One cache line per 64 bytes touched, as a streaming kernel reads its input.
__attribute__((noinline)) float read_lines(const float* p, size_t n) {
  float s = 0;
  for (size_t i = 0; i < n; i += 16) s += p[i];
  return s;
}

// GB/s of reading `buf` on CPU a after CPU `writer` filled it (median of reps).
double read_gbps(int a, int writer, std::vector<float>& buf) {
  std::vector<double> secs;
  volatile float sink = 0;
  for (int rep = 0; rep < 101; ++rep) {
    std::thread w([&] {
      pin_to(writer);
      std::memset(buf.data(), rep & 0x7f, buf.size() * sizeof(float));
    });
    w.join();
    pin_to(a);
    const auto t0 = Clock::now();
    sink = sink + read_lines(buf.data(), buf.size());
    secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return buf.size() * sizeof(float) / median(secs) / 1e9;
}

// Median wall time of a two-thread pthreadpool job whose items busy-wait `total_us` in all.
double pool_job_us(double total_us) {
  pthreadpool_t pool = pthreadpool_create(2);
  if (!pool) return 0;
  static double item_us;
  item_us = total_us / 64;
  auto spin = [](void*, size_t) {
    const auto t0 = Clock::now();
    while (std::chrono::duration<double, std::micro>(Clock::now() - t0).count() < item_us) {
    }
  };
  std::vector<double> us;
  for (int rep = 0; rep < 3000; ++rep) {
    const auto t0 = Clock::now();
    pthreadpool_parallelize_1d(pool, spin, nullptr, 64, 0);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  pthreadpool_destroy(pool);
  return median(us);
}

}  // namespace

int main() {
  // The probe spins on both cores waiting for each other. Under a real-time policy (a
  // benchmark started with `chrt -f`) a spinner never gives its core away, so two probes at
  // once, or one beside another real-time spinner, wait on each other forever: run it at the
  // normal policy whatever the caller's (its threads inherit it).
  sched_param normal{};
  sched_setscheduler(0, SCHED_OTHER, &normal);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) {
    std::puts(
        "{\"round_trip_ns\": null, \"cross_read_gbps\": null, \"local_read_gbps\": null, "
        "\"pool_job_20us_us\": null}");
    return 0;
  }
  std::vector<double> trips;
  for (int i = 0; i < 5; ++i) trips.push_back(round_trip_ns(cpus[0], cpus[1]));
  std::vector<float> buf(size_t(1) << 18);  // 1 MiB: a 128x128x16 fp32 activation
  const double cross = read_gbps(cpus[0], cpus[1], buf);
  const double local = read_gbps(cpus[0], cpus[0], buf);
  pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);  // the pool as a session gets it
  const double job = pool_job_us(20.0);
  std::printf(
      "{\"round_trip_ns\": %.1f, \"cross_read_gbps\": %.1f, \"local_read_gbps\": %.1f, "
      "\"pool_job_20us_us\": %.1f, \"cpus\": [%d, %d]}\n",
      median(trips), cross, local, job, cpus[0], cpus[1]);
  return 0;
}
