// The arena planner (runtime/arena_planner.h) the CPU and Vulkan delegates share: tensors
// whose lives overlap never share bytes, the others do, offsets honour the alignment, and
// on random problems a brute-force check finds no overlap and the plan is never larger than
// plain greedy-by-size. On the asset models the CPU delegate's arena stays within the size
// it had before the planner was shared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "nn/import/import.h"
#include "runtime/arena_planner.h"
#include "runtime/delegate.h"
#include "test_support.h"

namespace {

using nn::ArenaPlan;
using nn::ArenaTensor;

// Every pair of tensors whose lives overlap occupies disjoint bytes; every offset is aligned;
// the plan's size covers every tensor. Returns the first violation, or "".
std::string check_plan(const std::vector<ArenaTensor>& t, const ArenaPlan& plan, uint64_t alignment) {
  if (plan.offsets.size() != t.size()) return "one offset per tensor";
  auto rounded = [&](size_t i) { return (t[i].bytes + alignment - 1) / alignment * alignment; };
  for (size_t i = 0; i < t.size(); ++i) {
    if (plan.offsets[i] % alignment) return "tensor " + std::to_string(i) + " misaligned";
    if (plan.offsets[i] + rounded(i) > plan.bytes) return "tensor " + std::to_string(i) + " past the end";
    for (size_t j = i + 1; j < t.size(); ++j) {
      const bool live_together = t[i].first <= t[j].last && t[j].first <= t[i].last;
      const bool share_bytes = plan.offsets[i] < plan.offsets[j] + rounded(j) &&
                               plan.offsets[j] < plan.offsets[i] + rounded(i);
      if (live_together && share_bytes && rounded(i) && rounded(j))
        return "tensors " + std::to_string(i) + " and " + std::to_string(j) + " overlap";
    }
  }
  return "";
}

// The most bytes live at one position: no plan can be smaller.
uint64_t lower_bound(const std::vector<ArenaTensor>& t, uint64_t alignment) {
  uint64_t most = 0;
  size_t end = 0;
  for (const auto& x : t) end = std::max(end, x.last);
  for (size_t p = 0; p <= end; ++p) {
    uint64_t sum = 0;
    for (const auto& x : t)
      if (x.first <= p && p <= x.last) sum += (x.bytes + alignment - 1) / alignment * alignment;
    most = std::max(most, sum);
  }
  return most;
}

// Plain greedy by size, first fit: the CPU and Vulkan delegates' planner before it was shared.
uint64_t greedy_by_size(const std::vector<ArenaTensor>& t, uint64_t alignment) {
  std::vector<size_t> order(t.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto size = [&](size_t i) { return (t[i].bytes + alignment - 1) / alignment * alignment; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size(a) > size(b); });
  std::vector<uint64_t> offset(t.size());
  std::vector<size_t> placed;
  uint64_t total = 0;
  for (size_t i : order) {
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t p : placed)
      if (t[p].first <= t[i].last && t[i].first <= t[p].last) taken.push_back({offset[p], offset[p] + size(p)});
    std::sort(taken.begin(), taken.end());
    uint64_t o = 0;
    for (auto [b, e] : taken) {
      if (o + size(i) <= b) break;
      o = std::max(o, e);
    }
    offset[i] = o;
    total = std::max(total, o + size(i));
    placed.push_back(i);
  }
  return total;
}

TEST(ArenaPlanner, NothingToPlaceIsAnEmptyArena) {
  ArenaPlan plan = nn::plan_arena({}, 64);
  EXPECT_EQ(plan.bytes, 0u);
  EXPECT_TRUE(plan.offsets.empty());
}

TEST(ArenaPlanner, TensorsLiveTogetherNeverShareBytes) {
  // Three tensors all live at position 2: the arena holds all three side by side.
  std::vector<ArenaTensor> t = {{0, 2, 100}, {1, 3, 200}, {2, 2, 300}};
  ArenaPlan plan = nn::plan_arena(t, 1);
  EXPECT_EQ(check_plan(t, plan, 1), "");
  EXPECT_EQ(plan.bytes, 600u);
}

TEST(ArenaPlanner, TensorsWithDisjointLivesReuseBytes) {
  // A chain a -> b -> c -> d: each tensor is live with its neighbours only, so a and c (and
  // b and d) can share; the arena is the largest neighbouring pair, not the sum.
  std::vector<ArenaTensor> t = {{0, 1, 1000}, {1, 2, 1000}, {2, 3, 1000}, {3, 4, 1000}};
  ArenaPlan plan = nn::plan_arena(t, 64);
  EXPECT_EQ(check_plan(t, plan, 64), "");
  EXPECT_EQ(plan.bytes, 2 * 1024u);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[3]);
}

TEST(ArenaPlanner, OffsetsAreMultiplesOfTheAlignment) {
  std::vector<ArenaTensor> t = {{0, 5, 1}, {0, 5, 7}, {1, 2, 100}, {2, 4, 65}, {3, 5, 3}};
  for (uint64_t alignment : {1u, 4u, 48u, 64u, 256u}) {
    ArenaPlan plan = nn::plan_arena(t, alignment);
    EXPECT_EQ(check_plan(t, plan, alignment), "") << "alignment " << alignment;
  }
  // At most four tensors live together (positions 2 to 4), each 256 bytes after rounding.
  EXPECT_EQ(nn::plan_arena(t, 256).bytes, 4 * 256u);
}

TEST(ArenaPlanner, RandomProblemsPassTheBruteForceCheck) {
  std::mt19937 rng(20261126);
  int smaller = 0;
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + rng() % 48, positions = 1 + rng() % 30;
    const uint64_t alignment = uint64_t(1) << (rng() % 8);
    std::vector<ArenaTensor> t(n);
    for (auto& x : t) {
      x.first = rng() % positions;
      x.last = x.first + rng() % (positions - x.first);
      // Mostly distinct sizes, some repeated (ties), some zero.
      x.bytes = rng() % 4 == 0 ? 64 * (1 + rng() % 4) : rng() % 5000;
    }
    ArenaPlan plan = nn::plan_arena(t, alignment);
    ASSERT_EQ(check_plan(t, plan, alignment), "") << "round " << round;
    EXPECT_GE(plan.bytes, lower_bound(t, alignment)) << "round " << round;
    const uint64_t greedy = greedy_by_size(t, alignment);
    EXPECT_LE(plan.bytes, greedy) << "round " << round;
    smaller += plan.bytes < greedy;
    // Same input, same plan.
    EXPECT_EQ(nn::plan_arena(t, alignment).offsets, plan.offsets);
  }
  std::printf("smaller than plain greedy-by-size on %d of 400 random problems\n", smaller);
}

// The CPU delegate's arena on whole models, compiled as one partition at 1 and 2 threads.
uint64_t cpu_arena_bytes(const std::string& rel, int threads) {
  auto loaded = nn::load_model(nn_test::asset(rel));
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  if (!loaded.is_ok()) return 0;
  const nn::Model& model = **loaded;
  nn::PartitionSpec spec;
  for (uint32_t k = 0; k < model.operations.size(); ++k) spec.ops.push_back(k);
  std::vector<uint32_t> partition_of(model.operations.size(), 0);
  nn::compute_partition_boundary(model, spec, partition_of);
  nn::CompileOptions options;
  options.threads = threads;
  auto compiled = nn::make_cpu_delegate()->compile(model, spec, options);
  EXPECT_TRUE(compiled.is_ok()) << compiled.status().to_string();
  return compiled.is_ok() ? (*compiled)->arena_bytes() : 0;
}

TEST(ArenaPlanner, CpuArenaOnAssetModelsIsNoLargerThanBefore) {
  // Bytes the CPU delegate's own greedy-by-size planner gave each model (1 / 2 threads).
  struct Case {
    const char* model;
    uint64_t before_1t, before_2t;
  };
  const Case cases[] = {
      {"models/selfie_segmentation.tflite", 3146048, 3146048},
      {"models/mobilenet_v2.onnx", 2408640, 2408640},
      {"models/lraspp_mobilenet_v3_large.onnx", 3145920, 3145920},
  };
  for (const Case& c : cases) {
    if (!nn_test::require_asset(c.model)) continue;
    const uint64_t one = cpu_arena_bytes(c.model, 1), two = cpu_arena_bytes(c.model, 2);
    std::printf("%s: cpu arena %llu bytes at 1 thread, %llu at 2\n", c.model, (unsigned long long)one,
                (unsigned long long)two);
    EXPECT_GT(one, 0u);
    EXPECT_LE(one, c.before_1t) << c.model;
    EXPECT_LE(two, c.before_2t) << c.model;
  }
}

}  // namespace
