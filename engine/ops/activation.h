// The clamp of NNAPI's fused activations, one rule for everyone who applies it: the
// reference kernels (a FuseCode on conv/pool/FC/ADD..., and the RELU/RELU1/RELU6 ops), the
// CPU delegate's XNNPACK clamps and native epilogues, and the Vulkan delegate's shaders.
// The range of a FuseCode is fuse_code_range() (nn/ir/types.h, beside FuseCode itself);
// quantized kernels clamp to that range quantized (quant::activation_range).
#pragma once

#include <optional>

#include "nn/ir/types.h"

namespace nn {

// The FuseCode whose clamp the op RELU, RELU1 or RELU6 applies; nullopt for any other op.
std::optional<FuseCode> clamp_activation_code(OperationType type);

}  // namespace nn
