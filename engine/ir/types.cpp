#include "nn/ir/types.h"

#include <cstddef>
#include <limits>

namespace nn {

std::string_view operand_type_name(OperandType t) {
  switch (t) {
#define NN_X(name, value) \
  case OperandType::name: return #name;
    NN_OPERAND_TYPES(NN_X)
#undef NN_X
  }
  return "?";
}

std::string_view operation_type_name(OperationType t) {
  switch (t) {
#define NN_X(name, value) \
  case OperationType::name: return #name;
    NN_OPERATION_TYPES(NN_X)
#undef NN_X
  }
  return "?";
}

std::optional<OperandType> operand_type_from_int(int32_t v) {
  switch (v) {
#define NN_X(name, value) \
  case value: return OperandType::name;
    NN_OPERAND_TYPES(NN_X)
#undef NN_X
  }
  return std::nullopt;
}

std::optional<OperationType> operation_type_from_int(int32_t v) {
  switch (v) {
#define NN_X(name, value) \
  case value: return OperationType::name;
    NN_OPERATION_TYPES(NN_X)
#undef NN_X
  }
  return std::nullopt;
}

std::optional<OperationType> operation_type_from_name(std::string_view name) {
#define NN_X(n, value) \
  if (name == #n) return OperationType::n;
  NN_OPERATION_TYPES(NN_X)
#undef NN_X
  return std::nullopt;
}

bool is_tensor_type(OperandType t) {
  switch (t) {
    case OperandType::FLOAT32:
    case OperandType::INT32:
    case OperandType::UINT32:
    case OperandType::BOOL:
    case OperandType::FLOAT16:
      return false;
    default:
      return true;
  }
}

size_t element_size(OperandType t) {
  switch (t) {
    case OperandType::FLOAT32:
    case OperandType::INT32:
    case OperandType::UINT32:
    case OperandType::TENSOR_FLOAT32:
    case OperandType::TENSOR_INT32:
      return 4;
    case OperandType::FLOAT16:
    case OperandType::TENSOR_FLOAT16:
    case OperandType::TENSOR_QUANT16_SYMM:
    case OperandType::TENSOR_QUANT16_ASYMM:
      return 2;
    case OperandType::BOOL:
    case OperandType::TENSOR_BOOL8:
    case OperandType::TENSOR_QUANT8_ASYMM:
    case OperandType::TENSOR_QUANT8_SYMM:
    case OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL:
    case OperandType::TENSOR_QUANT8_ASYMM_SIGNED:
      return 1;
  }
  return 0;
}

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

}  // namespace nn
