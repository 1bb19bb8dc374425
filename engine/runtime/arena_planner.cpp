#include "runtime/arena_planner.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace nn {
namespace {

uint64_t round_up(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool overlap(const ArenaTensor& a, const ArenaTensor& b) {
  return a.first <= b.last && b.first <= a.last;
}

// Places the tensors in `order`, each in a free gap among the already placed tensors whose
// lives overlap its own: the lowest that fits (first fit) or the smallest that fits (best
// fit; past the last neighbour when none does). sizes[i]: tensor i's rounded size.
ArenaPlan place(std::span<const ArenaTensor> tensors, std::span<const uint64_t> sizes,
                std::span<const size_t> order, bool best_fit) {
  ArenaPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  std::vector<size_t> placed;
  placed.reserve(tensors.size());
  std::vector<std::pair<uint64_t, uint64_t>> taken;  // [begin, end) of overlapping placed tensors
  for (size_t i : order) {
    taken.clear();
    for (size_t p : placed)
      if (overlap(tensors[p], tensors[i])) taken.emplace_back(plan.offsets[p], plan.offsets[p] + sizes[p]);
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0, cursor = 0, best_gap = UINT64_MAX;
    bool found = false;
    for (auto [begin, end] : taken) {
      if (begin >= cursor && begin - cursor >= sizes[i]) {
        const uint64_t gap = begin - cursor;
        if (!best_fit) {
          offset = cursor, found = true;
          break;
        }
        if (gap < best_gap) best_gap = gap, offset = cursor, found = true;
      }
      cursor = std::max(cursor, end);
    }
    if (!found) offset = cursor;
    plan.offsets[i] = offset;
    plan.bytes = std::max(plan.bytes, offset + sizes[i]);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace

ArenaPlan plan_arena(std::span<const ArenaTensor> tensors, uint64_t alignment) {
  if (alignment == 0) alignment = 1;
  std::vector<uint64_t> sizes(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) sizes[i] = round_up(tensors[i].bytes, alignment);
  std::vector<size_t> by_size(tensors.size());
  std::iota(by_size.begin(), by_size.end(), size_t(0));
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });

  // Ties in size broken by the longer life first, then by earlier first use.
  std::vector<size_t> by_size_life = by_size;
  auto span_of = [&](size_t i) { return tensors[i].last - std::min(tensors[i].first, tensors[i].last); };
  std::stable_sort(by_size_life.begin(), by_size_life.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return span_of(a) > span_of(b);
  });
  // Largest "area" (bytes x positions) first: long-lived tensors settle low.
  std::vector<size_t> by_area = by_size;
  std::stable_sort(by_area.begin(), by_area.end(), [&](size_t a, size_t b) {
    const long double area_a = (long double)sizes[a] * (span_of(a) + 1);
    const long double area_b = (long double)sizes[b] * (span_of(b) + 1);
    return area_a > area_b;
  });

  ArenaPlan best = place(tensors, sizes, by_size, false);
  for (const auto* order : {&by_size, &by_size_life, &by_area})
    for (bool best_fit : {false, true}) {
      if (order == &by_size && !best_fit) continue;  // the first plan
      ArenaPlan plan = place(tensors, sizes, *order, best_fit);
      if (plan.bytes < best.bytes) best = std::move(plan);
    }
  return best;
}

}  // namespace nn
