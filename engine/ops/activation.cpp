#include "ops/activation.h"

namespace nn {

std::optional<FuseCode> clamp_activation_code(OperationType type) {
  switch (type) {
    case OperationType::RELU: return FuseCode::RELU;
    case OperationType::RELU1: return FuseCode::RELU1;
    case OperationType::RELU6: return FuseCode::RELU6;
    default: return std::nullopt;
  }
}

}  // namespace nn
