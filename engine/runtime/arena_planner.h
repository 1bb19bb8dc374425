// One buffer for a partition's intermediate tensors: each tensor is live over a range of
// positions (steps, or ops inside a step) and tensors whose ranges overlap get disjoint
// bytes; the others may share. Used by the CPU delegate (its arena of tensors between
// steps) and the Vulkan delegate (its device buffer of tensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace nn {

// A tensor to place: live from position `first` to position `last` (both included), `bytes` long.
struct ArenaTensor {
  size_t first = 0, last = 0;
  uint64_t bytes = 0;
};

struct ArenaPlan {
  std::vector<uint64_t> offsets;  // per tensor, in the order given
  uint64_t bytes = 0;             // the buffer size: the end of the furthest tensor
};

// Offsets for `tensors`, each a multiple of `alignment` (> 0; each tensor's bytes are
// rounded up to it), so that two tensors whose live ranges overlap never overlap in memory.
// Greedy: tensors taken largest first and each put at the lowest offset its overlapping,
// already placed neighbours leave free (TFLite's "greedy by size" arena planner); a few
// tie-break orders and best-fit gaps are tried too and the smallest buffer kept, which is
// never larger than that first plan. Deterministic for a given input.
ArenaPlan plan_arena(std::span<const ArenaTensor> tensors, uint64_t alignment);

}  // namespace nn
