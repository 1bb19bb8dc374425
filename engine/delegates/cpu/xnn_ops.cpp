// IR op -> XNNPACK subgraph nodes (Feb-2022 API). xnn_can_lower decides, xnn_lower
// defines; they must agree (a define that fails anyway moves the op to the reference
// kernels and the partition is rebuilt).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "delegates/cpu/cpu_internal.h"
#include "delegates/cpu/xnn_int8.h"
#include "ops/activation.h"
#include "ops/op_params.h"

namespace nn::cpu {

namespace {

bool is_f32_tensor(const Operand& o) {
  return o.type == OperandType::TENSOR_FLOAT32;
}

bool rank_ok(const Operand& o) {
  return o.dims.size() <= XNN_MAX_TENSOR_DIMS;
}

// Every tensor input that carries data (inputs listed) and every output is fp32 and fits.
std::string check_f32(const Model& m, const Operation& op, std::initializer_list<size_t> data_inputs) {
  for (size_t i : data_inputs) {
    if (i >= op.inputs.size()) return "missing input " + std::to_string(i);
    if (!m.has_value(op.inputs[i])) continue;
    const Operand& o = m.operands[op.inputs[i]];
    if (!is_f32_tensor(o))
      return "input " + std::to_string(i) + " is " + std::string(operand_type_name(o.type));
    if (!rank_ok(o)) return "input " + std::to_string(i) + " rank " + std::to_string(o.dims.size()) + " > 6";
  }
  for (uint32_t out : op.outputs) {
    const Operand& o = m.operands[out];
    if (!is_f32_tensor(o)) return "output is " + std::string(operand_type_name(o.type));
    if (!rank_ok(o)) return "output rank " + std::to_string(o.dims.size()) + " > 6";
  }
  return {};
}

// Reads a static TENSOR_INT32 (axes, paddings).
bool static_i32(const Model& m, uint32_t operand, const StaticLookup& statics, std::vector<int32_t>* out) {
  const Operand& o = m.operands[operand];
  const void* data = statics(operand);
  if (o.type != OperandType::TENSOR_INT32 || !data) return false;
  out->resize(num_elements(o.dims));
  if (!out->empty()) std::memcpy(out->data(), data, out->size() * sizeof(int32_t));
  return true;
}

// MEAN over H and W of a rank-4 tensor: a global average pool.
bool mean_is_global_pool(const Model& m, const Operation& op, const StaticLookup& statics) {
  if (op.inputs.size() < 3) return false;
  const Operand& in = m.operands[op.inputs[0]];
  if (in.dims.size() != 4) return false;
  std::vector<int32_t> axes;
  if (!static_i32(m, op.inputs[1], statics, &axes)) return false;
  std::set<int32_t> norm;
  for (int32_t a : axes) norm.insert(a < 0 ? a + 4 : a);
  return norm == std::set<int32_t>{1, 2};
}

bool is_global_average_pool(const Model& m, const Operation& op, const WindowParams& p) {
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& out = m.operands[op.outputs[0]];
  return op.type == OperationType::AVERAGE_POOL_2D && p.filter_h == in.dims[1] && p.filter_w == in.dims[2] &&
         p.pad_top == 0 && p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0 && out.dims.size() == 4 &&
         out.dims[1] == 1 && out.dims[2] == 1;
}

// A 1x1 window at stride 1 without padding copies its input (torchvision's adaptive
// average pool to the size it already has, as in VGG): XNNPACK's pooling refuses a 1x1
// window, its clamp is the copy.
bool is_identity_pool(const Model& m, const Operation& op, const WindowParams& p) {
  return p.filter_h == 1 && p.filter_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0 &&
         m.operands[op.inputs[0]].dims == m.operands[op.outputs[0]].dims;
}

// POW's exponent when it is one constant value XNNPACK has a node for (2: square, 0.5:
// square root, as layer norm's variance and std), else 0.
float pow_exponent(const Model& m, const Operation& op, const StaticLookup& statics) {
  if (op.inputs.size() < 2 || !m.has_value(op.inputs[1])) return 0.f;
  const Operand& e = m.operands[op.inputs[1]];
  const void* data = statics(op.inputs[1]);
  if (!data || e.type != OperandType::TENSOR_FLOAT32 || num_elements(e.dims) != 1) return 0.f;
  const float v = *static_cast<const float*>(data);
  return v == 2.f || v == 0.5f ? v : 0.f;
}

}  // namespace

bool is_global_mean(const Model& model, const Operation& op, const StaticLookup& statics) {
  if (op.type == OperationType::MEAN) return mean_is_global_pool(model, op, statics);
  if (op.type != OperationType::AVERAGE_POOL_2D || model.operands[op.inputs[0]].dims.size() != 4)
    return false;
  std::string why;
  auto p = parse_window_op(model, op, &why);
  return p && is_global_average_pool(model, op, *p);
}

const char* xnn_status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success:
      return "success";
    case xnn_status_uninitialized:
      return "uninitialized";
    case xnn_status_invalid_parameter:
      return "invalid parameter";
    case xnn_status_invalid_state:
      return "invalid state";
    case xnn_status_unsupported_parameter:
      return "unsupported parameter";
    case xnn_status_unsupported_hardware:
      return "unsupported hardware";
    case xnn_status_out_of_memory:
      return "out of memory";
  }
  return "unknown status";
}

bool xnn_takes_output_clamp(OperationType t) {
  switch (t) {
    case OperationType::CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::TRANSPOSE_CONV_2D:
    case OperationType::FULLY_CONNECTED:
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D:
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
    case OperationType::MEAN:
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
      return true;
    default:
      return false;
  }
}

void xnn_own_clamp(const Model& m, const Operation& op, float* lo, float* hi) {
  auto clamp_to = [&](int32_t fuse_code) {
    const ActivationRange r = fuse_code_range(fuse_code);
    *lo = r.lo, *hi = r.hi;
  };
  clamp_to(static_cast<int32_t>(clamp_activation_code(op.type).value_or(FuseCode::NONE)));
  switch (op.type) {
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
      clamp_to(m.scalar_i32(op.inputs[2]));
      return;
    case OperationType::FULLY_CONNECTED:
      clamp_to(m.scalar_i32(op.inputs[3]));
      return;
    case OperationType::CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::TRANSPOSE_CONV_2D:
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D: {
      std::string why;
      if (auto p = parse_window_op(m, op, &why)) clamp_to(p->fuse);
      return;
    }
    default:
      return;
  }
}

SupportResult xnn_can_lower(const Model& m, uint32_t op_index, const StaticLookup& statics) {
  const Operation& op = m.operations[op_index];
  if (is_int8_op(m, op)) return xnn_int8_can_lower(m, op_index, statics);
  auto no = [](std::string why) { return SupportResult::no(std::move(why)); };
  if (op.outputs.size() != 1) return no("multi-output op");
  for (uint32_t i : op.inputs)
    if (m.has_value(i))
      for (uint32_t d : m.operands[i].dims)
        if (d == 0) return no("zero-sized tensor");
  switch (op.type) {
    case OperationType::CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::TRANSPOSE_CONV_2D: {
      if (auto e = check_f32(m, op, {0, 1, 2}); !e.empty()) return no(e);
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return no(why);
      if (!statics(op.inputs[1])) return no("filter is not constant");
      if (m.has_value(op.inputs[2]) && !statics(op.inputs[2])) return no("bias is not constant");
      const Operand& in = m.operands[op.inputs[0]];
      const Operand& filter = m.operands[op.inputs[1]];
      const uint32_t cin = in.dims[3];
      if (op.type == OperationType::DEPTHWISE_CONV_2D) {
        if (filter.dims[0] != 1 || filter.dims[3] != cin * p->depth_multiplier)
          return no("depthwise filter/depth_multiplier mismatch");
      } else if (op.type == OperationType::GROUPED_CONV_2D) {
        if (p->groups == 0 || cin % p->groups || filter.dims[0] % p->groups ||
            filter.dims[3] * p->groups != cin)
          return no("group/channel mismatch");
      } else if (filter.dims[3] != cin) {
        return no("filter/input channel mismatch");
      }
      if (op.type == OperationType::TRANSPOSE_CONV_2D &&
          (p->pad_top >= p->filter_h || p->pad_bottom >= p->filter_h || p->pad_left >= p->filter_w ||
           p->pad_right >= p->filter_w))
        return no("transpose conv padding >= kernel");
      return SupportResult::yes();
    }
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D: {
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return no(why);
      if (is_global_average_pool(m, op, *p) || is_identity_pool(m, op, *p)) return SupportResult::yes();
      if (p->filter_h * p->filter_w <= 1) return no("1x1 pooling window with a stride or padding");
      if (p->pad_top >= p->filter_h || p->pad_bottom >= p->filter_h || p->pad_left >= p->filter_w ||
          p->pad_right >= p->filter_w)
        return no("padding >= window");
      return SupportResult::yes();
    }
    case OperationType::FULLY_CONNECTED: {
      if (auto e = check_f32(m, op, {0, 1, 2}); !e.empty()) return no(e);
      const Operand& w = m.operands[op.inputs[1]];
      if (w.dims.size() != 2) return no("weights not rank 2");
      if (!statics(op.inputs[1])) return no("weights are not constant");
      if (m.has_value(op.inputs[2]) && !statics(op.inputs[2])) return no("bias is not constant");
      if (num_elements(m.operands[op.inputs[0]].dims) % w.dims[1]) return no("input size mismatch");
      if (m.operands[op.outputs[0]].dims.size() != 2) return no("output not rank 2");
      return SupportResult::yes();
    }
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
    case OperationType::MAXIMUM:
    case OperationType::MINIMUM:
      if (auto e = check_f32(m, op, {0, 1}); !e.empty()) return no(e);
      return SupportResult::yes();
    case OperationType::PRELU: {
      if (auto e = check_f32(m, op, {0, 1}); !e.empty()) return no(e);
      const Operand& in = m.operands[op.inputs[0]];
      const Operand& alpha = m.operands[op.inputs[1]];
      if (!statics(op.inputs[1])) return no("alpha is not constant");
      if (in.dims.size() != 4) return no("input not rank 4");
      if (num_elements(alpha.dims) != in.dims.back() || alpha.dims.empty() ||
          alpha.dims.back() != in.dims.back())
        return no("alpha is not per-channel");
      return SupportResult::yes();
    }
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
    case OperationType::LOGISTIC:
    case OperationType::HARD_SWISH:
    case OperationType::ABS:
    case OperationType::NEG:
    case OperationType::SQRT:
    case OperationType::FLOOR:
    case OperationType::NNPIPE_CEIL:
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      return SupportResult::yes();
    case OperationType::ELU:
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      return SupportResult::yes();
    case OperationType::POW: {
      if (auto e = check_f32(m, op, {0, 1}); !e.empty()) return no(e);
      if (pow_exponent(m, op, statics) == 0.f) return no("exponent is not a constant 2 or 0.5");
      if (m.operands[op.inputs[0]].dims != m.operands[op.outputs[0]].dims) return no("base is broadcast");
      return SupportResult::yes();
    }
    case OperationType::SOFTMAX: {
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      if (m.scalar_f32(op.inputs[1]) != 1.f) return no("beta != 1");
      const size_t rank = m.operands[op.inputs[0]].dims.size();
      if (rank == 0) return no("scalar input");
      if (op.inputs.size() >= 3 && m.has_value(op.inputs[2])) {
        int32_t axis = m.scalar_i32(op.inputs[2]);
        if (axis != -1 && axis != static_cast<int32_t>(rank) - 1) return no("axis is not the last");
      }
      return SupportResult::yes();
    }
    case OperationType::RESHAPE:
    case OperationType::SQUEEZE:
    case OperationType::EXPAND_DIMS:
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      if (m.operands[op.outputs[0]].dims.empty()) return no("scalar output");
      return SupportResult::yes();
    case OperationType::PAD:
    case OperationType::PAD_V2: {
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      std::vector<int32_t> pads;
      if (!static_i32(m, op.inputs[1], statics, &pads)) return no("paddings are not constant");
      const size_t rank = m.operands[op.inputs[0]].dims.size();
      if (rank == 0 || pads.size() != rank * 2) return no("paddings shape");
      for (int32_t v : pads)
        if (v < 0) return no("negative padding");
      return SupportResult::yes();
    }
    case OperationType::RESIZE_BILINEAR: {
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      std::string why;
      auto r = parse_resize(m, op, &why);
      if (!r) return no(why);
      if (r->align_corners && r->half_pixel_centers) return no("align_corners with half_pixel_centers");
      return SupportResult::yes();
    }
    case OperationType::DEPTH_TO_SPACE: {
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      if (m.operands[op.inputs[0]].dims.size() != 4) return no("input not rank 4");
      if (op.inputs.size() >= 3 && m.has_value(op.inputs[2]) && m.scalar_bool(op.inputs[2]))
        return no("NCHW layout");
      if (m.scalar_i32(op.inputs[1]) < 2) return no("block size < 2");
      return SupportResult::yes();
    }
    case OperationType::MEAN:
      if (auto e = check_f32(m, op, {0}); !e.empty()) return no(e);
      if (!mean_is_global_pool(m, op, statics))
        return no("only MEAN over H,W of NHWC lowers (global average pool)");
      return SupportResult::yes();
    default:
      return no("no XNNPACK lowering for " + std::string(operation_type_name(op.type)));
  }
}

#define NN_XNN_TRY(call)                                                                                     \
  do {                                                                                                       \
    xnn_status nn_xs_ = (call);                                                                              \
    if (nn_xs_ != xnn_status_success)                                                                        \
      return Status(StatusCode::kUnsupportedOp, std::string(#call).substr(0, std::string(#call).find('(')) + \
                                                    " failed: " + xnn_status_name(nn_xs_));                  \
  } while (0)

Status xnn_lower(xnn_subgraph_t sg, const Model& m, uint32_t op_index, const StaticLookup& statics,
                 XnnValues& values, uint32_t out_operand, float lo, float hi) {
  const Operation& op = m.operations[op_index];
  if (is_int8_op(m, op)) return xnn_int8_lower(sg, m, op_index, statics, values, out_operand, lo, hi);
  auto in = [&](size_t i) { return values.value(op.inputs[i]); };
  NN_ASSIGN_OR_RETURN(const uint32_t x, in(0));
  NN_ASSIGN_OR_RETURN(const uint32_t y, values.value(out_operand));
  auto optional_bias = [&](size_t i) -> Result<uint32_t> {
    if (!m.has_value(op.inputs[i])) return XNN_INVALID_VALUE_ID;
    return values.value(op.inputs[i]);
  };
  const Operand& input = m.operands[op.inputs[0]];
  const Operand& output = m.operands[op.outputs[0]];

  switch (op.type) {
    case OperationType::CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::TRANSPOSE_CONV_2D: {
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return Status(StatusCode::kUnsupportedOp, why);
      NN_ASSIGN_OR_RETURN(const uint32_t w, in(1));
      NN_ASSIGN_OR_RETURN(const uint32_t b, optional_bias(2));
      const Operand& filter = m.operands[op.inputs[1]];
      const uint32_t cin = input.dims[3];
      if (op.type == OperationType::DEPTHWISE_CONV_2D) {
        NN_XNN_TRY(xnn_define_depthwise_convolution_2d(
            sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left, p->filter_h, p->filter_w, p->stride_h,
            p->stride_w, p->dilation_h, p->dilation_w, p->depth_multiplier, cin, lo, hi, x, w, b, y, 0));
      } else if (op.type == OperationType::TRANSPOSE_CONV_2D) {
        NN_XNN_TRY(xnn_define_deconvolution_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left,
                                               p->adjustment_h, p->adjustment_w, p->filter_h, p->filter_w,
                                               p->stride_h, p->stride_w, 1, 1, 1, cin, filter.dims[0], lo, hi,
                                               x, w, b, y, 0));
      } else {
        const uint32_t groups = op.type == OperationType::GROUPED_CONV_2D ? p->groups : 1;
        NN_XNN_TRY(xnn_define_convolution_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left,
                                             p->filter_h, p->filter_w, p->stride_h, p->stride_w,
                                             p->dilation_h, p->dilation_w, groups, cin / groups,
                                             filter.dims[0] / groups, lo, hi, x, w, b, y, 0));
      }
      return Status::ok();
    }
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D: {
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return Status(StatusCode::kUnsupportedOp, why);
      if (is_global_average_pool(m, op, *p)) {
        NN_XNN_TRY(xnn_define_global_average_pooling_2d(sg, lo, hi, x, y, 0));
      } else if (is_identity_pool(m, op, *p)) {
        NN_XNN_TRY(xnn_define_clamp(sg, lo, hi, x, y, 0));
      } else if (op.type == OperationType::AVERAGE_POOL_2D) {
        NN_XNN_TRY(xnn_define_average_pooling_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left,
                                                 p->filter_h, p->filter_w, p->stride_h, p->stride_w, lo, hi,
                                                 x, y, 0));
      } else {
        NN_XNN_TRY(xnn_define_max_pooling_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left,
                                             p->filter_h, p->filter_w, p->stride_h, p->stride_w, 1, 1, lo, hi,
                                             x, y, 0));
      }
      return Status::ok();
    }
    case OperationType::FULLY_CONNECTED: {
      NN_ASSIGN_OR_RETURN(const uint32_t w, in(1));
      NN_ASSIGN_OR_RETURN(const uint32_t b, optional_bias(2));
      NN_XNN_TRY(xnn_define_fully_connected(sg, lo, hi, x, w, b, y, XNN_FLAG_TENSORFLOW_RESHAPE_2D));
      return Status::ok();
    }
    case OperationType::ADD:
    case OperationType::SUB:
    case OperationType::MUL:
    case OperationType::DIV:
    case OperationType::MAXIMUM:
    case OperationType::MINIMUM: {
      NN_ASSIGN_OR_RETURN(const uint32_t x2, in(1));
      switch (op.type) {
        case OperationType::ADD:
          NN_XNN_TRY(xnn_define_add2(sg, lo, hi, x, x2, y, 0));
          break;
        case OperationType::SUB:
          NN_XNN_TRY(xnn_define_subtract(sg, lo, hi, x, x2, y, 0));
          break;
        case OperationType::MUL:
          NN_XNN_TRY(xnn_define_multiply2(sg, lo, hi, x, x2, y, 0));
          break;
        case OperationType::DIV:
          NN_XNN_TRY(xnn_define_divide(sg, lo, hi, x, x2, y, 0));
          break;
        case OperationType::MAXIMUM:
          NN_XNN_TRY(xnn_define_maximum2(sg, x, x2, y, 0));
          break;
        default:
          NN_XNN_TRY(xnn_define_minimum2(sg, x, x2, y, 0));
          break;
      }
      return Status::ok();
    }
    case OperationType::PRELU: {
      const void* alpha = statics(op.inputs[1]);
      NN_ASSIGN_OR_RETURN(const uint32_t slope, values.static_value({input.dims.back()}, alpha));
      NN_XNN_TRY(xnn_define_prelu(sg, x, slope, y, 0));
      return Status::ok();
    }
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
      NN_XNN_TRY(xnn_define_clamp(sg, lo, hi, x, y, 0));
      return Status::ok();
    case OperationType::LOGISTIC:
      NN_XNN_TRY(xnn_define_sigmoid(sg, x, y, 0));
      return Status::ok();
    case OperationType::HARD_SWISH:
      NN_XNN_TRY(xnn_define_hardswish(sg, x, y, 0));
      return Status::ok();
    case OperationType::ABS:
      NN_XNN_TRY(xnn_define_abs(sg, x, y, 0));
      return Status::ok();
    case OperationType::NEG:
      NN_XNN_TRY(xnn_define_negate(sg, x, y, 0));
      return Status::ok();
    case OperationType::SQRT:
      NN_XNN_TRY(xnn_define_square_root(sg, x, y, 0));
      return Status::ok();
    case OperationType::FLOOR:
      NN_XNN_TRY(xnn_define_floor(sg, x, y, 0));
      return Status::ok();
    case OperationType::NNPIPE_CEIL:
      NN_XNN_TRY(xnn_define_ceiling(sg, x, y, 0));
      return Status::ok();
    case OperationType::POW:
      if (pow_exponent(m, op, statics) == 2.f)
        NN_XNN_TRY(xnn_define_square(sg, x, y, 0));
      else
        NN_XNN_TRY(xnn_define_square_root(sg, x, y, 0));
      return Status::ok();
    case OperationType::ELU:
      NN_XNN_TRY(xnn_define_elu(sg, m.scalar_f32(op.inputs[1]), x, y, 0));
      return Status::ok();
    case OperationType::SOFTMAX:
      NN_XNN_TRY(xnn_define_softmax(sg, x, y, 0));
      return Status::ok();
    case OperationType::RESHAPE:
    case OperationType::SQUEEZE:
    case OperationType::EXPAND_DIMS: {
      std::vector<size_t> shape(output.dims.begin(), output.dims.end());
      NN_XNN_TRY(xnn_define_static_reshape(sg, shape.size(), shape.data(), x, y, 0));
      return Status::ok();
    }
    case OperationType::PAD:
    case OperationType::PAD_V2: {
      std::vector<int32_t> pads;
      if (!static_i32(m, op.inputs[1], statics, &pads)) return Status(StatusCode::kUnsupportedOp, "paddings");
      const size_t rank = input.dims.size();
      std::vector<size_t> pre(rank), post(rank);
      for (size_t d = 0; d < rank; ++d) pre[d] = pads[2 * d], post[d] = pads[2 * d + 1];
      float value = op.type == OperationType::PAD_V2 ? m.scalar_f32(op.inputs[2]) : 0.f;
      NN_XNN_TRY(xnn_define_static_constant_pad(sg, pre.data(), post.data(), value, x, y, 0));
      return Status::ok();
    }
    case OperationType::RESIZE_BILINEAR: {
      std::string why;
      auto r = parse_resize(m, op, &why);
      if (!r) return Status(StatusCode::kUnsupportedOp, why);
      uint32_t flags = r->align_corners ? XNN_FLAG_ALIGN_CORNERS
                                        : (r->half_pixel_centers ? 0 : XNN_FLAG_TENSORFLOW_LEGACY_MODE);
      NN_XNN_TRY(xnn_define_static_resize_bilinear_2d(sg, r->out_h, r->out_w, x, y, flags));
      return Status::ok();
    }
    case OperationType::DEPTH_TO_SPACE:
      NN_XNN_TRY(xnn_define_depth_to_space(sg, x, y, static_cast<uint32_t>(m.scalar_i32(op.inputs[1])), 0));
      return Status::ok();
    case OperationType::MEAN: {
      if (output.dims.size() == 4) {
        NN_XNN_TRY(xnn_define_global_average_pooling_2d(sg, lo, hi, x, y, 0));
        return Status::ok();
      }
      // keep_dims = 0: pool into [N,1,1,C], then give it the output's shape.
      NN_ASSIGN_OR_RETURN(const uint32_t pooled, values.internal_value({input.dims[0], 1, 1, input.dims[3]}));
      NN_XNN_TRY(xnn_define_global_average_pooling_2d(sg, lo, hi, x, pooled, 0));
      std::vector<size_t> shape(output.dims.begin(), output.dims.end());
      if (shape.empty()) shape.push_back(1);
      NN_XNN_TRY(xnn_define_static_reshape(sg, shape.size(), shape.data(), pooled, y, 0));
      return Status::ok();
    }
    default:
      return Status(StatusCode::kUnsupportedOp, "no XNNPACK lowering");
  }
}

}  // namespace nn::cpu
