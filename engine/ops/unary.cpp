// Unary element-wise ops: activations (RELU, RELU1, RELU6, LOGISTIC, TANH, HARD_SWISH, ELU),
// math (ABS, EXP, LOG, NEG, SQRT, RSQRT, SIN, FLOOR, NNPIPE_CEIL, NNPIPE_ERF), CAST, and the
// quantization boundary ops DEQUANTIZE and QUANTIZE. Operand lists: engine/ops/OPS.md.
//
// Semantics chosen where NNAPI leaves room:
// - CAST float -> int truncates toward zero like static_cast (TFLite, NNAPI), saturates at the
//   int32 range and maps NaN to 0; anything -> BOOL8 is (x != 0); BOOL8 -> number is 0 or 1.
//   CAST converts between TENSOR_FLOAT32, TENSOR_INT32, TENSOR_BOOL8 and TENSOR_FLOAT16.
// - QUANTIZE rounds half away from zero (std::round, as NNAPI's CPU reference does) and
//   clamps to the type's range; NaN quantizes to the zero point.
// - ABS and NEG also take TENSOR_INT32 (NNAPI feature level 4); NEG wraps INT32_MIN.
// - RELU, RELU1, RELU6, LOGISTIC, TANH and HARD_SWISH take quant8 (both signednesses) with
//   NNAPI's output rules: RELU* keep the input's scale and zero point, LOGISTIC's output is
//   scale 1/256 with zero point 0 (uint8) or -128 (int8), TANH's 1/128 with 128 or 0,
//   HARD_SWISH's any. RELU* clamp the stored integers; the others go through a 256-entry
//   table of the exactly rounded function (quant::lookup_table), which NNAPI's fixed-point
//   curves approximate within one step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "nn/ops/registry.h"
#include "ops/activation.h"
#include "ops/conv_util.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {
namespace {

constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
constexpr OperandType kF16 = OperandType::TENSOR_FLOAT16;
constexpr OperandType kI32 = OperandType::TENSOR_INT32;
constexpr OperandType kBool8 = OperandType::TENSOR_BOOL8;
constexpr OperandType kQ8Asymm = OperandType::TENSOR_QUANT8_ASYMM;
constexpr OperandType kQ8AsymmSigned = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
constexpr OperandType kQ8Symm = OperandType::TENSOR_QUANT8_SYMM;
constexpr OperandType kQ8PerChannel = OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;

Status prepare_same_shape(Model& m, const Operation& op, std::initializer_list<OperandType> types) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, types, "in"));
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, in.dims, in.type, &in);
  return Status::ok();
}

template <OperationType kOp>
Status prepare_float_unary(Model& m, const Operation& op) {
  return prepare_same_shape(m, op, {kF32});
}
template <OperationType kOp>
Status prepare_signed_unary(Model& m, const Operation& op) {
  return prepare_same_shape(m, op, {kF32, kI32});
}

// The activations that take quant8 too.
template <OperationType kOp>
Status prepare_activation(Model& m, const Operation& op) {
  using T = OperationType;
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32, kQ8Asymm, kQ8AsymmSigned}, "in"));
  const Operand in = m.operands[op.inputs[0]];
  Operand& out = m.operands[op.outputs[0]];
  const Operand declared = out;
  set_output(m, op, 0, in.dims, in.type, &in);
  if (in.type == kF32) return Status::ok();
  NN_RETURN_IF_ERROR(conv_util::check_quant_params(in, input_label(0, "in")));
  const bool is_unsigned = in.type == kQ8Asymm;
  float want_scale = 0.f;
  int32_t want_zp = 0;
  if constexpr (kOp == T::LOGISTIC) want_scale = 1.f / 256, want_zp = is_unsigned ? 0 : -128;
  if constexpr (kOp == T::TANH) want_scale = 1.f / 128, want_zp = is_unsigned ? 128 : 0;
  const bool declared_quant = declared.type == in.type && declared.scale > 0.f;
  if constexpr (kOp == T::HARD_SWISH) {
    if (declared_quant) out.scale = declared.scale, out.zero_point = declared.zero_point;
    return conv_util::check_quant_params(out, "output 0");
  }
  if (want_scale > 0.f) {
    // LOGISTIC/TANH: NNAPI fixes the output's quantization; a builder that declared none gets it.
    if (declared_quant && (declared.scale != want_scale || declared.zero_point != want_zp))
      return {StatusCode::kInvalidModel,
              "output 0 is quantized with scale " + std::to_string(declared.scale) + ", zero point " +
                  std::to_string(declared.zero_point) + "; NNAPI requires scale " + std::to_string(want_scale) +
                  " and zero point " + std::to_string(want_zp) + " for " + std::string(operand_type_name(in.type))};
    out.scale = want_scale;
    out.zero_point = want_zp;
    return Status::ok();
  }
  if (declared_quant && (declared.scale != in.scale || declared.zero_point != in.zero_point))
    return {StatusCode::kInvalidModel, "output 0 scale / zero point must equal the input's for a quantized " +
                                           std::string(operation_type_name(kOp)) + ", as NNAPI requires"};
  return Status::ok();
}

Status prepare_elu(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32}, "in"));
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, 1, OperandType::FLOAT32, "alpha"));
  const float alpha = m.scalar_f32(op.inputs[1]);
  if (!std::isfinite(alpha))
    return {StatusCode::kInvalidModel,
            input_label(1, "alpha") + " must be finite, got " + std::to_string(alpha)};
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, in.dims, in.type, &in);
  return Status::ok();
}

bool is_cast_type(OperandType t) {
  return t == kF32 || t == kI32 || t == kBool8 || t == kF16;
}

Status prepare_cast(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32, kI32, kBool8, kF16}, "in"));
  Operand& out = m.operands[op.outputs[0]];
  if (!is_cast_type(out.type))
    return {StatusCode::kInvalidModel, "output 0 has type " + std::string(operand_type_name(out.type)) +
                                           "; CAST converts to TENSOR_FLOAT32, TENSOR_INT32, TENSOR_BOOL8 or "
                                           "TENSOR_FLOAT16"};
  out.dims = m.operands[op.inputs[0]].dims;
  return Status::ok();
}

// Checks an operand's quantization parameters; `what` names it ("input 0", "output 0").
Status check_quant_params(const Operand& o, const std::string& what) {
  if (o.type == kQ8PerChannel) {
    const ChannelQuant& cq = o.channel_quant;
    if (cq.channel_dim >= o.dims.size())
      return {StatusCode::kInvalidModel, what + ": channel_dim " + std::to_string(cq.channel_dim) +
                                             " out of range for dims " + dims_to_string(o.dims)};
    if (cq.scales.size() != o.dims[cq.channel_dim])
      return {StatusCode::kInvalidModel, what + ": " + std::to_string(cq.scales.size()) +
                                             " per-channel scales for " +
                                             std::to_string(o.dims[cq.channel_dim]) + " channels"};
    for (size_t c = 0; c < cq.scales.size(); ++c)
      if (!(cq.scales[c] > 0.f) || !std::isfinite(cq.scales[c]))
        return {StatusCode::kInvalidModel, what + ": per-channel scale " + std::to_string(c) +
                                               " must be positive, got " + std::to_string(cq.scales[c])};
    return Status::ok();
  }
  if (!(o.scale > 0.f) || !std::isfinite(o.scale))
    return {StatusCode::kInvalidModel, what + ": scale must be positive, got " + std::to_string(o.scale)};
  int32_t lo = 0, hi = 0;
  if (o.type == kQ8Asymm) hi = 255;
  if (o.type == kQ8AsymmSigned) lo = -128, hi = 127;
  if (o.zero_point < lo || o.zero_point > hi)
    return {StatusCode::kInvalidModel, what + ": zero point " + std::to_string(o.zero_point) + " outside [" +
                                           std::to_string(lo) + ", " + std::to_string(hi) + "] for " +
                                           std::string(operand_type_name(o.type))};
  return Status::ok();
}

Status prepare_dequantize(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(
      check_tensor_type(m, op, 0, {kQ8Asymm, kQ8AsymmSigned, kQ8Symm, kQ8PerChannel, kF16}, "in"));
  const Operand& in = m.operands[op.inputs[0]];
  if (in.type != kF16) NN_RETURN_IF_ERROR(check_quant_params(in, "input 0 (in)"));
  Operand& out = m.operands[op.outputs[0]];
  out.dims = in.dims;
  out.type = kF32;
  out.scale = 0.f;
  out.zero_point = 0;
  out.channel_quant = {};
  return Status::ok();
}

Status prepare_quantize(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kF32, kF16}, "in"));
  Operand& out = m.operands[op.outputs[0]];
  if (out.type != kQ8Asymm && out.type != kQ8AsymmSigned)
    return {StatusCode::kInvalidModel, "output 0 has type " + std::string(operand_type_name(out.type)) +
                                           "; QUANTIZE produces TENSOR_QUANT8_ASYMM or "
                                           "TENSOR_QUANT8_ASYMM_SIGNED"};
  NN_RETURN_IF_ERROR(check_quant_params(out, "output 0"));
  out.dims = m.operands[op.inputs[0]].dims;
  return Status::ok();
}

// --- kernels ---

template <typename T, typename F>
void unary_loop(const OpContext& ctx, F f) {
  const T* in = ctx.in<T>(0);
  T* out = ctx.out<T>(0);
  const size_t n = num_elements(ctx.output(0).dims);
  for (size_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

template <OperationType kOp>
float unary_f32(float x) {
  using T = OperationType;
  if constexpr (kOp == T::LOGISTIC) return 1.f / (1.f + std::exp(-x));
  if constexpr (kOp == T::TANH) return std::tanh(x);
  if constexpr (kOp == T::HARD_SWISH) return x * std::clamp(x + 3.f, 0.f, 6.f) * (1.f / 6.f);
  if constexpr (kOp == T::ABS) return std::fabs(x);
  if constexpr (kOp == T::EXP) return std::exp(x);
  if constexpr (kOp == T::LOG) return std::log(x);
  if constexpr (kOp == T::NEG) return -x;
  if constexpr (kOp == T::SQRT) return std::sqrt(x);
  if constexpr (kOp == T::RSQRT) return 1.f / std::sqrt(x);
  if constexpr (kOp == T::SIN) return std::sin(x);
  if constexpr (kOp == T::FLOOR) return std::floor(x);
  if constexpr (kOp == T::NNPIPE_CEIL) return std::ceil(x);
  if constexpr (kOp == T::NNPIPE_ERF) return std::erf(x);
}

template <OperationType kOp>
Status float_unary_reference(const OpContext& ctx) {
  unary_loop<float>(ctx, unary_f32<kOp>);
  return Status::ok();
}

template <OperationType kOp>
Status activation_reference(const OpContext& ctx) {
  using T = OperationType;
  const Operand& in = ctx.input(0);
  constexpr bool kClamp = kOp == T::RELU || kOp == T::RELU1 || kOp == T::RELU6;
  if constexpr (kClamp) {
    if (in.type == kF32) {
      const ActivationRange r = fuse_code_range(static_cast<int32_t>(*clamp_activation_code(kOp)));
      unary_loop<float>(ctx, [r](float x) { return std::clamp(x, r.lo, r.hi); });
      return Status::ok();
    }
  } else if (in.type == kF32) {
    return float_unary_reference<kOp>(ctx);
  }
  const Operand& out = ctx.output(0);
  const size_t n = num_elements(out.dims);
  const int32_t lo = quant::type_range(in.type).lo;
  if constexpr (kClamp) {
    const quant::Range r = quant::activation_range(static_cast<int32_t>(*clamp_activation_code(kOp)), out);
    for (size_t i = 0; i < n; ++i)
      quant::store(ctx.output_data[0], out.type, i, std::clamp(quant::load(ctx.input_data[0], in.type, i), r.lo, r.hi));
  } else {
    const std::vector<int32_t> table = quant::lookup_table(in, out, [](double x) {
      if constexpr (kOp == T::LOGISTIC) return 1.0 / (1.0 + std::exp(-x));
      if constexpr (kOp == T::TANH) return std::tanh(x);
      if constexpr (kOp == T::HARD_SWISH) return x * std::clamp(x + 3.0, 0.0, 6.0) / 6.0;
    });
    for (size_t i = 0; i < n; ++i)
      quant::store(ctx.output_data[0], out.type, i, table[size_t(quant::load(ctx.input_data[0], in.type, i) - lo)]);
  }
  return Status::ok();
}

template <OperationType kOp>
Status signed_unary_reference(const OpContext& ctx) {
  if (ctx.input(0).type == kI32) {
    unary_loop<int32_t>(ctx, [](int32_t x) {
      const uint32_t u = static_cast<uint32_t>(x);
      const uint32_t neg = 0u - u;  // wraps INT32_MIN to itself, like two's complement hardware
      if constexpr (kOp == OperationType::ABS) return static_cast<int32_t>(x < 0 ? neg : u);
      return static_cast<int32_t>(neg);
    });
    return Status::ok();
  }
  unary_loop<float>(ctx, unary_f32<kOp>);
  return Status::ok();
}

Status elu_reference(const OpContext& ctx) {
  const float alpha = ctx.f32(1);
  unary_loop<float>(ctx, [alpha](float x) { return x < 0.f ? alpha * std::expm1(x) : x; });
  return Status::ok();
}

// CAST goes through double: exact for every int32, float32 and float16 value.
double load_as_double(const void* data, OperandType t, size_t i) {
  switch (t) {
    case kF32:
      return static_cast<const float*>(data)[i];
    case kI32:
      return static_cast<const int32_t*>(data)[i];
    case kBool8:
      return static_cast<const uint8_t*>(data)[i] != 0 ? 1.0 : 0.0;
    case kF16:
      return half_to_float(static_cast<const uint16_t*>(data)[i]);
    default:
      return 0.0;
  }
}

int32_t saturate_to_i32(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (v <= static_cast<double>(std::numeric_limits<int32_t>::min()))
    return std::numeric_limits<int32_t>::min();
  if (v >= static_cast<double>(std::numeric_limits<int32_t>::max()))
    return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(v);
}

Status cast_reference(const OpContext& ctx) {
  const OperandType from = ctx.input(0).type;
  const OperandType to = ctx.output(0).type;
  const size_t n = num_elements(ctx.output(0).dims);
  const void* in = ctx.input_data[0];
  if (from == to) {
    std::memcpy(ctx.output_data[0], in, n * element_size(to));
    return Status::ok();
  }
  for (size_t i = 0; i < n; ++i) {
    const double v = load_as_double(in, from, i);
    switch (to) {
      case kF32:
        ctx.out<float>(0)[i] = static_cast<float>(v);
        break;
      case kI32:
        ctx.out<int32_t>(0)[i] = saturate_to_i32(v);
        break;
      case kBool8:
        ctx.out<uint8_t>(0)[i] = v != 0.0;
        break;
      case kF16:
        ctx.out<uint16_t>(0)[i] = float_to_half(static_cast<float>(v));
        break;
      default:
        return {StatusCode::kInternal, "CAST to " + std::string(operand_type_name(to)) + " has no kernel"};
    }
  }
  return Status::ok();
}

Status dequantize_reference(const OpContext& ctx) {
  const Operand& in = ctx.input(0);
  const size_t n = num_elements(in.dims);
  float* out = ctx.out<float>(0);
  switch (in.type) {
    case kF16: {
      const uint16_t* h = ctx.in<uint16_t>(0);
      for (size_t i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
      return Status::ok();
    }
    case kQ8Asymm: {
      const uint8_t* q = ctx.in<uint8_t>(0);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i] - in.zero_point) * in.scale;
      return Status::ok();
    }
    case kQ8AsymmSigned:
    case kQ8Symm: {
      const int8_t* q = ctx.in<int8_t>(0);
      const int32_t zp = in.type == kQ8Symm ? 0 : in.zero_point;
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i] - zp) * in.scale;
      return Status::ok();
    }
    case kQ8PerChannel: {
      const int8_t* q = ctx.in<int8_t>(0);
      const AxisSplit s = split_at_axis(in.dims, static_cast<int>(in.channel_quant.channel_dim));
      const std::vector<float>& scales = in.channel_quant.scales;
      for (size_t o = 0; o < s.outer; ++o)
        for (size_t c = 0; c < s.axis; ++c)
          for (size_t k = 0; k < s.inner; ++k) {
            const size_t i = (o * s.axis + c) * s.inner + k;
            out[i] = static_cast<float>(q[i]) * scales[c];
          }
      return Status::ok();
    }
    default:
      return {StatusCode::kInternal,
              "DEQUANTIZE from " + std::string(operand_type_name(in.type)) + " has no kernel"};
  }
}

// NNAPI: round(x / scale), ties away from zero. Requantization::kFp32: PyTorch's
// quantize_per_tensor, nearbyint(x * (1 / scale)), ties to even.
template <typename Q>
void quantize_loop(const float* in, Q* out, size_t n, float scale, int32_t zero_point, Requantization mode) {
  constexpr float lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  const float inverse_scale = 1.f / scale;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(in[i])) {
      out[i] = static_cast<Q>(zero_point);
      continue;
    }
    // Clamp in float before converting: huge values would overflow an int cast.
    const float q = (mode == Requantization::kFp32 ? std::nearbyint(in[i] * inverse_scale) : std::round(in[i] / scale)) +
                    static_cast<float>(zero_point);
    out[i] = static_cast<Q>(std::clamp(q, lo, hi));
  }
}

Status quantize_reference(const OpContext& ctx) {
  const Operand& out = ctx.output(0);
  const size_t n = num_elements(out.dims);
  std::vector<float> converted;
  const float* in = ctx.in<float>(0);
  if (ctx.input(0).type == kF16) {
    converted.resize(n);
    for (size_t i = 0; i < n; ++i) converted[i] = half_to_float(ctx.in<uint16_t>(0)[i]);
    in = converted.data();
  }
  if (out.type == kQ8Asymm)
    quantize_loop(in, ctx.out<uint8_t>(0), n, out.scale, out.zero_point, ctx.requantization);
  else
    quantize_loop(in, ctx.out<int8_t>(0), n, out.scale, out.zero_point, ctx.requantization);
  return Status::ok();
}

template <OperationType kOp>
void add_float_unary(OpRegistry& r) {
  r.add({kOp, prepare_float_unary<kOp>, float_unary_reference<kOp>});
}

}  // namespace

void register_unary_ops(OpRegistry& r) {
  using T = OperationType;
  r.add({T::RELU, prepare_activation<T::RELU>, activation_reference<T::RELU>});
  r.add({T::RELU1, prepare_activation<T::RELU1>, activation_reference<T::RELU1>});
  r.add({T::RELU6, prepare_activation<T::RELU6>, activation_reference<T::RELU6>});
  r.add({T::LOGISTIC, prepare_activation<T::LOGISTIC>, activation_reference<T::LOGISTIC>});
  r.add({T::TANH, prepare_activation<T::TANH>, activation_reference<T::TANH>});
  r.add({T::HARD_SWISH, prepare_activation<T::HARD_SWISH>, activation_reference<T::HARD_SWISH>});
  add_float_unary<T::EXP>(r);
  add_float_unary<T::LOG>(r);
  add_float_unary<T::SQRT>(r);
  add_float_unary<T::RSQRT>(r);
  add_float_unary<T::SIN>(r);
  add_float_unary<T::FLOOR>(r);
  add_float_unary<T::NNPIPE_CEIL>(r);
  add_float_unary<T::NNPIPE_ERF>(r);
  r.add({T::ABS, prepare_signed_unary<T::ABS>, signed_unary_reference<T::ABS>});
  r.add({T::NEG, prepare_signed_unary<T::NEG>, signed_unary_reference<T::NEG>});
  r.add({T::ELU, prepare_elu, elu_reference});
  r.add({T::CAST, prepare_cast, cast_reference});
  r.add({T::DEQUANTIZE, prepare_dequantize, dequantize_reference});
  r.add({T::QUANTIZE, prepare_quantize, quantize_reference});
}

}  // namespace nn
