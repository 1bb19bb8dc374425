// Reductions and normalizations: MEAN, REDUCE_SUM/MAX/MIN/PROD, ARGMAX, ARGMIN, SOFTMAX,
// LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION.
// Operand lists: engine/ops/OPS.md.
//
// Semantics (NNAPI's, NeuralNetworksTypes.h, where it speaks):
// - Reduction axes are a constant 1-D TENSOR_INT32 in [-rank, rank); duplicates count once.
//   An empty axes list reduces nothing (NNAPI: "reduce all" was documented, never
//   implemented). When every dim is reduced without keep_dims the output is [1].
//   MEAN's keep_dims is INT32 (> 0 keeps), REDUCE_*'s is BOOL. Sums accumulate in double.
// - ARGMAX/ARGMIN: first index on ties; a NaN wins (numpy). Rank-1 input gives [1].
// - SOFTMAX/LOG_SOFTMAX subtract the max before exp (no overflow at 1e30); beta must be > 0.
// - L2_NORMALIZATION: x / max(||x||, 1e-6) along the axis (TFLite's epsilon: zeros stay 0).
// - LOCAL_RESPONSE_NORMALIZATION: x / (bias + alpha * sum_{|j|<=radius} x[c+j]^2)^beta, with
//   alpha NOT divided by the window size (NNAPI/TFLite; ONNX/PyTorch importers divide).
// - INSTANCE_NORMALIZATION: NHWC, per (n, c) over H and W, biased variance. gamma and beta
//   are FLOAT32 scalars (NNAPI); as an nnpipe extension they may also be TENSOR_FLOAT32 [C]
//   (ONNX's per-channel scale and bias), which the NNAPI delegate must refuse.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {
namespace {

constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
constexpr OperandType kI32 = OperandType::TENSOR_INT32;

// Which dims the axes operand reduces (normalized, duplicates merged).
Result<std::vector<bool>> reduced_dims(const Operand& axes, const int32_t* values, size_t rank) {
  std::vector<bool> mask(rank, false);
  const size_t n = num_elements(axes.dims);
  for (size_t k = 0; k < n; ++k) {
    Result<int> axis = normalize_axis(values[k], rank);
    if (!axis.is_ok())
      return Status(StatusCode::kInvalidModel,
                    input_label(1, "axes") + " entry " + std::to_string(k) + ": " + axis.status().message());
    mask[*axis] = true;
  }
  return mask;
}

// Input dims with reduced dims set to 1: the output's layout, broadcastable to the input.
Dims kept_dims(const Dims& in, const std::vector<bool>& mask) {
  Dims d = in;
  for (size_t i = 0; i < d.size(); ++i)
    if (mask[i]) d[i] = 1;
  return d;
}

Status prepare_reduce(Model& m, const Operation& op, std::initializer_list<OperandType> types,
                      OperandType keep_dims_type) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, types, "in"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 1, 8, "in"));
  NN_RETURN_IF_ERROR(check_const_i32_vector(m, op, 1, "axes"));
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, 2, keep_dims_type, "keep_dims"));
  const Operand in = m.operands[op.inputs[0]];
  const Operand& axes = m.operands[op.inputs[1]];
  NN_ASSIGN_OR_RETURN(std::vector<bool> mask, reduced_dims(axes, axes.as<int32_t>(), in.dims.size()));
  const bool keep =
      keep_dims_type == OperandType::BOOL ? m.scalar_bool(op.inputs[2]) : m.scalar_i32(op.inputs[2]) > 0;
  Dims out;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (!mask[i])
      out.push_back(in.dims[i]);
    else if (keep)
      out.push_back(1);
  }
  if (out.empty()) out = {1};
  set_output(m, op, 0, std::move(out), in.type, &in);
  return Status::ok();
}

template <OperationType kOp>
Status prepare_reduce_op(Model& m, const Operation& op) {
  if constexpr (kOp == OperationType::MEAN) {
    // Quant8 MEAN keeps a declared output scale / zero point (else the input's).
    const Operand declared = op.outputs.empty() ? Operand{} : m.operands[op.outputs[0]];
    NN_RETURN_IF_ERROR(prepare_reduce(
        m, op, {kF32, OperandType::TENSOR_QUANT8_ASYMM, OperandType::TENSOR_QUANT8_ASYMM_SIGNED},
        OperandType::INT32));
    Operand& out = m.operands[op.outputs[0]];
    if (!conv_util::is_quant8(out.type)) return Status::ok();
    if (declared.type == out.type && declared.scale > 0.f) {
      out.scale = declared.scale;
      out.zero_point = declared.zero_point;
    }
    NN_RETURN_IF_ERROR(conv_util::check_quant_params(m.operands[op.inputs[0]], input_label(0, "in")));
    return conv_util::check_quant_params(out, "output 0");
  }
  return prepare_reduce(m, op, {kF32, kI32}, OperandType::BOOL);
}

template <OperationType kOp, typename T>
Status reduce_typed(const OpContext& ctx) {
  using T_ = OperationType;
  const Dims& in_dims = ctx.input(0).dims;
  NN_ASSIGN_OR_RETURN(std::vector<bool> mask, reduced_dims(ctx.input(1), ctx.in<int32_t>(1), in_dims.size()));
  const Dims kept = kept_dims(in_dims, mask);
  const size_t out_n = num_elements(kept);
  const T* x = ctx.in<T>(0);
  T* out = ctx.out<T>(0);
  if constexpr (kOp == T_::MEAN || kOp == T_::REDUCE_SUM || kOp == T_::REDUCE_PROD) {
    // float: double accumulators; int32: int64, wrapped to 32 bits at the end.
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    std::vector<Acc> acc(out_n, kOp == T_::REDUCE_PROD ? Acc(1) : Acc(0));
    for_each_broadcast(in_dims, in_dims, kept, [&](size_t i, size_t, size_t o) {
      if constexpr (kOp == T_::REDUCE_PROD && std::is_floating_point_v<T>)
        acc[o] *= x[i];
      else if constexpr (kOp == T_::REDUCE_PROD)  // wraps like int32 hardware, no UB
        acc[o] = static_cast<Acc>(static_cast<uint64_t>(acc[o]) * static_cast<uint64_t>(int64_t{x[i]}));
      else
        acc[o] += x[i];
    });
    const double count =
        static_cast<double>(num_elements(in_dims)) / static_cast<double>(std::max<size_t>(out_n, 1));
    for (size_t o = 0; o < out_n; ++o) {
      if constexpr (kOp == T_::MEAN)
        out[o] = static_cast<T>(acc[o] / count);
      else if constexpr (std::is_floating_point_v<T>)
        out[o] = static_cast<T>(acc[o]);
      else
        out[o] = static_cast<T>(static_cast<uint32_t>(static_cast<uint64_t>(acc[o])));
    }
  } else {
    constexpr bool kMax = kOp == T_::REDUCE_MAX;
    const T init = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    const T start = std::numeric_limits<T>::has_infinity
                        ? (kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity())
                        : init;
    std::fill(out, out + out_n, start);
    for_each_broadcast(in_dims, in_dims, kept, [&](size_t i, size_t, size_t o) {
      const T v = x[i];
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(out[o])) return;  // NaN propagates
        if (std::isnan(v)) {
          out[o] = v;
          return;
        }
      }
      if (kMax ? v > out[o] : v < out[o]) out[o] = v;
    });
  }
  return Status::ok();
}

// Quant8 MEAN: an exact int64 sum of the stored integers; the mean is requantized to the
// output's scale and zero point rounding half away from zero (TFLite's reference Mean), or
// as qnnpack (Requantization::kFp32).
Status mean_quant(const OpContext& ctx) {
  const Operand& in = ctx.input(0);
  const Operand& out = ctx.output(0);
  NN_ASSIGN_OR_RETURN(std::vector<bool> mask, reduced_dims(ctx.input(1), ctx.in<int32_t>(1), in.dims.size()));
  const Dims kept = kept_dims(in.dims, mask);
  const size_t out_n = num_elements(kept);
  std::vector<int64_t> acc(out_n, 0);
  for_each_broadcast(in.dims, in.dims, kept,
                     [&](size_t i, size_t, size_t o) { acc[o] += quant::load(ctx.input_data[0], in.type, i); });
  const double count = double(num_elements(in.dims)) / double(std::max<size_t>(out_n, 1));
  const quant::Range r = quant::type_range(out.type);
  if (ctx.requantization == Requantization::kFp32) {
    // qnnpack's global average: the centred sum times (in_scale / out_scale) / count in
    // float, rounded to even.
    const float scale = (in.scale / out.scale) / float(count);
    for (size_t o = 0; o < out_n; ++o) {
      const int64_t centred = acc[o] - int64_t(count) * in.zero_point;
      const int32_t v = quant::requantize_fp32(int32_t(std::clamp<int64_t>(centred, INT32_MIN, INT32_MAX)), scale);
      quant::store(ctx.output_data[0], out.type, o, std::clamp(v + out.zero_point, r.lo, r.hi));
    }
    return Status::ok();
  }
  for (size_t o = 0; o < out_n; ++o) {
    const double real = (double(acc[o]) / count - in.zero_point) * in.scale;
    const double q = std::round(real / out.scale) + out.zero_point;
    quant::store(ctx.output_data[0], out.type, o, int32_t(std::clamp(q, double(r.lo), double(r.hi))));
  }
  return Status::ok();
}

template <OperationType kOp>
Status reduce_reference(const OpContext& ctx) {
  if constexpr (kOp == OperationType::MEAN)
    if (conv_util::is_quant8(ctx.input(0).type)) return mean_quant(ctx);
  if (ctx.input(0).type == kI32) {
    if constexpr (kOp != OperationType::MEAN) return reduce_typed<kOp, int32_t>(ctx);
  }
  return reduce_typed<kOp, float>(ctx);
}

// --- ARGMAX / ARGMIN ---

Status prepare_arg(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32, kI32}, "in"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 1, 8, "in"));
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, 1, OperandType::INT32, "axis"));
  const Dims in = m.operands[op.inputs[0]].dims;
  Result<int> axis = normalize_axis(m.scalar_i32(op.inputs[1]), in.size());
  if (!axis.is_ok()) return axis.status().with_context(input_label(1, "axis"));
  Dims out;
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int>(i) != *axis) out.push_back(in[i]);
  if (out.empty()) out = {1};
  Operand& o = m.operands[op.outputs[0]];
  o.dims = std::move(out);
  o.type = kI32;
  o.scale = 0.f;
  o.zero_point = 0;
  return Status::ok();
}

template <bool kMax, typename T>
void arg_typed(const OpContext& ctx, int axis) {
  const AxisSplit s = split_at_axis(ctx.input(0).dims, axis);
  const T* x = ctx.in<T>(0);
  int32_t* out = ctx.out<int32_t>(0);
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t k = 0; k < s.inner; ++k) {
      const T* base = x + o * s.axis * s.inner + k;
      size_t best = 0;
      T best_v = base[0];
      for (size_t a = 1; a < s.axis; ++a) {
        const T v = base[a * s.inner];
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(best_v)) break;
          if (std::isnan(v)) {
            best = a;
            break;
          }
        }
        if (kMax ? v > best_v : v < best_v) best = a, best_v = v;
      }
      out[o * s.inner + k] = static_cast<int32_t>(best);
    }
}

template <bool kMax>
Status arg_reference(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.i32(1), ctx.input(0).dims.size()));
  if (ctx.input(0).type == kI32)
    arg_typed<kMax, int32_t>(ctx, axis);
  else
    arg_typed<kMax, float>(ctx, axis);
  return Status::ok();
}

// --- SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION ---

// Optional axis input at `index` (INT32, default -1) normalized against the input's rank.
Result<int> axis_input(const Model& m, const Operation& op, size_t index) {
  const size_t rank = m.operands[op.inputs[0]].dims.size();
  if (index >= op.inputs.size() || !m.has_value(op.inputs[index])) return static_cast<int>(rank) - 1;
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, index, OperandType::INT32, "axis"));
  Result<int> axis = normalize_axis(m.scalar_i32(op.inputs[index]), rank);
  if (!axis.is_ok()) return axis.status().with_context(input_label(index, "axis"));
  return axis;
}

Status check_float_param(const Model& m, const Operation& op, size_t index, const char* name, bool positive) {
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, index, OperandType::FLOAT32, name));
  const float v = m.scalar_f32(op.inputs[index]);
  if (!std::isfinite(v) || (positive && !(v > 0.f)))
    return {StatusCode::kInvalidModel, input_label(index, name) + " must be " +
                                           (positive ? "positive and " : "") + "finite, got " +
                                           std::to_string(v)};
  return Status::ok();
}

// in (float, rank >= 1), then scalar params; output = input shape. axis_index: where the
// optional axis sits (or SIZE_MAX for none).
Status prepare_axis_op(Model& m, const Operation& op, size_t min_inputs, size_t max_inputs,
                       size_t axis_index) {
  NN_RETURN_IF_ERROR(check_input_count(op, min_inputs, max_inputs));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32}, "in"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 1, 8, "in"));
  if (axis_index != SIZE_MAX) NN_RETURN_IF_ERROR(axis_input(m, op, axis_index).status());
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, in.dims, in.type, &in);
  return Status::ok();
}

Status prepare_softmax(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(prepare_axis_op(m, op, 2, 3, 2));
  return check_float_param(m, op, 1, "beta", true);
}

Status prepare_log_softmax(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(prepare_axis_op(m, op, 3, 3, 2));
  return check_float_param(m, op, 1, "beta", true);
}

Status prepare_l2_norm(Model& m, const Operation& op) {
  return prepare_axis_op(m, op, 1, 2, 1);
}

Status prepare_lrn(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(prepare_axis_op(m, op, 5, 6, 5));
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, 1, OperandType::INT32, "radius"));
  const int32_t radius = m.scalar_i32(op.inputs[1]);
  if (radius < 0)
    return {StatusCode::kInvalidModel,
            input_label(1, "radius") + " must be >= 0, got " + std::to_string(radius)};
  NN_RETURN_IF_ERROR(check_float_param(m, op, 2, "bias", false));
  NN_RETURN_IF_ERROR(check_float_param(m, op, 3, "alpha", false));
  return check_float_param(m, op, 4, "beta", false);
}

// Runs fn(pointer to first element, count, stride) for each 1-D slice along the axis.
template <typename Fn>
Status for_each_axis_slice(const OpContext& ctx, int axis, Fn fn) {
  const AxisSplit s = split_at_axis(ctx.input(0).dims, axis);
  for (size_t o = 0; o < s.outer; ++o)
    for (size_t k = 0; k < s.inner; ++k) {
      const size_t base = o * s.axis * s.inner + k;
      fn(ctx.in<float>(0) + base, ctx.out<float>(0) + base, s.axis, s.inner);
    }
  return Status::ok();
}

int runtime_axis(const OpContext& ctx, size_t index) {
  const int rank = static_cast<int>(ctx.input(0).dims.size());
  if (!ctx.has_input(index)) return rank - 1;
  const int32_t a = ctx.i32(index);
  return a < 0 ? a + rank : a;  // prepare checked the range
}

template <bool kLog>
Status softmax_reference(const OpContext& ctx) {
  const float beta = ctx.f32(1);
  return for_each_axis_slice(ctx, runtime_axis(ctx, 2),
                             [beta](const float* x, float* y, size_t n, size_t stride) {
                               float max_v = -std::numeric_limits<float>::infinity();
                               for (size_t i = 0; i < n; ++i) max_v = std::max(max_v, x[i * stride]);
                               double sum = 0;
                               for (size_t i = 0; i < n; ++i) {
                                 const float e = std::exp((x[i * stride] - max_v) * beta);
                                 if (!kLog) y[i * stride] = e;
                                 sum += e;
                               }
                               if constexpr (kLog) {
                                 const float log_sum = static_cast<float>(std::log(sum));
                                 for (size_t i = 0; i < n; ++i)
                                   y[i * stride] = (x[i * stride] - max_v) * beta - log_sum;
                               } else {
                                 const float inv = static_cast<float>(1.0 / sum);
                                 for (size_t i = 0; i < n; ++i) y[i * stride] *= inv;
                               }
                             });
}

Status l2_norm_reference(const OpContext& ctx) {
  return for_each_axis_slice(ctx, runtime_axis(ctx, 1),
                             [](const float* x, float* y, size_t n, size_t stride) {
                               double sum = 0;
                               for (size_t i = 0; i < n; ++i)
                                 sum += static_cast<double>(x[i * stride]) * x[i * stride];
                               const float inv = static_cast<float>(1.0 / std::max(std::sqrt(sum), 1e-6));
                               for (size_t i = 0; i < n; ++i) y[i * stride] = x[i * stride] * inv;
                             });
}

Status lrn_reference(const OpContext& ctx) {
  const int64_t radius = ctx.i32(1);
  const double bias = ctx.f32(2), alpha = ctx.f32(3), beta = ctx.f32(4);
  return for_each_axis_slice(
      ctx, runtime_axis(ctx, 5), [&](const float* x, float* y, size_t n, size_t stride) {
        const int64_t count = static_cast<int64_t>(n);
        for (int64_t c = 0; c < count; ++c) {
          double sq = 0;
          for (int64_t j = std::max<int64_t>(0, c - radius); j <= std::min(count - 1, c + radius); ++j)
            sq += static_cast<double>(x[j * stride]) * x[j * stride];
          y[c * stride] = static_cast<float>(x[c * stride] / std::pow(bias + alpha * sq, beta));
        }
      });
}

// --- INSTANCE_NORMALIZATION ---

Status check_gamma_beta(const Model& m, const Operation& op, size_t index, const char* name,
                        uint32_t channels) {
  const Operand& o = m.operands[op.inputs[index]];
  if (o.type == OperandType::FLOAT32) return check_float_param(m, op, index, name, false);
  if (o.type == kF32 && o.dims == Dims{channels}) return Status::ok();
  return {StatusCode::kInvalidModel,
          input_label(index, name) + " must be a FLOAT32 scalar or a TENSOR_FLOAT32 [" +
              std::to_string(channels) + "], got " + std::string(operand_type_name(o.type)) + " " +
              dims_to_string(o.dims)};
}

Status prepare_instance_norm(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 5, 5));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32}, "in"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 4, 4, "in"));
  const Operand in = m.operands[op.inputs[0]];
  NN_RETURN_IF_ERROR(check_gamma_beta(m, op, 1, "gamma", in.dims[3]));
  NN_RETURN_IF_ERROR(check_gamma_beta(m, op, 2, "beta", in.dims[3]));
  NN_RETURN_IF_ERROR(check_float_param(m, op, 3, "epsilon", true));
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, 4, OperandType::BOOL, "layout"));
  if (m.scalar_bool(op.inputs[4]))
    return {StatusCode::kInvalidModel,
            input_label(4, "layout") + " must be false (NHWC); NCHW is not supported"};
  set_output(m, op, 0, in.dims, in.type, &in);
  return Status::ok();
}

float gamma_beta_at(const OpContext& ctx, size_t index, size_t c) {
  if (ctx.input(index).type == OperandType::FLOAT32) return ctx.f32(index);
  return ctx.in<float>(index)[c];
}

Status instance_norm_reference(const OpContext& ctx) {
  const Dims& d = ctx.input(0).dims;
  const size_t batches = d[0], spatial = size_t{d[1]} * d[2], channels = d[3];
  const double eps = ctx.f32(3);
  const float* x = ctx.in<float>(0);
  float* y = ctx.out<float>(0);
  for (size_t b = 0; b < batches; ++b)
    for (size_t c = 0; c < channels; ++c) {
      const float* xb = x + b * spatial * channels + c;
      float* yb = y + b * spatial * channels + c;
      double sum = 0;
      for (size_t i = 0; i < spatial; ++i) sum += xb[i * channels];
      const double mean = sum / static_cast<double>(spatial);
      double var = 0;
      for (size_t i = 0; i < spatial; ++i) var += (xb[i * channels] - mean) * (xb[i * channels] - mean);
      var /= static_cast<double>(spatial);
      const double scale = gamma_beta_at(ctx, 1, c) / std::sqrt(var + eps);
      const double shift = gamma_beta_at(ctx, 2, c);
      for (size_t i = 0; i < spatial; ++i)
        yb[i * channels] = static_cast<float>((xb[i * channels] - mean) * scale + shift);
    }
  return Status::ok();
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  using T = OperationType;
  r.add({T::MEAN, prepare_reduce_op<T::MEAN>, reduce_reference<T::MEAN>});
  r.add({T::REDUCE_SUM, prepare_reduce_op<T::REDUCE_SUM>, reduce_reference<T::REDUCE_SUM>});
  r.add({T::REDUCE_MAX, prepare_reduce_op<T::REDUCE_MAX>, reduce_reference<T::REDUCE_MAX>});
  r.add({T::REDUCE_MIN, prepare_reduce_op<T::REDUCE_MIN>, reduce_reference<T::REDUCE_MIN>});
  r.add({T::REDUCE_PROD, prepare_reduce_op<T::REDUCE_PROD>, reduce_reference<T::REDUCE_PROD>});
  r.add({T::ARGMAX, prepare_arg, arg_reference<true>});
  r.add({T::ARGMIN, prepare_arg, arg_reference<false>});
  r.add({T::SOFTMAX, prepare_softmax, softmax_reference<false>});
  r.add({T::LOG_SOFTMAX, prepare_log_softmax, softmax_reference<true>});
  r.add({T::L2_NORMALIZATION, prepare_l2_norm, l2_norm_reference});
  r.add({T::LOCAL_RESPONSE_NORMALIZATION, prepare_lrn, lrn_reference});
  r.add({T::INSTANCE_NORMALIZATION, prepare_instance_norm, instance_norm_reference});
}

}  // namespace nn
