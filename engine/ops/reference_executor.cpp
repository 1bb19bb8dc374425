// Runs a validated model op by op with the reference kernels: the oracle every delegate
// is compared against. Simple on purpose: one buffer per operand, no memory planning.
#include <cstring>
#include <vector>

#include "nn/ops/registry.h"

namespace nn {

Status run_reference(const Model& model, std::span<const void* const> inputs,
                     std::span<void* const> outputs, Requantization requantization) {
  NN_CHECK_OR_RETURN(inputs.size() == model.inputs.size(), StatusCode::kInvalidArgument,
                     "expected " + std::to_string(model.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  NN_CHECK_OR_RETURN(outputs.size() == model.outputs.size(), StatusCode::kInvalidArgument,
                     "expected " + std::to_string(model.outputs.size()) + " outputs, got " +
                         std::to_string(outputs.size()));
  std::vector<const void*> data(model.operands.size(), nullptr);
  std::vector<std::vector<uint8_t>> storage(model.operands.size());
  for (size_t i = 0; i < model.operands.size(); ++i)
    if (model.operands[i].is_constant()) data[i] = model.operands[i].data;
  for (size_t k = 0; k < model.inputs.size(); ++k) data[model.inputs[k]] = inputs[k];

  const OpRegistry& registry = OpRegistry::instance();
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t k = 0; k < model.operations.size(); ++k) {
    const Operation& op = model.operations[k];
    const OpDef* def = registry.find(op.type);
    NN_CHECK_OR_RETURN(def, StatusCode::kUnsupportedOp,
                       "op " + std::to_string(k) + ": no kernel for " + std::string(operation_type_name(op.type)));
    in.clear();
    out.clear();
    for (uint32_t i : op.inputs) in.push_back(data[i]);
    for (uint32_t i : op.outputs) {
      storage[i].assign(model.operands[i].byte_size() + 16, 0);
      data[i] = storage[i].data();
      out.push_back(storage[i].data());
    }
    OpContext ctx{model, op, in, out, requantization};
    Status s = def->reference(ctx);
    if (!s.is_ok()) return s.with_context("op " + std::to_string(k) + " " + std::string(operation_type_name(op.type)));
  }
  for (size_t k = 0; k < model.outputs.size(); ++k) {
    uint32_t i = model.outputs[k];
    NN_CHECK_OR_RETURN(data[i], StatusCode::kInternal, "model output " + std::to_string(k) + " was not computed");
    std::memcpy(outputs[k], data[i], model.operands[i].byte_size());
  }
  return Status::ok();
}

}  // namespace nn
