// Element-wise ops on the Vulkan delegate: ADD, SUB, MUL with numpy broadcasting over up
// to rank 4 (e.g. the squeeze-excite [1,H,W,C] x [1,1,1,C]), and the activations RELU,
// RELU1, RELU6, HARD_SWISH, LOGISTIC (which the delegate usually fuses into the op that
// produces their input; see vulkan_delegate.cpp).
#include <bit>
#include <cstring>

#include "delegates/vulkan/vk_ops.h"
#include "ops/activation.h"

namespace nn::vk {

uint32_t float_bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

Activation fuse_activation(int32_t fuse_code) {
  const ActivationRange r = fuse_code_range(fuse_code);
  Activation a;
  a.lo = r.lo, a.hi = r.hi;
  return a;
}

namespace {

constexpr size_t kMaxRank = 4;

SupportResult binary_supports(const Model& m, const Operation& op) {
  if (op.inputs.size() != 3 || op.outputs.size() != 1) return SupportResult::no("expects inputs a, b, fuse");
  for (size_t i = 0; i < 2; ++i)
    if (m.operands[op.inputs[i]].type != OperandType::TENSOR_FLOAT32)
      return SupportResult::no("input " + std::to_string(i) + " is " +
                               std::string(operand_type_name(m.operands[op.inputs[i]].type)));
  const Dims& a = m.operands[op.inputs[0]].dims;
  const Dims& b = m.operands[op.inputs[1]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  if (a.size() > kMaxRank || b.size() > kMaxRank || out.size() > kMaxRank)
    return SupportResult::no("rank above 4 (" + dims_to_string(a) + ", " + dims_to_string(b) + ")");
  const int32_t fuse = m.scalar_i32(op.inputs[2]);
  if (fuse < 0 || fuse > 3) return SupportResult::no("unknown fuse code " + std::to_string(fuse));
  return SupportResult::yes();
}

// `dims` right-aligned to rank 4 against `out`: element strides, 0 along broadcast dims.
std::vector<uint32_t> broadcast_strides(const Dims& dims, const Dims& out4) {
  Dims d4(kMaxRank - dims.size(), 1);
  d4.insert(d4.end(), dims.begin(), dims.end());
  std::vector<uint32_t> strides(kMaxRank, 0);
  uint32_t stride = 1;
  for (size_t i = kMaxRank; i-- > 0;) {
    strides[i] = (d4[i] == 1 && out4[i] != 1) ? 0 : stride;
    stride *= d4[i];
  }
  return strides;
}

Status lower_binary(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  const Dims& a = m.operands[op.inputs[0]].dims;
  const Dims& b = m.operands[op.inputs[1]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  Dims out4(kMaxRank - out.size(), 1);
  out4.insert(out4.end(), out.begin(), out.end());
  const std::vector<uint32_t> sa = broadcast_strides(a, out4), sb = broadcast_strides(b, out4);
  const uint32_t code = op.type == OperationType::ADD ? 0 : op.type == OperationType::SUB ? 1 : 2;
  d.shader = "binary";
  d.spec = {code,
            out4[1],
            out4[2],
            out4[3],
            sa[0],
            sa[1],
            sa[2],
            sa[3],
            sb[0],
            sb[1],
            sb[2],
            sb[3],
            uint32_t(a == out && b == out)};
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.bindings.push_back(ctx.operand(op.inputs[1]));
  d.items = num_elements(out);
  d.act = fuse_activation(m.scalar_i32(op.inputs[2]));
  return Status::ok();
}

SupportResult unary_supports(const Model&, const Operation& op) {
  if (op.inputs.size() != 1 || op.outputs.size() != 1) return SupportResult::no("expects one input");
  return SupportResult::yes();
}

Status lower_unary(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  switch (op.type) {
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
      d.act = fuse_activation(static_cast<int32_t>(*clamp_activation_code(op.type)));
      break;
    case OperationType::HARD_SWISH:
      d.act.kind = Activation::kHardSwish;
      break;
    case OperationType::LOGISTIC:
      d.act.kind = Activation::kLogistic;
      break;
    default:
      return Status(StatusCode::kInternal, "not a unary op");
  }
  d.shader = "unary";
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.items = num_elements(m.operands[op.outputs[0]].dims);
  return Status::ok();
}

}  // namespace

void add_eltwise_lowerings(std::vector<OpLowering>& out) {
  for (OperationType t : {OperationType::ADD, OperationType::SUB, OperationType::MUL})
    out.push_back({t, binary_supports, lower_binary});
  for (OperationType t : {OperationType::RELU, OperationType::RELU1, OperationType::RELU6,
                          OperationType::HARD_SWISH, OperationType::LOGISTIC})
    out.push_back({t, unary_supports, lower_unary});
}

}  // namespace nn::vk
