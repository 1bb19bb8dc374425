// PAD, PAD_V2, MIRROR_PAD: shape inference and reference kernels (any element type).
// Registered by register_shape_ops (shape.cpp); shared helpers in ops/shape_util.h.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/shape_util.h"
#include "ops/tensor_util.h"

namespace nn::shape_util {
namespace {

// paddings: a constant TENSOR_INT32 [rank, 2] of non-negative values.
Result<std::vector<int64_t>> read_paddings(const Model& m, const Operation& op, size_t index, size_t rank) {
  if (index >= op.inputs.size()) return invalid(input_label(index, "paddings") + " is missing");
  const Operand& o = m.operands[op.inputs[index]];
  if (o.type != OperandType::TENSOR_INT32 || !o.is_constant() || o.length < o.byte_size())
    return invalid(input_label(index, "paddings") + " must be a constant TENSOR_INT32 [rank, 2], got " +
                   (o.is_constant() ? "constant " : "non-constant ") +
                   std::string(operand_type_name(o.type)) + operand_suffix(m, op, index));
  if (o.dims != Dims{static_cast<uint32_t>(rank), 2})
    return invalid(input_label(index, "paddings") + " must have dims [" + std::to_string(rank) + ",2], got " +
                   dims_to_string(o.dims));
  std::vector<int32_t> raw(rank * 2);
  if (!raw.empty()) std::memcpy(raw.data(), o.data, raw.size() * sizeof(int32_t));
  for (size_t i = 0; i < raw.size(); ++i)
    if (raw[i] < 0)
      return invalid(input_label(index, "paddings") + ": dim " + std::to_string(i / 2) +
                     " has negative padding " + std::to_string(raw[i]));
  return std::vector<int64_t>(raw.begin(), raw.end());
}

struct PadPlan {
  Dims out;
  std::vector<int64_t> paddings;  // [rank, 2]: before, after
  std::array<uint8_t, 8> fill{};  // one element's bytes (PAD, PAD_V2)
  int mode = 0;                   // MIRROR_PAD: 0 REFLECT, 1 SYMMETRIC
};

template <typename T>
void store(std::array<uint8_t, 8>& fill, T v) {
  std::memcpy(fill.data(), &v, sizeof v);
}

// The padding element for PAD (zero, i.e. the zero point for asymmetric quantized types)
// or PAD_V2 (pad_value: FLOAT32 for float tensors, FLOAT16 also for float16; INT32 for
// quantized, int32 and bool8 tensors, taken as the stored value; FLOAT32 for quantized
// tensors is quantized with the tensor's scale and zero point).
Status pad_fill(const Model& m, const Operation& op, bool has_value, std::array<uint8_t, 8>& fill) {
  const Operand& in = m.operands[op.inputs[0]];
  double v = 0;
  bool stored = false;  // v is already in the tensor's stored representation
  if (has_value) {
    if (op.inputs.size() < 3) return invalid(input_label(2, "pad_value") + " is missing");
    const Operand& pv = m.operands[op.inputs[2]];
    if (pv.type == OperandType::FLOAT32 && in.type != OperandType::TENSOR_BOOL8) {
      NN_RETURN_IF_ERROR(check_scalar_input(m, op, 2, OperandType::FLOAT32, "pad_value"));
      v = m.scalar_f32(op.inputs[2]);
      NN_CHECK_OR_RETURN(std::isfinite(v) || in.type == OperandType::TENSOR_FLOAT32 ||
                             in.type == OperandType::TENSOR_FLOAT16,
                         StatusCode::kInvalidModel, input_label(2, "pad_value") + " is not finite");
    } else if (pv.type == OperandType::FLOAT16 && in.type == OperandType::TENSOR_FLOAT16) {
      NN_RETURN_IF_ERROR(check_scalar_input(m, op, 2, OperandType::FLOAT16, "pad_value"));
      uint16_t h;
      std::memcpy(&h, pv.data, 2);
      v = half_to_float(h);
    } else if (pv.type == OperandType::INT32 && in.type != OperandType::TENSOR_FLOAT32 &&
               in.type != OperandType::TENSOR_FLOAT16) {
      NN_RETURN_IF_ERROR(check_scalar_input(m, op, 2, OperandType::INT32, "pad_value"));
      v = m.scalar_i32(op.inputs[2]);
      stored = true;
    } else {
      return invalid(input_label(2, "pad_value") + " has type " + std::string(operand_type_name(pv.type)) +
                     ", which does not fit a " + std::string(operand_type_name(in.type)) + " input");
    }
  } else {
    stored = true;
    v = is_quantized(in.type) ? in.zero_point : 0;
  }
  auto quantized = [&](double lo, double hi) -> Result<double> {
    double q = v;
    if (!stored) {
      NN_CHECK_OR_RETURN(in.scale > 0, StatusCode::kInvalidModel,
                         "input 0 has scale " + std::to_string(in.scale) + "; cannot quantize pad_value");
      q = std::nearbyint(v / in.scale) + in.zero_point;
      q = std::clamp(q, lo, hi);
    }
    NN_CHECK_OR_RETURN(q >= lo && q <= hi, StatusCode::kInvalidModel,
                       input_label(2, "pad_value") + " " + std::to_string(static_cast<int64_t>(q)) +
                           " is outside the range of " + std::string(operand_type_name(in.type)));
    return q;
  };
  switch (in.type) {
    case OperandType::TENSOR_FLOAT32:
      store(fill, static_cast<float>(v));
      return Status::ok();
    case OperandType::TENSOR_FLOAT16:
      store(fill, float_to_half(static_cast<float>(v)));
      return Status::ok();
    case OperandType::TENSOR_INT32: {
      NN_CHECK_OR_RETURN(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
                         StatusCode::kInvalidModel, input_label(2, "pad_value") + " does not fit INT32");
      store(fill, static_cast<int32_t>(std::nearbyint(v)));
      return Status::ok();
    }
    case OperandType::TENSOR_BOOL8:
      store(fill, static_cast<uint8_t>(v != 0));
      return Status::ok();
    case OperandType::TENSOR_QUANT8_ASYMM: {
      NN_ASSIGN_OR_RETURN(double q, quantized(0, 255));
      store(fill, static_cast<uint8_t>(q));
      return Status::ok();
    }
    case OperandType::TENSOR_QUANT8_ASYMM_SIGNED:
    case OperandType::TENSOR_QUANT8_SYMM: {
      NN_ASSIGN_OR_RETURN(double q, quantized(-128, 127));
      store(fill, static_cast<int8_t>(q));
      return Status::ok();
    }
    case OperandType::TENSOR_QUANT16_ASYMM: {
      NN_ASSIGN_OR_RETURN(double q, quantized(0, 65535));
      store(fill, static_cast<uint16_t>(q));
      return Status::ok();
    }
    case OperandType::TENSOR_QUANT16_SYMM: {
      NN_ASSIGN_OR_RETURN(double q, quantized(-32768, 32767));
      store(fill, static_cast<int16_t>(q));
      return Status::ok();
    }
    default:
      return {StatusCode::kUnsupportedOp,
              "cannot pad a " + std::string(operand_type_name(in.type)) + " tensor"};
  }
}

template <OperationType kType>
Result<PadPlan> plan_pad(const Model& m, const Operation& op) {
  constexpr bool kMirror = kType == OperationType::MIRROR_PAD;
  constexpr size_t kInputs = kType == OperationType::PAD ? 2 : 3;
  NN_RETURN_IF_ERROR(check_input_count(op, kInputs, kInputs));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  PadPlan p;
  NN_ASSIGN_OR_RETURN(p.paddings, read_paddings(m, op, 1, in.size()));
  if constexpr (kMirror) {
    NN_ASSIGN_OR_RETURN(int32_t mode, read_scalar_i32(m, op, 2, "mode"));
    NN_CHECK_OR_RETURN(
        mode == 0 || mode == 1, StatusCode::kInvalidModel,
        input_label(2, "mode") + " must be 0 (REFLECT) or 1 (SYMMETRIC), got " + std::to_string(mode));
    p.mode = mode;
  } else {
    NN_RETURN_IF_ERROR(pad_fill(m, op, kType == OperationType::PAD_V2, p.fill));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t before = p.paddings[2 * i], after = p.paddings[2 * i + 1];
    if (kMirror) {
      const int64_t limit = p.mode == 0 ? int64_t{in[i]} - 1 : int64_t{in[i]};
      NN_CHECK_OR_RETURN(before <= limit && after <= limit, StatusCode::kInvalidModel,
                         "paddings " + i64_list(p.paddings) + ": dim " + std::to_string(i) + " of size " +
                             std::to_string(in[i]) + " allows at most " + std::to_string(limit) + " in " +
                             (p.mode == 0 ? "REFLECT" : "SYMMETRIC") + " mode");
    }
    dims.push_back(int64_t{in[i]} + before + after);
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  return p;
}

template <OperationType kType>
Status prepare_pad(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(PadPlan p, plan_pad<kType>(m, op));
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, std::move(p.out), in.type, &in);
  return Status::ok();
}

// PAD, PAD_V2: fill the output, then copy the input into its interior.
template <OperationType kType>
Status run_pad(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  NN_ASSIGN_OR_RETURN(PadPlan p, plan_pad<kType>(ctx.model, ctx.op));
  const size_t esize = element_size(ctx.input(0).type);
  const size_t total = num_elements(p.out);
  auto* dst = static_cast<uint8_t*>(ctx.output_data[0]);
  for (size_t i = 0; i < total; ++i) std::memcpy(dst + i * esize, p.fill.data(), esize);
  // Copy row by row along the last axis: walk the input with an odometer, writing at the
  // matching interior position of the output.
  const Dims& in = ctx.input(0).dims;
  const size_t rank = in.size();
  const auto* src = static_cast<const uint8_t*>(ctx.input_data[0]);
  if (rank == 0) {
    std::memcpy(dst, src, esize);
    return Status::ok();
  }
  const std::vector<int64_t> out_strides = row_major_strides(to_i64(p.out));
  int64_t base = 0;
  for (size_t i = 0; i < rank; ++i) base += p.paddings[2 * i] * out_strides[i];
  const size_t row = in[rank - 1] * esize;
  std::vector<uint32_t> idx(rank, 0);
  int64_t at = base;
  for (;;) {
    std::memcpy(dst + at * static_cast<int64_t>(esize), src, row);
    src += row;
    int k = static_cast<int>(rank) - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < in[k]) {
        at += out_strides[k];
        break;
      }
      at -= out_strides[k] * (in[k] - 1);
      idx[k] = 0;
    }
    if (k < 0) return Status::ok();
  }
}

// MIRROR_PAD: every output coordinate maps, per axis, to a source coordinate.
Status run_mirror_pad(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  NN_ASSIGN_OR_RETURN(PadPlan p, plan_pad<OperationType::MIRROR_PAD>(ctx.model, ctx.op));
  const Dims& in = ctx.input(0).dims;
  const size_t rank = in.size(), esize = element_size(ctx.input(0).type);
  auto* dst = static_cast<uint8_t*>(ctx.output_data[0]);
  const auto* src = static_cast<const uint8_t*>(ctx.input_data[0]);
  if (rank == 0) {
    std::memcpy(dst, src, esize);
    return Status::ok();
  }
  const std::vector<int64_t> in_strides = row_major_strides(to_i64(in));
  std::vector<std::vector<int64_t>> map(rank);  // source element offset per output coordinate
  for (size_t a = 0; a < rank; ++a) {
    const int64_t d = in[a], before = p.paddings[2 * a];
    map[a].resize(p.out[a]);
    for (int64_t o = 0; o < static_cast<int64_t>(p.out[a]); ++o) {
      int64_t i = o - before;
      if (i < 0) i = p.mode == 0 ? -i : -i - 1;
      if (i >= d) i = p.mode == 0 ? 2 * (d - 1) - i : 2 * d - 1 - i;
      map[a][o] = i * in_strides[a];
    }
  }
  std::vector<uint32_t> idx(rank, 0);
  const std::vector<int64_t>& last = map[rank - 1];
  for (;;) {
    int64_t base = 0;
    for (size_t a = 0; a + 1 < rank; ++a) base += map[a][idx[a]];
    for (int64_t v : last) {
      std::memcpy(dst, src + (base + v) * static_cast<int64_t>(esize), esize);
      dst += esize;
    }
    int k = static_cast<int>(rank) - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < p.out[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return Status::ok();
  }
}

}  // namespace

void register_pad_ops(OpRegistry& r) {
  r.add({OperationType::PAD, &prepare_pad<OperationType::PAD>, &run_pad<OperationType::PAD>});
  r.add({OperationType::PAD_V2, &prepare_pad<OperationType::PAD_V2>, &run_pad<OperationType::PAD_V2>});
  r.add({OperationType::MIRROR_PAD, &prepare_pad<OperationType::MIRROR_PAD>, &run_mirror_pad});
}

}  // namespace nn::shape_util
