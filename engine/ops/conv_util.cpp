#include "ops/conv_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "nn/ops/registry.h"
#include "ops/tensor_util.h"

namespace nn::conv_util {

namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

}  // namespace

Result<int32_t> read_i32(const Model& model, const Operation& op, size_t index, const char* name) {
  NN_RETURN_IF_ERROR(check_scalar_input(model, op, index, OperandType::INT32, name));
  return model.scalar_i32(op.inputs[index]);
}

Result<bool> read_bool(const Model& model, const Operation& op, size_t index, const char* name) {
  NN_RETURN_IF_ERROR(check_scalar_input(model, op, index, OperandType::BOOL, name));
  return model.scalar_bool(op.inputs[index]);
}

Result<float> read_f32(const Model& model, const Operation& op, size_t index, const char* name) {
  NN_RETURN_IF_ERROR(check_scalar_input(model, op, index, OperandType::FLOAT32, name));
  const float v = model.scalar_f32(op.inputs[index]);
  if (!std::isfinite(v))
    return invalid(input_label(index, name) + " must be finite, got " + std::to_string(v));
  return v;
}

Result<int32_t> read_i32_at_least(const Model& model, const Operation& op, size_t index, const char* name,
                                  int32_t min) {
  NN_ASSIGN_OR_RETURN(int32_t v, read_i32(model, op, index, name));
  if (v < min)
    return invalid(input_label(index, name) + " must be >= " + std::to_string(min) + ", got " +
                   std::to_string(v));
  return v;
}

Result<int32_t> read_fuse(const Model& model, const Operation& op, size_t index) {
  NN_ASSIGN_OR_RETURN(int32_t v, read_i32(model, op, index, "fuse"));
  if (v < 0 || v > 3)
    return invalid(input_label(index, "fuse") + " must be a FuseCode 0..3, got " + std::to_string(v));
  return v;
}

Status check_layout_nhwc(const Model& model, const Operation& op, size_t index) {
  if (index >= op.inputs.size() || !model.has_value(op.inputs[index])) return Status::ok();
  NN_ASSIGN_OR_RETURN(bool nchw, read_bool(model, op, index, "layout"));
  if (nchw)
    return {StatusCode::kUnsupportedOp,
            input_label(index, "layout") + " is true (NCHW); the IR is NHWC only"};
  return Status::ok();
}

Result<AxisPadding> implicit_padding(int32_t scheme, int64_t in, int64_t filter, int64_t stride,
                                     int64_t dilation, const char* axis) {
  AxisPadding p;
  if (scheme == static_cast<int32_t>(PaddingCode::VALID)) return p;
  if (scheme != static_cast<int32_t>(PaddingCode::SAME))
    return invalid(std::string("padding scheme for ") + axis + " must be 1 (SAME) or 2 (VALID), got " +
                   std::to_string(scheme));
  const int64_t out = (in + stride - 1) / stride;
  const int64_t effective = (filter - 1) * dilation + 1;
  const int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
  p.before = total / 2;
  p.after = total - p.before;
  return p;
}

Result<uint32_t> window_output_size(int64_t in, int64_t filter, int64_t stride, int64_t dilation,
                                    const AxisPadding& pad, const char* axis) {
  const int64_t effective = (filter - 1) * dilation + 1;
  const int64_t padded = in + pad.before + pad.after;
  if (padded < effective)
    return invalid(std::string(axis) + ": filter extent " + std::to_string(effective) + " (filter " +
                   std::to_string(filter) + ", dilation " + std::to_string(dilation) +
                   ") exceeds padded input " + std::to_string(padded));
  const int64_t out = (padded - effective) / stride + 1;
  if (out >= (int64_t{1} << 24))
    return invalid(std::string(axis) + ": output size " + std::to_string(out) + " too large");
  return static_cast<uint32_t>(out);
}

AxisPadding transpose_conv_implicit_padding(int32_t scheme, int64_t out, int64_t filter, int64_t stride) {
  AxisPadding p;
  if (scheme != static_cast<int32_t>(PaddingCode::SAME)) return p;
  // NNAPI: treat the output as the input of the matching forward conv.
  const int64_t forward_out = (out + stride - 1) / stride;
  const int64_t needed = (forward_out - 1) * stride + filter;
  if (needed > out) p.before = (needed - out) / 2;
  p.after = needed - out - p.before;  // may be negative: the tail is cropped
  return p;
}

bool is_quant8(OperandType type) {
  return type == OperandType::TENSOR_QUANT8_ASYMM || type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
}

Status check_quant_params(const Operand& operand, const std::string& label) {
  if (!is_quant8(operand.type)) return Status::ok();
  if (!(operand.scale > 0.f) || !std::isfinite(operand.scale))
    return invalid(label + " is " + std::string(operand_type_name(operand.type)) + " with scale " +
                   std::to_string(operand.scale) + ", must be > 0");
  const int32_t lo = operand.type == OperandType::TENSOR_QUANT8_ASYMM ? 0 : -128;
  const int32_t hi = operand.type == OperandType::TENSOR_QUANT8_ASYMM ? 255 : 127;
  if (operand.zero_point < lo || operand.zero_point > hi)
    return invalid(label + " zero point " + std::to_string(operand.zero_point) + " is outside [" +
                   std::to_string(lo) + "," + std::to_string(hi) + "]");
  return Status::ok();
}

void set_output_like(Model& model, const Operation& op, const Operand& like, Dims dims) {
  Operand& out = model.operands[op.outputs[0]];
  const bool keep_declared = is_quant8(like.type) && out.type == like.type && out.scale > 0.f;
  if (!keep_declared) {
    out.type = like.type;
    out.scale = like.scale;
    out.zero_point = like.zero_point;
  }
  out.channel_quant = {};
  out.dims = std::move(dims);
}

FloatInput::FloatInput(const Operand& operand, const void* data) {
  const size_t n = num_elements(operand.dims);
  switch (operand.type) {
    case OperandType::TENSOR_QUANT8_ASYMM: {
      storage_.resize(n);
      const uint8_t* q = static_cast<const uint8_t*>(data);
      for (size_t i = 0; i < n; ++i) storage_[i] = operand.scale * (int32_t(q[i]) - operand.zero_point);
      data_ = storage_.data();
      return;
    }
    case OperandType::TENSOR_QUANT8_ASYMM_SIGNED: {
      storage_.resize(n);
      const int8_t* q = static_cast<const int8_t*>(data);
      for (size_t i = 0; i < n; ++i) storage_[i] = operand.scale * (int32_t(q[i]) - operand.zero_point);
      data_ = storage_.data();
      return;
    }
    case OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL: {
      storage_.resize(n);
      const int8_t* q = static_cast<const int8_t*>(data);
      const Dims& d = operand.dims;
      const uint32_t axis = operand.channel_quant.channel_dim;
      size_t inner = 1;
      for (size_t k = axis + 1; k < d.size(); ++k) inner *= d[k];
      const size_t channels = axis < d.size() ? d[axis] : 1;
      for (size_t i = 0; i < n; ++i)
        storage_[i] = operand.channel_quant.scales[(i / inner) % channels] * q[i];
      data_ = storage_.data();
      return;
    }
    default:  // TENSOR_FLOAT32: prepare() admitted nothing else
      data_ = static_cast<const float*>(data);
      return;
  }
}

FloatOutput::FloatOutput(const Operand& operand, void* data) : operand_(operand), out_(data) {
  if (operand.type == OperandType::TENSOR_FLOAT32) {
    data_ = static_cast<float*>(data);
  } else {
    storage_.resize(num_elements(operand.dims));
    data_ = storage_.data();
  }
}

void FloatOutput::finish(int32_t fuse_code) {
  const size_t n = num_elements(operand_.dims);
  apply_fused_activation(fuse_code, data_, n);
  if (operand_.type == OperandType::TENSOR_FLOAT32) return;
  const bool is_unsigned = operand_.type == OperandType::TENSOR_QUANT8_ASYMM;
  const float lo = is_unsigned ? 0.f : -128.f, hi = is_unsigned ? 255.f : 127.f;
  for (size_t i = 0; i < n; ++i) {
    float q = std::round(data_[i] / operand_.scale) + static_cast<float>(operand_.zero_point);
    q = std::clamp(std::isnan(q) ? 0.f : q, lo, hi);
    if (is_unsigned)
      static_cast<uint8_t*>(out_)[i] = static_cast<uint8_t>(q);
    else
      static_cast<int8_t*>(out_)[i] = static_cast<int8_t>(q);
  }
}

std::vector<float> bias_as_float(const Operand* bias, const void* bias_data, const Operand& input,
                                 const Operand& filter, size_t channels) {
  std::vector<float> out(channels, 0.f);
  if (!bias || !bias_data) return out;
  if (bias->type == OperandType::TENSOR_FLOAT32) {
    std::memcpy(out.data(), bias_data, channels * sizeof(float));
    return out;
  }
  const int32_t* q = static_cast<const int32_t*>(bias_data);
  for (size_t c = 0; c < channels; ++c) {
    const float filter_scale = filter.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL
                                   ? filter.channel_quant.scales[c]
                                   : filter.scale;
    out[c] = static_cast<float>(q[c]) * input.scale * filter_scale;
  }
  return out;
}

Status check_bias(const Model& model, const Operation& op, size_t index, size_t channels) {
  const Operand& input = model.operands[op.inputs[0]];
  const bool quant = is_quant8(input.type);
  NN_RETURN_IF_ERROR(check_tensor_type(
      model, op, index, {quant ? OperandType::TENSOR_INT32 : OperandType::TENSOR_FLOAT32}, "bias"));
  const Operand& bias = model.operands[op.inputs[index]];
  if (bias.dims.size() != 1 || bias.dims[0] != channels)
    return invalid(input_label(index, "bias") + " must be [" + std::to_string(channels) + "], got " +
                   dims_to_string(bias.dims));
  if (!quant) return Status::ok();
  if (bias.zero_point != 0)
    return invalid(input_label(index, "bias") + " zero point must be 0, got " +
                   std::to_string(bias.zero_point));
  const Operand& filter = model.operands[op.inputs[1]];
  if (filter.type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL) return Status::ok();  // scale unused
  const double expected = double(input.scale) * double(filter.scale);
  if (!(std::fabs(bias.scale - expected) <= 1e-4 * expected))
    return invalid(input_label(index, "bias") + " scale " + std::to_string(bias.scale) +
                   " must equal input scale x filter scale = " + std::to_string(expected));
  return Status::ok();
}

Status check_filter_type(const Model& model, const Operation& op, size_t index, const char* name,
                         int per_channel_dim) {
  const Operand& input = model.operands[op.inputs[0]];
  if (!is_quant8(input.type)) return check_tensor_type(model, op, index, {input.type}, name);
  if (per_channel_dim >= 0)
    NN_RETURN_IF_ERROR(
        check_tensor_type(model, op, index, {input.type, OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL}, name));
  else
    NN_RETURN_IF_ERROR(check_tensor_type(model, op, index, {input.type}, name));
  const Operand& filter = model.operands[op.inputs[index]];
  if (filter.type != OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL)
    return check_quant_params(filter, input_label(index, name));
  const ChannelQuant& cq = filter.channel_quant;
  if (cq.channel_dim != static_cast<uint32_t>(per_channel_dim) || cq.channel_dim >= filter.dims.size())
    return invalid(input_label(index, name) + " per-channel quantization must be along dim " +
                   std::to_string(per_channel_dim) + ", got dim " + std::to_string(cq.channel_dim));
  if (cq.scales.size() != filter.dims[cq.channel_dim])
    return invalid(input_label(index, name) + " has " + std::to_string(cq.scales.size()) +
                   " per-channel scales for " + std::to_string(filter.dims[cq.channel_dim]) + " channels");
  for (size_t c = 0; c < cq.scales.size(); ++c)
    if (!(cq.scales[c] > 0.f) || !std::isfinite(cq.scales[c]))
      return invalid(input_label(index, name) + " per-channel scale " + std::to_string(c) + " is " +
                     std::to_string(cq.scales[c]) + ", must be > 0");
  return Status::ok();
}

ConvSlots conv_slots(ConvKind kind, bool explicit_padding) {
  ConvSlots f;
  f.explicit_padding = explicit_padding;
  size_t i = 3;
  if (kind == ConvKind::kTranspose && !explicit_padding) f.output_shape = i++;
  f.padding = i;
  i += explicit_padding ? 4 : 1;
  f.stride = i;
  i += 2;
  if (kind == ConvKind::kDepthwise || kind == ConvKind::kGrouped) f.groups = i++;
  f.fuse = i++;
  f.layout = i++;
  if (kind == ConvKind::kConv || kind == ConvKind::kDepthwise) f.dilation = i;
  return f;
}

namespace {
// Input counts a form admits: layout and dilation are optional for CONV_2D/DEPTHWISE_CONV_2D.
bool slots_admit(ConvKind kind, const ConvSlots& f, size_t n) {
  if (kind == ConvKind::kGrouped || kind == ConvKind::kTranspose) return n == f.layout + 1;
  return n == f.layout || n == f.layout + 1 || n == f.dilation + 2;
}
}  // namespace

Result<ConvSlots> pick_conv_slots(const Model& m, const Operation& op, ConvKind kind) {
  const size_t n = op.inputs.size();
  const ConvSlots ex = conv_slots(kind, true), im = conv_slots(kind, false);
  const bool ex_ok = slots_admit(kind, ex, n), im_ok = slots_admit(kind, im, n);
  if (ex_ok && im_ok) {
    // Same count for both forms (CONV_2D 10, DEPTHWISE_CONV_2D 11): NNAPI tells them apart
    // by the implicit form's layout slot, a BOOL there and an INT32 in the explicit form.
    return m.operands[op.inputs[im.layout]].type == OperandType::BOOL ? im : ex;
  }
  if (ex_ok) return ex;
  if (im_ok) return im;
  auto counts = [&](const ConvSlots& f) {
    if (kind == ConvKind::kGrouped || kind == ConvKind::kTranspose) return std::to_string(f.layout + 1);
    return std::to_string(f.layout) + ", " + std::to_string(f.layout + 1) + " or " +
           std::to_string(f.dilation + 2);
  };
  return Status(StatusCode::kInvalidModel, "expects " + counts(ex) + " inputs (explicit padding) or " +
                                               counts(im) + " (implicit padding), got " + std::to_string(n));
}

Result<const Operand*> nhwc_activation_input(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0,
                                       {OperandType::TENSOR_FLOAT32, OperandType::TENSOR_QUANT8_ASYMM,
                                        OperandType::TENSOR_QUANT8_ASYMM_SIGNED},
                                       "input"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 4, 4, "input"));
  const Operand& input = m.operands[op.inputs[0]];
  NN_RETURN_IF_ERROR(check_quant_params(input, input_label(0, "input")));
  for (uint32_t d : input.dims)
    if (d == 0)
      return Status(StatusCode::kInvalidModel,
                    input_label(0, "input") + " has a zero dim " + dims_to_string(input.dims));
  return &input;
}

}  // namespace nn::conv_util
