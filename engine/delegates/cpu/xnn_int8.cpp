#include "delegates/cpu/xnn_int8.h"

#include <string>
#include <vector>

#include "ops/op_params.h"

namespace nn::cpu {
namespace {

using T = OperationType;
constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
constexpr OperandType kQ8 = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
constexpr OperandType kPerChannel = OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;

bool is_quant(OperandType t) {
  return t == kQ8 || t == kPerChannel || t == OperandType::TENSOR_QUANT8_ASYMM || t == OperandType::TENSOR_QUANT8_SYMM;
}

Status xnn_failed(const char* what, xnn_status s) {
  return Status(StatusCode::kUnsupportedOp, std::string(what) + " failed: " + xnn_status_name(s));
}

// The filter's scale per output channel (one repeated for a per-tensor filter).
std::vector<float> filter_scales(const Operand& filter, size_t channels) {
  if (filter.type == kPerChannel) return filter.channel_quant.scales;
  return std::vector<float>(channels, filter.scale);
}

// Static filter and bias of a quantized conv or FC as XNNPACK values: a qcint8 filter with
// its channel dim (0 for OHWI and FC weights, 3 for depthwise) and a qcint32 bias with
// scales input x filter[c] for per-channel filters; qint8 / qint32 for per-tensor ones.
Status define_weights(xnn_subgraph_t sg, const Model& m, const Operation& op, const StaticLookup& statics,
                      XnnValues& values, uint32_t* w, uint32_t* b) {
  const Operand& input = m.operands[op.inputs[0]];
  const Operand& filter = m.operands[op.inputs[1]];
  const bool depthwise = op.type == T::DEPTHWISE_CONV_2D;
  const size_t channel_dim = depthwise ? 3 : 0;
  const size_t channels = filter.dims[channel_dim];
  std::vector<size_t> fdims(filter.dims.begin(), filter.dims.end());
  xnn_status s;
  if (filter.type == kPerChannel) {
    s = xnn_define_channelwise_quantized_tensor_value(sg, xnn_datatype_qcint8, filter.channel_quant.scales.data(),
                                                      fdims.size(), channel_dim, fdims.data(),
                                                      statics(op.inputs[1]), XNN_INVALID_VALUE_ID, 0, w);
  } else {
    s = xnn_define_quantized_tensor_value(sg, xnn_datatype_qint8, 0, filter.scale, fdims.size(), fdims.data(),
                                          statics(op.inputs[1]), XNN_INVALID_VALUE_ID, 0, w);
  }
  if (s != xnn_status_success) return xnn_failed("defining the int8 filter", s);
  *b = XNN_INVALID_VALUE_ID;
  if (!m.has_value(op.inputs[2])) return Status::ok();
  const size_t bdims[1] = {channels};
  if (filter.type == kPerChannel) {
    std::vector<float> scales = filter_scales(filter, channels);
    for (float& v : scales) v *= input.scale;
    s = xnn_define_channelwise_quantized_tensor_value(sg, xnn_datatype_qcint32, values.keep(std::move(scales)), 1,
                                                      0, bdims, statics(op.inputs[2]), XNN_INVALID_VALUE_ID, 0, b);
  } else {
    s = xnn_define_quantized_tensor_value(sg, xnn_datatype_qint32, 0, input.scale * filter.scale, 1, bdims,
                                          statics(op.inputs[2]), XNN_INVALID_VALUE_ID, 0, b);
  }
  if (s != xnn_status_success) return xnn_failed("defining the int32 bias", s);
  return Status::ok();
}

}  // namespace

bool is_int8_op(const Model& m, const Operation& op) {
  for (uint32_t i : op.inputs)
    if (m.has_value(i) && is_quant(m.operands[i].type)) return true;
  for (uint32_t o : op.outputs)
    if (is_quant(m.operands[o].type)) return true;
  return false;
}

SupportResult xnn_int8_can_lower(const Model& m, uint32_t k, const StaticLookup& statics) {
  const Operation& op = m.operations[k];
  auto no = [](std::string why) { return SupportResult::no(std::move(why)); };
  if (op.outputs.size() != 1) return no("multi-output op");
  const Operand& in = m.operands[op.inputs[0]];
  const Operand& out = m.operands[op.outputs[0]];
  for (uint32_t d : in.dims)
    if (d == 0) return no("zero-sized tensor");
  switch (op.type) {
    case T::QUANTIZE:
      if (in.type != kF32 || out.type != kQ8) return no("QUANTIZE to " + std::string(operand_type_name(out.type)));
      return SupportResult::yes();
    case T::DEQUANTIZE:
      if (in.type != kQ8 || out.type != kF32) return no("DEQUANTIZE from " + std::string(operand_type_name(in.type)));
      return SupportResult::yes();
    case T::CONV_2D:
    case T::DEPTHWISE_CONV_2D: {
      if (in.type != kQ8 || out.type != kQ8) return no("int8 conv on other than TENSOR_QUANT8_ASYMM_SIGNED");
      const Operand& filter = m.operands[op.inputs[1]];
      if (filter.type != kPerChannel && !(filter.type == kQ8 && filter.zero_point == 0))
        return no("filter is not symmetric int8");
      if (!statics(op.inputs[1])) return no("filter is not constant");
      if (m.has_value(op.inputs[2]) && !statics(op.inputs[2])) return no("bias is not constant");
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return no(why);
      if (op.type == T::DEPTHWISE_CONV_2D && filter.dims[3] != in.dims[3] * p->depth_multiplier)
        return no("depthwise filter/depth_multiplier mismatch");
      if (op.type == T::CONV_2D && filter.dims[3] != in.dims[3]) return no("filter/input channel mismatch");
      return SupportResult::yes();
    }
    case T::FULLY_CONNECTED: {
      if (in.type != kQ8 || out.type != kQ8) return no("int8 FC on other than TENSOR_QUANT8_ASYMM_SIGNED");
      const Operand& w = m.operands[op.inputs[1]];
      if (w.type != kQ8 || w.zero_point != 0) return no("weights are not symmetric int8");
      if (!statics(op.inputs[1])) return no("weights are not constant");
      if (m.has_value(op.inputs[2]) && !statics(op.inputs[2])) return no("bias is not constant");
      return SupportResult::yes();
    }
    case T::RESIZE_BILINEAR: {
      if (in.type != kQ8 || out.type != kQ8) return no("int8 resize on other than TENSOR_QUANT8_ASYMM_SIGNED");
      if (in.scale != out.scale || in.zero_point != out.zero_point)
        return no("output quantization differs from the input's");
      std::string why;
      auto r = parse_resize(m, op, &why);
      if (!r) return no(why);
      if (r->align_corners && r->half_pixel_centers) return no("align_corners with half_pixel_centers");
      return SupportResult::yes();
    }
    case T::AVERAGE_POOL_2D:
      if (in.type != kQ8 || out.type != kQ8) return no("int8 pool on other than TENSOR_QUANT8_ASYMM_SIGNED");
      if (!is_global_mean(m, op, statics)) return no("XNNPACK's int8 average pool is global only");
      return SupportResult::yes();
    case T::MAX_POOL_2D: {
      if (in.type != kQ8 || out.type != kQ8) return no("int8 pool on other than TENSOR_QUANT8_ASYMM_SIGNED");
      if (in.scale != out.scale || in.zero_point != out.zero_point)
        return no("output quantization differs from the input's");
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return no(why);
      if (p->filter_h * p->filter_w <= 1) return no("1x1 pooling window");
      return SupportResult::yes();
    }
    case T::ADD:
    case T::MUL: {
      const Operand& b = m.operands[op.inputs[1]];
      if (in.type != kQ8 || b.type != kQ8 || out.type != kQ8) return no("int8 ADD/MUL on other than TENSOR_QUANT8_ASYMM_SIGNED");
      if (in.dims.size() > XNN_MAX_TENSOR_DIMS || b.dims.size() > XNN_MAX_TENSOR_DIMS) return no("rank");
      if (!m.operands[op.inputs[2]].is_constant()) return no("fuse code is not constant");
      return SupportResult::yes();
    }
    case T::LOGISTIC:
      if (in.type != kQ8 || out.type != kQ8) return no("int8 LOGISTIC on other than TENSOR_QUANT8_ASYMM_SIGNED");
      if (out.scale != 1.f / 256 || out.zero_point != -128) return no("output not scale 1/256, zero point -128");
      return SupportResult::yes();
    case T::RESHAPE:
      if (in.type != kQ8 || out.type != kQ8 || in.scale != out.scale || in.zero_point != out.zero_point)
        return no("int8 reshape that requantizes");
      if (out.dims.empty() || out.dims.size() > XNN_MAX_TENSOR_DIMS) return no("output rank");
      return SupportResult::yes();
    default:
      return no("no int8 XNNPACK lowering for " + std::string(operation_type_name(op.type)));
  }
}

Status xnn_int8_lower(xnn_subgraph_t sg, const Model& m, uint32_t k, const StaticLookup& statics,
                      XnnValues& values, uint32_t out_operand, float lo, float hi) {
  const Operation& op = m.operations[k];
  NN_ASSIGN_OR_RETURN(const uint32_t x, values.value(op.inputs[0]));
  NN_ASSIGN_OR_RETURN(const uint32_t y, values.value(out_operand));
  const Operand& input = m.operands[op.inputs[0]];
  xnn_status s = xnn_status_success;
  switch (op.type) {
    case T::QUANTIZE:
    case T::DEQUANTIZE:
      s = xnn_define_convert(sg, x, y, 0);
      if (s != xnn_status_success) return xnn_failed("xnn_define_convert", s);
      return Status::ok();
    case T::CONV_2D:
    case T::DEPTHWISE_CONV_2D: {
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return Status(StatusCode::kUnsupportedOp, why);
      uint32_t w = 0, b = 0;
      NN_RETURN_IF_ERROR(define_weights(sg, m, op, statics, values, &w, &b));
      const Operand& filter = m.operands[op.inputs[1]];
      const uint32_t cin = input.dims[3];
      if (op.type == T::DEPTHWISE_CONV_2D)
        s = xnn_define_depthwise_convolution_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left,
                                                p->filter_h, p->filter_w, p->stride_h, p->stride_w, p->dilation_h,
                                                p->dilation_w, p->depth_multiplier, cin, lo, hi, x, w, b, y, 0);
      else
        s = xnn_define_convolution_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left, p->filter_h,
                                      p->filter_w, p->stride_h, p->stride_w, p->dilation_h, p->dilation_w, 1, cin,
                                      filter.dims[0], lo, hi, x, w, b, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 convolution", s);
      return Status::ok();
    }
    case T::FULLY_CONNECTED: {
      uint32_t w = 0, b = 0;
      NN_RETURN_IF_ERROR(define_weights(sg, m, op, statics, values, &w, &b));
      s = xnn_define_fully_connected(sg, lo, hi, x, w, b, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 fully connected", s);
      return Status::ok();
    }
    case T::RESIZE_BILINEAR: {
      std::string why;
      auto r = parse_resize(m, op, &why);
      if (!r) return Status(StatusCode::kUnsupportedOp, why);
      const uint32_t flags =
          r->align_corners ? XNN_FLAG_ALIGN_CORNERS : (r->half_pixel_centers ? 0 : XNN_FLAG_TENSORFLOW_LEGACY_MODE);
      s = xnn_define_static_resize_bilinear_2d(sg, r->out_h, r->out_w, x, y, flags);
      if (s != xnn_status_success) return xnn_failed("int8 resize", s);
      return Status::ok();
    }
    case T::AVERAGE_POOL_2D:
      s = xnn_define_global_average_pooling_2d(sg, lo, hi, x, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 global average pool", s);
      return Status::ok();
    case T::MAX_POOL_2D: {
      std::string why;
      auto p = parse_window_op(m, op, &why);
      if (!p) return Status(StatusCode::kUnsupportedOp, why);
      s = xnn_define_max_pooling_2d(sg, p->pad_top, p->pad_right, p->pad_bottom, p->pad_left, p->filter_h,
                                    p->filter_w, p->stride_h, p->stride_w, 1, 1, lo, hi, x, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 max pool", s);
      return Status::ok();
    }
    case T::ADD:
    case T::MUL: {
      NN_ASSIGN_OR_RETURN(const uint32_t b, values.value(op.inputs[1]));
      s = op.type == T::ADD ? xnn_define_add2(sg, lo, hi, x, b, y, 0) : xnn_define_multiply2(sg, lo, hi, x, b, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 ADD/MUL", s);
      return Status::ok();
    }
    case T::LOGISTIC:
      s = xnn_define_sigmoid(sg, x, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 sigmoid", s);
      return Status::ok();
    case T::RESHAPE: {
      const Operand& out = m.operands[out_operand];
      std::vector<size_t> shape(out.dims.begin(), out.dims.end());
      s = xnn_define_static_reshape(sg, shape.size(), shape.data(), x, y, 0);
      if (s != xnn_status_success) return xnn_failed("int8 reshape", s);
      return Status::ok();
    }
    default:
      return Status(StatusCode::kUnsupportedOp,
                    "no int8 XNNPACK lowering for " + std::string(operation_type_name(op.type)));
  }
}

xnn_status xnn_int8_define_value(xnn_subgraph_t sg, const Operand& o, size_t num_dims, const size_t* dims,
                                 const void* data, uint32_t external_id, uint32_t flags, uint32_t* id) {
  if (o.type != kQ8) return xnn_status_unsupported_parameter;
  return xnn_define_quantized_tensor_value(sg, xnn_datatype_qint8, o.zero_point, o.scale, num_dims, dims, data,
                                           external_id, flags, id);
}

}  // namespace nn::cpu
