// ONNX reductions (ReduceMean, ReduceSum, ... ReduceLogSumExp), ArgMax/ArgMin and
// Softmax/LogSoftmax; registered by register_shape_translators (ops_shape.cpp).
#include "import/onnx/converter.h"
#include "import/onnx/ops_shape_util.h"

namespace nn::onnx_import {

namespace {

// The ONNX dims and new IR layout after removing `removed` ONNX axes from a value in `perm`.
void drop_axes(const Shape& dims, const Perm& perm, const std::vector<bool>& removed, Shape* out_dims,
               Perm* out_perm) {
  std::vector<int> renumber(dims.size(), -1);
  int next = 0;
  out_dims->clear();
  for (size_t a = 0; a < dims.size(); ++a)
    if (!removed[a]) {
      renumber[a] = next++;
      out_dims->push_back(dims[a]);
    }
  out_perm->clear();
  for (int ax : perm)
    if (!removed[ax]) out_perm->push_back(renumber[ax]);
}

// Reductions: done in the input's layout; with keepdims=0 the survivors keep their order.
Status reduce_common(Converter& c, Value& x, OperationType type, std::vector<int64_t> axes, bool keep,
                     Value* result) {
  const size_t r = x.rank();
  std::vector<bool> reduced(r, false);
  if (axes.empty()) reduced.assign(r, true);
  for (int64_t a : axes) {
    int64_t ax;
    NN_RETURN_IF_ERROR(normalize_axis(c, a, r, &ax));
    reduced[ax] = true;
  }
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  std::vector<int32_t> ir_axes;
  for (size_t j = 0; j < r; ++j)
    if (reduced[perm[j]]) ir_axes.push_back(static_cast<int32_t>(j));
  Shape kept_dims = x.dims;
  for (size_t k = 0; k < r; ++k)
    if (reduced[k]) kept_dims[k] = 1;
  Shape out_dims;
  Perm out_perm;
  drop_axes(x.dims, perm, reduced, &out_dims, &out_perm);
  const bool all = out_dims.empty();
  const bool ir_keep = keep || all;
  uint32_t keep_op = type == OperationType::MEAN ? c.model().add_scalar_i32(ir_keep ? 1 : 0)
                                                 : c.model().add_scalar_bool(ir_keep);
  uint32_t axes_op = c.const_i32({static_cast<int64_t>(ir_axes.size())}, ir_axes);
  const OperandType t = c.model().operands[in].type;
  if (ir_keep) {
    uint32_t o = c.emit(type, {in, axes_op, keep_op}, t, permute(kept_dims, perm));
    *result = c.runtime(o, kept_dims, perm, x.onnx_type);
    if (!keep) return c.unsupported("reducing every axis to a scalar (keepdims=0)");
    return Status::ok();
  }
  uint32_t o = c.emit(type, {in, axes_op, keep_op}, t, permute(out_dims, out_perm));
  *result = c.runtime(o, out_dims, out_perm, x.onnx_type);
  return Status::ok();
}

Status unary_op(Converter& c, OperationType type, Value& x, Value* result) {
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  uint32_t o = c.emit(type, {in}, c.model().operands[in].type, permute(x.dims, perm));
  *result = c.runtime(o, x.dims, perm, x.onnx_type);
  return Status::ok();
}

Status t_reduce(Converter& c) {
  const std::string& op = c.node().op_type();
  bool present;
  // ReduceSum takes axes as an input from opset 13, the others from opset 18.
  NN_ASSIGN_OR_RETURN(auto axes, axes_param(c, 1, &present));
  const bool keep = c.attr_i("keepdims", 1) != 0;
  if (axes.empty() && c.attr_i("noop_with_empty_axes", 0)) {
    c.set_out(0, c.in(0));
    return Status::ok();
  }
  Value x = c.in(0);
  Value tmp, out;
  OperationType type = OperationType::REDUCE_SUM;
  if (op == "ReduceMean")
    type = OperationType::MEAN;
  else if (op == "ReduceMax")
    type = OperationType::REDUCE_MAX;
  else if (op == "ReduceMin")
    type = OperationType::REDUCE_MIN;
  else if (op == "ReduceProd")
    type = OperationType::REDUCE_PROD;
  if (op == "ReduceL1") {
    NN_RETURN_IF_ERROR(unary_op(c, OperationType::ABS, x, &tmp));
    x = tmp;
  } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
    const Perm perm = c.layout_of(x);
    NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
    uint32_t o = c.emit(OperationType::MUL, {in, in, c.model().add_scalar_i32(0)},
                        c.model().operands[in].type, permute(x.dims, perm));
    x = c.runtime(o, x.dims, perm, x.onnx_type);
  } else if (op == "ReduceLogSumExp") {
    NN_RETURN_IF_ERROR(unary_op(c, OperationType::EXP, x, &tmp));
    x = tmp;
  }
  NN_RETURN_IF_ERROR(reduce_common(c, x, type, axes, keep, &out));
  if (op == "ReduceL2") {
    NN_RETURN_IF_ERROR(unary_op(c, OperationType::SQRT, out, &tmp));
    out = tmp;
  } else if (op == "ReduceLogSum" || op == "ReduceLogSumExp") {
    NN_RETURN_IF_ERROR(unary_op(c, OperationType::LOG, out, &tmp));
    out = tmp;
  }
  c.set_out(0, std::move(out));
  return Status::ok();
}

Status t_argminmax(Converter& c) {
  Value& x = c.in(0);
  int64_t axis;
  NN_RETURN_IF_ERROR(normalize_axis(c, c.attr_i("axis", 0), x.rank(), &axis));
  const bool keep = c.attr_i("keepdims", 1) != 0;
  const bool last = c.attr_i("select_last_index", 0) != 0;
  const OperationType type = c.node().op_type() == "ArgMax" ? OperationType::ARGMAX : OperationType::ARGMIN;
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  const int ax = ir_axis(perm, axis);
  if (last) {
    uint32_t axis_t = c.const_i32({1}, {ax});
    in = c.emit(OperationType::REVERSE, {in, axis_t}, c.model().operands[in].type, permute(x.dims, perm));
  }
  std::vector<bool> removed(x.rank(), false);
  removed[axis] = true;
  Shape out_dims;
  Perm out_perm;
  drop_axes(x.dims, perm, removed, &out_dims, &out_perm);
  if (out_dims.empty()) return c.unsupported("arg-reduction of a 1-D tensor");
  uint32_t o = c.emit(type, {in, c.model().add_scalar_i32(ax)}, OperandType::TENSOR_INT32,
                      permute(out_dims, out_perm));
  if (last) {
    uint32_t n1 = c.const_i32({1}, {static_cast<int32_t>(x.dims[axis] - 1)});
    o = c.emit(OperationType::SUB, {n1, o, c.model().add_scalar_i32(0)}, OperandType::TENSOR_INT32,
               permute(out_dims, out_perm));
  }
  Value v = c.runtime(o, out_dims, out_perm, kInt64);
  if (keep) {
    // Re-insert the unit axis where the IR layout had it: element order is unchanged.
    Shape kd = x.dims;
    kd[axis] = 1;
    std::vector<int32_t> shape;
    for (int p : perm) shape.push_back(static_cast<int32_t>(kd[p]));
    uint32_t ro =
        c.emit(OperationType::RESHAPE, {o, c.const_i32({static_cast<int64_t>(shape.size())}, shape)},
               OperandType::TENSOR_INT32, permute(kd, perm));
    v = c.runtime(ro, kd, perm, kInt64);
  }
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_softmax(Converter& c) {
  Value& x = c.in(0);
  const bool log = c.node().op_type() == "LogSoftmax";
  const OperationType type = log ? OperationType::LOG_SOFTMAX : OperationType::SOFTMAX;
  const int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis;
  NN_RETURN_IF_ERROR(normalize_axis(c, c.attr_i("axis", c.opset() >= 13 ? -1 : 1), x.rank(), &axis));
  if (c.opset() < 13 && axis != r - 1) {
    // Opsets 1-12 normalize over everything from `axis` on: flatten to 2-D.
    int64_t a = 1, b = 1;
    for (int64_t k = 0; k < r; ++k) (k < axis ? a : b) *= x.dims[k];
    NN_ASSIGN_OR_RETURN(Value flat, c.reshaped(x, {a, b}));
    NN_ASSIGN_OR_RETURN(uint32_t in, c.onnx_order(flat));
    uint32_t o = c.emit(type, {in, c.model().add_scalar_f32(1.f), c.model().add_scalar_i32(1)},
                        OperandType::TENSOR_FLOAT32, {a, b});
    Value v = c.runtime(o, {a, b}, identity_perm(2), kFloat);
    NN_ASSIGN_OR_RETURN(Value back, c.reshaped(v, x.dims));
    c.set_out(0, std::move(back));
    return Status::ok();
  }
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  uint32_t o =
      c.emit(type, {in, c.model().add_scalar_f32(1.f), c.model().add_scalar_i32(ir_axis(perm, axis))},
             OperandType::TENSOR_FLOAT32, permute(x.dims, perm));
  c.set_out(0, c.runtime(o, x.dims, perm, kFloat));
  return Status::ok();
}

}  // namespace

void register_reduce_translators(std::unordered_map<std::string, Translator>& t) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    t[op] = t_reduce;
  t["ArgMax"] = t_argminmax;
  t["ArgMin"] = t_argminmax;
  t["Softmax"] = t_softmax;
  t["LogSoftmax"] = t_softmax;
}

}  // namespace nn::onnx_import
