// Shape, axis and data-movement ops (Reshape, Transpose, Concat, Slice, Gather, Pad,
// Constant...). Reductions and Softmax are in ops_reduce.cpp, the host evaluation of
// all-constant nodes (Shape/Gather/Concat/... chains) in fold_constant.cpp.
#include <algorithm>

#include "import/onnx/converter.h"
#include "import/onnx/ops_shape_util.h"

namespace nn::onnx_import {

namespace {

HostTensor make_int_tensor(const Shape& dims, const std::vector<int64_t>& v) {
  HostTensor h;
  h.kind = ElemKind::kInt;
  h.onnx_type = kInt64;
  h.dims = dims;
  h.v.assign(v.begin(), v.end());
  return h;
}

Result<Shape> reshape_target(Converter& c, const Shape& in, const HostTensor& shape) {
  Shape out;
  int64_t infer = -1;
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  for (size_t k = 0; k < shape.numel(); ++k) {
    int64_t d = shape.i(k);
    if (d == 0 && !allowzero) {
      if (k >= in.size())
        return c.invalid("shape entry 0 at " + std::to_string(k) + " has no input dim to copy");
      d = in[k];
    } else if (d == -1) {
      if (infer >= 0) return c.invalid("more than one -1 in the target shape");
      infer = static_cast<int64_t>(k);
      d = 1;
    } else if (d < 0) {
      return c.invalid("bad target dimension " + std::to_string(d));
    }
    out.push_back(d);
  }
  const size_t total = dims_numel(in);
  if (infer >= 0) {
    size_t rest = dims_numel(out);
    if (rest == 0 || total % rest) return c.invalid("cannot infer -1 reshaping " + dims_str(in));
    out[infer] = static_cast<int64_t>(total / rest);
  }
  if (dims_numel(out) != total) return c.invalid("cannot reshape " + dims_str(in) + " to " + dims_str(out));
  return out;
}

// ---------------------------------------------------------------- translators

Status t_identity(Converter& c) {
  Value v = c.in(0);
  c.set_out(0, v);
  return Status::ok();
}

Status t_shape(Converter& c) {
  const Shape& d = c.in(0).dims;
  int64_t r = static_cast<int64_t>(d.size());
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> v;
  for (int64_t k = start; k < end; ++k) v.push_back(d[k]);
  c.set_out_const(0, make_int_tensor({static_cast<int64_t>(v.size())}, v));
  return Status::ok();
}

Status t_size(Converter& c) {
  c.set_out_const(0, make_int_tensor({}, {static_cast<int64_t>(dims_numel(c.in(0).dims))}));
  return Status::ok();
}

Status t_reshape(Converter& c) {
  NN_ASSIGN_OR_RETURN(const HostTensor* shape, c.const_in(1, "shape"));
  NN_ASSIGN_OR_RETURN(Shape dims, reshape_target(c, c.in(0).dims, *shape));
  NN_ASSIGN_OR_RETURN(Value v, c.reshaped(c.in(0), dims));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_flatten(Converter& c) {
  const Shape& in = c.in(0).dims;
  int64_t axis = c.attr_i("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(in.size());
  if (axis < 0 || axis > static_cast<int64_t>(in.size())) return c.invalid("axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k) (k < axis ? a : b) *= in[k];
  NN_ASSIGN_OR_RETURN(Value v, c.reshaped(c.in(0), {a, b}));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_squeeze(Converter& c) {
  bool present;
  NN_ASSIGN_OR_RETURN(auto axes, axes_param(c, 1, &present));
  const Shape& in = c.in(0).dims;
  std::vector<bool> removed(in.size(), false);
  for (int64_t a : axes) {
    int64_t ax;
    NN_RETURN_IF_ERROR(normalize_axis(c, a, in.size(), &ax));
    if (in[ax] != 1) return c.invalid("cannot squeeze axis " + std::to_string(a) + " of " + dims_str(in));
    removed[ax] = true;
  }
  if (!present)
    for (size_t k = 0; k < in.size(); ++k) removed[k] = in[k] == 1;
  Shape out;
  for (size_t k = 0; k < in.size(); ++k)
    if (!removed[k]) out.push_back(in[k]);
  NN_ASSIGN_OR_RETURN(Value v, c.reshaped(c.in(0), out));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_unsqueeze(Converter& c) {
  bool present;
  NN_ASSIGN_OR_RETURN(auto axes, axes_param(c, 1, &present));
  const Shape& in = c.in(0).dims;
  const size_t r = in.size() + axes.size();
  std::vector<bool> added(r, false);
  for (int64_t a : axes) {
    int64_t ax;
    NN_RETURN_IF_ERROR(normalize_axis(c, a, r, &ax));
    if (added[ax]) return c.invalid("axis " + std::to_string(a) + " listed twice");
    added[ax] = true;
  }
  Shape out;
  size_t k = 0;
  for (size_t i = 0; i < r; ++i) out.push_back(added[i] ? 1 : in[k++]);
  NN_ASSIGN_OR_RETURN(Value v, c.reshaped(c.in(0), out));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_transpose(Converter& c) {
  const size_t r = c.in(0).rank();
  std::vector<int64_t> p = c.attr_ints("perm");
  Perm t(r);
  if (p.empty()) {
    for (size_t i = 0; i < r; ++i) t[i] = static_cast<int>(r - 1 - i);
  } else {
    if (p.size() != r)
      return c.invalid("perm has " + std::to_string(p.size()) + " entries for rank " + std::to_string(r));
    std::vector<bool> seen(r, false);
    for (size_t i = 0; i < r; ++i) {
      if (p[i] < 0 || p[i] >= static_cast<int64_t>(r) || seen[p[i]])
        return c.invalid("perm is not a permutation");
      seen[p[i]] = true;
      t[i] = static_cast<int>(p[i]);
    }
  }
  c.set_out(0, c.transposed(c.in(0), t));
  return Status::ok();
}

Status t_concat(Converter& c) {
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) ins.push_back(&c.in(i));
  if (ins.empty()) return c.invalid("no inputs");
  const size_t r = ins[0]->rank();
  int64_t axis;
  NN_RETURN_IF_ERROR(normalize_axis(c, c.attr_i("axis", 0), r, &axis));
  Shape out = ins[0]->dims;
  out[axis] = 0;
  Perm perm = identity_perm(r);
  bool chosen = false;
  for (Value* v : ins) {
    if (v->rank() != r) return c.invalid("inputs differ in rank");
    for (size_t k = 0; k < r; ++k)
      if (static_cast<int64_t>(k) != axis && v->dims[k] != ins[0]->dims[k])
        return c.invalid("inputs " + dims_str(ins[0]->dims) + " and " + dims_str(v->dims) +
                         " differ off the axis");
    out[axis] += v->dims[axis];
    if (!chosen && !v->is_const) {
      perm = v->home;
      chosen = true;
    }
  }
  std::vector<uint32_t> ops;
  OperandType type = c.ir_type(*ins[0]);
  for (Value* v : ins) {
    if (v->dims[axis] == 0) continue;
    NN_ASSIGN_OR_RETURN(uint32_t o, c.operand(*v, perm));
    ops.push_back(o);
  }
  const int ax = ir_axis(perm, axis);
  ops.push_back(c.model().add_scalar_i32(ax));
  uint32_t o = c.emit(OperationType::CONCATENATION, ops, type, permute(out, perm));
  c.set_out(0, c.runtime(o, out, perm, ins[0]->onnx_type));
  return Status::ok();
}

Status emit_slice(Converter& c, Value& x, const std::vector<AxisSlice>& s, Value* result) {
  const Perm perm = c.layout_of(x);
  Shape out = x.dims;
  bool unit = true;
  for (size_t k = 0; k < s.size(); ++k) {
    out[k] = s[k].len;
    if (s[k].len <= 0) return c.unsupported("slice yields an empty tensor " + dims_str(out));
    unit = unit && s[k].step == 1;
  }
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  const int64_t r = static_cast<int64_t>(s.size());
  std::vector<int32_t> begin(r), size(r), end(r), strides(r);
  int32_t end_mask = 0;
  for (int64_t j = 0; j < r; ++j) {
    const AxisSlice& a = s[perm[j]];
    begin[j] = static_cast<int32_t>(a.begin);
    size[j] = static_cast<int32_t>(a.len);
    end[j] = static_cast<int32_t>(a.end);
    strides[j] = static_cast<int32_t>(a.step);
    if (a.step < 0 && a.end < 0) end_mask |= 1 << j;
  }
  const OperandType type = c.model().operands[in].type;
  uint32_t o;
  if (unit) {
    o = c.emit(OperationType::SLICE, {in, c.const_i32({r}, begin), c.const_i32({r}, size)}, type,
               permute(out, perm));
  } else {
    o = c.emit(OperationType::STRIDED_SLICE,
               {in, c.const_i32({r}, begin), c.const_i32({r}, end), c.const_i32({r}, strides),
                c.model().add_scalar_i32(0), c.model().add_scalar_i32(end_mask), c.model().add_scalar_i32(0)},
               type, permute(out, perm));
  }
  *result = c.runtime(o, out, perm, x.onnx_type);
  return Status::ok();
}

Status t_slice(Converter& c) {
  NN_ASSIGN_OR_RETURN(auto s, read_slice(c, c.in(0).dims));
  Value v;
  NN_RETURN_IF_ERROR(emit_slice(c, c.in(0), s, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_split(Converter& c) {
  Value& x = c.in(0);
  int64_t axis;
  NN_RETURN_IF_ERROR(normalize_axis(c, c.attr_i("axis", 0), x.rank(), &axis));
  const size_t n = c.num_outputs();
  std::vector<int64_t> sizes;
  if (c.has_input(1)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* t, c.const_in(1, "split"));
    sizes = ints_of(*t);
  } else if (c.has_attr("split")) {
    sizes = c.attr_ints("split");
  } else {
    if (x.dims[axis] % static_cast<int64_t>(n)) return c.invalid("axis does not divide into equal parts");
    sizes.assign(n, x.dims[axis] / static_cast<int64_t>(n));
  }
  if (sizes.size() != n)
    return c.invalid("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) +
                     " outputs");
  int64_t total = 0;
  bool equal = true;
  for (int64_t s : sizes) {
    if (s <= 0) return c.unsupported("split part of size " + std::to_string(s));
    total += s;
    equal = equal && s == sizes[0];
  }
  if (total != x.dims[axis]) return c.invalid("split sizes do not add up to the axis");
  const Perm perm = c.layout_of(x);
  if (equal && n > 1) {
    NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
    const OperandType type = c.model().operands[in].type;
    Shape part = x.dims;
    part[axis] = sizes[0];
    std::vector<uint32_t> outs;
    for (size_t k = 0; k < n; ++k) outs.push_back(c.add_tensor(type, permute(part, perm), {}));
    c.model().add_operation(OperationType::SPLIT,
                            {in, c.model().add_scalar_i32(ir_axis(perm, axis)),
                             c.model().add_scalar_i32(static_cast<int32_t>(n))},
                            outs);
    for (size_t k = 0; k < n; ++k) c.set_out(k, c.runtime(outs[k], part, perm, x.onnx_type));
    return Status::ok();
  }
  int64_t begin = 0;
  for (size_t k = 0; k < n; ++k) {
    std::vector<AxisSlice> s(x.rank());
    for (size_t i = 0; i < x.rank(); ++i) s[i] = {0, x.dims[i], 1, x.dims[i]};
    s[axis] = {begin, begin + sizes[k], 1, sizes[k]};
    begin += sizes[k];
    if (!c.has_output(k)) continue;
    Value v;
    NN_RETURN_IF_ERROR(emit_slice(c, x, s, &v));
    c.set_out(k, std::move(v));
  }
  return Status::ok();
}

Status t_gather(Converter& c) {
  Value& x = c.in(0);
  int64_t axis;
  NN_RETURN_IF_ERROR(normalize_axis(c, c.attr_i("axis", 0), x.rank(), &axis));
  Value& idx = c.in(1);
  Shape out;
  for (int64_t k = 0; k < axis; ++k) out.push_back(x.dims[k]);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  for (size_t k = axis + 1; k < x.rank(); ++k) out.push_back(x.dims[k]);
  uint32_t indices;
  if (idx.is_const) {
    std::vector<int32_t> v(idx.host.numel());
    for (size_t k = 0; k < v.size(); ++k) {
      int64_t i = idx.host.i(k);
      if (i < 0) i += x.dims[axis];
      if (i < 0 || i >= x.dims[axis])
        return c.invalid("index " + std::to_string(idx.host.i(k)) + " out of range");
      v[k] = static_cast<int32_t>(i);
    }
    Shape d = idx.dims.empty() ? Shape{1} : idx.dims;
    indices = c.const_i32(d, v);
  } else {
    if (idx.rank() == 0) return c.unsupported("scalar runtime indices");
    NN_ASSIGN_OR_RETURN(indices, c.onnx_order(idx));
  }
  Perm perm = identity_perm(x.rank());
  if (idx.rank() == 1 && !x.is_const) perm = x.home;  // rank kept: gather in place
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  const OperandType type = c.model().operands[in].type;
  if (idx.rank() == 1 || idx.rank() == 0) {
    Shape kept = x.dims;
    kept[axis] = idx.rank() ? idx.dims[0] : 1;
    uint32_t o = c.emit(OperationType::GATHER, {in, c.model().add_scalar_i32(ir_axis(perm, axis)), indices},
                        type, permute(kept, perm));
    Value v = c.runtime(o, kept, perm, x.onnx_type);
    if (idx.rank() == 0) {
      NN_ASSIGN_OR_RETURN(v, c.reshaped(v, out));
    }
    c.set_out(0, std::move(v));
    return Status::ok();
  }
  uint32_t o = c.emit(OperationType::GATHER,
                      {in, c.model().add_scalar_i32(static_cast<int32_t>(axis)), indices}, type, out);
  c.set_out(0, c.runtime(o, out, identity_perm(out.size()), x.onnx_type));
  return Status::ok();
}

Status t_pad(Converter& c) {
  Value& x = c.in(0);
  const size_t r = x.rank();
  std::vector<int64_t> pads;
  float value = 0;
  if (c.opset() < 11) {
    pads = c.attr_ints("pads");
    value = c.attr_f("value", 0.f);
  } else {
    NN_ASSIGN_OR_RETURN(const HostTensor* p, c.const_in(1, "pads"));
    pads = ints_of(*p);
    if (c.has_input(2)) {
      NN_ASSIGN_OR_RETURN(const HostTensor* v, c.const_in(2, "constant_value"));
      if (v->numel() != 1) return c.invalid("constant_value must hold one value");
      value = static_cast<float>(v->v[0]);
    }
    if (c.has_input(3)) return c.unsupported("the axes input");
  }
  if (pads.size() != 2 * r)
    return c.invalid("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
  const std::string mode = c.attr_s("mode", "constant");
  for (int64_t p : pads)
    if (p < 0) return c.unsupported("negative pads (cropping)");
  const Perm perm = c.layout_of(x);
  Shape out = x.dims;
  std::vector<int32_t> ir_pads(2 * r);
  for (size_t j = 0; j < r; ++j) {
    ir_pads[2 * j] = static_cast<int32_t>(pads[perm[j]]);
    ir_pads[2 * j + 1] = static_cast<int32_t>(pads[perm[j] + r]);
  }
  for (size_t k = 0; k < r; ++k) out[k] += pads[k] + pads[k + r];
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  const OperandType type = c.model().operands[in].type;
  uint32_t p = c.const_i32({static_cast<int64_t>(r), 2}, ir_pads);
  uint32_t o;
  if (mode == "constant") {
    if (value == 0.f)
      o = c.emit(OperationType::PAD, {in, p}, type, permute(out, perm));
    else
      o = c.emit(OperationType::PAD_V2, {in, p, c.model().add_scalar_f32(value)}, type, permute(out, perm));
  } else if (mode == "reflect") {
    for (size_t k = 0; k < r; ++k)
      if (pads[k] >= x.dims[k] || pads[k + r] >= x.dims[k])
        return c.unsupported("reflect pad wider than the input");
    o = c.emit(OperationType::MIRROR_PAD, {in, p, c.model().add_scalar_i32(0)}, type, permute(out, perm));
  } else if (mode == "edge") {
    // Replicate the border: one GATHER per padded axis with clamped indices (exact).
    o = in;
    Shape cur = x.dims;
    for (size_t k = 0; k < r; ++k) {
      if (!pads[k] && !pads[k + r]) continue;
      const int64_t n = cur[k];
      cur[k] += pads[k] + pads[k + r];
      std::vector<int32_t> idx(cur[k]);
      for (int64_t i = 0; i < cur[k]; ++i)
        idx[i] = static_cast<int32_t>(std::clamp<int64_t>(i - pads[k], 0, n - 1));
      o = c.emit(OperationType::GATHER,
                 {o, c.model().add_scalar_i32(ir_axis(perm, k)), c.const_i32({cur[k]}, idx)}, type,
                 permute(cur, perm));
    }
  } else {
    return c.unsupported("Pad mode '" + mode + "' has no IR equivalent");
  }
  c.set_out(0, c.runtime(o, out, perm, x.onnx_type));
  return Status::ok();
}

Status t_tile(Converter& c) {
  Value& x = c.in(0);
  NN_ASSIGN_OR_RETURN(const HostTensor* rep, c.const_in(1, "repeats"));
  if (rep->numel() != x.rank()) return c.invalid("repeats length differs from the input rank");
  const Perm perm = c.layout_of(x);
  Shape out = x.dims;
  std::vector<int32_t> m(x.rank());
  for (size_t k = 0; k < x.rank(); ++k) {
    if (rep->i(k) < 1) return c.unsupported("repeat count " + std::to_string(rep->i(k)));
    out[k] *= rep->i(k);
  }
  for (size_t j = 0; j < x.rank(); ++j) m[j] = static_cast<int32_t>(rep->i(perm[j]));
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  uint32_t o = c.emit(OperationType::TILE, {in, c.const_i32({static_cast<int64_t>(m.size())}, m)},
                      c.model().operands[in].type, permute(out, perm));
  c.set_out(0, c.runtime(o, out, perm, x.onnx_type));
  return Status::ok();
}

Status t_expand(Converter& c) {
  NN_ASSIGN_OR_RETURN(const HostTensor* shape, c.const_in(1, "shape"));
  Value x = c.in(0);
  const size_t r = std::max(x.rank(), shape->numel());
  Shape target(r, 1), lifted(r, 1);
  std::copy(x.dims.begin(), x.dims.end(), lifted.begin() + (r - x.rank()));
  for (size_t k = 0; k < shape->numel(); ++k) target[r - shape->numel() + k] = shape->i(k);
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    if (lifted[k] != target[k] && lifted[k] != 1 && target[k] != 1)
      return c.invalid("cannot expand " + dims_str(x.dims) + " to " + dims_str(target));
    out[k] = std::max(lifted[k], target[k]);
  }
  if (lifted != x.dims) {
    NN_ASSIGN_OR_RETURN(x, c.reshaped(x, lifted));
  }
  if (out == lifted) {
    c.set_out(0, x);
    return Status::ok();
  }
  const Perm perm = c.layout_of(x);
  std::vector<int32_t> m(r);
  for (size_t j = 0; j < r; ++j) m[j] = static_cast<int32_t>(out[perm[j]] / lifted[perm[j]]);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  uint32_t o = c.emit(OperationType::TILE, {in, c.const_i32({static_cast<int64_t>(r)}, m)},
                      c.model().operands[in].type, permute(out, perm));
  c.set_out(0, c.runtime(o, out, perm, x.onnx_type));
  return Status::ok();
}

Status t_constant(Converter& c) {
  if (c.has_attr("value")) {
    NN_ASSIGN_OR_RETURN(HostTensor h, c.attr_tensor("value"));
    c.set_out_const(0, std::move(h));
    return Status::ok();
  }
  HostTensor h;
  if (c.has_attr("value_float") || c.has_attr("value_floats")) {
    std::vector<float> f = c.attr_floats(c.has_attr("value_float") ? "value_float" : "value_floats");
    h.kind = ElemKind::kFloat;
    h.onnx_type = kFloat;
    h.v.assign(f.begin(), f.end());
    if (c.has_attr("value_floats")) h.dims = {static_cast<int64_t>(f.size())};
  } else if (c.has_attr("value_int") || c.has_attr("value_ints")) {
    std::vector<int64_t> v = c.attr_ints(c.has_attr("value_int") ? "value_int" : "value_ints");
    h = make_int_tensor({}, v);
    if (c.has_attr("value_ints")) h.dims = {static_cast<int64_t>(v.size())};
  } else {
    return c.unsupported("Constant without a value/value_float(s)/value_int(s) attribute");
  }
  c.set_out_const(0, std::move(h));
  return Status::ok();
}

Status t_constant_of_shape(Converter& c) {
  NN_ASSIGN_OR_RETURN(const HostTensor* shape, c.const_in(0, "shape"));
  HostTensor h;
  h.kind = ElemKind::kFloat;
  h.onnx_type = kFloat;
  h.v = {0.0};
  if (c.has_attr("value")) {
    NN_ASSIGN_OR_RETURN(h, c.attr_tensor("value"));
    if (h.numel() != 1) return c.invalid("value must hold one element");
  }
  Shape dims = ints_of(*shape);
  for (int64_t d : dims)
    if (d < 0 || d > (1 << 24)) return c.invalid("bad dimension " + std::to_string(d));
  if (dims_numel(dims) > (size_t{1} << 26))
    return c.unsupported("constant of " + dims_str(dims) + " is too large");
  double v = h.v[0];
  h.dims = dims;
  h.v.assign(dims_numel(dims), v);
  c.set_out_const(0, std::move(h));
  return Status::ok();
}

}  // namespace

void register_shape_translators(std::unordered_map<std::string, Translator>& t) {
  t["Identity"] = t_identity;
  t["Shape"] = t_shape;
  t["Size"] = t_size;
  t["Reshape"] = t_reshape;
  t["Flatten"] = t_flatten;
  t["Squeeze"] = t_squeeze;
  t["Unsqueeze"] = t_unsqueeze;
  t["Transpose"] = t_transpose;
  t["Concat"] = t_concat;
  t["Slice"] = t_slice;
  t["Split"] = t_split;
  t["Gather"] = t_gather;
  t["Pad"] = t_pad;
  t["Tile"] = t_tile;
  t["Expand"] = t_expand;
  register_reduce_translators(t);
  t["Constant"] = t_constant;
  t["ConstantOfShape"] = t_constant_of_shape;
}

}  // namespace nn::onnx_import
