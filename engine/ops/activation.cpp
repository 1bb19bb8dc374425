#include "ops/activation.h"

#include <limits>

namespace nn {

ActivationRange fuse_code_range(int32_t fuse_code) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  switch (static_cast<FuseCode>(fuse_code)) {
    case FuseCode::RELU: return {0.f, inf};
    case FuseCode::RELU1: return {-1.f, 1.f};
    case FuseCode::RELU6: return {0.f, 6.f};
    case FuseCode::NONE: break;
  }
  return {-inf, inf};
}

std::optional<FuseCode> clamp_activation_code(OperationType type) {
  switch (type) {
    case OperationType::RELU: return FuseCode::RELU;
    case OperationType::RELU1: return FuseCode::RELU1;
    case OperationType::RELU6: return FuseCode::RELU6;
    default: return std::nullopt;
  }
}

}  // namespace nn
