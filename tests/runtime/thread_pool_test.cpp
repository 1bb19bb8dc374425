// The engine's thread pool (runtime/thread_pool.cpp): every pthreadpool entry point visits
// each item once with the right tiles, XNNPACK runs on it (not on Debian's libpthreadpool,
// whose spinning collapsed oversubscribed runs), more threads than cores stay cheap, and a
// session never runs more threads than cores.
#include <gtest/gtest.h>
#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/thread_pool.h"
#include "runtime_test_util.h"
#include "test_model.h"

namespace {

// Records every call as (start or index per dim ..., size per tiled dim ...).
struct Visits {
  std::mutex mutex;
  std::map<std::vector<size_t>, int> seen;
  void add(std::vector<size_t> v) {
    std::lock_guard<std::mutex> lock(mutex);
    ++seen[std::move(v)];
  }
};

// The calls a serial loop makes for ranges r (the last `tiled` dims cut in tiles t).
std::map<std::vector<size_t>, int> expected(const std::vector<size_t>& r, const std::vector<size_t>& t,
                                            size_t tiled) {
  std::map<std::vector<size_t>, int> out;
  std::vector<size_t> idx(r.size(), 0);
  const size_t first_tiled = r.size() - tiled;
  auto step = [&](size_t d) { return d >= first_tiled ? t[d - first_tiled] : 1; };
  for (;;) {
    std::vector<size_t> call(idx);
    for (size_t d = first_tiled; d < r.size(); ++d) call.push_back(std::min(step(d), r[d] - idx[d]));
    ++out[call];
    size_t d = r.size();
    while (d > 0) {
      --d;
      idx[d] += step(d);
      if (idx[d] < r[d]) break;
      idx[d] = 0;
      if (d == 0) return out;
    }
  }
}

class PoolSizes : public ::testing::TestWithParam<int> {};

TEST_P(PoolSizes, EveryEntryPointVisitsEachItemOnce) {
  const int threads = GetParam();
  pthreadpool_t pool = threads == 0 ? nullptr : pthreadpool_create(size_t(threads));
  if (threads > 0) {
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pthreadpool_get_threads_count(pool), size_t(threads));
  }
  auto check = [&](const char* name, const std::vector<size_t>& r, const std::vector<size_t>& t, size_t tiled,
                   auto run) {
    Visits v;
    run(v);
    EXPECT_EQ(v.seen, expected(r, t, tiled)) << name << " on " << threads << " threads";
  };
  using V = Visits;
  check("1d", {37}, {}, 0, [&](V& v) {
    pthreadpool_parallelize_1d(pool, [](void* c, size_t i) { static_cast<V*>(c)->add({i}); }, &v, 37, 0);
  });
  check("1d_tile_1d", {37}, {5}, 1, [&](V& v) {
    pthreadpool_parallelize_1d_tile_1d(
        pool, [](void* c, size_t i, size_t n) { static_cast<V*>(c)->add({i, n}); }, &v, 37, 5, 0);
  });
  check("2d", {3, 11}, {}, 0, [&](V& v) {
    pthreadpool_parallelize_2d(pool, [](void* c, size_t i, size_t j) { static_cast<V*>(c)->add({i, j}); }, &v, 3,
                               11, 0);
  });
  check("2d_tile_1d", {3, 11}, {4}, 1, [&](V& v) {
    pthreadpool_parallelize_2d_tile_1d(
        pool, [](void* c, size_t i, size_t j, size_t n) { static_cast<V*>(c)->add({i, j, n}); }, &v, 3, 11, 4, 0);
  });
  check("2d_tile_2d", {13, 11}, {3, 4}, 2, [&](V& v) {
    pthreadpool_parallelize_2d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t ni, size_t nj) { static_cast<V*>(c)->add({i, j, ni, nj}); }, &v,
        13, 11, 3, 4, 0);
  });
  check("3d", {2, 3, 5}, {}, 0, [&](V& v) {
    pthreadpool_parallelize_3d(
        pool, [](void* c, size_t i, size_t j, size_t k) { static_cast<V*>(c)->add({i, j, k}); }, &v, 2, 3, 5, 0);
  });
  check("3d_tile_2d", {2, 7, 9}, {3, 4}, 2, [&](V& v) {
    pthreadpool_parallelize_3d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t nj, size_t nk) {
          static_cast<V*>(c)->add({i, j, k, nj, nk});
        },
        &v, 2, 7, 9, 3, 4, 0);
  });
  check("4d", {2, 3, 2, 5}, {}, 0, [&](V& v) {
    pthreadpool_parallelize_4d(
        pool, [](void* c, size_t i, size_t j, size_t k, size_t l) { static_cast<V*>(c)->add({i, j, k, l}); }, &v, 2,
        3, 2, 5, 0);
  });
  check("4d_tile_2d", {2, 3, 7, 9}, {2, 4}, 2, [&](V& v) {
    pthreadpool_parallelize_4d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t nk, size_t nl) {
          static_cast<V*>(c)->add({i, j, k, l, nk, nl});
        },
        &v, 2, 3, 7, 9, 2, 4, 0);
  });
  check("5d", {2, 1, 3, 2, 5}, {}, 0, [&](V& v) {
    pthreadpool_parallelize_5d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t m) { static_cast<V*>(c)->add({i, j, k, l, m}); },
        &v, 2, 1, 3, 2, 5, 0);
  });
  check("5d_tile_2d", {2, 2, 3, 7, 5}, {3, 2}, 2, [&](V& v) {
    pthreadpool_parallelize_5d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t m, size_t nl, size_t nm) {
          static_cast<V*>(c)->add({i, j, k, l, m, nl, nm});
        },
        &v, 2, 2, 3, 7, 5, 3, 2, 0);
  });
  check("6d_tile_2d", {2, 1, 2, 3, 7, 5}, {3, 2}, 2, [&](V& v) {
    pthreadpool_parallelize_6d_tile_2d(
        pool,
        [](void* c, size_t i, size_t j, size_t k, size_t l, size_t m, size_t n, size_t nm, size_t nn) {
          static_cast<V*>(c)->add({i, j, k, l, m, n, nm, nn});
        },
        &v, 2, 1, 2, 3, 7, 5, 3, 2, 0);
  });
  if (pool) pthreadpool_destroy(pool);
}

INSTANTIATE_TEST_SUITE_P(Threads, PoolSizes, ::testing::Values(0, 1, 2, 4, 9));

// XNNPACK's operators call the engine's pool (the interposed pthreadpool API): the pool
// counts their jobs. With Debian's pool in their place this would crash or count nothing.
TEST(ThreadPool, XnnpackRunsOnTheEnginePool) {
  ASSERT_EQ(xnn_initialize(nullptr), xnn_status_success);
  pthreadpool_t pool = pthreadpool_create(2);
  ASSERT_NE(pool, nullptr);
  xnn_operator_t op = nullptr;
  ASSERT_EQ(xnn_create_clamp_nc_f32(64, 64, 64, 0.f, 6.f, 0, &op), xnn_status_success);
  std::vector<float> in(64 * 512), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(int(i % 17) - 8);
  ASSERT_EQ(xnn_setup_clamp_nc_f32(op, 512, in.data(), out.data(), pool), xnn_status_success);
  const uint64_t before = nn::thread_pool_stats(pool).jobs;
  ASSERT_EQ(xnn_run_operator(op, pool), xnn_status_success);
  EXPECT_GT(nn::thread_pool_stats(pool).jobs, before);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], std::min(6.f, std::max(0.f, in[i]))) << i;
  xnn_delete_operator(op);
  pthreadpool_destroy(pool);
}

// Four times more threads than cores: small jobs still take microseconds, not scheduler
// slices (a spinning pool waits a slice for each descheduled thread, milliseconds per job,
// in every batch). The fastest of several batches is judged, so another process taking the
// cores for a while (a shared CI host) cannot fail the test; a spinning pool would still.
TEST(ThreadPool, MoreThreadsThanCoresStayCheap) {
  const size_t threads = 4 * nn::usable_cores();
  pthreadpool_t pool = pthreadpool_create(threads);
  ASSERT_NE(pool, nullptr);
  std::atomic<size_t> sum{0};
  const int batches = 8, jobs = 250;
  double best_ms = 1e9;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < jobs; ++j)
      pthreadpool_parallelize_1d(
          pool, [](void* c, size_t i) { static_cast<std::atomic<size_t>*>(c)->fetch_add(i + 1); }, &sum, 64, 0);
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  EXPECT_EQ(sum.load(), size_t(batches) * jobs * 64 * 65 / 2);
  EXPECT_LT(best_ms / jobs, 0.5) << threads << " threads: " << best_ms << " ms for the fastest batch of " << jobs << " jobs";
  pthreadpool_destroy(pool);
}

// A job whose worker-side item sleeps 40 ms: the caller runs out of items and waits for it,
// a straggler. Returns false if the worker did not take its item within 2 ms or the
// caller's own item took over 5 ms (no free core then: the pool's straggler threshold is 4x
// the caller's time per item, which must stay under the 40 ms).
bool straggling_job(pthreadpool_t pool) {
  struct Ctx {
    std::atomic<bool> started{false};
    std::atomic<bool> worker_ran{false};
    std::thread::id caller = std::this_thread::get_id();
    std::chrono::steady_clock::time_point begun = std::chrono::steady_clock::now();
    std::atomic<bool> caller_quick{false};
  } ctx;
  pthreadpool_parallelize_1d(
      pool,
      [](void* p, size_t i) {
        Ctx& c = *static_cast<Ctx*>(p);
        if (std::this_thread::get_id() != c.caller) {
          c.started = true;
          c.worker_ran = std::chrono::steady_clock::now() - c.begun < std::chrono::milliseconds(2);
          std::this_thread::sleep_for(std::chrono::milliseconds(40));
          return;
        }
        // The caller's item: hold the caller until the worker has its item, so the caller
        // cannot take it.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (i == 0 && !c.started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        c.caller_quick = std::chrono::steady_clock::now() - c.begun < std::chrono::milliseconds(5);
      },
      &ctx, 2, 0);
  return ctx.worker_ran && ctx.caller_quick;
}

// One straggler (a page fault, a preempted vCPU) leaves the pool parallel; stragglers in
// quick succession make it run the caller alone a while.
TEST(ThreadPool, OnlyRepeatedStragglersMakeThePoolRunAlone) {
  if (nn::usable_cores() < 2) GTEST_SKIP() << "one core";
  pthreadpool_t pool = pthreadpool_create(2);
  ASSERT_NE(pool, nullptr);
  if (!straggling_job(pool)) GTEST_SKIP() << "the worker never ran (no free core)";
  EXPECT_EQ(nn::thread_pool_stats(pool).solo_periods, 0u) << "one straggler made the pool solo";
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // the strikes' window passes
  EXPECT_EQ(nn::thread_pool_stats(pool).solo_periods, 0u);
  int stragglers = 0;
  for (int k = 0; k < 2; ++k) stragglers += straggling_job(pool);
  if (stragglers < 2) GTEST_SKIP() << "the worker missed a job (no free core)";
  EXPECT_EQ(nn::thread_pool_stats(pool).solo_periods, 1u);
  pthreadpool_destroy(pool);
}

// Jobs started under SerialJobs run every item on the calling thread, counted as serial
// jobs; other threads' jobs and the same thread's after the scope are shared again.
TEST(ThreadPool, SerialJobsRunOnTheCallerAlone) {
  if (nn::usable_cores() < 2) GTEST_SKIP() << "one core";
  pthreadpool_t pool = pthreadpool_create(2);
  ASSERT_NE(pool, nullptr);
  struct Ctx {
    std::mutex mutex;
    std::map<std::thread::id, int> items;
  };
  auto job = [&](Ctx& c) {
    pthreadpool_parallelize_1d(
        pool,
        [](void* p, size_t) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
          while (std::chrono::steady_clock::now() < until) {
          }
          Ctx& x = *static_cast<Ctx*>(p);
          std::lock_guard<std::mutex> lock(x.mutex);
          ++x.items[std::this_thread::get_id()];
        },
        &c, 64, 0);
  };
  const uint64_t serial_before = nn::thread_pool_busy(pool).serial_jobs;
  {
    nn::SerialJobs serial(true);
    nn::SerialJobs nested(false);  // an inner scope that does not ask keeps the outer one
    for (int k = 0; k < 5; ++k) {
      Ctx c;
      job(c);
      ASSERT_EQ(c.items.size(), 1u);
      EXPECT_EQ(c.items.begin()->first, std::this_thread::get_id());
      EXPECT_EQ(c.items.begin()->second, 64);
    }
  }
  EXPECT_EQ(nn::thread_pool_busy(pool).serial_jobs - serial_before, 5u);
  bool shared = false;  // after the scope: the worker takes items again (when it gets a core)
  for (int k = 0; k < 50 && !shared; ++k) {
    Ctx c;
    job(c);
    shared = c.items.size() == 2;
  }
  EXPECT_EQ(nn::thread_pool_busy(pool).serial_jobs - serial_before, 5u);
  pthreadpool_destroy(pool);
  if (!shared) GTEST_SKIP() << "the worker never ran (no free core)";
}

// ParallelChoice on made-up timings: it samples both ways alternately after the cold run,
// keeps the caller alone only when its median is clearly faster, and measures again once
// both kMinRuns runs and kSettleShare times the round's time have passed.
namespace {
using Choice = nn::ParallelChoice;
// Feeds one round's samples: each run's time from the mode it was asked to run in.
void explore(Choice& c, double parallel_ms, double serial_ms) {
  ASSERT_TRUE(c.exploring());
  for (int k = 0; k < 2 * Choice::kSamples; ++k) {
    ASSERT_EQ(c.parallel(), k % 2 == 0) << "sample " << k;
    c.record(c.parallel() ? parallel_ms : serial_ms);
  }
  ASSERT_FALSE(c.exploring());
}
}  // namespace

TEST(ParallelChoice, KeepsTheFasterModeAndMeasuresAgain) {
  Choice c;
  EXPECT_TRUE(c.parallel());  // the cold run shares the pool and is not a sample
  c.record(100.0);
  ASSERT_TRUE(c.exploring());
  explore(c, 10.0, 8.0);
  EXPECT_FALSE(c.parallel()) << "the caller alone was 20% faster";
  EXPECT_EQ(c.rounds(), 1u);
  // Settled until 256 runs and 40 x the round's 54 ms (2160 ms: 270 runs of 8 ms).
  for (int k = 0; k < 269; ++k) {
    ASSERT_FALSE(c.exploring()) << "run " << k;
    ASSERT_FALSE(c.parallel());
    c.record(8.0);
  }
  c.record(8.0);
  ASSERT_TRUE(c.exploring());
  explore(c, 7.0, 8.0);  // the placement moved: sharing pays again
  EXPECT_TRUE(c.parallel());
  EXPECT_EQ(c.rounds(), 2u);
  // Short runs: kMinRuns is what holds the next round back.
  for (int k = 0; k < Choice::kMinRuns - 1; ++k) c.record(50.0);
  EXPECT_FALSE(c.exploring());
  c.record(50.0);
  EXPECT_TRUE(c.exploring());
}

TEST(ParallelChoice, PrefersThePoolUnlessTheCallerIsClearlyFaster) {
  {
    Choice c;
    c.record(50.0);
    explore(c, 10.0, 9.7);  // 3% faster alone: within the margin
    EXPECT_TRUE(c.parallel());
  }
  {
    Choice c;
    c.record(50.0);
    explore(c, 10.0, 12.0);
    EXPECT_TRUE(c.parallel());
  }
  {  // a model that scales: the first pair ends the round, one run off the pool
    Choice c;
    c.record(50.0);
    c.record(10.0);
    ASSERT_FALSE(c.parallel());
    c.record(13.0);
    EXPECT_FALSE(c.exploring());
    EXPECT_TRUE(c.parallel());
  }
  {  // medians, not means: one lucky serial run does not decide
    Choice c;
    c.record(50.0);
    ASSERT_TRUE(c.parallel());
    const double serial[Choice::kSamples] = {1.0, 12.0, 12.0};
    for (int k = 0; k < 2 * Choice::kSamples; ++k) c.record(k % 2 == 0 ? 10.0 : serial[k / 2]);
    ASSERT_FALSE(c.exploring());
    EXPECT_TRUE(c.parallel());
  }
}

// A session asked for more threads than the process may use runs that many, and 0 (the
// cores free now) is accepted and runs.
TEST(ThreadPool, SessionThreadsClampToCores) {
  nn_test::TestModel b;
  uint32_t x = b.input({1, 8, 8, 16});
  b.output(b.op(nn::OperationType::LOGISTIC, {x}));
  ASSERT_TRUE(b.model->validate_and_infer_shapes().is_ok());
  for (int threads : {0, 64}) {
    nn::SessionOptions o;
    o.delegates = {"cpu"};
    o.threads = threads;
    auto c = nn_test::compare_with_reference(b.model, o);
    EXPECT_LE(c.max_rel_error, 1e-5);
    auto s = nn::Session::open(b.model, o);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_GE((*s)->report().threads, 1);
    EXPECT_LE((*s)->report().threads, int(nn::usable_cores())) << "asked " << threads;
  }
  EXPECT_GE(nn::free_cores(), 1u);
  EXPECT_LE(nn::free_cores(), nn::usable_cores());
}

}  // namespace
