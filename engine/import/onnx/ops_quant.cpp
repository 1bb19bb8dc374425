// Quantized ONNX graphs: QuantizeLinear / DequantizeLinear (the QDQ form ONNX Runtime's
// quantizer and torch write) and QLinearConv / QLinearMatMul.
//
// DequantizeLinear of a runtime tensor emits a DEQUANTIZE and remembers the quantized value
// (Value::qview); of a constant it folds to floats and remembers the integers' parameters
// (Value::qconst). A float op whose runtime inputs are all such views and whose result goes
// (through at most an absorbed Relu/Clip) to QuantizeLinear is translated by its regular
// float translator over the quantized operands, and the op it emitted is then rewritten into
// the quantized IR op (weights back to integers, bias to int32 at in_scale x w_scale, the
// output typed with QuantizeLinear's parameters); the DEQUANTIZE nobody reads is pruned.
// Data movement (Reshape, Flatten, Transpose, Squeeze, Unsqueeze) carries the quantization
// through. Anything else keeps DEQUANTIZE -> float op -> QUANTIZE, which is correct, only slower,
// and visible as those op types in `nnrun --explain`.
#include <algorithm>
#include <cmath>
#include <limits>

#include "import/onnx/converter.h"

namespace nn::onnx_import {

namespace {

constexpr int32_t kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6;

bool is_quant8(OperandType t) {
  return t == OperandType::TENSOR_QUANT8_ASYMM || t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
}

OperandType quant_type(int32_t onnx_type) {
  return onnx_type == kInt8 ? OperandType::TENSOR_QUANT8_ASYMM_SIGNED : OperandType::TENSOR_QUANT8_ASYMM;
}
int32_t onnx_quant_type(OperandType t) {
  return t == OperandType::TENSOR_QUANT8_ASYMM_SIGNED ? kInt8 : kUint8;
}
int64_t qmin(int32_t onnx_type) { return onnx_type == kInt8 ? -128 : 0; }
int64_t qmax(int32_t onnx_type) { return onnx_type == kInt8 ? 127 : 255; }

// Scale and zero point inputs of a Q / DQ / QLinear op. `dims` is the data's ONNX shape
// (per-axis parameters must have dims[axis] entries); `data_type` the stored integer type
// (the zero point's type decides it when given). Errors name the op's input.
Result<QuantConst> read_qparams(Converter& c, size_t scale_in, size_t zp_in, const Shape& dims, int axis,
                                int32_t data_type, const char* what) {
  QuantConst q;
  q.onnx_type = data_type;
  NN_ASSIGN_OR_RETURN(const HostTensor* s, c.const_in(scale_in, what));
  if (s->numel() == 0) return c.invalid(std::string(what) + " is empty");
  for (double v : s->v)
    if (!(v > 0) || !std::isfinite(v))
      return c.invalid(std::string(what) + " must be positive and finite, got " + std::to_string(v));
  q.scales = s->v;
  if (s->numel() > 1) {
    const int r = static_cast<int>(dims.size());
    if (axis < -r || axis >= r) return c.invalid("axis " + std::to_string(axis) + " outside rank " + std::to_string(r));
    q.axis = axis < 0 ? axis + r : axis;
    if (s->dims.size() != 1 || s->v.size() != static_cast<size_t>(dims[q.axis]))
      return c.invalid(std::string(what) + " " + dims_str(s->dims) + " is per-axis along axis " +
                       std::to_string(q.axis) + " but that axis of " + dims_str(dims) + " has " +
                       std::to_string(dims[q.axis]) + " entries");
  }
  q.zero_points.assign(q.scales.size(), 0);
  if (c.has_input(zp_in)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* z, c.const_in(zp_in, "zero point"));
    if (z->numel() != q.scales.size())
      return c.invalid("zero point has " + std::to_string(z->numel()) + " entries, scale " +
                       std::to_string(q.scales.size()));
    if (z->onnx_type != kUint8 && z->onnx_type != kInt8 && z->onnx_type != kInt32)
      return c.unsupported("zero point type " + onnx_type_name(z->onnx_type) + " (int8/uint8 only)");
    q.onnx_type = z->onnx_type;
    for (size_t k = 0; k < z->numel(); ++k) q.zero_points[k] = z->i(k);
  }
  return q;
}

bool per_tensor(const QuantConst& q) {
  for (size_t k = 1; k < q.scales.size(); ++k)
    if (q.scales[k] != q.scales[0] || q.zero_points[k] != q.zero_points[0]) return false;
  return true;
}

Converter::QParams tensor_params(const QuantConst& q) {
  return {static_cast<float>(q.scales[0]), static_cast<int32_t>(q.zero_points[0]), quant_type(q.onnx_type)};
}

// Index into the per-axis parameters for element k of a row-major tensor.
size_t axis_index(const Shape& dims, int axis, size_t k) {
  size_t inner = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= static_cast<size_t>(dims[d]);
  return (k / inner) % static_cast<size_t>(dims[axis]);
}

// Float value of stored integer tensor `h` under q, computed in float as ONNX does.
HostTensor dequantize_host(const HostTensor& h, const QuantConst& q) {
  HostTensor out;
  out.kind = ElemKind::kFloat;
  out.onnx_type = kFloat;
  out.dims = h.dims;
  out.v.resize(h.numel());
  for (size_t k = 0; k < h.numel(); ++k) {
    const size_t a = q.scales.size() > 1 ? axis_index(h.dims, q.axis, k) : 0;
    out.v[k] = static_cast<float>(static_cast<float>(h.i(k) - q.zero_points[a]) * static_cast<float>(q.scales[a]));
  }
  return out;
}

Status t_dequantize(Converter& c) {
  Value& x = c.in(0);
  if (x.onnx_type != kUint8 && x.onnx_type != kInt8 && x.onnx_type != kInt32)
    return c.unsupported("input type " + onnx_type_name(x.onnx_type) + " (int8, uint8 or int32)");
  NN_ASSIGN_OR_RETURN(QuantConst q, read_qparams(c, 1, 2, x.dims, static_cast<int>(c.attr_i("axis", 1)),
                                                 x.onnx_type, "x_scale"));
  if (q.onnx_type != x.onnx_type)
    return c.invalid("zero point type " + onnx_type_name(q.onnx_type) + " differs from x's " +
                     onnx_type_name(x.onnx_type));
  if (x.is_const) {
    Value v;
    v.is_const = true;
    v.host = dequantize_host(x.host, q);
    v.dims = v.host.dims;
    v.onnx_type = kFloat;
    v.qconst = std::make_shared<QuantConst>(q);
    c.set_out(0, std::move(v));
    return Status::ok();
  }
  if (x.onnx_type == kInt32) return c.unsupported("int32 runtime input");
  if (!per_tensor(q)) return c.unsupported("per-axis dequantization of a runtime tensor");
  NN_ASSIGN_OR_RETURN(Value qv, c.with_qparams(x, tensor_params(q)));
  c.set_out(0, c.dequantized(qv));
  return Status::ok();
}

// Round half to even, clamped: ONNX QuantizeLinear.
int64_t quantize_value(double x, double scale, int64_t zp, int32_t type) {
  const double r = std::nearbyint(static_cast<float>(x) / static_cast<float>(scale));
  return std::clamp<int64_t>(static_cast<int64_t>(std::clamp(r, -1e9, 1e9)) + zp, qmin(type), qmax(type));
}

Status t_quantize(Converter& c) {
  Value& x = c.in(0);
  const int32_t out_type = c.has_input(2) ? c.in(2).onnx_type : kUint8;
  NN_ASSIGN_OR_RETURN(QuantConst q, read_qparams(c, 1, 2, x.dims, static_cast<int>(c.attr_i("axis", 1)),
                                                 out_type, "y_scale"));
  if (q.onnx_type != kUint8 && q.onnx_type != kInt8)
    return c.unsupported("output type " + onnx_type_name(q.onnx_type) + " (int8 or uint8)");
  if (x.is_const) {  // torch stores fake-quantized weights as float -> QuantizeLinear -> DequantizeLinear
    HostTensor h;
    h.kind = q.onnx_type == kInt8 ? ElemKind::kInt8 : ElemKind::kUint8;
    h.onnx_type = q.onnx_type;
    h.dims = x.host.dims;
    h.v.resize(x.host.numel());
    for (size_t k = 0; k < h.numel(); ++k) {
      const size_t a = q.scales.size() > 1 ? axis_index(h.dims, q.axis, k) : 0;
      h.v[k] = static_cast<double>(quantize_value(x.host.v[k], q.scales[a], q.zero_points[a], q.onnx_type));
    }
    c.set_out_const(0, std::move(h));
    return Status::ok();
  }
  if (!per_tensor(q)) return c.unsupported("per-axis quantization of a runtime tensor");
  const Converter::QParams p = tensor_params(q);
  auto same = [&](const Value& v) {
    const Operand& o = c.model().operands[v.operands.at(v.home)];
    return o.type == p.type && o.scale == p.scale && o.zero_point == p.zero_point;
  };
  const OperandType have = c.model().operands[x.operands.at(x.home)].type;
  Value out;
  if (x.qview && same(*x.qview)) {
    out = *x.qview;  // QuantizeLinear(DequantizeLinear(q)) with the same parameters is q
  } else if (is_quant8(have) && same(x)) {
    out = x;  // a folded quantized op already wrote these parameters
  } else {
    NN_ASSIGN_OR_RETURN(uint32_t src, c.operand(x, x.home));
    if (is_quant8(have)) {  // requantize: through float
      src = c.emit(OperationType::DEQUANTIZE, {src}, OperandType::TENSOR_FLOAT32,
                   permute(x.dims, x.home));
    }
    uint32_t o = c.emit(OperationType::QUANTIZE, {src}, p.type, permute(x.dims, x.home));
    c.model().operands[o].scale = p.scale;
    c.model().operands[o].zero_point = p.zero_point;
    out = c.runtime(o, x.dims, x.home, q.onnx_type);
  }
  out.onnx_type = q.onnx_type;
  out.qview.reset();
  c.set_out(0, std::move(out));
  return Status::ok();
}

// A float stand-in for a QLinear op: `op_type` over inputs `ins`, attributes copied.
onnx::NodeProto stand_in(const onnx::NodeProto& n, const std::string& op_type, const std::vector<std::string>& ins) {
  onnx::NodeProto s;
  s.set_name(n.name());
  s.set_op_type(op_type);
  for (const auto& i : ins) s.add_input(i);
  // An output name nobody reads: the float translator must not absorb a consumer of the
  // quantized result as if it were float.
  s.add_output(n.output(0) + "\x01qlinear");
  for (const auto& a : n.attribute()) *s.add_attribute() = a;
  return s;
}

// QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, [B int32].
// QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp.
Status t_qlinear(Converter& c) {
  const bool conv = c.node().op_type() == "QLinearConv";
  if (c.num_inputs() < 8) return c.invalid("expects at least 8 inputs");
  Value& x = c.in(0);
  Value& w = c.in(3);
  if (x.is_const) return c.unsupported("a constant input");
  NN_ASSIGN_OR_RETURN(QuantConst xq, read_qparams(c, 1, 2, x.dims, 1, x.onnx_type, "x_scale"));
  if (!per_tensor(xq)) return c.invalid("x_scale must be per tensor");
  if (xq.onnx_type != x.onnx_type || (x.onnx_type != kUint8 && x.onnx_type != kInt8))
    return c.invalid("input type " + onnx_type_name(x.onnx_type) + " with zero point " + onnx_type_name(xq.onnx_type));
  NN_ASSIGN_OR_RETURN(QuantConst wq, read_qparams(c, 4, 5, w.dims, conv ? 0 : 1, w.onnx_type, "w_scale"));
  NN_ASSIGN_OR_RETURN(QuantConst yq, read_qparams(c, 6, 7, {}, 0, kUint8, "y_scale"));
  if (!per_tensor(yq) || yq.scales.size() != 1) return c.invalid("y_scale must be a scalar");
  if (yq.onnx_type != kUint8 && yq.onnx_type != kInt8)
    return c.unsupported("output type " + onnx_type_name(yq.onnx_type));
  NN_ASSIGN_OR_RETURN(Value xv, c.with_qparams(x, tensor_params(xq)));
  Value wv = w;
  if (w.is_const) {
    wv.host = dequantize_host(w.host, wq);
    wv.onnx_type = kFloat;
    wv.qconst = std::make_shared<QuantConst>(wq);
  } else {
    if (!per_tensor(wq)) return c.unsupported("per-axis scales on a runtime second input");
    NN_ASSIGN_OR_RETURN(Value wr, c.with_qparams(w, tensor_params(wq)));
    wv = c.dequantized(wr);
  }
  wv.operands.clear();
  std::vector<std::string> names = {c.node().input(0), c.node().input(3)};
  Value bv;
  if (conv && c.has_input(8)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* b, c.const_in(8, "B"));
    const int64_t M = w.dims.empty() ? 0 : w.dims[0];
    if (b->numel() != static_cast<size_t>(M)) return c.invalid("B size differs from output channels");
    bv.is_const = true;
    bv.host.kind = ElemKind::kFloat;
    bv.host.dims = {M};
    bv.host.v.resize(M);
    for (int64_t m = 0; m < M; ++m)
      bv.host.v[m] = static_cast<double>(b->i(m)) * static_cast<float>(xq.scales[0]) *
                     static_cast<float>(wq.scales[wq.scales.size() > 1 ? m : 0]);
    bv.dims = bv.host.dims;
    names.push_back(c.node().input(8));
  }
  const onnx::NodeProto fl = stand_in(c.node(), conv ? "Conv" : "MatMul", names);
  std::vector<Value*> ins = {&xv, &wv};
  if (names.size() == 3) ins.push_back(&bv);
  const Converter::QParams out = tensor_params(yq);
  if (c.fold_quantized(fl, ins, fl.output(0), out)) {
    Value v = *c.find_value(fl.output(0));
    v.onnx_type = yq.onnx_type;
    for (auto& [perm, op] : v.operands) c.model().operands[op].name = c.node().output(0);
    c.set_out(0, std::move(v));
    return Status::ok();
  }
  // No quantized form: DEQUANTIZE -> float op -> QUANTIZE.
  Value xf = c.dequantized(xv);
  ins[0] = &xf;
  if (!c.fold_quantized(fl, ins, fl.output(0), {}))
    return c.unsupported("cannot translate the float form of this op");
  Value f = *c.find_value(fl.output(0));
  NN_ASSIGN_OR_RETURN(uint32_t src, c.operand(f, f.home));
  uint32_t o = c.emit(OperationType::QUANTIZE, {src}, out.type, permute(f.dims, f.home));
  c.model().operands[o].scale = out.scale;
  c.model().operands[o].zero_point = out.zero_point;
  c.set_out(0, c.runtime(o, f.dims, f.home, yq.onnx_type));
  return Status::ok();
}

// Integers of a float constant operand made from a DequantizeLinear'd constant: per output
// channel scales `s` along IR dim `cdim`, zero point `zp` (per tensor).
std::vector<int64_t> stored_ints(const Operand& f, const std::vector<double>& s, uint32_t cdim, int64_t zp) {
  const size_t n = num_elements(f.dims);
  size_t inner = 1;
  for (size_t d = cdim + 1; d < f.dims.size(); ++d) inner *= f.dims[d];
  std::vector<int64_t> q(n);
  for (size_t k = 0; k < n; ++k) {
    const double sc = s.size() > 1 ? s[(k / inner) % f.dims[cdim]] : s[0];
    q[k] = static_cast<int64_t>(std::llround(f.as<float>()[k] / sc)) + zp;
  }
  return q;
}

}  // namespace

Result<Value> Converter::with_qparams(const Value& v, const QParams& p) {
  Value out = v;
  out.qview.reset();
  out.onnx_type = onnx_quant_type(p.type);
  const uint32_t src = v.operands.at(v.home);
  Operand& o = model_->operands[src];
  if (o.type != p.type)
    return invalid("quantized tensor '" + o.name + "' of type " + onnx_type_name(v.onnx_type) +
                   " read with " + onnx_type_name(onnx_quant_type(p.type)) + " parameters");
  const bool model_input = std::find(model_->inputs.begin(), model_->inputs.end(), src) != model_->inputs.end();
  if (model_input && quant_inputs_labelled_.insert(src).second) {
    o.scale = p.scale;  // a quantized model input takes the parameters of the first op reading it
    o.zero_point = p.zero_point;
  }
  if (o.scale == p.scale && o.zero_point == p.zero_point) {
    out.operands.clear();
    out.operands[v.home] = src;
    return out;
  }
  // The same bytes under other parameters (ONNX allows it): a relabelled copy.
  const Operand copy = o;
  std::vector<int32_t> shape(copy.dims.begin(), copy.dims.end());
  uint32_t s = const_i32({static_cast<int64_t>(shape.size())}, shape);
  uint32_t r = emit(OperationType::RESHAPE, {src, s}, p.type, Shape(copy.dims.begin(), copy.dims.end()));
  model_->operands[r].scale = p.scale;
  model_->operands[r].zero_point = p.zero_point;
  return runtime(r, v.dims, v.home, out.onnx_type);
}

Value Converter::dequantized(const Value& q) {
  const uint32_t src = q.operands.at(q.home);
  uint32_t o = emit(OperationType::DEQUANTIZE, {src}, OperandType::TENSOR_FLOAT32, permute(q.dims, q.home));
  Value v = runtime(o, q.dims, q.home, kFloat);
  v.qview = std::make_shared<Value>(q);
  return v;
}

bool Converter::fold_quantized(const onnx::NodeProto& node, std::vector<Value*> ins, const std::string& result,
                               const QParams& out) {
  const auto& table = translator_table();
  auto it = table.find(node.op_type());
  if (it == table.end()) return false;
  const size_t n_ops = model_->operations.size(), n_operands = model_->operands.size();
  const auto absorbed = absorbed_;
  const onnx::NodeProto* saved_node = node_;
  std::vector<Value*> saved_ins = node_inputs_;
  std::vector<Value> consts;  // constants: copies without cached operands of other types
  consts.reserve(ins.size());
  for (Value*& v : ins)
    if (v && v->is_const) {
      consts.push_back(*v);
      consts.back().operands.clear();
      v = &consts.back();
    }
  node_ = &node;
  node_inputs_ = ins;
  const bool quantize = out.scale > 0;
  folding_ = quantize;
  Status s;
  try {
    s = it->second(*this);
  } catch (...) {
    s = Status(StatusCode::kInternal, "missing input");
  }
  folding_ = false;
  node_ = saved_node;
  node_inputs_ = saved_ins;
  auto rollback = [&] {
    model_->operations.resize(n_ops);
    model_->operands.resize(n_operands);
    absorbed_ = absorbed;
    values_.erase(result);
    return false;
  };
  if (!s.is_ok()) return rollback();
  auto found = values_.find(result);
  if (found == values_.end() || found->second.is_const) return rollback();
  if (!quantize) return true;
  const Value& res = found->second;
  const uint32_t o = res.operands.at(res.home);
  int main = -1;
  for (size_t k = n_ops; k < model_->operations.size(); ++k) {
    const Operation& op = model_->operations[k];
    if (op.outputs[0] == o)
      main = static_cast<int>(k);
    else if (op.type != OperationType::TRANSPOSE && op.type != OperationType::RESHAPE)
      return rollback();
  }
  if (main < 0) return rollback();
  Operation& op = model_->operations[main];
  const Operand in0 = model_->operands[op.inputs[0]];
  if (in0.type != out.type) return rollback();
  auto same_as_input = [&] { return in0.scale == out.scale && in0.zero_point == out.zero_point; };
  std::vector<size_t> tensor_ins = {0};
  switch (op.type) {
    case OperationType::CONV_2D:
    case OperationType::DEPTHWISE_CONV_2D:
    case OperationType::GROUPED_CONV_2D:
    case OperationType::FULLY_CONNECTED: {
      const Value* wv = ins.size() > 1 ? ins[1] : nullptr;
      if (!wv || !wv->is_const || !wv->qconst || wv->qconst->onnx_type == kInt32) return rollback();
      const QuantConst& wq = *wv->qconst;
      const Operand f = model_->operands[op.inputs[1]];
      const Operand b = model_->operands[op.inputs[2]];
      if (!f.is_constant() || !b.is_constant() || f.type != OperandType::TENSOR_FLOAT32) return rollback();
      const bool fc = op.type == OperationType::FULLY_CONNECTED;
      const uint32_t cdim = op.type == OperationType::DEPTHWISE_CONV_2D ? 3 : 0;
      const int weight_axis = node.op_type() == "Conv" ? 0 : 1;  // ONNX OIHW / MatMul [K, N]
      const bool pt = per_tensor(wq);
      if (!pt && (fc ? wq.axis != weight_axis : wq.axis != 0)) return rollback();
      std::vector<double> ws = pt ? std::vector<double>{wq.scales[0]} : wq.scales;
      const bool symmetric = std::all_of(wq.zero_points.begin(), wq.zero_points.end(), [](int64_t z) { return z == 0; });
      Operand nf = f;
      std::vector<int64_t> q;
      if (!fc && symmetric && wq.onnx_type == kInt8) {
        nf.type = OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;
        if (pt) ws.assign(f.dims[cdim], wq.scales[0]);
        if (ws.size() != f.dims[cdim]) return rollback();
        nf.channel_quant.channel_dim = cdim;
        nf.channel_quant.scales.assign(ws.begin(), ws.end());
        nf.scale = 0.f;
        nf.zero_point = 0;
        q = stored_ints(f, ws, cdim, 0);
      } else if (pt) {
        // Per-tensor weights take the input's type: int8 symmetric weights under uint8
        // activations become uint8 with zero point 128 (the same values).
        int64_t zp = wq.zero_points[0];
        if (quant_type(wq.onnx_type) != in0.type) {
          if (wq.onnx_type == kInt8 && zp == 0 && in0.type == OperandType::TENSOR_QUANT8_ASYMM) zp = 128;
          else return rollback();
        }
        nf.type = in0.type;
        nf.scale = static_cast<float>(wq.scales[0]);
        nf.zero_point = static_cast<int32_t>(zp);
        q = stored_ints(f, ws, 0, zp);
      } else {
        return rollback();  // asymmetric per-channel weights, or per-column FC weights
      }
      const int64_t lo = nf.type == OperandType::TENSOR_QUANT8_ASYMM ? 0 : -128, hi = lo + 255;
      std::vector<uint8_t> bytes(q.size());
      for (size_t k = 0; k < q.size(); ++k) {
        if (q[k] < lo || q[k] > hi) return rollback();
        bytes[k] = static_cast<uint8_t>(q[k] & 0xff);
      }
      const uint32_t nfi = model_->add_constant(nf.type, nf.dims, bytes.data(), bytes.size(), f.name);
      model_->operands[nfi].scale = nf.scale;
      model_->operands[nfi].zero_point = nf.zero_point;
      model_->operands[nfi].channel_quant = nf.channel_quant;
      // Bias: int32 at in_scale x w_scale[c], zero point 0.
      const size_t nb = num_elements(b.dims);
      std::vector<int32_t> bq(nb);
      for (size_t m = 0; m < nb; ++m) {
        const double bs = static_cast<double>(in0.scale) * static_cast<float>(ws.size() > 1 ? ws[m] : ws[0]);
        const double r = std::round(b.as<float>()[m] / bs);
        if (std::fabs(r) > 2147483647.0) return rollback();
        bq[m] = static_cast<int32_t>(r);
      }
      const uint32_t nbi = model_->add_constant_i32(b.dims, bq);
      model_->operands[nbi].scale = static_cast<float>(in0.scale * static_cast<float>(ws[0]));
      Operation& op2 = model_->operations[main];  // add_constant may not move operations, but be safe
      op2.inputs[1] = nfi;
      op2.inputs[2] = nbi;
      break;
    }
    case OperationType::ADD:
    case OperationType::MUL:
    case OperationType::CONCATENATION:
      tensor_ins.clear();
      for (size_t k = 0; k < op.inputs.size(); ++k)
        if (!model_->operands[op.inputs[k]].dims.empty()) tensor_ins.push_back(k);
      break;
    case OperationType::MAX_POOL_2D:
    case OperationType::AVERAGE_POOL_2D:
    case OperationType::RELU:
    case OperationType::RELU1:
    case OperationType::RELU6:
      if (!same_as_input()) return rollback();
      break;
    case OperationType::LOGISTIC:
      if (out.scale != 1.f / 256 || out.zero_point != (out.type == OperandType::TENSOR_QUANT8_ASYMM ? 0 : -128))
        return rollback();
      break;
    case OperationType::MEAN:
    case OperationType::HARD_SWISH:
    case OperationType::RESIZE_BILINEAR:
    case OperationType::RESIZE_NEAREST_NEIGHBOR:
      break;
    default:
      return rollback();
  }
  {
    const Operation& op3 = model_->operations[main];
    for (size_t k : tensor_ins) {
      const Operand& t = model_->operands[op3.inputs[k]];
      if (t.type != out.type) return rollback();  // e.g. a float constant addend
    }
  }
  Operand& r = model_->operands[o];
  r.type = out.type;
  r.scale = out.scale;
  r.zero_point = out.zero_point;
  return true;
}

bool Converter::try_fold_qdq(Status* status) {
  static const std::unordered_set<std::string> compute = {
      "Conv",    "Gemm",      "MatMul", "Add",  "Mul",  "MaxPool", "AveragePool", "GlobalAveragePool",
      "Concat",  "Sigmoid",   "HardSwish", "Relu", "Clip", "Resize", "ReduceMean"};
  static const std::unordered_set<std::string> movement = {"Reshape", "Flatten", "Transpose", "Squeeze",
                                                            "Unsqueeze"};
  const onnx::NodeProto& n = *node_;
  const bool moves = movement.count(n.op_type()) != 0;
  if ((!moves && !compute.count(n.op_type())) || n.output_size() != 1) return false;
  std::vector<Value> views;
  views.reserve(node_inputs_.size());
  std::vector<Value*> ins(node_inputs_.size(), nullptr);
  bool any = false;
  for (size_t i = 0; i < node_inputs_.size(); ++i) {
    Value* v = node_inputs_[i];
    if (!v) continue;
    if (v->is_const) {
      ins[i] = v;
      continue;
    }
    if (!v->qview) return false;
    views.push_back(*v->qview);
    ins[i] = &views.back();
    any = true;
  }
  if (!any) return false;
  // Gemm's alpha scales the weights: their integers would no longer be the stored ones.
  if (n.op_type() == "Gemm" && attr_f("alpha", 1.f) != 1.f) return false;
  const std::string& out_name = n.output(0);
  if (moves) {
    // The same movement on the stored bytes; the result is again a dequantized view.
    const QParams none{};
    if (!fold_quantized(n, ins, out_name, none)) return false;
    const Value q = values_.at(out_name);
    const Operand& o = model_->operands[q.operands.at(q.home)];
    if (!is_quant8(o.type)) return false;
    Value qv = q;
    qv.onnx_type = onnx_quant_type(o.type);
    for (auto& [perm, op] : qv.operands)
      if (model_->operands[op].name.empty()) model_->operands[op].name = out_name + "/quantized";
    values_[out_name] = dequantized(qv);
    *status = Status::ok();
    return true;
  }
  // The result must reach a QuantizeLinear, through at most one Relu / Clip the float
  // translator absorbs (torch and ORT leave them between the op and its Q).
  std::string name = out_name;
  auto next = sole_consumer(name);
  if (next && (node_at(*next).op_type() == "Relu" || node_at(*next).op_type() == "Clip") &&
      n.op_type() != "Relu" && n.op_type() != "Clip") {
    name = node_at(*next).output(0);
    next = sole_consumer(name);
  }
  if (!next) return false;
  const onnx::NodeProto& qn = node_at(*next);
  if (qn.op_type() != "QuantizeLinear" || qn.input(0) != name || qn.input_size() < 2) return false;
  const Value* qs = find_value(qn.input(1));
  const Value* qz = qn.input_size() > 2 && !qn.input(2).empty() ? find_value(qn.input(2)) : nullptr;
  if (!qs || !qs->is_const || qs->host.numel() != 1 || !(qs->host.v[0] > 0) || !std::isfinite(qs->host.v[0]))
    return false;  // QuantizeLinear reports bad parameters itself
  if (qz && (!qz->is_const || qz->host.numel() != 1)) return false;
  QParams p;
  p.scale = static_cast<float>(qs->host.v[0]);
  p.zero_point = qz ? static_cast<int32_t>(qz->host.i(0)) : 0;
  p.type = quant_type(qz ? qz->onnx_type : kUint8);
  if (!fold_quantized(n, ins, name, p)) {
    values_.erase(out_name);
    return false;
  }
  *status = Status::ok();
  return true;
}

void register_quant_translators(std::unordered_map<std::string, Translator>& t) {
  t["QuantizeLinear"] = t_quantize;
  t["DequantizeLinear"] = t_dequantize;
  t["QLinearConv"] = t_qlinear;
  t["QLinearMatMul"] = t_qlinear;
}

}  // namespace nn::onnx_import
