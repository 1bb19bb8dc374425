// Shape ops: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, SPLIT, SLICE,
// STRIDED_SLICE, TILE, CHANNEL_SHUFFLE, DEPTH_TO_SPACE, SPACE_TO_DEPTH, PACK, REVERSE here;
// PAD, PAD_V2, MIRROR_PAD in pad.cpp, GATHER in gather.cpp. Operand lists: engine/ops/OPS.md.
//
// These ops move elements without looking at them, so every kernel copies by element size
// and works on any tensor type (float32, int32, bool8, quant8, float16, ...). Most of them
// are one strided copy: a "view" (dims plus source strides, possibly negative or zero)
// read in row-major order. Each op has one plan_* function that both prepare() and the
// reference kernel call, so the kernel runs on exactly what prepare() validated.
//
// Every parameter that shapes the output (shape, axes, perm, paddings, begin/size...) must
// be a constant operand. All index arithmetic is 64-bit and checked; an output is capped at
// 2^31 elements, and empty outputs (a zero dim) are refused.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "nn/ops/registry.h"
#include "ops/shape_util.h"
#include "ops/tensor_util.h"

namespace nn {
namespace {

using namespace shape_util;

std::string i32_list(const std::vector<int32_t>& v) {
  return i64_list(std::vector<int64_t>(v.begin(), v.end()));
}

// A constant TENSOR_INT32 of rank <= 1: axes, shape, perm, begin...
Result<std::vector<int32_t>> read_i32_vector(const Model& m, const Operation& op, size_t index,
                                             const char* name) {
  Status s = check_const_i32_vector(m, op, index, name);
  if (!s.is_ok()) return Status(s.code(), s.message() + operand_suffix(m, op, index));
  const Operand& o = m.operands[op.inputs[index]];
  std::vector<int32_t> v(num_elements(o.dims));
  if (!v.empty()) std::memcpy(v.data(), o.data, v.size() * sizeof(int32_t));
  return v;
}

// Optional trailing layout input (DEPTH_TO_SPACE, SPACE_TO_DEPTH): NHWC only.
Status check_layout_nhwc(const Model& m, const Operation& op, size_t index) {
  if (index >= op.inputs.size() || !m.has_value(op.inputs[index])) return Status::ok();
  NN_RETURN_IF_ERROR(check_scalar_input(m, op, index, OperandType::BOOL, "layout"));
  if (m.scalar_bool(op.inputs[index]))
    return {StatusCode::kUnsupportedOp, input_label(index, "layout") + " is NCHW; only NHWC is supported"};
  return Status::ok();
}

// Inputs joined into one output (CONCATENATION, PACK) must agree on type and quantization;
// CONCATENATION's quant8 inputs may differ in scale / zero point (NNAPI feature level 3):
// each is requantized to the output's.
bool is_quant8_asymm(OperandType t) {
  return t == OperandType::TENSOR_QUANT8_ASYMM || t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
}

Status check_same_type(const Model& m, const Operation& op, size_t index, size_t first,
                       bool requantizes = false) {
  const Operand& a = m.operands[op.inputs[first]];
  const Operand& b = m.operands[op.inputs[index]];
  if (a.type != b.type)
    return invalid(input_label(index) + " has type " + std::string(operand_type_name(b.type)) + ", input " +
                   std::to_string(first) + " has " + std::string(operand_type_name(a.type)));
  if (requantizes && is_quant8_asymm(a.type)) {
    if (!(b.scale > 0.f))
      return invalid(input_label(index) + " has scale " + std::to_string(b.scale) + ", must be > 0");
    return Status::ok();
  }
  if (is_quantized(a.type) && (a.scale != b.scale || a.zero_point != b.zero_point))
    return {StatusCode::kUnsupportedOp, input_label(index) + " has scale " + std::to_string(b.scale) +
                                            " zero point " + std::to_string(b.zero_point) + ", input " +
                                            std::to_string(first) + " has " + std::to_string(a.scale) +
                                            " / " + std::to_string(a.zero_point) +
                                            "; requantizing is not supported"};
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// The strided copy every permuting op reduces to.

// Output element at row-major index (i_0..i_k) of `dims` reads source element
// offset + sum(i_j * strides[j]). Strides are in elements and may be negative or zero.
struct View {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

template <size_t E>
void gather_view_impl(const uint8_t* src, uint8_t* dst, const View& v) {
  const size_t rank = v.dims.size();
  if (rank == 0) {
    std::memcpy(dst, src + v.offset * static_cast<int64_t>(E), E);
    return;
  }
  for (int64_t d : v.dims)
    if (d <= 0) return;
  const int64_t inner = v.dims[rank - 1];
  const int64_t inner_stride = v.strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t so = v.offset;
  for (;;) {
    const uint8_t* s = src + so * static_cast<int64_t>(E);
    if (inner_stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * E);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + i * E, s + i * inner_stride * static_cast<int64_t>(E), E);
    }
    dst += static_cast<size_t>(inner) * E;
    int k = static_cast<int>(rank) - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < v.dims[k]) {
        so += v.strides[k];
        break;
      }
      so -= v.strides[k] * (v.dims[k] - 1);
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

void gather_view(const void* src, void* dst, size_t element_bytes, const View& v) {
  auto s = static_cast<const uint8_t*>(src);
  auto d = static_cast<uint8_t*>(dst);
  switch (element_bytes) {
    case 1:
      return gather_view_impl<1>(s, d, v);
    case 2:
      return gather_view_impl<2>(s, d, v);
    case 4:
      return gather_view_impl<4>(s, d, v);
    case 8:
      return gather_view_impl<8>(s, d, v);
    default:
      break;
  }
}

struct Plan {
  Dims out;
  View view;  // for the ops that are one strided copy
};

// A reference kernel for ops whose plan is one view of input 0.
template <Result<Plan> (*PlanFn)(const Model&, const Operation&)>
Status run_view(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  NN_ASSIGN_OR_RETURN(Plan p, PlanFn(ctx.model, ctx.op));
  gather_view(ctx.input_data[0], ctx.output_data[0], element_size(ctx.input(0).type), p.view);
  return Status::ok();
}

template <Result<Plan> (*PlanFn)(const Model&, const Operation&)>
Status prepare_from_plan(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(Plan p, PlanFn(m, op));
  const Operand in = m.operands[op.inputs[0]];
  set_output(m, op, 0, std::move(p.out), in.type, &in);
  return Status::ok();
}

// A contiguous copy (RESHAPE, SQUEEZE, EXPAND_DIMS): same bytes, new dims.
Status copy_input0(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  std::memcpy(ctx.output_data[0], ctx.input_data[0], ctx.output(0).byte_size());
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// RESHAPE, SQUEEZE, EXPAND_DIMS

Result<Plan> plan_reshape(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> shape, read_i32_vector(m, op, 1, "shape"));
  const int64_t count = static_cast<int64_t>(num_elements(m.operands[op.inputs[0]].dims));
  std::vector<int64_t> dims(shape.begin(), shape.end());
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      NN_CHECK_OR_RETURN(inferred < 0, StatusCode::kInvalidModel,
                         input_label(1, "shape") + " " + i32_list(shape) + " has more than one -1");
      inferred = static_cast<int>(i);
      continue;
    }
    NN_CHECK_OR_RETURN(dims[i] >= 1, StatusCode::kInvalidModel,
                       input_label(1, "shape") + " " + i32_list(shape) + ": dim " + std::to_string(i) +
                           " must be positive or -1");
    // known <= count before this dim; comparing by division cannot overflow.
    NN_CHECK_OR_RETURN(dims[i] <= count / known, StatusCode::kInvalidModel,
                       input_label(1, "shape") + " " + i32_list(shape) +
                           " holds more elements than the input " +
                           dims_to_string(m.operands[op.inputs[0]].dims));
    known *= dims[i];
  }
  if (inferred >= 0) {
    NN_CHECK_OR_RETURN(count % known == 0, StatusCode::kInvalidModel,
                       input_label(1, "shape") + ": cannot reshape " +
                           dims_to_string(m.operands[op.inputs[0]].dims) + " to " + i32_list(shape) + ": " +
                           std::to_string(count) + " elements are not a multiple of " +
                           std::to_string(known));
    dims[inferred] = count / known;
  } else {
    NN_CHECK_OR_RETURN(known == count, StatusCode::kInvalidModel,
                       input_label(1, "shape") + ": cannot reshape " +
                           dims_to_string(m.operands[op.inputs[0]].dims) + " (" + std::to_string(count) +
                           " elements) to " + i32_list(shape));
  }
  NN_ASSIGN_OR_RETURN(Dims out, make_dims(dims));
  return Plan{std::move(out), {}};
}

Result<Plan> plan_squeeze(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  std::vector<char> drop(in.size(), 0);
  std::vector<int32_t> axes;
  if (op.inputs.size() > 1 && m.has_value(op.inputs[1])) {
    NN_ASSIGN_OR_RETURN(axes, read_i32_vector(m, op, 1, "axes"));
  }
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int32_t a : axes) {
      Result<int> axis = normalize_axis(a, in.size());
      if (!axis.is_ok()) return invalid(input_label(1, "axes") + ": " + axis.status().message());
      NN_CHECK_OR_RETURN(in[*axis] == 1, StatusCode::kInvalidModel,
                         "cannot squeeze axis " + std::to_string(a) + " of " + dims_to_string(in) +
                             ": its size is " + std::to_string(in[*axis]) + ", not 1");
      drop[*axis] = 1;
    }
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) dims.push_back(in[i]);
  NN_ASSIGN_OR_RETURN(Dims out, make_dims(dims));
  return Plan{std::move(out), {}};
}

Result<Plan> plan_expand_dims(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input", kMaxRank - 1));
  NN_ASSIGN_OR_RETURN(int32_t axis, read_scalar_i32(m, op, 1, "axis"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  Result<int> a = normalize_axis(axis, in.size() + 1);
  if (!a.is_ok()) return invalid(input_label(1, "axis") + ": " + a.status().message());
  std::vector<int64_t> dims = to_i64(in);
  dims.insert(dims.begin() + *a, 1);
  NN_ASSIGN_OR_RETURN(Dims out, make_dims(dims));
  return Plan{std::move(out), {}};
}

// ---------------------------------------------------------------------------------------
// TRANSPOSE, REVERSE, SLICE, STRIDED_SLICE, TILE, CHANNEL_SHUFFLE, DEPTH/SPACE

constexpr size_t kMaxTransposeRank = 6;

Result<Plan> plan_transpose(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 1, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input", kMaxTransposeRank));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const size_t rank = in.size();
  std::vector<int32_t> perm;
  if (op.inputs.size() > 1 && m.has_value(op.inputs[1])) {
    NN_ASSIGN_OR_RETURN(perm, read_i32_vector(m, op, 1, "perm"));
  }
  if (perm.empty())  // omitted (or given empty): reverse the dims, as NNAPI and ONNX
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int32_t>(rank - 1 - i));
  NN_CHECK_OR_RETURN(perm.size() == rank, StatusCode::kInvalidModel,
                     input_label(1, "perm") + " " + i32_list(perm) + " has " + std::to_string(perm.size()) +
                         " entries, input " + dims_to_string(in) + " has rank " + std::to_string(rank));
  std::vector<char> seen(rank, 0);
  const std::vector<int64_t> in_strides = row_major_strides(to_i64(in));
  Plan p;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < rank; ++i) {
    const int32_t a = perm[i];
    NN_CHECK_OR_RETURN(a >= 0 && static_cast<size_t>(a) < rank && !seen[a], StatusCode::kInvalidModel,
                       input_label(1, "perm") + " " + i32_list(perm) + " is not a permutation of 0.." +
                           std::to_string(rank - 1));
    seen[a] = 1;
    dims.push_back(in[a]);
    p.view.strides.push_back(in_strides[a]);
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  p.view.dims = dims;
  return p;
}

Result<Plan> plan_reverse(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> axes, read_i32_vector(m, op, 1, "axis"));
  NN_CHECK_OR_RETURN(!axes.empty(), StatusCode::kInvalidModel, input_label(1, "axis") + " is empty");
  const Dims& in = m.operands[op.inputs[0]].dims;
  Plan p;
  p.view.dims = to_i64(in);
  p.view.strides = row_major_strides(p.view.dims);
  std::vector<char> seen(in.size(), 0);
  for (int32_t a : axes) {
    Result<int> axis = normalize_axis(a, in.size());
    if (!axis.is_ok()) return invalid(input_label(1, "axis") + ": " + axis.status().message());
    NN_CHECK_OR_RETURN(
        !seen[*axis], StatusCode::kInvalidModel,
        input_label(1, "axis") + " " + i32_list(axes) + " names axis " + std::to_string(*axis) + " twice");
    seen[*axis] = 1;
    p.view.offset += (p.view.dims[*axis] - 1) * p.view.strides[*axis];
    p.view.strides[*axis] = -p.view.strides[*axis];
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(p.view.dims));
  return p;
}

Result<Plan> plan_slice(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> begin, read_i32_vector(m, op, 1, "begin"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> size, read_i32_vector(m, op, 2, "size"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const size_t rank = in.size();
  NN_CHECK_OR_RETURN(begin.size() == rank && size.size() == rank, StatusCode::kInvalidModel,
                     "begin " + i32_list(begin) + " and size " + i32_list(size) + " must have " +
                         std::to_string(rank) + " entries for input " + dims_to_string(in));
  Plan p;
  const std::vector<int64_t> in_strides = row_major_strides(to_i64(in));
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = in[i], b = begin[i];
    int64_t s = size[i];
    NN_CHECK_OR_RETURN(b >= 0 && b < d, StatusCode::kInvalidModel,
                       "begin " + i32_list(begin) + ": entry " + std::to_string(i) + " is outside [0," +
                           std::to_string(d) + ") for input " + dims_to_string(in));
    if (s == -1) s = d - b;
    NN_CHECK_OR_RETURN(s >= 1 && b + s <= d, StatusCode::kInvalidModel,
                       "size " + i32_list(size) + ": entry " + std::to_string(i) + " must be -1 or in [1," +
                           std::to_string(d - b) + "] for begin " + std::to_string(b) + " and input " +
                           dims_to_string(in));
    p.view.dims.push_back(s);
    p.view.strides.push_back(in_strides[i]);
    p.view.offset += b * in_strides[i];
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(p.view.dims));
  return p;
}

// TFLite's STRIDED_SLICE (no ellipsis or new-axis masks, as NNAPI): negative begin/end
// count from the end, then clamp to [0, d] (stride > 0) or [-1, d-1] (stride < 0); a masked
// begin/end takes the widest value; a shrink axis takes exactly element `begin`, which must
// exist, and is dropped from the output.
Result<Plan> plan_strided_slice(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 7, 7));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> begin, read_i32_vector(m, op, 1, "begin"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> end, read_i32_vector(m, op, 2, "end"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> strides, read_i32_vector(m, op, 3, "strides"));
  NN_ASSIGN_OR_RETURN(int32_t begin_mask, read_scalar_i32(m, op, 4, "begin_mask"));
  NN_ASSIGN_OR_RETURN(int32_t end_mask, read_scalar_i32(m, op, 5, "end_mask"));
  NN_ASSIGN_OR_RETURN(int32_t shrink_mask, read_scalar_i32(m, op, 6, "shrink_axis_mask"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const size_t rank = in.size();
  NN_CHECK_OR_RETURN(
      begin.size() == rank && end.size() == rank && strides.size() == rank, StatusCode::kInvalidModel,
      "begin " + i32_list(begin) + ", end " + i32_list(end) + " and strides " + i32_list(strides) +
          " must have " + std::to_string(rank) + " entries for input " + dims_to_string(in));
  const int64_t all_bits = (int64_t{1} << rank) - 1;
  const std::pair<const char*, int32_t> masks[] = {
      {"begin_mask", begin_mask}, {"end_mask", end_mask}, {"shrink_axis_mask", shrink_mask}};
  for (const auto& [name, mask] : masks)
    NN_CHECK_OR_RETURN(
        mask >= 0 && (mask & ~all_bits) == 0, StatusCode::kInvalidModel,
        std::string(name) + " " + std::to_string(mask) + " has bits beyond rank " + std::to_string(rank));
  const std::vector<int64_t> in_strides = row_major_strides(to_i64(in));
  Plan p;
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = in[i], s = strides[i];
    NN_CHECK_OR_RETURN(s != 0, StatusCode::kInvalidModel,
                       "strides " + i32_list(strides) + ": entry " + std::to_string(i) + " is 0");
    int64_t b = begin[i], count;
    if (shrink_mask & (1 << i)) {
      if (b < 0) b += d;
      NN_CHECK_OR_RETURN(b >= 0 && b < d, StatusCode::kInvalidModel,
                         "begin " + i32_list(begin) + ": shrink axis " + std::to_string(i) + " index " +
                             std::to_string(begin[i]) + " is outside input " + dims_to_string(in));
      count = 1;
    } else {
      const int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? d : d - 1;
      int64_t e = end[i];
      if (begin_mask & (1 << i)) {
        b = s > 0 ? lo : hi;
      } else {
        if (b < 0) b += d;
        b = std::clamp(b, lo, hi);
      }
      if (end_mask & (1 << i)) {
        e = s > 0 ? hi : lo;
      } else {
        if (e < 0) e += d;
        e = std::clamp(e, lo, hi);
      }
      count = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
      out_dims.push_back(count);
      NN_CHECK_OR_RETURN(count >= 1, StatusCode::kInvalidModel,
                         "axis " + std::to_string(i) + " selects no element (begin " + i32_list(begin) +
                             ", end " + i32_list(end) + ", strides " + i32_list(strides) + " on " +
                             dims_to_string(in) + "); empty tensors are not supported");
    }
    p.view.dims.push_back(count);
    p.view.strides.push_back(count == 1 ? 0 : s * in_strides[i]);
    p.view.offset += b * in_strides[i];
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(out_dims));
  return p;
}

Result<Plan> plan_tile(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 2));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(std::vector<int32_t> multiples, read_i32_vector(m, op, 1, "multiples"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  NN_CHECK_OR_RETURN(multiples.size() == in.size(), StatusCode::kInvalidModel,
                     input_label(1, "multiples") + " " + i32_list(multiples) + " must have " +
                         std::to_string(in.size()) + " entries for input " + dims_to_string(in));
  const std::vector<int64_t> in_strides = row_major_strides(to_i64(in));
  Plan p;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < in.size(); ++i) {
    NN_CHECK_OR_RETURN(multiples[i] >= 1, StatusCode::kInvalidModel,
                       input_label(1, "multiples") + " " + i32_list(multiples) + ": entry " +
                           std::to_string(i) + " must be >= 1");
    dims.push_back(int64_t{in[i]} * multiples[i]);
    // Output axis i seen as [multiple, d]: the repeat index does not move in the source.
    p.view.dims.push_back(multiples[i]);
    p.view.strides.push_back(0);
    p.view.dims.push_back(in[i]);
    p.view.strides.push_back(in_strides[i]);
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  return p;
}

Result<Plan> plan_channel_shuffle(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(int32_t groups, read_scalar_i32(m, op, 1, "num_groups"));
  NN_ASSIGN_OR_RETURN(int32_t axis_value, read_scalar_i32(m, op, 2, "axis"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  Result<int> axis = normalize_axis(axis_value, in.size());
  if (!axis.is_ok()) return invalid(input_label(2, "axis") + ": " + axis.status().message());
  const int64_t c = in[*axis];
  NN_CHECK_OR_RETURN(groups >= 1 && c % groups == 0, StatusCode::kInvalidModel,
                     input_label(1, "num_groups") + " " + std::to_string(groups) +
                         " must be >= 1 and divide " + std::to_string(c) + " (axis " + std::to_string(*axis) +
                         " of " + dims_to_string(in) + ")");
  const AxisSplit split = split_at_axis(in, *axis);
  const int64_t per_group = c / groups, inner = static_cast<int64_t>(split.inner);
  // [outer, groups, per_group, inner] read as [outer, per_group, groups, inner].
  Plan p;
  p.view.dims = {static_cast<int64_t>(split.outer), per_group, groups, inner};
  p.view.strides = {c * inner, inner, per_group * inner, 1};
  NN_ASSIGN_OR_RETURN(p.out, make_dims(to_i64(in)));
  return p;
}

Result<int64_t> read_block_size(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 2, 3));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_RETURN_IF_ERROR(check_rank(m, op, 0, 4, 4, "input"));
  NN_RETURN_IF_ERROR(check_layout_nhwc(m, op, 2));
  NN_ASSIGN_OR_RETURN(int32_t block, read_scalar_i32(m, op, 1, "block_size"));
  NN_CHECK_OR_RETURN(block >= 1, StatusCode::kInvalidModel,
                     input_label(1, "block_size") + " must be >= 1, got " + std::to_string(block));
  return int64_t{block};
}

// NHWC, DCR order (NNAPI, TFLite): output pixel (h*b + bh, w*b + bw) channel c reads input
// pixel (h, w) channel (bh*b + bw)*C_out + c.
Result<Plan> plan_depth_to_space(const Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(int64_t b, read_block_size(m, op));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const int64_t n = in[0], h = in[1], w = in[2], c = in[3];
  NN_CHECK_OR_RETURN(c % (b * b) == 0, StatusCode::kInvalidModel,
                     "channels " + std::to_string(c) + " of " + dims_to_string(in) +
                         " are not a multiple of block_size^2 = " + std::to_string(b * b));
  const int64_t co = c / (b * b);
  Plan p;
  NN_ASSIGN_OR_RETURN(p.out, make_dims({n, h * b, w * b, co}));
  p.view.dims = {n, h, b, w, b, co};
  p.view.strides = {h * w * c, w * c, b * co, c, co, 1};
  return p;
}

Result<Plan> plan_space_to_depth(const Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(int64_t b, read_block_size(m, op));
  const Dims& in = m.operands[op.inputs[0]].dims;
  const int64_t n = in[0], h = in[1], w = in[2], c = in[3];
  NN_CHECK_OR_RETURN(
      h % b == 0 && w % b == 0, StatusCode::kInvalidModel,
      "height and width of " + dims_to_string(in) + " must be multiples of block_size " + std::to_string(b));
  Plan p;
  NN_ASSIGN_OR_RETURN(p.out, make_dims({n, h / b, w / b, c * b * b}));
  p.view.dims = {n, h / b, w / b, b, b, c};
  p.view.strides = {h * w * c, b * w * c, b * c, w * c, c, 1};
  return p;
}

// ---------------------------------------------------------------------------------------
// CONCATENATION, PACK, SPLIT

struct JoinPlan {
  Dims out;
  size_t first = 0, count = 0;  // tensor inputs [first, first + count)
  int axis = 0;                 // in the output
};

Result<JoinPlan> plan_concatenation(const Model& m, const Operation& op) {
  NN_CHECK_OR_RETURN(
      op.inputs.size() >= 2, StatusCode::kInvalidModel,
      "expects at least 2 inputs (tensors, then axis), got " + std::to_string(op.inputs.size()));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  JoinPlan p;
  p.count = op.inputs.size() - 1;
  NN_ASSIGN_OR_RETURN(int32_t axis_value, read_scalar_i32(m, op, p.count, "axis"));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, nullptr));
  const Dims& d0 = m.operands[op.inputs[0]].dims;
  NN_CHECK_OR_RETURN(!d0.empty(), StatusCode::kInvalidModel, "input 0 is a scalar; cannot concatenate");
  Result<int> axis = normalize_axis(axis_value, d0.size());
  if (!axis.is_ok()) return invalid(input_label(p.count, "axis") + ": " + axis.status().message());
  p.axis = *axis;
  std::vector<int64_t> dims = to_i64(d0);
  for (size_t i = 1; i < p.count; ++i) {
    NN_RETURN_IF_ERROR(check_data_input(m, op, i, nullptr));
    NN_RETURN_IF_ERROR(check_same_type(m, op, i, 0, /*requantizes=*/true));
    const Dims& di = m.operands[op.inputs[i]].dims;
    bool ok = di.size() == d0.size();
    for (size_t k = 0; ok && k < di.size(); ++k) ok = static_cast<int>(k) == p.axis || di[k] == d0[k];
    NN_CHECK_OR_RETURN(ok, StatusCode::kInvalidModel,
                       input_label(i) + " " + dims_to_string(di) + " does not match input 0 " +
                           dims_to_string(d0) + " outside axis " + std::to_string(p.axis));
    dims[p.axis] += di[p.axis];
  }
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  return p;
}

Result<JoinPlan> plan_pack(const Model& m, const Operation& op) {
  NN_CHECK_OR_RETURN(
      op.inputs.size() >= 2, StatusCode::kInvalidModel,
      "expects at least 2 inputs (axis, then tensors), got " + std::to_string(op.inputs.size()));
  NN_RETURN_IF_ERROR(check_output_count(op, 1));
  JoinPlan p;
  p.first = 1;
  p.count = op.inputs.size() - 1;
  NN_ASSIGN_OR_RETURN(int32_t axis_value, read_scalar_i32(m, op, 0, "axis"));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 1, nullptr, kMaxRank - 1));
  const Dims& d0 = m.operands[op.inputs[1]].dims;
  Result<int> axis = normalize_axis(axis_value, d0.size() + 1);
  if (!axis.is_ok()) return invalid(input_label(0, "axis") + ": " + axis.status().message());
  p.axis = *axis;
  for (size_t i = 2; i < op.inputs.size(); ++i) {
    NN_RETURN_IF_ERROR(check_data_input(m, op, i, nullptr));
    NN_RETURN_IF_ERROR(check_same_type(m, op, i, 1));
    const Dims& di = m.operands[op.inputs[i]].dims;
    NN_CHECK_OR_RETURN(
        di == d0, StatusCode::kInvalidModel,
        input_label(i) + " " + dims_to_string(di) + " differs from input 1 " + dims_to_string(d0));
  }
  std::vector<int64_t> dims = to_i64(d0);
  dims.insert(dims.begin() + p.axis, static_cast<int64_t>(p.count));
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  return p;
}

template <Result<JoinPlan> (*PlanFn)(const Model&, const Operation&)>
Status prepare_join(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(JoinPlan p, PlanFn(m, op));
  const Operand like = m.operands[op.inputs[p.first]];
  const Operand declared = m.operands[op.outputs[0]];
  set_output(m, op, 0, std::move(p.out), like.type, &like);
  if (PlanFn == plan_concatenation && is_quant8_asymm(like.type) && declared.type == like.type &&
      declared.scale > 0.f) {
    Operand& out = m.operands[op.outputs[0]];
    out.scale = declared.scale;
    out.zero_point = declared.zero_point;
  }
  return Status::ok();
}

// A quant8 input whose scale / zero point differ from the output's: TFLite's
// ConcatenationWithScaling (round(q * s_in / s_out - zp_in * s_in / s_out) + zp_out, in float),
// or with Requantization::kFp32 PyTorch's quantized cat (dequantize, quantize with
// 1 / s_out, ties to even).
void requantize_block(const Operand& in, const Operand& out, const void* src, void* dst, size_t count,
                      Requantization mode) {
  const float scale = in.scale / out.scale;
  const float bias = -float(in.zero_point) * scale;
  const float inverse_out_scale = 1.f / out.scale;
  const double exact_ratio = double(in.scale) / double(out.scale);
  const bool ratio_is_finite = std::isfinite(scale) && std::isfinite(bias) && std::isfinite(inverse_out_scale);
  const int32_t lo = in.type == OperandType::TENSOR_QUANT8_ASYMM ? 0 : -128, hi = lo + 255;
  for (size_t j = 0; j < count; ++j) {
    const int32_t q = in.type == OperandType::TENSOR_QUANT8_ASYMM ? int32_t(static_cast<const uint8_t*>(src)[j])
                                                                  : int32_t(static_cast<const int8_t*>(src)[j]);
    // A ratio past float (a denormal output scale) is taken in double: the float forms would
    // give inf - inf = NaN. Clamped before the cast either way.
    const double rounded = !ratio_is_finite ? std::nearbyint(double(q - in.zero_point) * exact_ratio)
                           : mode == Requantization::kFp32
                               ? std::nearbyint(float(q - in.zero_point) * in.scale * inverse_out_scale)
                               : std::round(float(q) * scale + bias);
    const int32_t v = static_cast<int32_t>(std::clamp(rounded + out.zero_point, double(lo), double(hi)));
    if (in.type == OperandType::TENSOR_QUANT8_ASYMM)
      static_cast<uint8_t*>(dst)[j] = static_cast<uint8_t>(v);
    else
      static_cast<int8_t*>(dst)[j] = static_cast<int8_t>(v);
  }
}

// Each tensor input contributes a block of (its size along the axis) * inner elements per
// outer index; PACK's inputs have size 1 along the new axis.
template <Result<JoinPlan> (*PlanFn)(const Model&, const Operation&)>
Status run_join(const OpContext& ctx) {
  NN_ASSIGN_OR_RETURN(JoinPlan p, PlanFn(ctx.model, ctx.op));
  for (size_t i = p.first; i < p.first + p.count; ++i) NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, i));
  const size_t esize = element_size(ctx.output(0).type);
  const AxisSplit split = split_at_axis(p.out, p.axis);
  const bool pack = p.first == 1;
  std::vector<size_t> block(p.count);
  for (size_t i = 0; i < p.count; ++i)
    block[i] = (pack ? 1 : ctx.input(p.first + i).dims[p.axis]) * split.inner * esize;
  auto* dst = static_cast<uint8_t*>(ctx.output_data[0]);
  for (size_t o = 0; o < split.outer; ++o)
    for (size_t i = 0; i < p.count; ++i) {
      const Operand& in = ctx.input(p.first + i);
      const uint8_t* src = static_cast<const uint8_t*>(ctx.input_data[p.first + i]) + o * block[i];
      if (is_quant8_asymm(in.type) &&
          (in.scale != ctx.output(0).scale || in.zero_point != ctx.output(0).zero_point))
        requantize_block(in, ctx.output(0), src, dst, block[i] / esize, ctx.requantization);
      else
        std::memcpy(dst, src, block[i]);
      dst += block[i];
    }
  return Status::ok();
}

struct SplitPlan {
  Dims out;
  int axis = 0;
  int64_t parts = 1;
};

Result<SplitPlan> plan_split(const Model& m, const Operation& op) {
  NN_RETURN_IF_ERROR(check_input_count(op, 3, 3));
  NN_RETURN_IF_ERROR(check_data_input(m, op, 0, "input"));
  NN_ASSIGN_OR_RETURN(int32_t axis_value, read_scalar_i32(m, op, 1, "axis"));
  NN_ASSIGN_OR_RETURN(int32_t parts, read_scalar_i32(m, op, 2, "num_outputs"));
  const Dims& in = m.operands[op.inputs[0]].dims;
  Result<int> axis = normalize_axis(axis_value, in.size());
  if (!axis.is_ok()) return invalid(input_label(1, "axis") + ": " + axis.status().message());
  NN_CHECK_OR_RETURN(parts >= 1 && in[*axis] % parts == 0, StatusCode::kInvalidModel,
                     input_label(2, "num_outputs") + " " + std::to_string(parts) +
                         " must be >= 1 and divide " + std::to_string(in[*axis]) + " (axis " +
                         std::to_string(*axis) + " of " + dims_to_string(in) + ")");
  NN_CHECK_OR_RETURN(op.outputs.size() == static_cast<size_t>(parts), StatusCode::kInvalidModel,
                     "num_outputs is " + std::to_string(parts) + " but the op lists " +
                         std::to_string(op.outputs.size()) + " outputs");
  std::vector<int64_t> dims = to_i64(in);
  dims[*axis] /= parts;
  SplitPlan p;
  NN_ASSIGN_OR_RETURN(p.out, make_dims(dims));
  p.axis = *axis;
  p.parts = parts;
  return p;
}

Status prepare_split(Model& m, const Operation& op) {
  NN_ASSIGN_OR_RETURN(SplitPlan p, plan_split(m, op));
  const Operand in = m.operands[op.inputs[0]];
  for (size_t i = 0; i < op.outputs.size(); ++i) set_output(m, op, i, p.out, in.type, &in);
  return Status::ok();
}

Status run_split(const OpContext& ctx) {
  NN_RETURN_IF_ERROR(check_kernel_buffers(ctx, 0));
  NN_ASSIGN_OR_RETURN(SplitPlan p, plan_split(ctx.model, ctx.op));
  const AxisSplit split = split_at_axis(ctx.input(0).dims, p.axis);
  const size_t block =
      split.axis / static_cast<size_t>(p.parts) * split.inner * element_size(ctx.input(0).type);
  const auto* src = static_cast<const uint8_t*>(ctx.input_data[0]);
  for (size_t o = 0; o < split.outer; ++o)
    for (size_t i = 0; i < static_cast<size_t>(p.parts); ++i) {
      std::memcpy(static_cast<uint8_t*>(ctx.output_data[i]) + o * block, src, block);
      src += block;
    }
  return Status::ok();
}

template <Result<Plan> (*PlanFn)(const Model&, const Operation&)>
OpDef view_op(OperationType type) {
  return {type, &prepare_from_plan<PlanFn>, &run_view<PlanFn>};
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add({OperationType::RESHAPE, &prepare_from_plan<plan_reshape>, &copy_input0});
  r.add({OperationType::SQUEEZE, &prepare_from_plan<plan_squeeze>, &copy_input0});
  r.add({OperationType::EXPAND_DIMS, &prepare_from_plan<plan_expand_dims>, &copy_input0});
  r.add(view_op<plan_transpose>(OperationType::TRANSPOSE));
  r.add(view_op<plan_reverse>(OperationType::REVERSE));
  r.add(view_op<plan_slice>(OperationType::SLICE));
  r.add(view_op<plan_strided_slice>(OperationType::STRIDED_SLICE));
  r.add(view_op<plan_tile>(OperationType::TILE));
  r.add(view_op<plan_channel_shuffle>(OperationType::CHANNEL_SHUFFLE));
  r.add(view_op<plan_depth_to_space>(OperationType::DEPTH_TO_SPACE));
  r.add(view_op<plan_space_to_depth>(OperationType::SPACE_TO_DEPTH));
  r.add({OperationType::CONCATENATION, &prepare_join<plan_concatenation>, &run_join<plan_concatenation>});
  r.add({OperationType::PACK, &prepare_join<plan_pack>, &run_join<plan_pack>});
  r.add({OperationType::SPLIT, &prepare_split, &run_split});
  shape_util::register_pad_ops(r);
  shape_util::register_gather_ops(r);
}

}  // namespace nn
