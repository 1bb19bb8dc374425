// CONV_2D (general, and a 1x1 fast path), DEPTHWISE_CONV_2D and TRANSPOSE_CONV_2D on the
// Vulkan delegate. Operand lists: engine/ops/OPS.md, decoded by ops/op_params.h as for the
// reference kernels and the CPU delegate, so all read NNAPI's forms alike.
#include <cstring>

#include "delegates/vulkan/vk_ops.h"
#include "ops/op_params.h"

namespace nn::vk {

namespace {

bool is_constant(const Model& m, uint32_t operand) {
  return m.operands[operand].is_constant();
}

SupportResult conv_supports(const Model& m, const Operation& op) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return SupportResult::no(why);
  if (m.operands[op.inputs[0]].dims.size() != 4 || m.operands[op.outputs[0]].dims.size() != 4)
    return SupportResult::no("input and output must be rank 4");
  if (!is_constant(m, op.inputs[1])) return SupportResult::no("filter is not a constant");
  if (m.has_value(op.inputs[2]) && !is_constant(m, op.inputs[2]))
    return SupportResult::no("bias is not a constant");
  if (p->fuse < 0 || p->fuse > 3) return SupportResult::no("unknown fuse code " + std::to_string(p->fuse));
  return SupportResult::yes();
}

// OHWI [Cout][KH][KW][Cin] -> [KH][KW][Cin][Cout rounded up to 4], zeros in the padding:
// the vec4 weight layout of conv2d/conv1x1/transpose_conv.comp.
std::vector<float> repack_ohwi(const float* ohwi, uint32_t cout, uint32_t kh, uint32_t kw, uint32_t cin) {
  const size_t cout4 = (cout + 3) / 4 * 4;
  std::vector<float> w(size_t(kh) * kw * cin * cout4, 0.f);
  for (size_t o = 0; o < cout; ++o)
    for (size_t y = 0; y < kh; ++y)
      for (size_t x = 0; x < kw; ++x)
        for (size_t i = 0; i < cin; ++i)
          w[((y * kw + x) * cin + i) * cout4 + o] = ohwi[((o * kh + y) * kw + x) * cin + i];
  return w;
}

std::vector<float> bias_padded(const Model& m, const Operation& op, uint32_t cout, size_t multiple) {
  std::vector<float> b((cout + multiple - 1) / multiple * multiple, 0.f);
  if (m.has_value(op.inputs[2])) std::memcpy(b.data(), m.operands[op.inputs[2]].data, cout * sizeof(float));
  return b;
}

Status lower_conv(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return Status(StatusCode::kUnsupportedOp, why);
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  const uint32_t n = out[0], out_h = out[1], out_w = out[2], out_c = out[3];
  const uint32_t in_h = in[1], in_w = in[2], in_c = in[3];
  const uint32_t co4 = (out_c + 3) / 4;
  const bool transpose = op.type == OperationType::TRANSPOSE_CONV_2D;
  const std::vector<float> w =
      repack_ohwi(m.operands[op.inputs[1]].as<float>(), out_c, p->filter_h, p->filter_w, in_c);
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.bindings.push_back(ctx.upload_floats(w));
  d.bindings.push_back(ctx.upload_floats(bias_padded(m, op, out_c, 4)));
  d.act = fuse_activation(p->fuse);

  const bool pointwise = !transpose && p->filter_h == 1 && p->filter_w == 1 && p->stride_h == 1 &&
                         p->stride_w == 1 && p->pad_top == 0 && p->pad_left == 0 && in_h == out_h &&
                         in_w == out_w;
  if (pointwise) {
    const uint64_t pixels = uint64_t(n) * out_h * out_w;
    d.shader = "conv1x1";
    d.spec = {static_cast<uint32_t>(pixels), in_c, out_c};
    d.items = (pixels + 3) / 4 * co4;
    return Status::ok();
  }
  d.items = uint64_t(n) * out_h * out_w * co4;
  if (transpose) {
    d.shader = "transpose_conv";
    d.spec = {in_h,        in_w,        in_c,        out_h,       out_w,      out_c,
              p->filter_h, p->filter_w, p->stride_h, p->stride_w, p->pad_top, p->pad_left};
  } else {
    d.shader = "conv2d";
    d.spec = {in_h,        in_w,        in_c,        out_h,         out_w,         out_c,      p->filter_h,
              p->filter_w, p->stride_h, p->stride_w, p->dilation_h, p->dilation_w, p->pad_top, p->pad_left};
  }
  return Status::ok();
}

Status lower_depthwise(LoweringContext& ctx, const Model& m, const Operation& op, Dispatch& d) {
  std::string why;
  auto p = parse_window_op(m, op, &why);
  if (!p) return Status(StatusCode::kUnsupportedOp, why);
  const Dims& in = m.operands[op.inputs[0]].dims;
  const Dims& out = m.operands[op.outputs[0]].dims;
  const uint32_t out_c = out[3], in_c = in[3];
  if (in_c == 0 || out_c % in_c != 0)
    return Status(StatusCode::kInvalidModel, "output channels " + std::to_string(out_c) +
                                                 " are not a multiple of input channels " +
                                                 std::to_string(in_c));
  d.bindings.push_back(ctx.operand(op.inputs[0]));
  d.bindings.push_back(ctx.operand(op.inputs[1]));  // [1, KH, KW, Cout] is already the shader's layout
  d.bindings.push_back(ctx.upload_floats(bias_padded(m, op, out_c, 1)));
  d.act = fuse_activation(p->fuse);
  d.shader = "depthwise";
  d.spec = {in[1],         in[2],         in_c,        out[1],      out[2],
            out_c,         p->filter_h,   p->filter_w, p->stride_h, p->stride_w,
            p->dilation_h, p->dilation_w, p->pad_top,  p->pad_left, out_c / in_c};
  d.items = uint64_t(out[0]) * out[1] * out[2] * out_c;
  return Status::ok();
}

}  // namespace

void add_conv_lowerings(std::vector<OpLowering>& out) {
  out.push_back({OperationType::CONV_2D, conv_supports, lower_conv});
  out.push_back({OperationType::DEPTHWISE_CONV_2D, conv_supports, lower_depthwise});
  out.push_back({OperationType::TRANSPOSE_CONV_2D, conv_supports, lower_conv});
}

}  // namespace nn::vk
