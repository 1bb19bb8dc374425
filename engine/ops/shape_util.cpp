#include "ops/shape_util.h"

#include <string>
#include <vector>

#include "ops/tensor_util.h"

namespace nn::shape_util {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;

}  // namespace

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

std::string i64_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

Result<Dims> make_dims(const std::vector<int64_t>& dims) {
  NN_CHECK_OR_RETURN(dims.size() <= kMaxRank, StatusCode::kInvalidModel,
                     "output rank " + std::to_string(dims.size()) + " exceeds " + std::to_string(kMaxRank));
  int64_t total = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    NN_CHECK_OR_RETURN(dims[i] >= 1, StatusCode::kInvalidModel,
                       "output dim " + std::to_string(i) + " would be " + std::to_string(dims[i]) +
                           " (output " + i64_list(dims) + "); empty tensors are not supported");
    NN_CHECK_OR_RETURN(dims[i] <= kMaxElements && total * dims[i] <= kMaxElements, StatusCode::kInvalidModel,
                       "output " + i64_list(dims) + " exceeds 2^31 elements");
    total *= dims[i];
  }
  return Dims(dims.begin(), dims.end());
}

std::vector<int64_t> to_i64(const Dims& d) {
  return std::vector<int64_t>(d.begin(), d.end());
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

std::string operand_suffix(const Model& m, const Operation& op, size_t index) {
  if (index >= op.inputs.size()) return "";
  const std::string& name = m.operands[op.inputs[index]].name;
  return name.empty() ? "" : " (operand '" + name + "')";
}

Status check_data_input(const Model& m, const Operation& op, size_t index, const char* name,
                        size_t max_rank) {
  if (index >= op.inputs.size()) return invalid(input_label(index, name) + " is missing");
  const Operand& o = m.operands[op.inputs[index]];
  if (o.lifetime == Lifetime::NO_VALUE) return invalid(input_label(index, name) + " has no value");
  if (!is_tensor_type(o.type) || element_size(o.type) == 0)
    return invalid(input_label(index, name) + " must be a tensor, got " +
                   std::string(operand_type_name(o.type)));
  if (o.dims.size() > max_rank)
    return {StatusCode::kUnsupportedOp, input_label(index, name) + " has rank " +
                                            std::to_string(o.dims.size()) + " " + dims_to_string(o.dims) +
                                            "; at most " + std::to_string(max_rank) + " is supported"};
  for (uint32_t d : o.dims)
    if (d == 0) return invalid(input_label(index, name) + " is empty " + dims_to_string(o.dims));
  return Status::ok();
}

Result<int32_t> read_scalar_i32(const Model& m, const Operation& op, size_t index, const char* name) {
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, index, OperandType::INT32, name));
  return m.scalar_i32(op.inputs[index]);
}

bool is_quantized(OperandType t) {
  switch (t) {
    case OperandType::TENSOR_QUANT8_ASYMM:
    case OperandType::TENSOR_QUANT8_ASYMM_SIGNED:
    case OperandType::TENSOR_QUANT8_SYMM:
    case OperandType::TENSOR_QUANT16_SYMM:
    case OperandType::TENSOR_QUANT16_ASYMM:
    case OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL:
      return true;
    default:
      return false;
  }
}

Status check_kernel_buffers(const OpContext& ctx, size_t data_input) {
  if (data_input >= ctx.input_data.size() || !ctx.input_data[data_input])
    return {StatusCode::kInternal, "input " + std::to_string(data_input) + " has no buffer"};
  for (size_t i = 0; i < ctx.output_data.size(); ++i)
    if (!ctx.output_data[i]) return {StatusCode::kInternal, "output " + std::to_string(i) + " has no buffer"};
  return Status::ok();
}

}  // namespace nn::shape_util
