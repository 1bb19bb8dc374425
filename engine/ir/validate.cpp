// Structural validation of a Model and shape inference through each op's prepare().
#include <cstdint>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/ops/registry.h"

namespace nn {

namespace {

std::string operand_label(const Model& m, uint32_t i) {
  std::string s = "operand " + std::to_string(i);
  if (i < m.operands.size() && !m.operands[i].name.empty()) s += " '" + m.operands[i].name + "'";
  return s;
}

Status check_operand(const Model& m, uint32_t i) {
  const Operand& o = m.operands[i];
  if (o.lifetime == Lifetime::NO_VALUE) return Status::ok();
  if (!operand_type_from_int(static_cast<int32_t>(o.type)))
    return {StatusCode::kInvalidModel, operand_label(m, i) + ": unknown operand type " +
                                           std::to_string(static_cast<int32_t>(o.type))};
  if (!is_tensor_type(o.type) && !o.dims.empty())
    return {StatusCode::kInvalidModel, operand_label(m, i) + ": scalar " +
                                           std::string(operand_type_name(o.type)) + " has dims " +
                                           dims_to_string(o.dims)};
  if (o.dims.size() > 8)
    return {StatusCode::kInvalidModel, operand_label(m, i) + ": rank " + std::to_string(o.dims.size()) +
                                           " exceeds 8"};
  if (o.lifetime == Lifetime::CONSTANT) {
    // Guard against overflow from hostile dims before comparing sizes.
    size_t n = 1;
    for (uint32_t d : o.dims) {
      if (d != 0 && n > (size_t{1} << 40) / d)
        return {StatusCode::kInvalidModel, operand_label(m, i) + ": dims " + dims_to_string(o.dims) + " too large"};
      n *= d;
    }
    if (o.data == nullptr && o.byte_size() != 0)
      return {StatusCode::kInvalidModel, operand_label(m, i) + ": constant without data"};
    if (o.length != o.byte_size())
      return {StatusCode::kInvalidModel, operand_label(m, i) + ": constant holds " + std::to_string(o.length) +
                                             " bytes, its type and dims " + dims_to_string(o.dims) + " need " +
                                             std::to_string(o.byte_size())};
  }
  return Status::ok();
}

}  // namespace

Status Model::validate_and_infer_shapes() {
  const uint32_t n = static_cast<uint32_t>(operands.size());
  for (uint32_t i = 0; i < n; ++i) NN_RETURN_IF_ERROR(check_operand(*this, i));

  // defined[i]: the value of operand i is known before the op that reads it runs.
  std::vector<char> defined(n, 0);
  for (uint32_t i = 0; i < n; ++i)
    defined[i] = operands[i].lifetime == Lifetime::CONSTANT || operands[i].lifetime == Lifetime::NO_VALUE;
  NN_CHECK_OR_RETURN(!inputs.empty(), StatusCode::kInvalidModel, "model has no inputs");
  NN_CHECK_OR_RETURN(!outputs.empty(), StatusCode::kInvalidModel, "model has no outputs");
  for (size_t k = 0; k < inputs.size(); ++k) {
    uint32_t i = inputs[k];
    NN_CHECK_OR_RETURN(i < n, StatusCode::kInvalidModel,
                       "model input " + std::to_string(k) + " refers to operand " + std::to_string(i) +
                           " of " + std::to_string(n));
    NN_CHECK_OR_RETURN(!defined[i], StatusCode::kInvalidModel,
                       "model input " + std::to_string(k) + ": " + operand_label(*this, i) +
                           " is a constant or listed twice");
    const Operand& o = operands[i];
    NN_CHECK_OR_RETURN(is_tensor_type(o.type) && !o.dims.empty(), StatusCode::kInvalidModel,
                       "model input " + std::to_string(k) + ": must be a tensor with known dims");
    // Each dim under 2^24 and the whole under 2^31 elements, the cap every op's output has:
    // shape arithmetic on an input (RESHAPE's element count) then stays far from overflow.
    uint64_t elements = 1;
    for (uint32_t d : o.dims) {
      NN_CHECK_OR_RETURN(d > 0 && d < (1u << 24), StatusCode::kInvalidModel,
                         "model input " + std::to_string(k) + ": bad dims " + dims_to_string(o.dims));
      elements *= d;
      NN_CHECK_OR_RETURN(elements <= (uint64_t{1} << 31), StatusCode::kInvalidModel,
                         "model input " + std::to_string(k) + ": dims " + dims_to_string(o.dims) +
                             " hold more than 2^31 elements");
    }
    defined[i] = 1;
  }
  for (size_t k = 0; k < outputs.size(); ++k)
    NN_CHECK_OR_RETURN(outputs[k] < n, StatusCode::kInvalidModel,
                       "model output " + std::to_string(k) + " refers to operand " +
                           std::to_string(outputs[k]) + " of " + std::to_string(n));

  const OpRegistry& registry = OpRegistry::instance();
  for (size_t k = 0; k < operations.size(); ++k) {
    const Operation& op = operations[k];
    std::string where = "op " + std::to_string(k) + " " + std::string(operation_type_name(op.type));
    const OpDef* def = registry.find(op.type);
    if (!def)
      return {StatusCode::kUnsupportedOp,
              where + ": unknown operation type " + std::to_string(static_cast<int32_t>(op.type))};
    NN_CHECK_OR_RETURN(!op.outputs.empty(), StatusCode::kInvalidModel, where + ": has no outputs");
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      uint32_t i = op.inputs[j];
      NN_CHECK_OR_RETURN(i < n, StatusCode::kInvalidModel,
                         where + ": input " + std::to_string(j) + " refers to operand " + std::to_string(i) +
                             " of " + std::to_string(n));
      NN_CHECK_OR_RETURN(defined[i], StatusCode::kInvalidModel,
                         where + ": input " + std::to_string(j) + " (" + operand_label(*this, i) +
                             ") is used before any op produces it");
    }
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      uint32_t i = op.outputs[j];
      NN_CHECK_OR_RETURN(i < n, StatusCode::kInvalidModel,
                         where + ": output " + std::to_string(j) + " refers to operand " + std::to_string(i) +
                             " of " + std::to_string(n));
      NN_CHECK_OR_RETURN(!defined[i], StatusCode::kInvalidModel,
                         where + ": output " + std::to_string(j) + " (" + operand_label(*this, i) +
                             ") is already defined");
    }
    Status s = def->prepare(*this, op);
    if (!s.is_ok()) return s.with_context(where);
    for (uint32_t i : op.outputs) {
      defined[i] = 1;
      if (operands[i].lifetime == Lifetime::TEMPORARY) {
        // stays TEMPORARY unless it is a model output (fixed below)
      }
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    uint32_t i = outputs[k];
    NN_CHECK_OR_RETURN(defined[i] && operands[i].lifetime != Lifetime::CONSTANT &&
                           operands[i].lifetime != Lifetime::NO_VALUE,
                       StatusCode::kInvalidModel,
                       "model output " + std::to_string(k) + " (" + operand_label(*this, i) +
                           ") is not produced by any op");
    if (operands[i].lifetime == Lifetime::TEMPORARY) operands[i].lifetime = Lifetime::MODEL_OUTPUT;
  }
  for (uint32_t i : inputs) operands[i].lifetime = Lifetime::MODEL_INPUT;
  return Status::ok();
}

}  // namespace nn
