// TFLite operators -> IR operations, one handler per operator family. Every IR op gets
// NNAPI's exact operand list (engine/ops/OPS.md): scalar parameters become constant
// operands. Anything not handled here is refused by name.
#include <algorithm>
#include <cstring>

#include "import/tflite/tflite_converter.h"
#include "import/tflite/tflite_importer.h"

namespace nn::tflite_import {

namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}
Status unsupported(std::string message) {
  return {StatusCode::kUnsupportedOp, std::move(message)};
}

// TFLite Padding -> NNAPI PaddingCode. TF's SAME (extra pixel bottom/right) is NNAPI's SAME.
Result<int32_t> padding_code(tflite::Padding p) {
  switch (p) {
    case tflite::Padding_SAME:
      return static_cast<int32_t>(PaddingCode::SAME);
    case tflite::Padding_VALID:
      return static_cast<int32_t>(PaddingCode::VALID);
  }
  return invalid("unknown padding " + std::to_string(static_cast<int>(p)));
}

Status check_strides(int32_t w, int32_t h) {
  if (w < 1 || h < 1)
    return invalid("strides must be >= 1, got w=" + std::to_string(w) + " h=" + std::to_string(h));
  return Status::ok();
}

constexpr auto kNoActivation = tflite::ActivationFunctionType_NONE;

}  // namespace

// ---------------------------------------------------------------------------------------
// Helpers

int32_t Converter::in(size_t i) const {
  if (!cur_->inputs() || i >= cur_->inputs()->size()) return -1;
  return cur_->inputs()->Get(static_cast<uint32_t>(i));
}

int32_t Converter::out(size_t i) const {
  if (!cur_->outputs() || i >= cur_->outputs()->size()) return -1;
  return cur_->outputs()->Get(static_cast<uint32_t>(i));
}

Status Converter::expect_io(size_t min_in, size_t max_in, size_t outs) const {
  if (num_in() < min_in || num_in() > max_in)
    return invalid(
        "takes " +
        (min_in == max_in ? std::to_string(min_in) : std::to_string(min_in) + "-" + std::to_string(max_in)) +
        " inputs, got " + std::to_string(num_in()));
  if (num_out() != outs)
    return invalid("has " + std::to_string(outs) + " outputs, got " + std::to_string(num_out()));
  for (size_t i = 0; i < num_out(); ++i)
    NN_RETURN_IF_ERROR(check_tensor_index(out(i)).with_context("output " + std::to_string(i)));
  return Status::ok();
}

Result<uint32_t> Converter::in_operand(size_t i, const char* what) {
  const int32_t t = in(i);
  if (t == -1) return invalid("input " + std::to_string(i) + " (" + what + ") is missing");
  Result<uint32_t> r = operand(t);
  if (!r.is_ok()) return r.status().with_context("input " + std::to_string(i) + " (" + what + ")");
  return r;
}

uint32_t Converter::temp_like(uint32_t like, const std::string& suffix) {
  const Operand& src = m_.operands[like];
  Operand o;
  o.type = src.type;
  o.dims = src.dims;
  o.scale = src.scale;
  o.zero_point = src.zero_point;
  o.name = src.name + suffix;
  return m_.add_operand(std::move(o));
}

Result<Converter::Activation> Converter::activation(tflite::ActivationFunctionType act,
                                                    bool op_takes_fuse) const {
  auto fused_or_post = [&](FuseCode code, OperationType op) -> Activation {
    if (op_takes_fuse) return {static_cast<int32_t>(code), std::nullopt};
    return {0, op};
  };
  switch (act) {
    case tflite::ActivationFunctionType_NONE:
      return Activation{};
    case tflite::ActivationFunctionType_RELU:
      return fused_or_post(FuseCode::RELU, OperationType::RELU);
    case tflite::ActivationFunctionType_RELU_N1_TO_1:
      return fused_or_post(FuseCode::RELU1, OperationType::RELU1);
    case tflite::ActivationFunctionType_RELU6:
      return fused_or_post(FuseCode::RELU6, OperationType::RELU6);
    case tflite::ActivationFunctionType_TANH:
      return Activation{0, OperationType::TANH};
    default:
      break;
  }
  const char* name = tflite::EnumNameActivationFunctionType(act);
  return unsupported(std::string("fused activation ") + (name && *name ? name : std::to_string(act).c_str()) +
                     " is not supported");
}

Status Converter::emit(OperationType type, std::vector<uint32_t> inputs, std::vector<int32_t> out_tensors,
                       std::optional<OperationType> post) {
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < out_tensors.size(); ++i) {
    Result<uint32_t> o = output_operand(out_tensors[i]);
    if (!o.is_ok()) return o.status().with_context("output " + std::to_string(i));
    outs.push_back(o.value());
  }
  if (!post) {
    m_.add_operation(type, std::move(inputs), std::move(outs));
    return Status::ok();
  }
  const uint32_t final_out = outs[0];
  const uint32_t before_activation = temp_like(final_out, "/before_activation");
  outs[0] = before_activation;
  m_.add_operation(type, std::move(inputs), std::move(outs));
  m_.add_operation(*post, {before_activation}, {final_out});
  return Status::ok();
}

Result<uint32_t> Converter::zero_bias(int32_t filter_tensor, uint32_t channels_dim, const char* what) {
  NN_ASSIGN_OR_RETURN(uint32_t filter, operand(filter_tensor));
  const Operand& f = m_.operands[filter];
  if (f.type != OperandType::TENSOR_FLOAT32)
    return unsupported(std::string(what) + " without a bias needs a float32 filter, got " +
                       std::string(operand_type_name(f.type)));
  if (channels_dim >= f.dims.size())
    return invalid(std::string(what) + ": filter " + dims_to_string(f.dims) + " has no dimension " +
                   std::to_string(channels_dim));
  const uint32_t n = f.dims[channels_dim];
  std::vector<float> zeros(n, 0.f);
  return m_.add_constant_f32({n}, zeros, f.name + "/zero_bias");
}

Result<int32_t> Converter::axis_scalar(int32_t t, const char* what) const {
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> v, const_ints(t, what));
  if (v.size() != 1)
    return invalid(std::string(what) + " must hold one value, got " + std::to_string(v.size()));
  return v[0];
}

// ---------------------------------------------------------------------------------------
// Families

Status Converter::unary(OperationType type) {
  NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  return emit(type, {x}, {out(0)});
}

Status Converter::binary(OperationType type) {
  NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
  NN_ASSIGN_OR_RETURN(uint32_t a, in_operand(0, "a"));
  NN_ASSIGN_OR_RETURN(uint32_t b, in_operand(1, "b"));
  return emit(type, {a, b}, {out(0)});
}

Status Converter::binary_fused(OperationType type, tflite::ActivationFunctionType act) {
  NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
  NN_ASSIGN_OR_RETURN(uint32_t a, in_operand(0, "a"));
  NN_ASSIGN_OR_RETURN(uint32_t b, in_operand(1, "b"));
  NN_ASSIGN_OR_RETURN(Activation fa, activation(act, true));
  return emit(type, {a, b, m_.add_scalar_i32(fa.fuse)}, {out(0)}, fa.post);
}

Status Converter::conv2d(const tflite::Conv2DOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(2, 3, 1));
  if (!o) return invalid("missing Conv2DOptions");
  NN_RETURN_IF_ERROR(check_strides(o->stride_w(), o->stride_h()));
  NN_ASSIGN_OR_RETURN(int32_t padding, padding_code(o->padding()));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(uint32_t filter, in_operand(1, "filter"));
  uint32_t bias;
  if (in(2) >= 0) {
    NN_ASSIGN_OR_RETURN(bias, in_operand(2, "bias"));
  } else {
    NN_ASSIGN_OR_RETURN(bias, zero_bias(in(1), 0, "CONV_2D"));
  }
  NN_ASSIGN_OR_RETURN(Activation act, activation(o->fused_activation_function(), true));
  const Dims& xd = m_.operands[x].dims;
  const Dims& fd = m_.operands[filter].dims;
  // TFLite allows a filter with fewer input channels than the input: a grouped convolution.
  if (xd.size() == 4 && fd.size() == 4 && fd[3] != 0 && xd[3] != fd[3] && xd[3] % fd[3] == 0) {
    if (o->dilation_w_factor() != 1 || o->dilation_h_factor() != 1)
      return unsupported("grouped convolution with dilation");
    const int32_t groups = static_cast<int32_t>(xd[3] / fd[3]);
    return emit(OperationType::GROUPED_CONV_2D,
                {x, filter, bias, m_.add_scalar_i32(padding), m_.add_scalar_i32(o->stride_w()),
                 m_.add_scalar_i32(o->stride_h()), m_.add_scalar_i32(groups), m_.add_scalar_i32(act.fuse),
                 m_.add_scalar_bool(false)},
                {out(0)}, act.post);
  }
  std::vector<uint32_t> ins = {x,
                               filter,
                               bias,
                               m_.add_scalar_i32(padding),
                               m_.add_scalar_i32(o->stride_w()),
                               m_.add_scalar_i32(o->stride_h()),
                               m_.add_scalar_i32(act.fuse)};
  if (o->dilation_w_factor() != 1 || o->dilation_h_factor() != 1) {
    ins.push_back(m_.add_scalar_bool(false));
    ins.push_back(m_.add_scalar_i32(o->dilation_w_factor()));
    ins.push_back(m_.add_scalar_i32(o->dilation_h_factor()));
  }
  return emit(OperationType::CONV_2D, std::move(ins), {out(0)}, act.post);
}

Status Converter::depthwise_conv2d(const tflite::DepthwiseConv2DOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(2, 3, 1));
  if (!o) return invalid("missing DepthwiseConv2DOptions");
  NN_RETURN_IF_ERROR(check_strides(o->stride_w(), o->stride_h()));
  NN_ASSIGN_OR_RETURN(int32_t padding, padding_code(o->padding()));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(uint32_t filter, in_operand(1, "filter"));
  uint32_t bias;
  if (in(2) >= 0) {
    NN_ASSIGN_OR_RETURN(bias, in_operand(2, "bias"));
  } else {
    NN_ASSIGN_OR_RETURN(bias, zero_bias(in(1), 3, "DEPTHWISE_CONV_2D"));
  }
  NN_ASSIGN_OR_RETURN(Activation act, activation(o->fused_activation_function(), true));
  // Newer converters leave depth_multiplier stale (TFLite ignores it): derive it from the shapes.
  int32_t multiplier = o->depth_multiplier();
  const Dims& xd = m_.operands[x].dims;
  const Dims& fd = m_.operands[filter].dims;
  if (xd.size() == 4 && fd.size() == 4 && xd[3] != 0 && fd[3] % xd[3] == 0)
    multiplier = static_cast<int32_t>(fd[3] / xd[3]);
  std::vector<uint32_t> ins = {x,
                               filter,
                               bias,
                               m_.add_scalar_i32(padding),
                               m_.add_scalar_i32(o->stride_w()),
                               m_.add_scalar_i32(o->stride_h()),
                               m_.add_scalar_i32(multiplier),
                               m_.add_scalar_i32(act.fuse)};
  if (o->dilation_w_factor() != 1 || o->dilation_h_factor() != 1) {
    ins.push_back(m_.add_scalar_bool(false));
    ins.push_back(m_.add_scalar_i32(o->dilation_w_factor()));
    ins.push_back(m_.add_scalar_i32(o->dilation_h_factor()));
  }
  return emit(OperationType::DEPTHWISE_CONV_2D, std::move(ins), {out(0)}, act.post);
}

Status Converter::pool2d(OperationType type, const tflite::Pool2DOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
  if (!o) return invalid("missing Pool2DOptions");
  NN_RETURN_IF_ERROR(check_strides(o->stride_w(), o->stride_h()));
  if (o->filter_width() < 1 || o->filter_height() < 1)
    return invalid("filter size must be >= 1, got " + std::to_string(o->filter_width()) + "x" +
                   std::to_string(o->filter_height()));
  NN_ASSIGN_OR_RETURN(int32_t padding, padding_code(o->padding()));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(Activation act, activation(o->fused_activation_function(), true));
  return emit(type,
              {x, m_.add_scalar_i32(padding), m_.add_scalar_i32(o->stride_w()),
               m_.add_scalar_i32(o->stride_h()), m_.add_scalar_i32(o->filter_width()),
               m_.add_scalar_i32(o->filter_height()), m_.add_scalar_i32(act.fuse)},
              {out(0)}, act.post);
}

Status Converter::transpose_conv(const tflite::TransposeConvOptions* o) {
  // TFLite order: output_shape, weights [Cout, H, W, Cin], input, [bias].
  NN_RETURN_IF_ERROR(expect_io(3, 4, 1));
  if (!o) return invalid("missing TransposeConvOptions");
  NN_RETURN_IF_ERROR(check_strides(o->stride_w(), o->stride_h()));
  NN_ASSIGN_OR_RETURN(int32_t padding, padding_code(o->padding()));
  NN_ASSIGN_OR_RETURN(uint32_t output_shape, in_operand(0, "output_shape"));
  NN_ASSIGN_OR_RETURN(uint32_t filter, in_operand(1, "weights"));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(2, "input"));
  uint32_t bias;
  if (in(3) >= 0) {
    NN_ASSIGN_OR_RETURN(bias, in_operand(3, "bias"));
  } else {
    NN_ASSIGN_OR_RETURN(bias, zero_bias(in(1), 0, "TRANSPOSE_CONV"));
  }
  NN_ASSIGN_OR_RETURN(Activation act, activation(o->fused_activation_function(), true));
  return emit(OperationType::TRANSPOSE_CONV_2D,
              {x, filter, bias, output_shape, m_.add_scalar_i32(padding), m_.add_scalar_i32(o->stride_w()),
               m_.add_scalar_i32(o->stride_h()), m_.add_scalar_i32(act.fuse), m_.add_scalar_bool(false)},
              {out(0)}, act.post);
}

// MediaPipe's Convolution2DTransposeBias: inputs input, weights [Cout, H, W, Cin], bias;
// custom_options are 12 raw bytes, int32 little-endian {padding, stride_w, stride_h} with
// padding as TfLitePadding (1 SAME, 2 VALID). Output: in*stride (SAME) or
// (in-1)*stride + k (VALID), which is what the file declares; we check it.
Status Converter::transpose_conv_bias_custom() {
  NN_RETURN_IF_ERROR(expect_io(3, 3, 1));
  const auto* opts = cur_->custom_options();
  if (!opts || opts->size() != 12)
    return invalid("custom_options must be 12 bytes {padding, stride_w, stride_h}, got " +
                   std::to_string(opts ? opts->size() : 0));
  int32_t params[3];
  std::memcpy(params, opts->data(), 12);
  const int32_t padding = params[0], stride_w = params[1], stride_h = params[2];
  if (padding != 1 && padding != 2)
    return invalid("padding " + std::to_string(padding) + " is neither SAME (1) nor VALID (2)");
  NN_RETURN_IF_ERROR(check_strides(stride_w, stride_h));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(uint32_t filter, in_operand(1, "weights"));
  NN_ASSIGN_OR_RETURN(uint32_t bias, in_operand(2, "bias"));
  NN_ASSIGN_OR_RETURN(Dims out_dims, tensor_dims(out(0)));
  const Dims xd = m_.operands[x].dims, fd = m_.operands[filter].dims;
  if (out_dims.size() != 4 || xd.size() != 4 || fd.size() != 4)
    return invalid("input " + dims_to_string(xd) + ", weights " + dims_to_string(fd) + " and output " +
                   dims_to_string(out_dims) + " must all be rank 4");
  auto expected = [&](uint32_t in_size, uint32_t k, int32_t stride) {
    return padding == 1 ? in_size * static_cast<uint32_t>(stride)
                        : (in_size - 1) * static_cast<uint32_t>(stride) + k;
  };
  if (out_dims[1] != expected(xd[1], fd[1], stride_h) || out_dims[2] != expected(xd[2], fd[2], stride_w))
    return invalid("declared output " + dims_to_string(out_dims) + " does not match input " +
                   dims_to_string(xd) + ", kernel " + std::to_string(fd[1]) + "x" + std::to_string(fd[2]) +
                   ", strides " + std::to_string(stride_w) + "," + std::to_string(stride_h));
  std::vector<int32_t> shape(out_dims.begin(), out_dims.end());
  const uint32_t output_shape = m_.add_constant_i32({4}, shape, m_.operands[x].name + "/output_shape");
  return emit(OperationType::TRANSPOSE_CONV_2D,
              {x, filter, bias, output_shape, m_.add_scalar_i32(padding), m_.add_scalar_i32(stride_w),
               m_.add_scalar_i32(stride_h), m_.add_scalar_i32(0), m_.add_scalar_bool(false)},
              {out(0)});
}

Status Converter::fully_connected(const tflite::FullyConnectedOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(2, 3, 1));
  if (o && o->weights_format() != tflite::FullyConnectedOptionsWeightsFormat_DEFAULT)
    return unsupported("shuffled weights format");
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(uint32_t weights, in_operand(1, "weights"));
  uint32_t b;
  if (in(2) >= 0) {
    NN_ASSIGN_OR_RETURN(b, in_operand(2, "bias"));
  } else {
    b = m_.add_no_value();
  }
  NN_ASSIGN_OR_RETURN(Activation act, activation(o ? o->fused_activation_function() : kNoActivation, true));
  NN_ASSIGN_OR_RETURN(Dims out_dims, tensor_dims(out(0)));
  // keep_num_dims: TFLite keeps the leading dims ([.., units]); NNAPI's output is 2-D.
  if (o && o->keep_num_dims() && out_dims.size() != 2) {
    if (act.post) return unsupported("keep_num_dims with a TANH activation");
    NN_ASSIGN_OR_RETURN(uint32_t final_out, output_operand(out(0)));
    const uint32_t units = out_dims.empty() ? 1 : out_dims.back();
    const uint32_t flat =
        m_.add_tensor(m_.operands[final_out].type,
                      {units ? static_cast<uint32_t>(num_elements(out_dims) / units) : 0, units},
                      m_.operands[final_out].name + "/2d");
    m_.operands[flat].scale = m_.operands[final_out].scale;
    m_.operands[flat].zero_point = m_.operands[final_out].zero_point;
    m_.add_operation(OperationType::FULLY_CONNECTED, {x, weights, b, m_.add_scalar_i32(act.fuse)}, {flat});
    std::vector<int32_t> shape(out_dims.begin(), out_dims.end());
    const uint32_t shape_op = m_.add_constant_i32({static_cast<uint32_t>(shape.size())}, shape);
    m_.add_operation(OperationType::RESHAPE, {flat, shape_op}, {final_out});
    return Status::ok();
  }
  return emit(OperationType::FULLY_CONNECTED, {x, weights, b, m_.add_scalar_i32(act.fuse)}, {out(0)},
              act.post);
}

Status Converter::resize(OperationType type, bool align_corners, bool half_pixel_centers) {
  NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
  if (align_corners && half_pixel_centers)
    return invalid("align_corners and half_pixel_centers are both set");
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> size, const_ints(in(1), "size"));
  if (size.size() != 2 || size[0] < 1 || size[1] < 1)
    return invalid("size must be two positive values {height, width}");
  return emit(type,
              {x, m_.add_scalar_i32(size[1]), m_.add_scalar_i32(size[0]), m_.add_scalar_bool(false),
               m_.add_scalar_bool(align_corners), m_.add_scalar_bool(half_pixel_centers)},
              {out(0)});
}

Status Converter::reduce(OperationType type, const tflite::ReducerOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> axes, const_ints(in(1), "axes"));
  const uint32_t axes_op = m_.add_constant_i32({static_cast<uint32_t>(axes.size())}, axes);
  const bool keep = o && o->keep_dims();
  // NNAPI's MEAN takes keep_dims as INT32; the REDUCE_* ops take a BOOL.
  const uint32_t keep_op =
      type == OperationType::MEAN ? m_.add_scalar_i32(keep ? 1 : 0) : m_.add_scalar_bool(keep);
  return emit(type, {x, axes_op, keep_op}, {out(0)});
}

Status Converter::reshape(const tflite::ReshapeOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(1, 2, 1));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  // Target shape: the constant shape input, else the options, else the declared output.
  std::vector<int32_t> shape;
  if (in(1) >= 0 && is_constant(in(1))) {
    NN_ASSIGN_OR_RETURN(shape, const_ints(in(1), "shape"));
  } else if (o && o->new_shape() && in(1) < 0) {
    shape.assign(o->new_shape()->begin(), o->new_shape()->end());
  } else {
    NN_ASSIGN_OR_RETURN(Dims dims, tensor_dims(out(0)));
    shape.assign(dims.begin(), dims.end());
  }
  const uint32_t shape_op = m_.add_constant_i32({static_cast<uint32_t>(shape.size())}, shape);
  return emit(OperationType::RESHAPE, {x, shape_op}, {out(0)});
}

Status Converter::concatenation(const tflite::ConcatenationOptions* o) {
  if (num_in() < 1 || num_out() != 1) return invalid("takes at least 1 input and 1 output");
  NN_RETURN_IF_ERROR(check_tensor_index(out(0)));
  std::vector<uint32_t> ins;
  for (size_t i = 0; i < num_in(); ++i) {
    NN_ASSIGN_OR_RETURN(uint32_t t, in_operand(i, "value"));
    ins.push_back(t);
  }
  int32_t axis = o ? o->axis() : 0;
  if (axis < 0) axis += static_cast<int32_t>(m_.operands[ins[0]].dims.size());
  NN_ASSIGN_OR_RETURN(Activation act, activation(o ? o->fused_activation_function() : kNoActivation, false));
  ins.push_back(m_.add_scalar_i32(axis));
  return emit(OperationType::CONCATENATION, std::move(ins), {out(0)}, act.post);
}

Status Converter::strided_slice(const tflite::StridedSliceOptions* o) {
  NN_RETURN_IF_ERROR(expect_io(4, 4, 1));
  if (o && (o->ellipsis_mask() || o->new_axis_mask())) return unsupported("ellipsis_mask / new_axis_mask");
  if (o && o->offset()) return unsupported("offset=true");
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  NN_ASSIGN_OR_RETURN(uint32_t begin, in_operand(1, "begin"));
  NN_ASSIGN_OR_RETURN(uint32_t end, in_operand(2, "end"));
  NN_ASSIGN_OR_RETURN(uint32_t strides, in_operand(3, "strides"));
  return emit(OperationType::STRIDED_SLICE,
              {x, begin, end, strides, m_.add_scalar_i32(o ? o->begin_mask() : 0),
               m_.add_scalar_i32(o ? o->end_mask() : 0), m_.add_scalar_i32(o ? o->shrink_axis_mask() : 0)},
              {out(0)});
}

// UNPACK has no NNAPI op: SPLIT along the axis into `num` slices of size 1, then RESHAPE
// each slice to drop the axis. With num == 1 (an LSTM unrolled over one time step) the
// split is the identity and only the RESHAPE is emitted.
Status Converter::unpack(const tflite::UnpackOptions* o) {
  if (num_in() != 1 || num_out() < 1) return invalid("takes 1 input and at least 1 output");
  for (size_t i = 0; i < num_out(); ++i)
    NN_RETURN_IF_ERROR(check_tensor_index(out(i)).with_context("output " + std::to_string(i)));
  NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
  const Dims xd = m_.operands[x].dims;
  const int32_t rank = static_cast<int32_t>(xd.size());
  int32_t axis = o ? o->axis() : 0;
  if (axis < 0) axis += rank;
  if (rank < 1 || axis < 0 || axis >= rank)
    return invalid("axis " + std::to_string(o ? o->axis() : 0) + " out of range for input " + dims_to_string(xd));
  const uint32_t num = xd[static_cast<size_t>(axis)];
  if (num != num_out() || (o && o->num() != 0 && static_cast<uint32_t>(o->num()) != num))
    return invalid("input " + dims_to_string(xd) + " has " + std::to_string(num) + " slices along axis " +
                   std::to_string(axis) + ", but the op has " + std::to_string(num_out()) + " outputs (num " +
                   std::to_string(o ? o->num() : 0) + ")");
  Dims slice_dims = xd;
  slice_dims[static_cast<size_t>(axis)] = 1;
  std::vector<int32_t> out_shape;
  for (int32_t d = 0; d < rank; ++d)
    if (d != axis) out_shape.push_back(static_cast<int32_t>(xd[static_cast<size_t>(d)]));
  std::vector<uint32_t> slices;
  if (num == 1) {
    slices.push_back(x);
  } else {
    for (uint32_t i = 0; i < num; ++i) {
      const uint32_t t = temp_like(x, "/unpack_" + std::to_string(i));
      m_.operands[t].dims = slice_dims;
      slices.push_back(t);
    }
    m_.add_operation(OperationType::SPLIT,
                     {x, m_.add_scalar_i32(axis), m_.add_scalar_i32(static_cast<int32_t>(num))}, slices);
  }
  for (uint32_t i = 0; i < num; ++i) {
    NN_ASSIGN_OR_RETURN(uint32_t result, output_operand(out(i)));
    const uint32_t shape = m_.add_constant_i32({static_cast<uint32_t>(out_shape.size())}, out_shape);
    m_.add_operation(OperationType::RESHAPE, {slices[i], shape}, {result});
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Dispatch

Status Converter::convert_op(const tflite::Operator& op) {
  refused_by_name_ = false;
  const auto* codes = fb_.operator_codes();
  if (!codes || op.opcode_index() >= codes->size())
    return invalid("opcode index " + std::to_string(op.opcode_index()) + " out of range (model has " +
                   std::to_string(codes ? codes->size() : 0) + " operator codes)");
  const tflite::OperatorCode& oc = *codes->Get(op.opcode_index());
  // Codes below 127 may sit in either field (old converters wrote only the byte-sized
  // deprecated one, which holds 127 for larger codes): the larger value is the real one.
  const int32_t code = std::max<int32_t>(oc.deprecated_builtin_code(), oc.builtin_code());
  if (op.inputs())
    for (uint32_t i = 0; i < op.inputs()->size(); ++i)
      if (op.inputs()->Get(i) != -1)
        NN_RETURN_IF_ERROR(
            check_tensor_index(op.inputs()->Get(i)).with_context("input " + std::to_string(i)));
  if (code == tflite::BuiltinOperator_CUSTOM)
    return convert_custom(oc.custom_code() ? oc.custom_code()->str() : std::string(), op);
  return convert_builtin(code, op);
}

Status Converter::convert_custom(const std::string& name, const tflite::Operator& op) {
  (void)op;
  if (name == "Convolution2DTransposeBias") return transpose_conv_bias_custom();
  refused_by_name_ = true;
  return unsupported("custom op '" + name + "' is not supported");
}

Status Converter::convert_builtin(int32_t code, const tflite::Operator& op) {
  using T = OperationType;
  switch (code) {
    // Elementwise with a fused activation.
    case tflite::BuiltinOperator_ADD: {
      const auto* o = op.builtin_options_as_AddOptions();
      return binary_fused(T::ADD, o ? o->fused_activation_function() : kNoActivation);
    }
    case tflite::BuiltinOperator_SUB: {
      const auto* o = op.builtin_options_as_SubOptions();
      return binary_fused(T::SUB, o ? o->fused_activation_function() : kNoActivation);
    }
    case tflite::BuiltinOperator_MUL: {
      const auto* o = op.builtin_options_as_MulOptions();
      return binary_fused(T::MUL, o ? o->fused_activation_function() : kNoActivation);
    }
    case tflite::BuiltinOperator_DIV: {
      const auto* o = op.builtin_options_as_DivOptions();
      return binary_fused(T::DIV, o ? o->fused_activation_function() : kNoActivation);
    }
    case tflite::BuiltinOperator_SQUARED_DIFFERENCE: {  // (a - b) * (a - b)
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t a, in_operand(0, "a"));
      NN_ASSIGN_OR_RETURN(uint32_t b, in_operand(1, "b"));
      NN_ASSIGN_OR_RETURN(uint32_t result, output_operand(out(0)));
      const uint32_t diff = temp_like(result, "/difference");
      m_.add_operation(T::SUB, {a, b, m_.add_scalar_i32(0)}, {diff});
      m_.add_operation(T::MUL, {diff, diff, m_.add_scalar_i32(0)}, {result});
      return Status::ok();
    }
    case tflite::BuiltinOperator_SQUARE: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      return emit(T::MUL, {x, x, m_.add_scalar_i32(0)}, {out(0)});
    }

    // Elementwise without parameters.
    case tflite::BuiltinOperator_MAXIMUM:
      return binary(T::MAXIMUM);
    case tflite::BuiltinOperator_MINIMUM:
      return binary(T::MINIMUM);
    case tflite::BuiltinOperator_POW:
      return binary(T::POW);
    case tflite::BuiltinOperator_PRELU:
      return binary(T::PRELU);
    case tflite::BuiltinOperator_EQUAL:
      return binary(T::EQUAL);
    case tflite::BuiltinOperator_NOT_EQUAL:
      return binary(T::NOT_EQUAL);
    case tflite::BuiltinOperator_GREATER:
      return binary(T::GREATER);
    case tflite::BuiltinOperator_GREATER_EQUAL:
      return binary(T::GREATER_EQUAL);
    case tflite::BuiltinOperator_LESS:
      return binary(T::LESS);
    case tflite::BuiltinOperator_LESS_EQUAL:
      return binary(T::LESS_EQUAL);
    case tflite::BuiltinOperator_LOGICAL_AND:
      return binary(T::LOGICAL_AND);
    case tflite::BuiltinOperator_LOGICAL_OR:
      return binary(T::LOGICAL_OR);
    case tflite::BuiltinOperator_SELECT:
    case tflite::BuiltinOperator_SELECT_V2: {
      NN_RETURN_IF_ERROR(expect_io(3, 3, 1));
      NN_ASSIGN_OR_RETURN(uint32_t cond, in_operand(0, "condition"));
      NN_ASSIGN_OR_RETURN(uint32_t a, in_operand(1, "a"));
      NN_ASSIGN_OR_RETURN(uint32_t b, in_operand(2, "b"));
      return emit(T::SELECT, {cond, a, b}, {out(0)});
    }

    // Unary.
    case tflite::BuiltinOperator_RELU:
      return unary(T::RELU);
    case tflite::BuiltinOperator_RELU_N1_TO_1:
      return unary(T::RELU1);
    case tflite::BuiltinOperator_RELU6:
      return unary(T::RELU6);
    case tflite::BuiltinOperator_LOGISTIC:
      return unary(T::LOGISTIC);
    case tflite::BuiltinOperator_TANH:
      return unary(T::TANH);
    case tflite::BuiltinOperator_HARD_SWISH:
      return unary(T::HARD_SWISH);
    case tflite::BuiltinOperator_ABS:
      return unary(T::ABS);
    case tflite::BuiltinOperator_EXP:
      return unary(T::EXP);
    case tflite::BuiltinOperator_LOG:
      return unary(T::LOG);
    case tflite::BuiltinOperator_NEG:
      return unary(T::NEG);
    case tflite::BuiltinOperator_SQRT:
      return unary(T::SQRT);
    case tflite::BuiltinOperator_RSQRT:
      return unary(T::RSQRT);
    case tflite::BuiltinOperator_SIN:
      return unary(T::SIN);
    case tflite::BuiltinOperator_FLOOR:
      return unary(T::FLOOR);
    case tflite::BuiltinOperator_CEIL:
      return unary(T::NNPIPE_CEIL);
    case tflite::BuiltinOperator_LOGICAL_NOT:
      return unary(T::LOGICAL_NOT);
    case tflite::BuiltinOperator_CAST:
      return unary(T::CAST);
    case tflite::BuiltinOperator_QUANTIZE:
      return unary(T::QUANTIZE);
    case tflite::BuiltinOperator_DENSIFY: {  // of sparse constant weights: folded
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(bool folded, try_fold_densify(in(0), out(0)));
      if (!folded) return Status(StatusCode::kUnsupportedOp, "DENSIFY of a tensor that is not a sparse constant");
      return Status::ok();
    }
    case tflite::BuiltinOperator_DEQUANTIZE: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(bool folded, try_fold_dequantize(in(0), out(0)));
      return folded ? Status::ok() : unary(T::DEQUANTIZE);
    }
    case tflite::BuiltinOperator_ELU: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      return emit(T::ELU, {x, m_.add_scalar_f32(1.f)}, {out(0)});
    }
    case tflite::BuiltinOperator_LEAKY_RELU: {  // PRELU with a one-element alpha
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      if (m_.operands[x].type != OperandType::TENSOR_FLOAT32)
        return unsupported("LEAKY_RELU on non-float input");
      const auto* o = op.builtin_options_as_LeakyReluOptions();
      const float alpha = o ? o->alpha() : 0.2f;
      return emit(T::PRELU,
                  {x, m_.add_constant_f32({1}, std::span<const float>(&alpha, 1), "leaky_relu_alpha")},
                  {out(0)});
    }

    // Convolution, pooling, dense.
    case tflite::BuiltinOperator_CONV_2D:
      return conv2d(op.builtin_options_as_Conv2DOptions());
    case tflite::BuiltinOperator_DEPTHWISE_CONV_2D:
      return depthwise_conv2d(op.builtin_options_as_DepthwiseConv2DOptions());
    case tflite::BuiltinOperator_TRANSPOSE_CONV:
      return transpose_conv(op.builtin_options_as_TransposeConvOptions());
    case tflite::BuiltinOperator_AVERAGE_POOL_2D:
      return pool2d(T::AVERAGE_POOL_2D, op.builtin_options_as_Pool2DOptions());
    case tflite::BuiltinOperator_MAX_POOL_2D:
      return pool2d(T::MAX_POOL_2D, op.builtin_options_as_Pool2DOptions());
    case tflite::BuiltinOperator_FULLY_CONNECTED:
      return fully_connected(op.builtin_options_as_FullyConnectedOptions());
    case tflite::BuiltinOperator_BATCH_MATMUL: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      const auto* o = op.builtin_options_as_BatchMatMulOptions();
      NN_ASSIGN_OR_RETURN(uint32_t a, in_operand(0, "a"));
      NN_ASSIGN_OR_RETURN(uint32_t b, in_operand(1, "b"));
      return emit(T::BATCH_MATMUL,
                  {a, b, m_.add_scalar_bool(o && o->adj_x()), m_.add_scalar_bool(o && o->adj_y())}, {out(0)});
    }

    // Normalization.
    case tflite::BuiltinOperator_SOFTMAX: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      const auto* o = op.builtin_options_as_SoftmaxOptions();
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      return emit(T::SOFTMAX, {x, m_.add_scalar_f32(o ? o->beta() : 1.f)}, {out(0)});
    }
    case tflite::BuiltinOperator_LOG_SOFTMAX: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      return emit(T::LOG_SOFTMAX, {x, m_.add_scalar_f32(1.f), m_.add_scalar_i32(-1)}, {out(0)});
    }
    case tflite::BuiltinOperator_L2_NORMALIZATION: {
      const auto* o = op.builtin_options_as_L2NormOptions();
      if (o && o->fused_activation_function() != kNoActivation) return unsupported("fused activation");
      return unary(T::L2_NORMALIZATION);
    }
    case tflite::BuiltinOperator_LOCAL_RESPONSE_NORMALIZATION: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      const auto* o = op.builtin_options_as_LocalResponseNormalizationOptions();
      if (!o) return invalid("missing LocalResponseNormalizationOptions");
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      return emit(T::LOCAL_RESPONSE_NORMALIZATION,
                  {x, m_.add_scalar_i32(o->radius()), m_.add_scalar_f32(o->bias()),
                   m_.add_scalar_f32(o->alpha()), m_.add_scalar_f32(o->beta())},
                  {out(0)});
    }

    // Reductions.
    case tflite::BuiltinOperator_MEAN:
      return reduce(T::MEAN, op.builtin_options_as_ReducerOptions());
    case tflite::BuiltinOperator_SUM:
      return reduce(T::REDUCE_SUM, op.builtin_options_as_ReducerOptions());
    case tflite::BuiltinOperator_REDUCE_MAX:
      return reduce(T::REDUCE_MAX, op.builtin_options_as_ReducerOptions());
    case tflite::BuiltinOperator_REDUCE_MIN:
      return reduce(T::REDUCE_MIN, op.builtin_options_as_ReducerOptions());
    case tflite::BuiltinOperator_REDUCE_PROD:
      return reduce(T::REDUCE_PROD, op.builtin_options_as_ReducerOptions());
    case tflite::BuiltinOperator_ARG_MAX:
    case tflite::BuiltinOperator_ARG_MIN: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(int32_t axis, axis_scalar(in(1), "axis"));
      return emit(code == tflite::BuiltinOperator_ARG_MAX ? T::ARGMAX : T::ARGMIN,
                  {x, m_.add_scalar_i32(axis)}, {out(0)});
    }

    // Resizing.
    case tflite::BuiltinOperator_RESIZE_BILINEAR: {
      const auto* o = op.builtin_options_as_ResizeBilinearOptions();
      return resize(T::RESIZE_BILINEAR, o && o->align_corners(), o && o->half_pixel_centers());
    }
    case tflite::BuiltinOperator_RESIZE_NEAREST_NEIGHBOR: {
      const auto* o = op.builtin_options_as_ResizeNearestNeighborOptions();
      return resize(T::RESIZE_NEAREST_NEIGHBOR, o && o->align_corners(), o && o->half_pixel_centers());
    }

    // Shapes and data movement.
    case tflite::BuiltinOperator_RESHAPE:
      return reshape(op.builtin_options_as_ReshapeOptions());
    case tflite::BuiltinOperator_CONCATENATION:
      return concatenation(op.builtin_options_as_ConcatenationOptions());
    case tflite::BuiltinOperator_STRIDED_SLICE:
      return strided_slice(op.builtin_options_as_StridedSliceOptions());
    case tflite::BuiltinOperator_SQUEEZE: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      const auto* o = op.builtin_options_as_SqueezeOptions();
      if (!o || !o->squeeze_dims() || o->squeeze_dims()->size() == 0) return emit(T::SQUEEZE, {x}, {out(0)});
      std::vector<int32_t> axes(o->squeeze_dims()->begin(), o->squeeze_dims()->end());
      return emit(T::SQUEEZE, {x, m_.add_constant_i32({static_cast<uint32_t>(axes.size())}, axes)}, {out(0)});
    }
    case tflite::BuiltinOperator_EXPAND_DIMS: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(int32_t axis, axis_scalar(in(1), "axis"));
      return emit(T::EXPAND_DIMS, {x, m_.add_scalar_i32(axis)}, {out(0)});
    }
    case tflite::BuiltinOperator_TRANSPOSE: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t perm, in_operand(1, "perm"));
      return emit(T::TRANSPOSE, {x, perm}, {out(0)});
    }
    case tflite::BuiltinOperator_PAD: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t paddings, in_operand(1, "paddings"));
      return emit(T::PAD, {x, paddings}, {out(0)});
    }
    case tflite::BuiltinOperator_PADV2: {
      NN_RETURN_IF_ERROR(expect_io(3, 3, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t paddings, in_operand(1, "paddings"));
      NN_ASSIGN_OR_RETURN(float value, const_float_scalar(in(2), "constant_values"));
      return emit(T::PAD_V2, {x, paddings, m_.add_scalar_f32(value)}, {out(0)});
    }
    case tflite::BuiltinOperator_MIRROR_PAD: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      const auto* o = op.builtin_options_as_MirrorPadOptions();
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t paddings, in_operand(1, "paddings"));
      return emit(T::MIRROR_PAD, {x, paddings, m_.add_scalar_i32(o ? o->mode() : 0)}, {out(0)});
    }
    case tflite::BuiltinOperator_SLICE: {
      NN_RETURN_IF_ERROR(expect_io(3, 3, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t begin, in_operand(1, "begin"));
      NN_ASSIGN_OR_RETURN(uint32_t size, in_operand(2, "size"));
      return emit(T::SLICE, {x, begin, size}, {out(0)});
    }
    case tflite::BuiltinOperator_SPLIT: {  // TFLite order: axis, input
      if (num_in() != 2 || num_out() < 1)
        return invalid("takes 2 inputs (axis, input) and at least 1 output");
      const auto* o = op.builtin_options_as_SplitOptions();
      if (o && o->num_splits() != static_cast<int32_t>(num_out()))
        return invalid("num_splits " + std::to_string(o->num_splits()) + " but " + std::to_string(num_out()) +
                       " outputs");
      NN_ASSIGN_OR_RETURN(int32_t axis, axis_scalar(in(0), "axis"));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(1, "input"));
      std::vector<int32_t> outs;
      for (size_t i = 0; i < num_out(); ++i) outs.push_back(out(i));
      return emit(T::SPLIT, {x, m_.add_scalar_i32(axis), m_.add_scalar_i32(static_cast<int32_t>(num_out()))},
                  outs);
    }
    case tflite::BuiltinOperator_TILE: {
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      NN_ASSIGN_OR_RETURN(uint32_t multiples, in_operand(1, "multiples"));
      return emit(T::TILE, {x, multiples}, {out(0)});
    }
    case tflite::BuiltinOperator_GATHER: {  // TFLite order: params, indices
      NN_RETURN_IF_ERROR(expect_io(2, 2, 1));
      const auto* o = op.builtin_options_as_GatherOptions();
      if (o && o->batch_dims() != 0) return unsupported("batch_dims != 0");
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "params"));
      NN_ASSIGN_OR_RETURN(uint32_t indices, in_operand(1, "indices"));
      return emit(T::GATHER, {x, m_.add_scalar_i32(o ? o->axis() : 0), indices}, {out(0)});
    }
    case tflite::BuiltinOperator_PACK: {
      if (num_in() < 1 || num_out() != 1) return invalid("takes at least 1 input and 1 output");
      const auto* o = op.builtin_options_as_PackOptions();
      std::vector<uint32_t> ins = {m_.add_scalar_i32(o ? o->axis() : 0)};
      for (size_t i = 0; i < num_in(); ++i) {
        NN_ASSIGN_OR_RETURN(uint32_t t, in_operand(i, "value"));
        ins.push_back(t);
      }
      return emit(T::PACK, std::move(ins), {out(0)});
    }
    case tflite::BuiltinOperator_UNPACK:
      return unpack(op.builtin_options_as_UnpackOptions());
    case tflite::BuiltinOperator_DEPTH_TO_SPACE:
    case tflite::BuiltinOperator_SPACE_TO_DEPTH: {
      NN_RETURN_IF_ERROR(expect_io(1, 1, 1));
      NN_ASSIGN_OR_RETURN(uint32_t x, in_operand(0, "input"));
      int32_t block = 0;
      if (code == tflite::BuiltinOperator_DEPTH_TO_SPACE) {
        if (const auto* o = op.builtin_options_as_DepthToSpaceOptions()) block = o->block_size();
      } else if (const auto* o = op.builtin_options_as_SpaceToDepthOptions()) {
        block = o->block_size();
      }
      if (block < 1) return invalid("block_size must be >= 1, got " + std::to_string(block));
      return emit(code == tflite::BuiltinOperator_DEPTH_TO_SPACE ? T::DEPTH_TO_SPACE : T::SPACE_TO_DEPTH,
                  {x, m_.add_scalar_i32(block)}, {out(0)});
    }
    default:
      break;
  }
  refused_by_name_ = true;
  const std::string name = builtin_name(code);
  if (name.rfind("code ", 0) == 0) return unsupported("builtin operator " + name + " is not supported");
  return unsupported("builtin " + name + " (code " + std::to_string(code) + ") is not supported");
}

}  // namespace nn::tflite_import
