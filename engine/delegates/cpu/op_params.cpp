#include "delegates/cpu/op_params.h"

#include <algorithm>
#include <limits>

namespace nn::cpu {

namespace {

bool operand_is(const Model& m, const Operation& op, size_t i, OperandType t) {
  return i < op.inputs.size() && m.has_value(op.inputs[i]) && m.operands[op.inputs[i]].type == t;
}

// The optional layout flag at `index`: absent / NO_VALUE / false mean NHWC.
bool is_nchw(const Model& m, const Operation& op, size_t index) {
  return index < op.inputs.size() && m.has_value(op.inputs[index]) && m.scalar_bool(op.inputs[index]);
}

uint32_t u32(const Model& m, const Operation& op, size_t i) {
  return static_cast<uint32_t>(std::max(0, m.scalar_i32(op.inputs[i])));
}

}  // namespace

void same_padding(uint32_t in, uint32_t filter, uint32_t stride, uint32_t dilation, uint32_t* before,
                  uint32_t* after) {
  const int64_t out = (int64_t(in) + stride - 1) / stride;
  const int64_t effective = (int64_t(filter) - 1) * dilation + 1;
  const int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
  *before = static_cast<uint32_t>(total / 2);
  *after = static_cast<uint32_t>(total - total / 2);
}

void fuse_range(int32_t fuse, float* lo, float* hi) {
  const ActivationRange r = fuse_code_range(fuse);
  *lo = r.lo;
  *hi = r.hi;
}

std::optional<WindowParams> parse_window_op(const Model& m, const Operation& op, std::string* why) {
  const size_t n = op.inputs.size();
  const Operand& in = m.operands[op.inputs[0]];
  if (in.dims.size() != 4) {
    *why = "input is not rank 4";
    return std::nullopt;
  }
  const uint32_t in_h = in.dims[1], in_w = in.dims[2];
  WindowParams p;
  bool is_explicit = false;
  size_t layout_index = 0;
  size_t dilation_index = 0;  // 0 = none
  const Operand* filter = nullptr;
  int32_t padding_code = 0;

  auto read_explicit_pads = [&](size_t i) {
    p.pad_left = u32(m, op, i);
    p.pad_right = u32(m, op, i + 1);
    p.pad_top = u32(m, op, i + 2);
    p.pad_bottom = u32(m, op, i + 3);
  };

  switch (op.type) {
    case OperationType::CONV_2D: {
      is_explicit = n >= 11 || (n == 10 && !operand_is(m, op, 7, OperandType::BOOL));
      filter = &m.operands[op.inputs[1]];
      if (is_explicit) {
        read_explicit_pads(3);
        p.stride_w = u32(m, op, 7), p.stride_h = u32(m, op, 8), p.fuse = m.scalar_i32(op.inputs[9]);
        layout_index = 10, dilation_index = n >= 13 ? 11 : 0;
      } else {
        padding_code = m.scalar_i32(op.inputs[3]);
        p.stride_w = u32(m, op, 4), p.stride_h = u32(m, op, 5), p.fuse = m.scalar_i32(op.inputs[6]);
        layout_index = 7, dilation_index = n >= 10 ? 8 : 0;
      }
      break;
    }
    case OperationType::DEPTHWISE_CONV_2D: {
      is_explicit = n >= 12 || (n == 11 && !operand_is(m, op, 8, OperandType::BOOL));
      filter = &m.operands[op.inputs[1]];
      if (is_explicit) {
        read_explicit_pads(3);
        p.stride_w = u32(m, op, 7), p.stride_h = u32(m, op, 8);
        p.depth_multiplier = u32(m, op, 9), p.fuse = m.scalar_i32(op.inputs[10]);
        layout_index = 11, dilation_index = n >= 14 ? 12 : 0;
      } else {
        padding_code = m.scalar_i32(op.inputs[3]);
        p.stride_w = u32(m, op, 4), p.stride_h = u32(m, op, 5);
        p.depth_multiplier = u32(m, op, 6), p.fuse = m.scalar_i32(op.inputs[7]);
        layout_index = 8, dilation_index = n >= 11 ? 9 : 0;
      }
      break;
    }
    case OperationType::GROUPED_CONV_2D: {
      is_explicit = n >= 12;
      filter = &m.operands[op.inputs[1]];
      if (is_explicit) {
        read_explicit_pads(3);
        p.stride_w = u32(m, op, 7), p.stride_h = u32(m, op, 8);
        p.groups = u32(m, op, 9), p.fuse = m.scalar_i32(op.inputs[10]);
        layout_index = 11;
      } else {
        padding_code = m.scalar_i32(op.inputs[3]);
        p.stride_w = u32(m, op, 4), p.stride_h = u32(m, op, 5);
        p.groups = u32(m, op, 6), p.fuse = m.scalar_i32(op.inputs[7]);
        layout_index = 8;
      }
      break;
    }
    case OperationType::TRANSPOSE_CONV_2D: {
      is_explicit = n >= 11;
      filter = &m.operands[op.inputs[1]];
      if (is_explicit) {
        read_explicit_pads(3);
        p.stride_w = u32(m, op, 7), p.stride_h = u32(m, op, 8), p.fuse = m.scalar_i32(op.inputs[9]);
        layout_index = 10;
      } else {
        padding_code = m.scalar_i32(op.inputs[4]);
        p.stride_w = u32(m, op, 5), p.stride_h = u32(m, op, 6), p.fuse = m.scalar_i32(op.inputs[7]);
        layout_index = 8;
      }
      break;
    }
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::MAX_POOL_2D: {
      is_explicit = n >= 10;
      if (is_explicit) {
        read_explicit_pads(1);
        p.stride_w = u32(m, op, 5), p.stride_h = u32(m, op, 6);
        p.filter_w = u32(m, op, 7), p.filter_h = u32(m, op, 8), p.fuse = m.scalar_i32(op.inputs[9]);
        layout_index = 10;
      } else {
        padding_code = m.scalar_i32(op.inputs[1]);
        p.stride_w = u32(m, op, 2), p.stride_h = u32(m, op, 3);
        p.filter_w = u32(m, op, 4), p.filter_h = u32(m, op, 5), p.fuse = m.scalar_i32(op.inputs[6]);
        layout_index = 7;
      }
      break;
    }
    default:
      *why = "not a window op";
      return std::nullopt;
  }
  if (is_nchw(m, op, layout_index)) {
    *why = "NCHW layout";
    return std::nullopt;
  }
  if (dilation_index) {
    p.dilation_w = std::max(1u, u32(m, op, dilation_index));
    p.dilation_h = std::max(1u, u32(m, op, dilation_index + 1));
  }
  if (filter) {
    if (filter->dims.size() != 4) {
      *why = "filter is not rank 4";
      return std::nullopt;
    }
    p.filter_h = filter->dims[1];
    p.filter_w = filter->dims[2];
  }
  if (p.stride_h == 0 || p.stride_w == 0) {
    *why = "zero stride";
    return std::nullopt;
  }

  if (op.type == OperationType::TRANSPOSE_CONV_2D) {
    const Operand& out = m.operands[op.outputs[0]];
    if (out.dims.size() != 4) {
      *why = "output is not rank 4";
      return std::nullopt;
    }
    const int64_t out_h = out.dims[1], out_w = out.dims[2];
    auto axis = [&](int64_t in_size, int64_t out_size, uint32_t k, uint32_t stride, uint32_t* before,
                    uint32_t* after, uint32_t* adjustment) -> bool {
      int64_t pad_before = *before, pad_after = *after;
      if (!is_explicit) {
        // NNAPI: the padding of the forward conv whose input is this op's output; a
        // negative tail crops (XNNPACK: an output adjustment instead).
        pad_before = pad_after = 0;
        if (padding_code == static_cast<int32_t>(PaddingCode::SAME)) {
          const int64_t forward_out = (out_size + stride - 1) / stride;
          const int64_t needed = (forward_out - 1) * stride + k;
          if (needed > out_size) pad_before = (needed - out_size) / 2;
          pad_after = needed - out_size - pad_before;
        }
      }
      const int64_t produced = (in_size - 1) * stride + k - pad_before - std::max<int64_t>(pad_after, 0);
      const int64_t adj = out_size - produced;
      if (pad_before < 0 || adj < 0 || adj >= stride) return false;
      *before = static_cast<uint32_t>(pad_before);
      *after = static_cast<uint32_t>(std::max<int64_t>(pad_after, 0));
      *adjustment = static_cast<uint32_t>(adj);
      return true;
    };
    if (!axis(in_h, out_h, p.filter_h, p.stride_h, &p.pad_top, &p.pad_bottom, &p.adjustment_h) ||
        !axis(in_w, out_w, p.filter_w, p.stride_w, &p.pad_left, &p.pad_right, &p.adjustment_w)) {
      *why = "output size not reachable by a deconvolution with these pads";
      return std::nullopt;
    }
    return p;
  }
  if (!is_explicit) {
    if (padding_code == static_cast<int32_t>(PaddingCode::SAME)) {
      same_padding(in_h, p.filter_h, p.stride_h, p.dilation_h, &p.pad_top, &p.pad_bottom);
      same_padding(in_w, p.filter_w, p.stride_w, p.dilation_w, &p.pad_left, &p.pad_right);
    }
  }
  return p;
}

std::optional<ResizeParams> parse_resize(const Model& m, const Operation& op, std::string* why) {
  const size_t n = op.inputs.size();
  ResizeParams r;
  const Operand& out = m.operands[op.outputs[0]];
  if (out.dims.size() != 4 || m.operands[op.inputs[0]].dims.size() != 4) {
    *why = "not rank 4";
    return std::nullopt;
  }
  if (!operand_is(m, op, 1, OperandType::INT32)) {
    *why = "scale form (FLOAT32 scales) not lowered";
    return std::nullopt;
  }
  r.out_h = out.dims[1];
  r.out_w = out.dims[2];
  if (is_nchw(m, op, 3)) {
    *why = "NCHW layout";
    return std::nullopt;
  }
  if (n >= 6) {
    r.align_corners = m.has_value(op.inputs[4]) && m.scalar_bool(op.inputs[4]);
    r.half_pixel_centers = m.has_value(op.inputs[5]) && m.scalar_bool(op.inputs[5]);
  }
  return r;
}

}  // namespace nn::cpu
