// ONNX values and the IR operands that hold them: layout permutations, a value's operand
// in the layout an op wants (a TRANSPOSE or RESHAPE made once per layout), constants,
// broadcasting to a common rank and layout, and Transpose / Reshape as bookkeeping.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "import/onnx/converter.h"

namespace nn::onnx_import {

namespace {

Dims to_ir_dims(const Shape& s) {
  Dims d;
  for (int64_t x : s) d.push_back(static_cast<uint32_t>(std::max<int64_t>(x, 0)));
  return d;
}

}  // namespace

Perm identity_perm(size_t rank) {
  Perm p(rank);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int>(i)) return false;
  return true;
}

Perm inverse(const Perm& p) {
  Perm q(p.size());
  for (size_t i = 0; i < p.size(); ++i) q[p[i]] = static_cast<int>(i);
  return q;
}

Shape permute(const Shape& dims, const Perm& p) {
  Shape out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = dims[p[i]];
  return out;
}

void Converter::set_out(size_t i, Value v) {
  if (has_output(i)) {
    const std::string& name = node_->output(static_cast<int>(i));
    for (auto& [perm, op] : v.operands)
      if (model_->operands[op].name.empty()) model_->operands[op].name = name;
    values_[name] = std::move(v);
  }
}

void Converter::set_out_const(size_t i, HostTensor h) {
  Value v;
  v.is_const = true;
  v.dims = h.dims;
  v.onnx_type = h.onnx_type;
  v.host = std::move(h);
  set_out(i, std::move(v));
}

Value Converter::runtime(uint32_t operand, Shape dims, Perm perm, int32_t onnx_type) {
  Value v;
  v.dims = std::move(dims);
  v.onnx_type = onnx_type;
  v.home = std::move(perm);
  v.operands[v.home] = operand;
  return v;
}

Perm Converter::layout_of(const Value& v) const {
  return v.is_const ? identity_perm(v.rank()) : v.home;
}

OperandType Converter::ir_type(const Value& v) const {
  if (!v.is_const && !v.operands.empty()) {
    const OperandType t = model_->operands[v.operands.begin()->second].type;
    if (folding_ && (t == OperandType::TENSOR_QUANT8_ASYMM || t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED))
      return OperandType::TENSOR_FLOAT32;
    return t;
  }
  OperandType t = OperandType::TENSOR_FLOAT32;
  if (v.onnx_type == 2 || v.onnx_type == 3) return OperandType::TENSOR_INT32;  // folded int8/uint8 consts
  ir_type_of(v.onnx_type, &t);
  if (t == OperandType::TENSOR_FLOAT32 && v.host.kind == ElemKind::kInt) t = OperandType::TENSOR_INT32;
  return t;
}

uint32_t Converter::add_tensor(OperandType type, const Shape& ir_dims, const std::string& name) {
  return model_->add_tensor(type, to_ir_dims(ir_dims), name);
}

uint32_t Converter::emit(OperationType type, std::vector<uint32_t> inputs, OperandType out_type,
                         const Shape& ir_dims, const std::string& name) {
  uint32_t out = add_tensor(out_type, ir_dims, name);
  model_->add_operation(type, std::move(inputs), {out});
  return out;
}

uint32_t Converter::constant(const HostTensor& h, OperandType type) {
  const size_t n = h.v.size();
  switch (type) {
    case OperandType::TENSOR_INT32: {
      std::vector<int32_t> d(n);
      for (size_t k = 0; k < n; ++k)
        d[k] = static_cast<int32_t>(std::clamp<int64_t>(h.i(k), std::numeric_limits<int32_t>::min(),
                                                        std::numeric_limits<int32_t>::max()));
      return model_->add_constant_i32(to_ir_dims(h.dims), d);
    }
    case OperandType::TENSOR_BOOL8:
    case OperandType::TENSOR_QUANT8_ASYMM:
    case OperandType::TENSOR_QUANT8_SYMM:
    case OperandType::TENSOR_QUANT8_ASYMM_SIGNED:
    case OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL: {
      std::vector<uint8_t> d(n);
      for (size_t k = 0; k < n; ++k) {
        if (type == OperandType::TENSOR_BOOL8)
          d[k] = h.v[k] != 0;
        else
          d[k] = static_cast<uint8_t>(static_cast<int64_t>(h.v[k]) & 0xff);
      }
      return model_->add_constant(type, to_ir_dims(h.dims), d.data(), d.size());
    }
    default: {
      std::vector<float> d(n);
      for (size_t k = 0; k < n; ++k) d[k] = static_cast<float>(h.v[k]);
      return model_->add_constant_f32(to_ir_dims(h.dims), d);
    }
  }
}

uint32_t Converter::const_f32(const Shape& dims, const std::vector<float>& values) {
  return model_->add_constant_f32(to_ir_dims(dims), values);
}
uint32_t Converter::const_i32(const Shape& dims, const std::vector<int32_t>& values) {
  return model_->add_constant_i32(to_ir_dims(dims), values);
}

Result<uint32_t> Converter::operand(Value& v, const Perm& want) {
  if (want.size() != v.rank()) return Status(StatusCode::kInternal, where() + ": layout rank mismatch");
  auto it = v.operands.find(want);
  if (it != v.operands.end()) return it->second;
  if (v.is_const) {
    HostTensor t = is_identity(want) ? v.host : transpose_host(v.host, want);
    uint32_t op = constant(t, ir_type(v));
    v.operands[want] = op;
    return op;
  }
  const Perm& have = v.home;
  const uint32_t src = v.operands.at(have);
  const Operand& so = model_->operands[src];
  const Shape out_dims = permute(v.dims, want);
  // When only unit dimensions move, the element order is unchanged: a RESHAPE suffices.
  std::vector<int> a, b;
  for (int ax : have)
    if (v.dims[ax] != 1) a.push_back(ax);
  for (int ax : want)
    if (v.dims[ax] != 1) b.push_back(ax);
  uint32_t out;
  const OperandType type = so.type;
  const float scale = so.scale;
  const int32_t zp = so.zero_point;
  if (a == b) {
    std::vector<int32_t> shape(out_dims.begin(), out_dims.end());
    uint32_t s = const_i32({static_cast<int64_t>(shape.size())}, shape);
    out = emit(OperationType::RESHAPE, {src, s}, type, out_dims);
  } else {
    Perm hinv = inverse(have);
    std::vector<int32_t> t(want.size());
    for (size_t j = 0; j < want.size(); ++j) t[j] = hinv[want[j]];
    uint32_t p = const_i32({static_cast<int64_t>(t.size())}, t);
    out = emit(OperationType::TRANSPOSE, {src, p}, type, out_dims);
  }
  model_->operands[out].scale = scale;
  model_->operands[out].zero_point = zp;
  v.operands[want] = out;
  return out;
}

Result<std::vector<uint32_t>> Converter::broadcast(const std::vector<Value*>& ins, Shape* out_dims,
                                                   Perm* out_perm) {
  size_t r = 0;
  for (Value* v : ins) r = std::max(r, v->rank());
  Shape dims(r, 1);
  for (Value* v : ins) {
    const size_t off = r - v->rank();
    for (size_t k = 0; k < v->rank(); ++k) {
      int64_t d = v->dims[k], &o = dims[off + k];
      if (d == o || d == 1) continue;
      if (o == 1)
        o = d;
      else
        return invalid("inputs " + dims_str(ins[0]->dims) + " and " + dims_str(v->dims) +
                       " do not broadcast");
    }
  }
  // Use the layout of the first full-rank runtime input that is not in ONNX order.
  Perm perm = identity_perm(r);
  for (Value* v : ins)
    if (!v->is_const && v->rank() == r && !is_identity(v->home)) {
      perm = v->home;
      break;
    }
  std::vector<uint32_t> ops;
  for (Value* v : ins) {
    if (v->is_const && v->host.numel() == 1 && v->rank() <= r) {
      NN_ASSIGN_OR_RETURN(uint32_t o, operand(*v, identity_perm(v->rank())));
      ops.push_back(o);
      continue;
    }
    if (v->rank() == r) {
      NN_ASSIGN_OR_RETURN(uint32_t o, operand(*v, perm));
      ops.push_back(o);
      continue;
    }
    if (is_identity(perm)) {  // numpy broadcasting aligns trailing dims by itself
      NN_ASSIGN_OR_RETURN(uint32_t o, onnx_order(*v));
      ops.push_back(o);
      continue;
    }
    // Lower rank in a permuted layout: lift to rank r with leading ones first.
    Shape lifted(r - v->rank(), 1);
    lifted.insert(lifted.end(), v->dims.begin(), v->dims.end());
    if (v->is_const) {
      HostTensor h = v->host;
      h.dims = lifted;
      uint32_t o = constant(transpose_host(h, perm), ir_type(*v));
      ops.push_back(o);
      continue;
    }
    NN_ASSIGN_OR_RETURN(uint32_t src, onnx_order(*v));
    std::vector<int32_t> shape(lifted.begin(), lifted.end());
    uint32_t s = const_i32({static_cast<int64_t>(r)}, shape);
    uint32_t reshaped = emit(OperationType::RESHAPE, {src, s}, model_->operands[src].type, lifted);
    Value tmp = runtime(reshaped, lifted, identity_perm(r), v->onnx_type);
    NN_ASSIGN_OR_RETURN(uint32_t o, operand(tmp, perm));
    ops.push_back(o);
  }
  *out_dims = dims;
  *out_perm = perm;
  return ops;
}

Value Converter::transposed(const Value& v, const Perm& t) {
  Value out;
  out.is_const = v.is_const;
  out.onnx_type = v.onnx_type;
  out.dims = permute(v.dims, t);
  if (v.is_const) {
    out.host = transpose_host(v.host, t);
    return out;
  }
  const Perm tinv = inverse(t);
  auto remap = [&](const Perm& p) {
    Perm q(p.size());
    for (size_t i = 0; i < p.size(); ++i) q[i] = tinv[p[i]];
    return q;
  };
  for (const auto& [p, op] : v.operands) out.operands[remap(p)] = op;
  out.home = remap(v.home);
  return out;
}

Result<Value> Converter::reshaped(Value& v, const Shape& dims) {
  if (dims_numel(dims) != dims_numel(v.dims))
    return invalid("cannot reshape " + dims_str(v.dims) + " to " + dims_str(dims));
  if (v.is_const) {
    Value out = v;
    out.operands.clear();
    out.dims = dims;
    out.host.dims = dims;
    return out;
  }
  if (dims == v.dims) return v;
  // Any layout whose non-unit axes are in ONNX order already holds row-major data.
  std::optional<uint32_t> src;
  for (const auto& [p, op] : v.operands) {
    int last = -1;
    bool ordered = true;
    for (int ax : p)
      if (v.dims[ax] != 1) {
        if (ax < last) ordered = false;
        last = ax;
      }
    if (ordered) {
      src = op;
      break;
    }
  }
  if (!src) {
    NN_ASSIGN_OR_RETURN(uint32_t o, onnx_order(v));
    src = o;
  }
  // RESHAPE of a RESHAPE reads the original (the intermediate is pruned if unused).
  for (auto it = model_->operations.rbegin(); it != model_->operations.rend(); ++it)
    if (it->outputs.size() == 1 && it->outputs[0] == *src) {
      if (it->type == OperationType::RESHAPE) src = it->inputs[0];
      break;
    }
  const Operand& so = model_->operands[*src];
  const OperandType type = so.type;
  const float scale = so.scale;
  const int32_t zp = so.zero_point;
  std::vector<int32_t> shape(dims.begin(), dims.end());
  uint32_t s = const_i32({static_cast<int64_t>(shape.size())}, shape);
  uint32_t out = emit(OperationType::RESHAPE, {*src, s}, type, dims);
  model_->operands[out].scale = scale;
  model_->operands[out].zero_point = zp;
  return runtime(out, dims, identity_perm(dims.size()), v.onnx_type);
}

}  // namespace nn::onnx_import
