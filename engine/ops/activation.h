// The clamp of NNAPI's fused activations, one rule for everyone who applies it: the
// reference kernels (a FuseCode on conv/pool/FC/ADD..., and the RELU/RELU1/RELU6 ops), the
// CPU delegate's XNNPACK clamps and native epilogues, and the Vulkan delegate's shaders.
// Quantized kernels clamp to this range quantized (quant::activation_range).
#pragma once

#include <cstdint>
#include <optional>

#include "nn/ir/types.h"

namespace nn {

// The output range a FuseCode clamps to: [0, inf), [-1, 1], [0, 6], or unbounded (NONE and
// any other code, which validation refuses before a kernel sees it).
struct ActivationRange {
  float lo, hi;
};
ActivationRange fuse_code_range(int32_t fuse_code);

// The FuseCode whose clamp the op RELU, RELU1 or RELU6 applies; nullopt for any other op.
std::optional<FuseCode> clamp_activation_code(OperationType type);

}  // namespace nn
