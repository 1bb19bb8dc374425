// Binary element-wise ops with numpy broadcasting: arithmetic (ADD, SUB, MUL, DIV with a
// fused activation), MAXIMUM, MINIMUM, POW, PRELU, the comparisons (-> TENSOR_BOOL8), the
// logical ops and SELECT. Operand lists: engine/ops/OPS.md.
//
// Semantics chosen where NNAPI leaves room (NeuralNetworksTypes.h, ANEURALNETWORKS_DIV):
// - TENSOR_INT32 DIV is floor division, Python's "//" (5 // 2 = 2, -5 // 2 = -3), as NNAPI
//   states since feature level 4. NNAPI leaves x // 0 undefined; we define it as 0 so a bad
//   input never traps. INT32_MIN // -1 wraps to INT32_MIN. ADD/SUB/MUL wrap (two's complement).
// - For TENSOR_INT32 the fused activation must be NONE, as NNAPI requires.
// - MAXIMUM/MINIMUM propagate NaN (numpy/PyTorch), rather than std::max's order dependence.
// - Broadcasting goes up to rank 6 (NNAPI: 4); SELECT broadcasts all three inputs.
// - Comparisons accept TENSOR_FLOAT32, TENSOR_INT32 and TENSOR_BOOL8 (any non-zero byte is
//   true, as NNAPI's BOOL8 says).
// - ADD, SUB and MUL take TENSOR_QUANT8_ASYMM(_SIGNED) with NNAPI's integer arithmetic
//   (ops/quant_math.h): ADD/SUB rescale both inputs to twice the larger input scale with 20
//   bits of headroom, sum, and requantize; MUL requantizes the int32 product of the centred
//   inputs by in1_scale * in2_scale / out_scale. Inputs and output may all differ in scale.
//   With Requantization::kFp32, ADD/SUB are qnnpack's q8vadd (quant::Fp32Add) and MUL
//   requantizes in float.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "nn/ops/registry.h"
#include "ops/conv_util.h"
#include "ops/quant_math.h"
#include "ops/tensor_util.h"

namespace nn {
namespace {

constexpr size_t kMaxBroadcastRank = 6;
constexpr OperandType kF32 = OperandType::TENSOR_FLOAT32;
constexpr OperandType kI32 = OperandType::TENSOR_INT32;
constexpr OperandType kBool8 = OperandType::TENSOR_BOOL8;

Status check_same_type(const Model& m, const Operation& op, size_t i, const char* name_i, size_t j,
                       const char* name_j) {
  const Operand& a = m.operands[op.inputs[i]];
  const Operand& b = m.operands[op.inputs[j]];
  if (a.type == b.type) return Status::ok();
  return {StatusCode::kInvalidModel, input_label(j, name_j) + " has type " +
                                         std::string(operand_type_name(b.type)) + " but " +
                                         input_label(i, name_i) + " has " +
                                         std::string(operand_type_name(a.type)) + "; they must match"};
}

Status check_fuse(const Model& m, const Operation& op, size_t index, OperandType data_type) {
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, index, OperandType::INT32, "fuse"));
  const int32_t fuse = m.scalar_i32(op.inputs[index]);
  if (fuse < 0 || fuse > 3)
    return {StatusCode::kInvalidModel,
            input_label(index, "fuse") + " must be a FuseCode 0..3, got " + std::to_string(fuse)};
  if (data_type == kI32 && fuse != 0)
    return {StatusCode::kInvalidModel,
            input_label(index, "fuse") + " must be NONE (0) for TENSOR_INT32, got " + std::to_string(fuse)};
  return Status::ok();
}

// Two broadcasting tensor inputs (a, b), optionally a fuse scalar; output = broadcast shape.
Status prepare_binary(Model& m, const Operation& op, std::initializer_list<OperandType> types, bool has_fuse,
                      bool bool_output) {
  const size_t n = has_fuse ? 3 : 2;
  NN_RETURN_IF_ERROR(check_input_count(op, n, n));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, types, "a"));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 1, types, "b"));
  NN_RETURN_IF_ERROR(check_same_type(m, op, 0, "a", 1, "b"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 0, kMaxBroadcastRank, "a"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 1, 0, kMaxBroadcastRank, "b"));
  const Operand& a = m.operands[op.inputs[0]];
  const Operand& b = m.operands[op.inputs[1]];
  NN_ASSIGN_OR_RETURN(Dims out, broadcast_dims(a.dims, b.dims));
  if (has_fuse) NN_RETURN_IF_ERROR(check_fuse(m, op, 2, a.type));
  const Operand like = a;
  set_output(m, op, 0, std::move(out), bool_output ? kBool8 : a.type, bool_output ? nullptr : &like);
  return Status::ok();
}

constexpr OperandType kQ8 = OperandType::TENSOR_QUANT8_ASYMM;
constexpr OperandType kQ8Signed = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;

template <OperationType kOp>
Status prepare_arith(Model& m, const Operation& op) {
  if constexpr (kOp == OperationType::DIV)
    return prepare_binary(m, op, {kF32, kI32}, /*has_fuse=*/true, /*bool_output=*/false);
  // Quant8: the builder's declared output scale / zero point are kept (the inputs' only
  // when none was declared).
  const Operand declared = op.outputs.empty() ? Operand{} : m.operands[op.outputs[0]];
  NN_RETURN_IF_ERROR(prepare_binary(m, op, {kF32, kI32, kQ8, kQ8Signed}, true, false));
  Operand& out = m.operands[op.outputs[0]];
  if (!conv_util::is_quant8(out.type)) return Status::ok();
  if (declared.type == out.type && declared.scale > 0.f) {
    out.scale = declared.scale;
    out.zero_point = declared.zero_point;
  }
  NN_RETURN_IF_ERROR(conv_util::check_quant_params(m.operands[op.inputs[0]], input_label(0, "a")));
  NN_RETURN_IF_ERROR(conv_util::check_quant_params(m.operands[op.inputs[1]], input_label(1, "b")));
  return conv_util::check_quant_params(out, "output 0");
}
template <OperationType kOp>
Status prepare_minmax(Model& m, const Operation& op) {
  return prepare_binary(m, op, {kF32, kI32}, false, false);
}
template <OperationType kOp>
Status prepare_float_binary(Model& m, const Operation& op) {
  return prepare_binary(m, op, {kF32}, false, false);
}
template <OperationType kOp>
Status prepare_compare(Model& m, const Operation& op) {
  return prepare_binary(m, op, {kF32, kI32, kBool8}, false, true);
}
template <OperationType kOp>
Status prepare_logical(Model& m, const Operation& op) {
  return prepare_binary(m, op, {kBool8}, false, true);
}

Status prepare_logical_not(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 1));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kBool8}, "a"));
  set_output(m, op, 0, m.operands[op.inputs[0]].dims, kBool8);
  return Status::ok();
}

Status prepare_select(Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 0, {kBool8}, "cond"));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 1, {kF32, kI32, kBool8}, "a"));
  NN_RETURN_IF_ERROR(check_tensor_type(m, op, 2, {kF32, kI32, kBool8}, "b"));
  NN_RETURN_IF_ERROR(check_same_type(m, op, 1, "a", 2, "b"));
  for (size_t i = 0; i < 3; ++i) NN_RETURN_IF_ERROR(check_rank(m, op, i, 0, kMaxBroadcastRank));
  const Operand& c = m.operands[op.inputs[0]];
  const Operand& a = m.operands[op.inputs[1]];
  const Operand& b = m.operands[op.inputs[2]];
  NN_ASSIGN_OR_RETURN(Dims ab, broadcast_dims(a.dims, b.dims));
  NN_ASSIGN_OR_RETURN(Dims out, broadcast_dims(c.dims, ab));
  const Operand like = a;
  set_output(m, op, 0, std::move(out), a.type, &like);
  return Status::ok();
}

// --- kernels ---

template <typename In, typename Out, typename F>
void binary_loop(const OpContext& ctx, F f) {
  const In* a = ctx.in<In>(0);
  const In* b = ctx.in<In>(1);
  Out* o = ctx.out<Out>(0);
  for_each_broadcast(ctx.output(0).dims, ctx.input(0).dims, ctx.input(1).dims,
                     [&](size_t i, size_t ia, size_t ib) { o[i] = f(a[ia], b[ib]); });
}

Status unexpected_type(const OpContext& ctx, size_t input) {
  return {StatusCode::kInternal, "no reference kernel for " +
                                     std::string(operand_type_name(ctx.input(input).type)) +
                                     " (prepare let it through)"};
}

int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t wrap_sub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}
int32_t wrap_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
int32_t floor_div(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);  // INT32_MIN / -1 would trap
  int32_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// NNAPI's addQuant8 / mulQuant8 (TFLite's reference AddElementwise / MulElementwise), or
// qnnpack's arithmetic (Requantization::kFp32).
template <OperationType kOp>
void arith_quant(const OpContext& ctx) {
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& out = ctx.output(0);
  const quant::Range r = quant::activation_range(ctx.i32(2), out);
  const void* da = ctx.input_data[0];
  const void* db = ctx.input_data[1];
  if constexpr (kOp == OperationType::MUL) {
    const quant::Requantizer m = quant::make_requantizer(ctx.requantization, a.scale, b.scale, out.scale);
    for_each_broadcast(out.dims, a.dims, b.dims, [&](size_t i, size_t ia, size_t ib) {
      const int32_t prod = (quant::load(da, a.type, ia) - a.zero_point) * (quant::load(db, b.type, ib) - b.zero_point);
      const int32_t v = m.apply(prod) + out.zero_point;
      quant::store(ctx.output_data[0], out.type, i, std::clamp(v, r.lo, r.hi));
    });
  } else if (ctx.requantization == Requantization::kFp32) {
    const quant::Fp32Add add(a.scale, b.scale, out.scale, kOp == OperationType::SUB);
    for_each_broadcast(out.dims, a.dims, b.dims, [&](size_t i, size_t ia, size_t ib) {
      const int32_t v =
          add.apply(quant::load(da, a.type, ia) - a.zero_point, quant::load(db, b.type, ib) - b.zero_point) +
          out.zero_point;
      quant::store(ctx.output_data[0], out.type, i, std::clamp(v, r.lo, r.hi));
    });
  } else {
    constexpr int kLeftShift = 20;
    const double twice_max = 2.0 * std::max(a.scale, b.scale);
    const quant::Multiplier ma = quant::quantize_multiplier(a.scale / twice_max);
    const quant::Multiplier mb = quant::quantize_multiplier(b.scale / twice_max);
    const quant::Multiplier mo = quant::quantize_multiplier(twice_max / ((1 << kLeftShift) * double(out.scale)));
    for_each_broadcast(out.dims, a.dims, b.dims, [&](size_t i, size_t ia, size_t ib) {
      const int32_t xa = (quant::load(da, a.type, ia) - a.zero_point) * (1 << kLeftShift);
      const int32_t xb = (quant::load(db, b.type, ib) - b.zero_point) * (1 << kLeftShift);
      const int32_t sa = quant::multiply_by_quantized_multiplier(xa, ma);
      const int32_t sb = quant::multiply_by_quantized_multiplier(xb, mb);
      const int32_t sum = kOp == OperationType::ADD ? sa + sb : sa - sb;
      const int32_t v = quant::multiply_by_quantized_multiplier(sum, mo) + out.zero_point;
      quant::store(ctx.output_data[0], out.type, i, std::clamp(v, r.lo, r.hi));
    });
  }
}

template <OperationType kOp>
Status arith_reference(const OpContext& ctx) {
  const OperandType t = ctx.input(0).type;
  if constexpr (kOp != OperationType::DIV) {
    if (conv_util::is_quant8(t)) {
      arith_quant<kOp>(ctx);
      return Status::ok();
    }
  }
  if (t == kF32) {
    binary_loop<float, float>(ctx, [](float a, float b) {
      if constexpr (kOp == OperationType::ADD) return a + b;
      if constexpr (kOp == OperationType::SUB) return a - b;
      if constexpr (kOp == OperationType::MUL) return a * b;
      if constexpr (kOp == OperationType::DIV) return a / b;
    });
    apply_fused_activation(ctx.i32(2), ctx.out<float>(0), num_elements(ctx.output(0).dims));
    return Status::ok();
  }
  if (t == kI32) {
    binary_loop<int32_t, int32_t>(ctx, [](int32_t a, int32_t b) {
      if constexpr (kOp == OperationType::ADD) return wrap_add(a, b);
      if constexpr (kOp == OperationType::SUB) return wrap_sub(a, b);
      if constexpr (kOp == OperationType::MUL) return wrap_mul(a, b);
      if constexpr (kOp == OperationType::DIV) return floor_div(a, b);
    });
    return Status::ok();
  }
  return unexpected_type(ctx, 0);
}

template <OperationType kOp>
Status minmax_reference(const OpContext& ctx) {
  constexpr bool kMax = kOp == OperationType::MAXIMUM;
  const OperandType t = ctx.input(0).type;
  if (t == kF32) {
    binary_loop<float, float>(ctx, [](float a, float b) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
      return kMax ? (a < b ? b : a) : (b < a ? b : a);
    });
    return Status::ok();
  }
  if (t == kI32) {
    binary_loop<int32_t, int32_t>(
        ctx, [](int32_t a, int32_t b) { return kMax ? std::max(a, b) : std::min(a, b); });
    return Status::ok();
  }
  return unexpected_type(ctx, 0);
}

Status pow_reference(const OpContext& ctx) {
  binary_loop<float, float>(ctx, [](float a, float b) { return std::pow(a, b); });
  return Status::ok();
}

Status prelu_reference(const OpContext& ctx) {
  binary_loop<float, float>(ctx, [](float x, float alpha) { return x < 0.f ? alpha * x : x; });
  return Status::ok();
}

template <OperationType kOp, typename T>
bool compare(T a, T b) {
  if constexpr (kOp == OperationType::EQUAL) return a == b;
  if constexpr (kOp == OperationType::NOT_EQUAL) return a != b;
  if constexpr (kOp == OperationType::GREATER) return a > b;
  if constexpr (kOp == OperationType::GREATER_EQUAL) return a >= b;
  if constexpr (kOp == OperationType::LESS) return a < b;
  if constexpr (kOp == OperationType::LESS_EQUAL) return a <= b;
}

template <OperationType kOp>
Status compare_reference(const OpContext& ctx) {
  switch (ctx.input(0).type) {
    case kF32:
      binary_loop<float, uint8_t>(ctx, [](float a, float b) -> uint8_t { return compare<kOp>(a, b); });
      return Status::ok();
    case kI32:
      binary_loop<int32_t, uint8_t>(ctx, [](int32_t a, int32_t b) -> uint8_t { return compare<kOp>(a, b); });
      return Status::ok();
    case kBool8:
      binary_loop<uint8_t, uint8_t>(
          ctx, [](uint8_t a, uint8_t b) -> uint8_t { return compare<kOp, int>(a != 0, b != 0); });
      return Status::ok();
    default:
      return unexpected_type(ctx, 0);
  }
}

template <OperationType kOp>
Status logical_reference(const OpContext& ctx) {
  binary_loop<uint8_t, uint8_t>(ctx, [](uint8_t a, uint8_t b) -> uint8_t {
    if constexpr (kOp == OperationType::LOGICAL_AND) return (a != 0) && (b != 0);
    return (a != 0) || (b != 0);
  });
  return Status::ok();
}

Status logical_not_reference(const OpContext& ctx) {
  const uint8_t* a = ctx.in<uint8_t>(0);
  uint8_t* o = ctx.out<uint8_t>(0);
  const size_t n = num_elements(ctx.output(0).dims);
  for (size_t i = 0; i < n; ++i) o[i] = a[i] == 0;
  return Status::ok();
}

template <typename T>
void select_loop(const OpContext& ctx) {
  const uint8_t* c = ctx.in<uint8_t>(0);
  const T* a = ctx.in<T>(1);
  const T* b = ctx.in<T>(2);
  T* o = ctx.out<T>(0);
  for_each_broadcast3(ctx.output(0).dims, ctx.input(0).dims, ctx.input(1).dims, ctx.input(2).dims,
                      [&](size_t i, size_t ic, size_t ia, size_t ib) { o[i] = c[ic] ? a[ia] : b[ib]; });
}

Status select_reference(const OpContext& ctx) {
  switch (ctx.input(1).type) {
    case kF32:
      select_loop<float>(ctx);
      return Status::ok();
    case kI32:
      select_loop<int32_t>(ctx);
      return Status::ok();
    case kBool8:
      select_loop<uint8_t>(ctx);
      return Status::ok();
    default:
      return unexpected_type(ctx, 1);
  }
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  using T = OperationType;
  r.add({T::ADD, prepare_arith<T::ADD>, arith_reference<T::ADD>});
  r.add({T::SUB, prepare_arith<T::SUB>, arith_reference<T::SUB>});
  r.add({T::MUL, prepare_arith<T::MUL>, arith_reference<T::MUL>});
  r.add({T::DIV, prepare_arith<T::DIV>, arith_reference<T::DIV>});
  r.add({T::MAXIMUM, prepare_minmax<T::MAXIMUM>, minmax_reference<T::MAXIMUM>});
  r.add({T::MINIMUM, prepare_minmax<T::MINIMUM>, minmax_reference<T::MINIMUM>});
  r.add({T::POW, prepare_float_binary<T::POW>, pow_reference});
  r.add({T::PRELU, prepare_float_binary<T::PRELU>, prelu_reference});
  r.add({T::EQUAL, prepare_compare<T::EQUAL>, compare_reference<T::EQUAL>});
  r.add({T::NOT_EQUAL, prepare_compare<T::NOT_EQUAL>, compare_reference<T::NOT_EQUAL>});
  r.add({T::GREATER, prepare_compare<T::GREATER>, compare_reference<T::GREATER>});
  r.add({T::GREATER_EQUAL, prepare_compare<T::GREATER_EQUAL>, compare_reference<T::GREATER_EQUAL>});
  r.add({T::LESS, prepare_compare<T::LESS>, compare_reference<T::LESS>});
  r.add({T::LESS_EQUAL, prepare_compare<T::LESS_EQUAL>, compare_reference<T::LESS_EQUAL>});
  r.add({T::LOGICAL_AND, prepare_logical<T::LOGICAL_AND>, logical_reference<T::LOGICAL_AND>});
  r.add({T::LOGICAL_OR, prepare_logical<T::LOGICAL_OR>, logical_reference<T::LOGICAL_OR>});
  r.add({T::LOGICAL_NOT, prepare_logical_not, logical_not_reference});
  r.add({T::SELECT, prepare_select, select_reference});
}

}  // namespace nn
