#include "delegates/nnapi/nnapi_feature_levels.h"

#include <algorithm>

#include "nn/ir/types.h"

namespace nn::nnapi {

int operation_feature_level(int32_t t) {
  if (t >= 0 && t <= 28) return 27;    // ADD .. TANH
  if (t >= 29 && t <= 37) return 28;   // BATCH_TO_SPACE_ND .. TRANSPOSE
  if (t >= 38 && t <= 94) return 29;   // ABS .. RESIZE_NEAREST_NEIGHBOR
  if (t >= 95 && t <= 101) return 30;  // QUANTIZED_LSTM, IF, WHILE, ELU, HARD_SWISH, FILL, RANK
  if (t >= 102 && t <= 105) return 34; // BATCH_MATMUL, PACK, MIRROR_PAD, REVERSE
  return 0;
}

int operand_type_feature_level(int32_t t) {
  if (t >= 0 && t <= 5) return 27;   // FLOAT32, INT32, UINT32, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM
  if (t >= 6 && t <= 13) return 29;  // BOOL, TENSOR_QUANT16_SYMM, FLOAT16 types, BOOL8, per-channel, ...
  if (t == 14) return 30;            // TENSOR_QUANT8_ASYMM_SIGNED
  return 0;
}

namespace {

struct SignatureNeed {
  int level = 0;
  const char* why = "";
};

SignatureNeed signature_need(int32_t op, std::span<const int32_t> in) {
  const size_t n = in.size();
  auto type_at = [&](size_t i) { return i < n ? in[i] : -1; };
  const int32_t kFloat32Scalar = static_cast<int32_t>(OperandType::FLOAT32);
  switch (static_cast<OperationType>(op)) {
    case OperationType::SOFTMAX:
      if (n >= 3) return {29, "SOFTMAX with an axis input"};
      break;
    case OperationType::L2_NORMALIZATION:
      if (n >= 2) return {29, "L2_NORMALIZATION with an axis input"};
      break;
    case OperationType::LOCAL_RESPONSE_NORMALIZATION:
      if (n >= 6) return {29, "LOCAL_RESPONSE_NORMALIZATION with an axis input"};
      break;
    case OperationType::RESIZE_BILINEAR:
      if (n >= 5) return {30, "RESIZE_BILINEAR with align_corners / half_pixel_centers"};
      if (n >= 4) return {29, "RESIZE_BILINEAR with a layout input"};
      if (type_at(1) == kFloat32Scalar) return {29, "RESIZE_BILINEAR by scale"};
      break;
    case OperationType::CONV_2D:
      if (n > 10 || n == 8) return {29, "CONV_2D with layout / dilation inputs"};
      break;
    case OperationType::DEPTHWISE_CONV_2D:
      if (n > 11 || n == 9 || n == 10) return {29, "DEPTHWISE_CONV_2D with layout / dilation inputs"};
      break;
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D:
      if (n == 8 || n == 11) return {29, "a pool with a layout input"};
      break;
    default:
      break;
  }
  return {};
}

}  // namespace

int signature_feature_level(int32_t op, std::span<const int32_t> input_types) {
  int level = operation_feature_level(op);
  if (level == 0) return 0;
  for (int32_t t : input_types) level = std::max(level, operand_type_feature_level(t));
  return std::max(level, signature_need(op, input_types).level);
}

std::string signature_level_reason(int32_t op, std::span<const int32_t> input_types, int available) {
  const int op_level = operation_feature_level(op);
  const std::string name(operation_type_name(static_cast<OperationType>(op)));
  if (op_level == 0) return "operation code " + std::to_string(op) + " is not an NNAPI operation";
  if (op_level > available)
    return name + " needs feature level " + std::to_string(op_level) + " (device has " +
           std::to_string(available) + ")";
  for (int32_t t : input_types)
    if (operand_type_feature_level(t) > available)
      return name + ": operand type " + std::string(operand_type_name(static_cast<OperandType>(t))) +
             " needs feature level " + std::to_string(operand_type_feature_level(t)) + " (device has " +
             std::to_string(available) + ")";
  SignatureNeed need = signature_need(op, input_types);
  if (need.level > available)
    return std::string(need.why) + " needs feature level " + std::to_string(need.level) + " (device has " +
           std::to_string(available) + ")";
  return {};
}

}  // namespace nn::nnapi
