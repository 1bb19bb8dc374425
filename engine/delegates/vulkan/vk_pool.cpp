// AVERAGE_POOL_2D and MEAN over the spatial axes (H, W) on the Vulkan delegate.
#include <algorithm>
#include <set>

#include "delegates/vulkan/vk_ops.h"
#include "ops/op_params.h"

namespace nn::vk {

namespace {

SupportResult avg_pool_supports(const Model& m, const Operation& op) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return SupportResult::no(why);
  if (m.operands[op.outputs[0]].dims.size() != 4) return SupportResult::no("output must be rank 4");
  if (p->fuse < 0 || p->fuse > 3) return SupportResult::no("unknown fuse code " + std::to_string(p->fuse));
  return SupportResult::yes();
}

Status lower_avg_pool(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return Status(StatusCode::kUnsupportedOp, why);
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  d.shader = "avg_pool";
  d.spec = {in[1],       in[2],       in[3],       out[1],     out[2],     p->filter_h,
            p->filter_w, p->stride_h, p->stride_w, p->pad_top, p->pad_left};
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.items = num_elements(out);
  d.act = fuse_activation(p->fuse);
  return Status::ok();
}

SupportResult mean_supports(const Model& m, const Operation& op) {
  if (op.inputs.size() != 3 || op.outputs.size() != 1)
    return SupportResult::no("expects inputs in, axes, keep_dims");
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& axes = m.operands[op.inputs[1]];
  if (in.dims.size() != 4)
    return SupportResult::no("only rank-4 NHWC input is lowered, got " + dims_to_string(in.dims));
  if (!axes.is_constant() || axes.type != OperandType::TENSOR_INT32)
    return SupportResult::no("axes must be a constant TENSOR_INT32");
  std::set<int32_t> set;
  for (size_t i = 0; i < num_elements(axes.dims); ++i) {
    int32_t a = axes.as<int32_t>()[i];
    set.insert(a < 0 ? a + 4 : a);
  }
  if (set != std::set<int32_t>{1, 2})
    return SupportResult::no("only the mean over H and W (axes 1, 2) is lowered");
  return SupportResult::yes();
}

Status lower_mean(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  const Dims& in = m.operands[op.inputs[0]].dims;
  d.shader = "mean_hw";
  d.spec = {in[1] * in[2], in[3]};
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.items = uint64_t(in[0]) * in[3];
  return Status::ok();
}

}  // namespace

void add_pool_lowerings(std::vector<OpLowering>& out) {
  out.push_back({OperationType::AVERAGE_POOL_2D, avg_pool_supports, lower_avg_pool});
  out.push_back({OperationType::MEAN, mean_supports, lower_mean});
}

}  // namespace nn::vk
