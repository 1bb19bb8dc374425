// Elementwise ops and activations. They run in whatever layout their inputs have (a conv's
// NHWC output stays NHWC through Relu/Add/Mul...); broadcast operands are brought to it.
#include <cmath>

#include "import/onnx/converter.h"

namespace nn::onnx_import {

namespace {

constexpr int32_t kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9;

HostTensor scalar_f(double v) {
  HostTensor h;
  h.kind = ElemKind::kFloat;
  h.onnx_type = kFloat;
  h.dims = {1};
  h.v = {v};
  return h;
}

Value const_value(HostTensor h) {
  Value v;
  v.is_const = true;
  v.dims = h.dims;
  v.onnx_type = h.onnx_type;
  v.host = std::move(h);
  return v;
}

bool is_comparison(OperationType t) {
  return t == OperationType::EQUAL || t == OperationType::NOT_EQUAL || t == OperationType::LESS ||
         t == OperationType::LESS_EQUAL || t == OperationType::GREATER || t == OperationType::GREATER_EQUAL ||
         t == OperationType::LOGICAL_AND || t == OperationType::LOGICAL_OR;
}

bool has_fuse_param(OperationType t) {
  return t == OperationType::ADD || t == OperationType::SUB || t == OperationType::MUL ||
         t == OperationType::DIV;
}

// a (op) b with numpy broadcasting, in the inputs' layout.
Status binary(Converter& c, OperationType type, std::vector<Value*> ins, Value* out, int32_t fuse = 0) {
  Shape dims;
  Perm perm;
  NN_ASSIGN_OR_RETURN(std::vector<uint32_t> ops, c.broadcast(ins, &dims, &perm));
  OperandType out_type = c.ir_type(*ins[0]);
  int32_t onnx_type = ins[0]->onnx_type;
  if (type == OperationType::SELECT) {
    out_type = c.ir_type(*ins[1]);
    onnx_type = ins[1]->onnx_type;
  }
  if (is_comparison(type)) {
    out_type = OperandType::TENSOR_BOOL8;
    onnx_type = kBool;
  }
  if (has_fuse_param(type)) ops.push_back(c.model().add_scalar_i32(fuse));
  uint32_t o = c.emit(type, ops, out_type, permute(dims, perm));
  *out = c.runtime(o, dims, perm, onnx_type);
  return Status::ok();
}

Status unary(Converter& c, OperationType type, Value& x, Value* out, std::vector<uint32_t> extra = {}) {
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  std::vector<uint32_t> ops = {in};
  ops.insert(ops.end(), extra.begin(), extra.end());
  uint32_t o = c.emit(type, ops, c.model().operands[in].type, permute(x.dims, perm));
  *out = c.runtime(o, x.dims, perm, x.onnx_type);
  return Status::ok();
}

template <OperationType T>
Status t_unary(Converter& c) {
  if (c.ir_type(c.in(0)) != OperandType::TENSOR_FLOAT32 && T != OperationType::ABS &&
      T != OperationType::NEG && T != OperationType::LOGICAL_NOT)
    return c.unsupported("input type " + onnx_type_name(c.in(0).onnx_type));
  Value v;
  NN_RETURN_IF_ERROR(unary(c, T, c.in(0), &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

template <OperationType T>
Status t_binary(Converter& c) {
  if (c.num_inputs() != 2 || !c.has_input(0) || !c.has_input(1)) return c.invalid("expects two inputs");
  Value v;
  std::string name = c.node().output(0);
  int32_t fuse = 0;
  if (has_fuse_param(T) && c.ir_type(c.in(0)) == OperandType::TENSOR_FLOAT32)
    fuse = c.absorb_activation(name, &name);
  NN_RETURN_IF_ERROR(binary(c, T, {&c.in(0), &c.in(1)}, &v, fuse));
  if (fuse) c.bind(name, v);
  c.set_out(0, std::move(v));
  return Status::ok();
}

// Max, Min, Sum, Mean: variadic, folded pairwise.
template <OperationType T>
Status t_variadic(Converter& c) {
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) ins.push_back(&c.in(i));
  if (ins.empty()) return c.invalid("no inputs");
  Value acc = *ins[0];
  if (ins.size() == 1) {
    // A single input passes through; a copy keeps outputs distinct from inputs.
    Value copy;
    if (acc.is_const) {
      c.set_out(0, acc);
      return Status::ok();
    }
    NN_ASSIGN_OR_RETURN(copy, c.reshaped(acc, acc.dims));
    c.set_out(0, copy);
    return Status::ok();
  }
  for (size_t i = 1; i < ins.size(); ++i) {
    Value next;
    NN_RETURN_IF_ERROR(binary(c, T, {&acc, ins[i]}, &next));
    acc = std::move(next);
  }
  if (c.node().op_type() == "Mean") {
    Value k = const_value(scalar_f(1.0 / static_cast<double>(ins.size())));
    Value next;
    NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&acc, &k}, &next));
    acc = std::move(next);
  }
  c.set_out(0, std::move(acc));
  return Status::ok();
}

Status t_relu(Converter& c) {
  return t_unary<OperationType::RELU>(c);
}

Status clip_bounds(Converter& c, float* lo, float* hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (c.opset() < 11) {
    *lo = c.attr_f("min", -INFINITY);
    *hi = c.attr_f("max", INFINITY);
    return Status::ok();
  }
  if (c.has_input(1)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* t, c.const_in(1, "min"));
    if (t->numel() != 1) return c.invalid("min must be a scalar");
    *lo = static_cast<float>(t->v[0]);
  }
  if (c.has_input(2)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* t, c.const_in(2, "max"));
    if (t->numel() != 1) return c.invalid("max must be a scalar");
    *hi = static_cast<float>(t->v[0]);
  }
  return Status::ok();
}

Status t_clip(Converter& c) {
  float lo, hi;
  NN_RETURN_IF_ERROR(clip_bounds(c, &lo, &hi));
  Value& x = c.in(0);
  if (c.ir_type(x) != OperandType::TENSOR_FLOAT32)
    return c.unsupported("input type " + onnx_type_name(x.onnx_type));
  Value v;
  if (lo == 0.f && hi == 6.f) {
    NN_RETURN_IF_ERROR(unary(c, OperationType::RELU6, x, &v));
  } else if (lo == -1.f && hi == 1.f) {
    NN_RETURN_IF_ERROR(unary(c, OperationType::RELU1, x, &v));
  } else if (lo == 0.f && std::isinf(hi) && hi > 0) {
    NN_RETURN_IF_ERROR(unary(c, OperationType::RELU, x, &v));
  } else {
    v = x;
    if (!std::isinf(lo)) {
      Value k = const_value(scalar_f(lo)), next;
      NN_RETURN_IF_ERROR(binary(c, OperationType::MAXIMUM, {&v, &k}, &next));
      v = std::move(next);
    }
    if (!std::isinf(hi)) {
      Value k = const_value(scalar_f(hi)), next;
      NN_RETURN_IF_ERROR(binary(c, OperationType::MINIMUM, {&v, &k}, &next));
      v = std::move(next);
    }
    if (std::isinf(lo) && std::isinf(hi)) {
      NN_ASSIGN_OR_RETURN(v, c.reshaped(x, x.dims));
    }
  }
  c.set_out(0, std::move(v));
  return Status::ok();
}

// HardSigmoid(x) = clamp(alpha*x + beta, 0, 1). x * HardSigmoid(x) with torch's constants
// (alpha 1/6, beta 1/2) is HardSwish: one HARD_SWISH op.
Status t_hard_sigmoid(Converter& c) {
  if (!c.has_input(0)) return c.invalid("expects one input");
  const float alpha = c.attr_f("alpha", 0.2f), beta = c.attr_f("beta", 0.5f);
  const std::string& x_name = c.node().input(0);
  const std::string& hs_name = c.node().output(0);
  if (std::fabs(alpha - 1.f / 6.f) < 1e-7f && beta == 0.5f) {
    if (auto m = c.sole_consumer(hs_name)) {
      const onnx::NodeProto& mul = c.node_at(*m);
      if (mul.op_type() == "Mul" && mul.input_size() == 2 && mul.output_size() == 1 &&
          ((mul.input(0) == x_name && mul.input(1) == hs_name) ||
           (mul.input(1) == x_name && mul.input(0) == hs_name))) {
        Value v;
        NN_RETURN_IF_ERROR(unary(c, OperationType::HARD_SWISH, c.in(0), &v));
        c.absorb(*m);
        c.bind(mul.output(0), v);
        c.set_out(0, std::move(v));  // only the absorbed Mul read it
        return Status::ok();
      }
    }
  }
  Value a = const_value(scalar_f(alpha)), b = const_value(scalar_f(beta)), one = const_value(scalar_f(1.0));
  Value t1, t2, t3;
  NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&c.in(0), &a}, &t1));
  NN_RETURN_IF_ERROR(binary(c, OperationType::ADD, {&t1, &b}, &t2, /*fuse=*/1));
  NN_RETURN_IF_ERROR(binary(c, OperationType::MINIMUM, {&t2, &one}, &t3));
  c.set_out(0, std::move(t3));
  return Status::ok();
}

Status t_leaky_relu(Converter& c) {
  Value alpha = const_value(scalar_f(c.attr_f("alpha", 0.01f))), v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::PRELU, {&c.in(0), &alpha}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_prelu(Converter& c) {
  Value v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::PRELU, {&c.in(0), &c.in(1)}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_elu(Converter& c) {
  Value v;
  NN_RETURN_IF_ERROR(
      unary(c, OperationType::ELU, c.in(0), &v, {c.model().add_scalar_f32(c.attr_f("alpha", 1.f))}));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_selu(Converter& c) {
  Value e, v;
  NN_RETURN_IF_ERROR(unary(c, OperationType::ELU, c.in(0), &e,
                           {c.model().add_scalar_f32(c.attr_f("alpha", 1.67326319217681884765625f))}));
  Value g = const_value(scalar_f(c.attr_f("gamma", 1.05070102214813232421875f)));
  NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&e, &g}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_reciprocal(Converter& c) {
  Value one = const_value(scalar_f(1.0)), v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::DIV, {&one, &c.in(0)}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_softsign(Converter& c) {
  Value a, d, v, one = const_value(scalar_f(1.0));
  NN_RETURN_IF_ERROR(unary(c, OperationType::ABS, c.in(0), &a));
  NN_RETURN_IF_ERROR(binary(c, OperationType::ADD, {&a, &one}, &d));
  NN_RETURN_IF_ERROR(binary(c, OperationType::DIV, {&c.in(0), &d}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_softplus(Converter& c) {
  Value e, s, v, one = const_value(scalar_f(1.0));
  NN_RETURN_IF_ERROR(unary(c, OperationType::EXP, c.in(0), &e));
  NN_RETURN_IF_ERROR(binary(c, OperationType::ADD, {&e, &one}, &s));
  NN_RETURN_IF_ERROR(unary(c, OperationType::LOG, s, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_where(Converter& c) {
  Value v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::SELECT, {&c.in(0), &c.in(1), &c.in(2)}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_cast(Converter& c) {
  const int32_t to = static_cast<int32_t>(c.attr_i("to", kFloat));
  OperandType type;
  if (!(to == kFloat || to == kInt32 || to == kInt64 || to == kBool) || !ir_type_of(to, &type))
    return c.unsupported("cast to " + onnx_type_name(to));
  Value& x = c.in(0);
  if (c.ir_type(x) == type) {
    Value v = x;
    v.onnx_type = to;
    c.set_out(0, std::move(v));
    return Status::ok();
  }
  const Perm perm = c.layout_of(x);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(x, perm));
  uint32_t o = c.emit(OperationType::CAST, {in}, type, permute(x.dims, perm));
  c.set_out(0, c.runtime(o, x.dims, perm, to));
  return Status::ok();
}

Status t_dropout(Converter& c) {
  if (c.has_input(2)) {
    NN_ASSIGN_OR_RETURN(const HostTensor* t, c.const_in(2, "training_mode"));
    if (t->numel() == 1 && t->v[0] != 0) return c.unsupported("training_mode=true");
  }
  if (c.has_output(1)) return c.unsupported("the mask output");
  c.set_out(0, c.in(0));
  return Status::ok();
}

// Celu(x) = alpha * Elu(x / alpha, 1).
Status t_celu(Converter& c) {
  const float alpha = c.attr_f("alpha", 1.f);
  Value inv = const_value(scalar_f(1.0 / alpha)), k = const_value(scalar_f(alpha)), t, e, v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&c.in(0), &inv}, &t));
  NN_RETURN_IF_ERROR(unary(c, OperationType::ELU, t, &e, {c.model().add_scalar_f32(1.f)}));
  NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&e, &k}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status to_float(Converter& c, Value& b, Value* out) {
  const Perm perm = c.layout_of(b);
  NN_ASSIGN_OR_RETURN(uint32_t in, c.operand(b, perm));
  uint32_t o = c.emit(OperationType::CAST, {in}, OperandType::TENSOR_FLOAT32, permute(b.dims, perm));
  *out = c.runtime(o, b.dims, perm, kFloat);
  return Status::ok();
}

// Sign(x) = (x > 0) - (x < 0).
Status t_sign(Converter& c) {
  if (c.ir_type(c.in(0)) != OperandType::TENSOR_FLOAT32) return c.unsupported("non-float Sign");
  Value zero = const_value(scalar_f(0.0)), gt, lt, fg, fl, v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::GREATER, {&c.in(0), &zero}, &gt));
  NN_RETURN_IF_ERROR(binary(c, OperationType::LESS, {&c.in(0), &zero}, &lt));
  NN_RETURN_IF_ERROR(to_float(c, gt, &fg));
  NN_RETURN_IF_ERROR(to_float(c, lt, &fl));
  NN_RETURN_IF_ERROR(binary(c, OperationType::SUB, {&fg, &fl}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

// ThresholdedRelu(x) = x * (x > alpha).
Status t_thresholded_relu(Converter& c) {
  Value alpha = const_value(scalar_f(c.attr_f("alpha", 1.f))), gt, f, v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::GREATER, {&c.in(0), &alpha}, &gt));
  NN_RETURN_IF_ERROR(to_float(c, gt, &f));
  NN_RETURN_IF_ERROR(binary(c, OperationType::MUL, {&c.in(0), &f}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

// IsNaN(x) = x != x.
Status t_isnan(Converter& c) {
  Value v;
  NN_RETURN_IF_ERROR(binary(c, OperationType::NOT_EQUAL, {&c.in(0), &c.in(0)}, &v));
  c.set_out(0, std::move(v));
  return Status::ok();
}

Status t_isinf(Converter& c) {
  const bool pos = c.attr_i("detect_positive", 1) != 0, neg = c.attr_i("detect_negative", 1) != 0;
  Value v;
  if (pos && neg) {
    Value a, inf = const_value(scalar_f(INFINITY));
    NN_RETURN_IF_ERROR(unary(c, OperationType::ABS, c.in(0), &a));
    NN_RETURN_IF_ERROR(binary(c, OperationType::EQUAL, {&a, &inf}, &v));
  } else if (pos || neg) {
    Value inf = const_value(scalar_f(pos ? INFINITY : -INFINITY));
    NN_RETURN_IF_ERROR(binary(c, OperationType::EQUAL, {&c.in(0), &inf}, &v));
  } else {
    return c.unsupported("IsInf detecting neither sign");
  }
  c.set_out(0, std::move(v));
  return Status::ok();
}

}  // namespace

void register_elementwise_translators(std::unordered_map<std::string, Translator>& t) {
  t["Relu"] = t_relu;
  t["Sigmoid"] = t_unary<OperationType::LOGISTIC>;
  t["Tanh"] = t_unary<OperationType::TANH>;
  t["HardSwish"] = t_unary<OperationType::HARD_SWISH>;
  t["Abs"] = t_unary<OperationType::ABS>;
  t["Exp"] = t_unary<OperationType::EXP>;
  t["Log"] = t_unary<OperationType::LOG>;
  t["Sqrt"] = t_unary<OperationType::SQRT>;
  t["Neg"] = t_unary<OperationType::NEG>;
  t["Sin"] = t_unary<OperationType::SIN>;
  t["Floor"] = t_unary<OperationType::FLOOR>;
  t["Ceil"] = t_unary<OperationType::NNPIPE_CEIL>;
  t["Erf"] = t_unary<OperationType::NNPIPE_ERF>;
  t["Not"] = t_unary<OperationType::LOGICAL_NOT>;
  t["Add"] = t_binary<OperationType::ADD>;
  t["Sub"] = t_binary<OperationType::SUB>;
  t["Mul"] = t_binary<OperationType::MUL>;
  t["Div"] = t_binary<OperationType::DIV>;
  t["Pow"] = t_binary<OperationType::POW>;
  t["Equal"] = t_binary<OperationType::EQUAL>;
  t["Less"] = t_binary<OperationType::LESS>;
  t["LessOrEqual"] = t_binary<OperationType::LESS_EQUAL>;
  t["Greater"] = t_binary<OperationType::GREATER>;
  t["GreaterOrEqual"] = t_binary<OperationType::GREATER_EQUAL>;
  t["And"] = t_binary<OperationType::LOGICAL_AND>;
  t["Or"] = t_binary<OperationType::LOGICAL_OR>;
  t["Xor"] = t_binary<OperationType::NOT_EQUAL>;
  t["Max"] = t_variadic<OperationType::MAXIMUM>;
  t["Min"] = t_variadic<OperationType::MINIMUM>;
  t["Sum"] = t_variadic<OperationType::ADD>;
  t["Mean"] = t_variadic<OperationType::ADD>;
  t["Clip"] = t_clip;
  t["HardSigmoid"] = t_hard_sigmoid;
  t["LeakyRelu"] = t_leaky_relu;
  t["PRelu"] = t_prelu;
  t["Elu"] = t_elu;
  t["Selu"] = t_selu;
  t["Reciprocal"] = t_reciprocal;
  t["Softsign"] = t_softsign;
  t["Softplus"] = t_softplus;
  t["Where"] = t_where;
  t["Cast"] = t_cast;
  t["Dropout"] = t_dropout;
  t["Celu"] = t_celu;
  t["Sign"] = t_sign;
  t["ThresholdedRelu"] = t_thresholded_relu;
  t["IsNaN"] = t_isnan;
  t["IsInf"] = t_isinf;
}

}  // namespace nn::onnx_import
