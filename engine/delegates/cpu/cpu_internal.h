// Internals of the CPU delegate shared by its files: which IR ops lower to XNNPACK
// subgraph nodes (xnn_ops.cpp) and how the partition builder hands them value ids.
#pragma once

#include <xnnpack.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/ir/model.h"
#include "runtime/delegate.h"

namespace nn::cpu {

// Data of an operand known at compile time (a model constant or a value the CPU
// delegate folded), or nullptr.
using StaticLookup = std::function<const void*(uint32_t operand)>;

// Whether `op_index` lowers to XNNPACK nodes exactly (same numbers as the reference
// kernel up to float rounding); the reason when not.
SupportResult xnn_can_lower(const Model& model, uint32_t op_index, const StaticLookup& statics);

// Ops whose XNNPACK node clamps its output, so a following RELU/RELU1/RELU6 folds in.
bool xnn_takes_output_clamp(OperationType type);
// The clamp an op applies itself (its fuse code), [-inf, inf] when none.
void xnn_own_clamp(const Model& model, const Operation& op, float* lo, float* hi);

// MEAN over H and W of an NHWC tensor, or an AVERAGE_POOL_2D whose window is the whole
// unpadded image: the channel means, either way. Says nothing of the op's own clamp.
bool is_global_mean(const Model& model, const Operation& op, const StaticLookup& statics);

// Hands out XNNPACK value ids while one subgraph is built.
class XnnValues {
 public:
  virtual ~XnnValues() = default;
  // The value of an IR operand, defined on first use: static (constant), external
  // (crosses the step's boundary) or internal.
  virtual Result<uint32_t> value(uint32_t operand) = 0;
  // A fresh internal fp32 value / a static fp32 value over `data` (kept alive by the caller).
  virtual Result<uint32_t> internal_value(const Dims& dims) = 0;
  virtual Result<uint32_t> static_value(const Dims& dims, const void* data) = 0;
  // Keeps `values` alive until the runtime is created (XNNPACK keeps a pointer to a
  // channelwise value's scales) and returns where they are.
  virtual const float* keep(std::vector<float> values) = 0;
};

// Defines the nodes of one op. The op's (only) output is `out_operand` clamped to
// [lo, hi] (out_operand differs from op.outputs[0] when a following activation was fused).
Status xnn_lower(xnn_subgraph_t subgraph, const Model& model, uint32_t op_index, const StaticLookup& statics,
                 XnnValues& values, uint32_t out_operand, float lo, float hi);

const char* xnn_status_name(xnn_status s);

}  // namespace nn::cpu
