// GATHER: shape inference and reference kernel (any element type, TENSOR_INT32 indices).
// Registered by register_shape_ops (shape.cpp); shared helpers in ops/shape_util.h.
#include <cstring>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/shape_util.h"
#include "ops/tensor_util.h"

namespace nn::shape_util {
namespace {

struct GatherPlan {
  Dims out;
  int axis = 0;
};

Result<GatherPlan> plan_gather(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(int32_t axis_value, read_scalar_i32(m, op, 1, "axis"));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 2, {OperandType::TENSOR_INT32}, "indices"));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 2, "indices"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Operand& indices = m.operands[op.inputs[2]];
  Result<int> axis = normalize_axis(axis_value, in.size());
  if (!axis.is_ok()) return invalid(input_label(1, "axis") + ": " + axis.status().message());
  // Constant indices are checked now; runtime ones by the kernel.
  if (indices.is_constant()) {
    const int32_t* v = indices.as<int32_t>();
    const int64_t d = in[*axis];
    for (size_t i = 0, n = num_elements(indices.dims); i < n; ++i)
      NN_CHECK_OR_RETURN(v[i] >= -d && v[i] < d, StatusCode::kInvalidModel,
                         input_label(2, "indices") + ": element " + std::to_string(i) + " = " +
                             std::to_string(v[i]) + " is outside [-" + std::to_string(d) + "," +
                             std::to_string(d) + ") for axis " + std::to_string(*axis) + " of " +
                             dims_to_string(in));
  }
  std::vector<int64_t> dims(in.begin(), in.begin() + *axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), in.begin() + *axis + 1, in.end());
  GatherPlan p;
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  p.axis = *axis;
  return p;
}

Status prepare_gather(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(GatherPlan p, plan_gather(m, op));
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, std::move(p.out), in.type, &in);
  return Status::ok();
}

Status run_gather(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 2));
  NN_ASSIGN_OR_RETURN(GatherPlan p, plan_gather(ctx.model, ctx.op));
  const AxisSplit split = split_at_axis(ctx.input(0).dims, p.axis);
  const int32_t* indices = ctx.in<int32_t>(2);
  const size_t count = num_elements(ctx.input(2).dims);
  const int64_t d = static_cast<int64_t>(split.axis);
  for (size_t i = 0; i < count; ++i)
    if (indices[i] < -d || indices[i] >= d)
      return {StatusCode::kInvalidArgument,
              "indices element " + std::to_string(i) + " = " + std::to_string(indices[i]) + " is outside [-" +
                  std::to_string(d) + "," + std::to_string(d) + ") for axis " + std::to_string(p.axis)};
  const size_t block = split.inner * element_size(ctx.input(0).type);
  const auto* src = static_cast<const uint8_t*>(ctx.input_data[0]);
  auto* dst = static_cast<uint8_t*>(ctx.output_data[0]);
  for (size_t o = 0; o < split.outer; ++o)
    for (size_t i = 0; i < count; ++i) {
      const int64_t k = indices[i] < 0 ? indices[i] + d : indices[i];
      std::memcpy(dst, src + (o * split.axis + static_cast<size_t>(k)) * block, block);
      dst += block;
    }
  return Status::ok();
}

}  // namespace

void register_gather_ops(OpRegistry& r) {
  r.add({OperationType::GATHER, &prepare_gather, &run_gather});
}

}  // namespace nn::shape_util
