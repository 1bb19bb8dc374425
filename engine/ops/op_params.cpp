#include "ops/op_params.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/tensor_util.h"

namespace nn {

namespace {

using conv_util::AxisPadding;
using conv_util::ConvKind;
using ConvForm = conv_util::ConvSlots;
constexpr size_t kAbsent = conv_util::kAbsentSlot;

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

// out_width / out_height: INT32 sizes, or (NNAPI) FLOAT32 scale factors, both the same type.
Result<uint32_t> read_extent(const Model& m, const Operation& op, size_t index, const char* name,
                             uint32_t in_extent) {
  const Operand& o = m.operands[op.inputs[index]];
  if (o.type == OperandType::FLOAT32) {
    NN_ASSIGN_OR_RETURN(float scale, conv_util::read_f32(m, op, index, name));
    const double out = std::floor(double(in_extent) * scale);
    if (!(scale > 0.f) || out < 1 || out >= (1 << 24))
      return invalid(input_label(index, name) + " scale " + std::to_string(scale) + " gives output size " +
                     std::to_string(out) + ", must be in [1, 2^24)");
    return static_cast<uint32_t>(out);
  }
  NN_ASSIGN_OR_RETURN(int32_t v, conv_util::read_i32(m, op, index, name));
  if (v < 1 || v >= (1 << 24))
    return invalid(input_label(index, name) + " must be in [1, 2^24), got " + std::to_string(v));
  return static_cast<uint32_t>(v);
}

// Explicit padding: pad_left, pad_right, pad_top, pad_bottom from input `first` on, each >= 0.
Status read_explicit_pads(const Model& m, const Operation& op, size_t first, AxisPadding* pad_w,
                          AxisPadding* pad_h) {
  using conv_util::read_i32_at_least;
  NN_ASSIGN_OR_RETURN(int32_t l, read_i32_at_least(m, op, first + 0, "pad_left", 0));
  NN_ASSIGN_OR_RETURN(int32_t r, read_i32_at_least(m, op, first + 1, "pad_right", 0));
  NN_ASSIGN_OR_RETURN(int32_t t, read_i32_at_least(m, op, first + 2, "pad_top", 0));
  NN_ASSIGN_OR_RETURN(int32_t b, read_i32_at_least(m, op, first + 3, "pad_bottom", 0));
  *pad_w = {l, r};
  *pad_h = {t, b};
  return Status::ok();
}

}  // namespace

std::optional<ConvKind> conv_kind(OperationType type) {
  switch (type) {
    case OperationType::CONV_2D: return ConvKind::kConv;
    case OperationType::DEPTHWISE_CONV_2D: return ConvKind::kDepthwise;
    case OperationType::GROUPED_CONV_2D: return ConvKind::kGrouped;
    case OperationType::TRANSPOSE_CONV_2D: return ConvKind::kTranspose;
    default: return std::nullopt;
  }
}

// Checks everything about a conv op and computes the output extent: prepare() and the
// kernels read the same numbers, so they can never disagree.
Result<ConvParams> decode_conv(const Model& m, const Operation& op, ConvKind kind) {
  using namespace conv_util;
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_ASSIGN_OR_RETURN(ConvForm form, pick_conv_slots(m, op, kind));
  ConvParams p;
  p.kind = kind;
  p.form = form;

  NN_ASSIGN_OR_RETURN(const Operand* input_operand, conv_util::nhwc_activation_input(m, op));
  const Operand& input = *input_operand;
  p.batch = input.dims[0];
  p.in_h = input.dims[1];
  p.in_w = input.dims[2];
  p.in_c = input.dims[3];

  NN_RETURN_IF_ERROR(check_filter_type(m, op, 1, "filter", kind == ConvKind::kDepthwise ? 3 : 0));
  NN_RETURN_IF_ERROR(check_rank(m, op, 1, 4, 4, "filter"));
  const Operand& filter = m.operands[op.inputs[1]];
  for (uint32_t d : filter.dims)
    if (d == 0) return invalid(input_label(1, "filter") + " has a zero dim " + dims_to_string(filter.dims));
  p.k_h = filter.dims[1];
  p.k_w = filter.dims[2];

  NN_ASSIGN_OR_RETURN(p.stride_w, read_i32_at_least(m, op, form.stride, "stride_w", 1));
  NN_ASSIGN_OR_RETURN(p.stride_h, read_i32_at_least(m, op, form.stride + 1, "stride_h", 1));
  NN_ASSIGN_OR_RETURN(p.fuse, read_fuse(m, op, form.fuse));
  NN_RETURN_IF_ERROR(check_layout_nhwc(m, op, form.layout));
  if (form.dilation != kAbsent && op.inputs.size() >= form.dilation + 2) {
    NN_ASSIGN_OR_RETURN(p.dil_w, read_i32_at_least(m, op, form.dilation, "dilation_w", 1));
    NN_ASSIGN_OR_RETURN(p.dil_h, read_i32_at_least(m, op, form.dilation + 1, "dilation_h", 1));
  }
  if (form.groups != kAbsent) {
    const char* name = kind == ConvKind::kDepthwise ? "depth_multiplier" : "num_groups";
    NN_ASSIGN_OR_RETURN(p.groups, read_i32_at_least(m, op, form.groups, name, 1));
  }

  const std::string filter_dims = dims_to_string(filter.dims);
  switch (kind) {
    case ConvKind::kConv:
    case ConvKind::kTranspose:
      p.out_c = filter.dims[0];
      if (filter.dims[3] != p.in_c)
        return invalid(input_label(1, "filter") + " " + filter_dims + " has " +
                       std::to_string(filter.dims[3]) + " input channels, input has " +
                       std::to_string(p.in_c));
      break;
    case ConvKind::kGrouped: {
      const uint32_t g = static_cast<uint32_t>(p.groups);
      p.out_c = filter.dims[0];
      if (p.in_c % g != 0 || p.out_c % g != 0)
        return invalid(input_label(form.groups, "num_groups") + " " + std::to_string(g) +
                       " must divide the input channels " + std::to_string(p.in_c) +
                       " and the output channels " + std::to_string(p.out_c));
      if (filter.dims[3] != p.in_c / g)
        return invalid(input_label(1, "filter") + " " + filter_dims +
                       " must have input channels / num_groups = " + std::to_string(p.in_c / g) +
                       " in dim 3");
      break;
    }
    case ConvKind::kDepthwise:
      p.out_c = filter.dims[3];
      if (filter.dims[0] != 1)
        return invalid(input_label(1, "filter") + " must be [1,H,W,Cout], got " + filter_dims);
      if (static_cast<uint64_t>(p.in_c) * static_cast<uint64_t>(p.groups) != p.out_c)
        return invalid(input_label(1, "filter") + " " + filter_dims + " has " + std::to_string(p.out_c) +
                       " output channels, input channels " + std::to_string(p.in_c) + " x depth_multiplier " +
                       std::to_string(p.groups) + " = " +
                       std::to_string(static_cast<uint64_t>(p.in_c) * static_cast<uint64_t>(p.groups)));
      break;
  }
  NN_RETURN_IF_ERROR(check_bias(m, op, 2, p.out_c));

  if (kind == ConvKind::kTranspose) {
    if (form.explicit_padding) {
      NN_RETURN_IF_ERROR(read_explicit_pads(m, op, form.padding, &p.pad_w, &p.pad_h));
      const int64_t ow = (int64_t(p.in_w) - 1) * p.stride_w + p.k_w - p.pad_w.before - p.pad_w.after;
      const int64_t oh = (int64_t(p.in_h) - 1) * p.stride_h + p.k_h - p.pad_h.before - p.pad_h.after;
      if (ow < 1 || oh < 1 || ow >= (1 << 24) || oh >= (1 << 24))
        return invalid("output extent " + std::to_string(oh) + "x" + std::to_string(ow) +
                       " (from (in-1)*stride + filter - pads) must be in [1, 2^24)");
      p.out_w = static_cast<uint32_t>(ow);
      p.out_h = static_cast<uint32_t>(oh);
    } else {
      const size_t i = form.output_shape;
      NN_RETURN_IF_ERROR(check_tensor_type(m, op, i, {OperandType::TENSOR_INT32}, "output_shape"));
      const Operand& shape = m.operands[op.inputs[i]];
      if (!shape.is_constant() || shape.dims != Dims{4})
        return invalid(input_label(i, "output_shape") + " must be a constant TENSOR_INT32 [4], got " +
                       std::string(shape.is_constant() ? "constant " : "non-constant ") +
                       dims_to_string(shape.dims));
      const int32_t* s = shape.as<int32_t>();
      if (s[0] != int32_t(p.batch) || s[3] != int32_t(p.out_c) || s[1] < 1 || s[2] < 1 || s[1] >= (1 << 24) ||
          s[2] >= (1 << 24))
        return invalid(input_label(i, "output_shape") + " [" + std::to_string(s[0]) + "," +
                       std::to_string(s[1]) + "," + std::to_string(s[2]) + "," + std::to_string(s[3]) +
                       "] must be [" + std::to_string(p.batch) + ",H,W," + std::to_string(p.out_c) +
                       "] with H, W >= 1");
      p.out_h = static_cast<uint32_t>(s[1]);
      p.out_w = static_cast<uint32_t>(s[2]);
      NN_ASSIGN_OR_RETURN(int32_t scheme, read_i32(m, op, form.padding, "padding"));
      if (scheme != 1 && scheme != 2)
        return invalid(input_label(form.padding, "padding") + " must be 1 (SAME) or 2 (VALID), got " +
                       std::to_string(scheme));
      p.pad_w = transpose_conv_implicit_padding(scheme, p.out_w, p.k_w, p.stride_w);
      p.pad_h = transpose_conv_implicit_padding(scheme, p.out_h, p.k_h, p.stride_h);
    }
    return p;
  }

  if (form.explicit_padding) {
    NN_RETURN_IF_ERROR(read_explicit_pads(m, op, form.padding, &p.pad_w, &p.pad_h));
  } else {
    NN_ASSIGN_OR_RETURN(int32_t scheme, read_i32(m, op, form.padding, "padding"));
    NN_ASSIGN_OR_RETURN(p.pad_w, implicit_padding(scheme, p.in_w, p.k_w, p.stride_w, p.dil_w, "width"));
    NN_ASSIGN_OR_RETURN(p.pad_h, implicit_padding(scheme, p.in_h, p.k_h, p.stride_h, p.dil_h, "height"));
  }
  NN_ASSIGN_OR_RETURN(p.out_w, window_output_size(p.in_w, p.k_w, p.stride_w, p.dil_w, p.pad_w, "width"));
  NN_ASSIGN_OR_RETURN(p.out_h, window_output_size(p.in_h, p.k_h, p.stride_h, p.dil_h, p.pad_h, "height"));
  return p;
}

Result<PoolParams> decode_pool(const Model& m, const Operation& op) {
  using namespace conv_util;
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  const size_t n = op.inputs.size();
  // explicit: in, 4 pads, strides, filter, fuse, [layout] (10, 11); implicit: in, padding, ... (7, 8)
  bool explicit_padding;
  if (n == 10 || n == 11)
    explicit_padding = true;
  else if (n == 7 || n == 8)
    explicit_padding = false;
  else
    return invalid("expects 10 or 11 inputs (explicit padding) or 7 or 8 (implicit padding), got " +
                   std::to_string(n));
  NN_ASSIGN_OR_RETURN(const Operand* input_operand, conv_util::nhwc_activation_input(m, op));
  const Operand& input = *input_operand;
  PoolParams p;
  p.batch = input.dims[0];
  p.in_h = input.dims[1];
  p.in_w = input.dims[2];
  p.channels = input.dims[3];

  const size_t s = explicit_padding ? 5 : 2;  // stride_w
  NN_ASSIGN_OR_RETURN(p.stride_w, read_i32_at_least(m, op, s, "stride_w", 1));
  NN_ASSIGN_OR_RETURN(p.stride_h, read_i32_at_least(m, op, s + 1, "stride_h", 1));
  NN_ASSIGN_OR_RETURN(p.filter_w, read_i32_at_least(m, op, s + 2, "filter_w", 1));
  NN_ASSIGN_OR_RETURN(p.filter_h, read_i32_at_least(m, op, s + 3, "filter_h", 1));
  NN_ASSIGN_OR_RETURN(p.fuse, read_fuse(m, op, s + 4));
  NN_RETURN_IF_ERROR(check_layout_nhwc(m, op, s + 5));
  if (explicit_padding) {
    NN_RETURN_IF_ERROR(read_explicit_pads(m, op, 1, &p.pad_w, &p.pad_h));
  } else {
    NN_ASSIGN_OR_RETURN(int32_t scheme, read_i32(m, op, 1, "padding"));
    NN_ASSIGN_OR_RETURN(p.pad_w, implicit_padding(scheme, p.in_w, p.filter_w, p.stride_w, 1, "width"));
    NN_ASSIGN_OR_RETURN(p.pad_h, implicit_padding(scheme, p.in_h, p.filter_h, p.stride_h, 1, "height"));
  }
  NN_ASSIGN_OR_RETURN(p.out_w, window_output_size(p.in_w, p.filter_w, p.stride_w, 1, p.pad_w, "width"));
  NN_ASSIGN_OR_RETURN(p.out_h, window_output_size(p.in_h, p.filter_h, p.stride_h, 1, p.pad_h, "height"));
  return p;
}

Result<ResizeParams> decode_resize(const Model& m, const Operation& op) {
  using namespace conv_util;
  const size_t n = op.inputs.size();
  if (n != 3 && n != 4 && n != 6)
    return invalid(
        "expects 3, 4 or 6 inputs (in, out_width, out_height, [layout, [align_corners, "
        "half_pixel_centers]]), got " +
        std::to_string(n));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_ASSIGN_OR_RETURN(const Operand* input_operand, conv_util::nhwc_activation_input(m, op));
  const Operand& input = *input_operand;
  ResizeParams p;
  p.batch = input.dims[0];
  p.in_h = input.dims[1];
  p.in_w = input.dims[2];
  p.channels = input.dims[3];
  const OperandType wt = m.operands[op.inputs[1]].type, ht = m.operands[op.inputs[2]].type;
  if (wt != ht)
    return invalid(
        "input 1 (out_width) and input 2 (out_height) must both be INT32 sizes or both FLOAT32 "
        "scales, got " +
        std::string(operand_type_name(wt)) + " and " + std::string(operand_type_name(ht)));
  p.scale_form = wt == OperandType::FLOAT32;
  NN_ASSIGN_OR_RETURN(p.out_w, read_extent(m, op, 1, "out_width", p.in_w));
  NN_ASSIGN_OR_RETURN(p.out_h, read_extent(m, op, 2, "out_height", p.in_h));
  NN_RETURN_IF_ERROR(check_layout_nhwc(m, op, 3));
  if (n == 6) {
    NN_ASSIGN_OR_RETURN(p.align_corners, read_bool(m, op, 4, "align_corners"));
    NN_ASSIGN_OR_RETURN(p.half_pixel_centers, read_bool(m, op, 5, "half_pixel_centers"));
    if (p.align_corners && p.half_pixel_centers)
      return invalid("input 4 (align_corners) and input 5 (half_pixel_centers) cannot both be true");
  }
  return p;
}

namespace {

uint32_t to_u32(int64_t v) { return static_cast<uint32_t>(std::max<int64_t>(v, 0)); }

// A transpose conv as XNNPACK's deconvolution: non-negative pads and an output adjustment
// in [0, stride) that makes (in - 1) * stride + filter - pads + adjustment the output.
bool deconvolution_axis(int64_t in, int64_t out, int64_t filter, int64_t stride, const AxisPadding& pad,
                        uint32_t* before, uint32_t* after, uint32_t* adjustment) {
  const int64_t kept_after = std::max<int64_t>(pad.after, 0);  // a negative tail crops
  const int64_t produced = (in - 1) * stride + filter - pad.before - kept_after;
  const int64_t adj = out - produced;
  if (pad.before < 0 || adj < 0 || adj >= stride) return false;
  *before = to_u32(pad.before);
  *after = to_u32(kept_after);
  *adjustment = static_cast<uint32_t>(adj);
  return true;
}

}  // namespace

std::optional<WindowParams> parse_window_op(const Model& m, const Operation& op, std::string* why) {
  WindowParams w;
  if (const std::optional<ConvKind> kind = conv_kind(op.type)) {
    Result<ConvParams> decoded = decode_conv(m, op, *kind);
    if (!decoded) {
      *why = decoded.status().message();
      return std::nullopt;
    }
    const ConvParams& p = *decoded;
    w.stride_h = to_u32(p.stride_h), w.stride_w = to_u32(p.stride_w);
    w.dilation_h = to_u32(p.dil_h), w.dilation_w = to_u32(p.dil_w);
    w.filter_h = p.k_h, w.filter_w = p.k_w;
    w.fuse = p.fuse;
    if (*kind == ConvKind::kGrouped) w.groups = to_u32(p.groups);
    if (*kind == ConvKind::kDepthwise) w.depth_multiplier = to_u32(p.groups);
    if (*kind == ConvKind::kTranspose) {
      if (!deconvolution_axis(p.in_h, p.out_h, p.k_h, p.stride_h, p.pad_h, &w.pad_top, &w.pad_bottom,
                              &w.adjustment_h) ||
          !deconvolution_axis(p.in_w, p.out_w, p.k_w, p.stride_w, p.pad_w, &w.pad_left, &w.pad_right,
                              &w.adjustment_w)) {
        *why = "output size not reachable by a deconvolution with these pads";
        return std::nullopt;
      }
      return w;
    }
    w.pad_top = to_u32(p.pad_h.before), w.pad_bottom = to_u32(p.pad_h.after);
    w.pad_left = to_u32(p.pad_w.before), w.pad_right = to_u32(p.pad_w.after);
    return w;
  }
  if (op.type != OperationType::AVERAGE_POOL_2D && op.type != OperationType::MAX_POOL_2D) {
    *why = "not a window op";
    return std::nullopt;
  }
  Result<PoolParams> decoded = decode_pool(m, op);
  if (!decoded) {
    *why = decoded.status().message();
    return std::nullopt;
  }
  const PoolParams& p = *decoded;
  w.stride_h = to_u32(p.stride_h), w.stride_w = to_u32(p.stride_w);
  w.filter_h = to_u32(p.filter_h), w.filter_w = to_u32(p.filter_w);
  w.fuse = p.fuse;
  w.pad_top = to_u32(p.pad_h.before), w.pad_bottom = to_u32(p.pad_h.after);
  w.pad_left = to_u32(p.pad_w.before), w.pad_right = to_u32(p.pad_w.after);
  return w;
}

std::optional<ResizeParams> parse_resize(const Model& m, const Operation& op, std::string* why) {
  Result<ResizeParams> decoded = decode_resize(m, op);
  if (!decoded) {
    *why = decoded.status().message();
    return std::nullopt;
  }
  if (decoded->scale_form) {
    *why = "scale form (FLOAT32 scales) not lowered";
    return std::nullopt;
  }
  return *decoded;
}

}  // namespace nn
