// The spatial ops' operand lists (engine/ops/OPS.md) decoded once, for everyone who reads
// them: the reference kernels' prepare() and run(), the CPU delegate and the Vulkan delegate.
//
//   decode_conv / decode_pool / decode_resize  validate and decode: Result<...>, errors that
//       name the input ("input 7 (stride_w) must be >= 1, got 0"); prepare() runs them, so
//       in a loaded model they cannot fail.
//   parse_window_op / parse_resize  the delegates' view of the same decoding: explicit
//       numbers (padding resolved, a transpose conv's output adjustment), nullopt with a
//       reason for the forms a delegate leaves to the reference kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nn/ir/model.h"
#include "nn/status.h"
#include "ops/conv_util.h"

namespace nn {

// CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D.
struct ConvParams {
  conv_util::ConvKind kind = conv_util::ConvKind::kConv;
  conv_util::ConvSlots form;
  uint32_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  uint32_t out_h = 0, out_w = 0, out_c = 0;
  uint32_t k_h = 0, k_w = 0;
  conv_util::AxisPadding pad_w, pad_h;  // a transpose conv's `after` may be negative (cropped)
  int32_t stride_w = 1, stride_h = 1, dil_w = 1, dil_h = 1;
  int32_t groups = 1;  // GROUPED_CONV_2D num_groups, DEPTHWISE_CONV_2D depth_multiplier
  int32_t fuse = 0;
};
// The conv kind of an op type, or nullopt for any other op.
std::optional<conv_util::ConvKind> conv_kind(OperationType type);
Result<ConvParams> decode_conv(const Model& model, const Operation& op, conv_util::ConvKind kind);

// AVERAGE_POOL_2D, MAX_POOL_2D.
struct PoolParams {
  uint32_t batch = 0, in_h = 0, in_w = 0, channels = 0, out_h = 0, out_w = 0;
  conv_util::AxisPadding pad_w, pad_h;
  int32_t stride_w = 1, stride_h = 1, filter_w = 1, filter_h = 1, fuse = 0;
};
Result<PoolParams> decode_pool(const Model& model, const Operation& op);

// RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR.
struct ResizeParams {
  uint32_t batch = 0, in_h = 0, in_w = 0, channels = 0, out_h = 0, out_w = 0;
  bool align_corners = false, half_pixel_centers = false;
  bool scale_form = false;  // out_width/out_height given as FLOAT32 scales, not INT32 sizes
};
Result<ResizeParams> decode_resize(const Model& model, const Operation& op);

// A window op (conv family or pool) in explicit numbers.
struct WindowParams {
  uint32_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  uint32_t stride_h = 1, stride_w = 1;
  uint32_t dilation_h = 1, dilation_w = 1;
  uint32_t filter_h = 1, filter_w = 1;  // kernel (conv) or window (pool)
  int32_t fuse = 0;
  uint32_t groups = 1;                          // GROUPED_CONV_2D
  uint32_t depth_multiplier = 1;                // DEPTHWISE_CONV_2D
  uint32_t adjustment_h = 0, adjustment_w = 0;  // TRANSPOSE_CONV_2D: extra output rows/cols
};
// CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D, AVERAGE_POOL_2D, MAX_POOL_2D:
// decode_conv / decode_pool's result; nullopt with the reason when that fails (NCHW layout,
// not a window op) or a transpose conv's output cannot be reached with a non-negative
// adjustment below the stride (XNNPACK's deconvolution form).
std::optional<WindowParams> parse_window_op(const Model& model, const Operation& op, std::string* why);

// decode_resize's result for the delegates, which lower the INT32-size form only.
std::optional<ResizeParams> parse_resize(const Model& model, const Operation& op, std::string* why);

}  // namespace nn
