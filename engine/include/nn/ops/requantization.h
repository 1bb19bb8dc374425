// How the integer reference kernels turn an int32 accumulator into an 8-bit output
// (engine/ops/OPS.md, "Quantized arithmetic"). The op semantics are NNAPI's either way;
// only the rounding of the rescale differs, by at most one step per op.
#pragma once

#include <optional>
#include <string_view>

namespace nn {

enum class Requantization {
  // NNAPI's fixed point (QuantizeMultiplier, rounding doubling high multiply, rounding
  // divide by a power of two): two roundings, ties away from zero. What Android's CPU
  // reference and TFLite's reference kernels compute. The default.
  kNnapi,
  // qnnpack's (PyTorch's quantized CPU engine): the scale as a float, float(acc) * scale
  // rounded once to nearest, ties to even; ADD as qnnpack's q8vadd. Makes PyTorch
  // qnnpack models equal to eager PyTorch.
  kFp32,
};

// "nnapi" / "fp32".
const char* requantization_name(Requantization mode);
// The mode named "nnapi" or "fp32"; nullopt for anything else.
std::optional<Requantization> parse_requantization(std::string_view name);

}  // namespace nn
