// ONNX protobuf -> IR: graph walk, value/layout tracking, model inputs and outputs,
// metadata. The op translators live in ops_*.cpp.
#include "import/onnx/converter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>

#include "ir/sha256.h"

namespace nn::onnx_import {

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

bool wants_nhwc_input(const std::string& op) {
  static const std::unordered_set<std::string> ops = {
      "Conv",          "ConvTranspose",      "MaxPool",      "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization", "Resize",       "Upsample",    "InstanceNormalization",
      "LRN",           "DepthToSpace",       "SpaceToDepth", "QLinearConv"};
  return ops.count(op) != 0;
}

const std::unordered_map<std::string, Translator>& translator_table() {
  static const auto table = [] {
    std::unordered_map<std::string, Translator> t;
    register_nn_translators(t);
    register_elementwise_translators(t);
    register_shape_translators(t);
    register_quant_translators(t);
    return t;
  }();
  return table;
}

namespace {


Dims to_ir_dims(const Shape& s) {
  Dims d;
  for (int64_t x : s) d.push_back(static_cast<uint32_t>(std::max<int64_t>(x, 0)));
  return d;
}

}  // namespace

Converter::Converter(const onnx::ModelProto& proto, std::string source_name)
    : proto_(proto), source_name_(std::move(source_name)) {}

// ---------------------------------------------------------------- node access

bool Converter::has_input(size_t i) const {
  return i < num_inputs() && !node_->input(static_cast<int>(i)).empty();
}
bool Converter::has_output(size_t i) const {
  return i < num_outputs() && !node_->output(static_cast<int>(i)).empty();
}
// A translator that reads an input the node lacks (a hostile or broken file) must not
// dereference null: this unwinds to translate_node, which turns it into a Status. The
// exception never leaves the importer.
struct MissingInput {
  size_t index;
};

Value& Converter::in(size_t i) {
  if (i >= node_inputs_.size() || node_inputs_[i] == nullptr) throw MissingInput{i};
  return *node_inputs_[i];
}
bool Converter::in_const(size_t i) const {
  return has_input(i) && node_inputs_[i]->is_const;
}

Result<const HostTensor*> Converter::const_in(size_t i, const char* what) {
  if (!has_input(i)) return invalid(std::string("missing input ") + std::to_string(i) + " (" + what + ")");
  if (!node_inputs_[i]->is_const)
    return unsupported(std::string("input ") + std::to_string(i) + " (" + what + ", '" +
                       node_->input(static_cast<int>(i)) + "') must be a constant known at import time");
  return &node_inputs_[i]->host;
}

static const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const char* name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool Converter::has_attr(const char* name) const {
  return find_attr(*node_, name) != nullptr;
}

int64_t Converter::attr_i(const char* name, int64_t def) const {
  const auto* a = find_attr(*node_, name);
  return a && a->type() == onnx::AttributeProto::INT ? a->i() : def;
}
float Converter::attr_f(const char* name, float def) const {
  const auto* a = find_attr(*node_, name);
  return a && a->type() == onnx::AttributeProto::FLOAT ? a->f() : def;
}
std::string Converter::attr_s(const char* name, const std::string& def) const {
  const auto* a = find_attr(*node_, name);
  return a && a->type() == onnx::AttributeProto::STRING ? a->s() : def;
}
std::vector<int64_t> Converter::attr_ints(const char* name) const {
  const auto* a = find_attr(*node_, name);
  if (!a) return {};
  if (a->type() == onnx::AttributeProto::INT) return {a->i()};
  return {a->ints().begin(), a->ints().end()};
}
std::vector<float> Converter::attr_floats(const char* name) const {
  const auto* a = find_attr(*node_, name);
  if (!a) return {};
  if (a->type() == onnx::AttributeProto::FLOAT) return {a->f()};
  return {a->floats().begin(), a->floats().end()};
}
Result<HostTensor> Converter::attr_tensor(const char* name) const {
  const auto* a = find_attr(*node_, name);
  if (!a || a->type() != onnx::AttributeProto::TENSOR)
    return invalid(std::string("missing tensor attribute ") + name);
  auto t = tensor_from_proto(a->t());
  if (!t) return t.status().with_context(where());
  return t;
}

std::string Converter::where() const {
  if (!node_) return "graph";
  return "node " + std::to_string(node_index_) + " '" + node_->name() + "' (" + node_->op_type() + ")";
}
Status Converter::unsupported(const std::string& why) const {
  return Status(StatusCode::kUnsupportedOp, where() + ": " + why);
}
Status Converter::invalid(const std::string& why) const {
  return Status(StatusCode::kInvalidModel, where() + ": " + why);
}

// ---------------------------------------------------------------- values and operands

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

// ---------------------------------------------------------------- fusion helpers

std::optional<int> Converter::sole_consumer(const std::string& name) const {
  if (graph_outputs_.count(name)) return std::nullopt;
  auto it = consumers_.find(name);
  if (it == consumers_.end() || it->second.size() != 1) return std::nullopt;
  return it->second[0];
}

const Value* Converter::find_value(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

int32_t Converter::absorb_activation(const std::string& name, std::string* out_name) {
  auto c = sole_consumer(name);
  if (!c) return 0;
  const onnx::NodeProto& n = node_at(*c);
  if (n.output_size() < 1 || n.input_size() < 1 || n.input(0) != name) return 0;
  int32_t code = 0;
  if (n.op_type() == "Relu") {
    code = 1;
  } else if (n.op_type() == "Clip") {
    float lo = -INFINITY, hi = INFINITY;
    if (opset_ < 11) {
      for (const auto& a : n.attribute()) {
        if (a.name() == "min") lo = a.f();
        if (a.name() == "max") hi = a.f();
      }
    } else {
      for (int k = 1; k <= 2 && k < n.input_size(); ++k) {
        if (n.input(k).empty()) continue;
        const Value* v = find_value(n.input(k));
        if (!v || !v->is_const || v->host.numel() != 1) return 0;
        (k == 1 ? lo : hi) = static_cast<float>(v->host.v[0]);
      }
    }
    if (lo == 0.f && hi == 6.f)
      code = 3;
    else if (lo == -1.f && hi == 1.f)
      code = 2;
    else if (lo == 0.f && std::isinf(hi) && hi > 0)
      code = 1;
  }
  if (!code) return 0;
  absorb(*c);
  *out_name = n.output(0);
  return code;
}

// ---------------------------------------------------------------- the graph

Status Converter::load_graph() {
  for (const auto& o : proto_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = static_cast<int>(o.version());
  const onnx::GraphProto& g = proto_.graph();
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) return Status(StatusCode::kInvalidModel, "initializer without a name");
    auto h = tensor_from_proto(t);
    if (!h) return h.status().with_context("initializer '" + t.name() + "'");
    Value v;
    v.is_const = true;
    v.dims = h->dims;
    v.onnx_type = h->onnx_type;
    v.host = std::move(h.value());
    values_[t.name()] = std::move(v);
  }
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& name : g.node(i).input())
      if (!name.empty()) {
        auto& list = consumers_[name];
        if (list.empty() || list.back() != i) list.push_back(i);
      }
  for (const auto& o : g.output()) graph_outputs_.insert(o.name());

  for (const auto& in : g.input()) {
    if (values_.count(in.name())) continue;  // an initializer listed as input (old exporters)
    const std::string what = "model input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      return Status(StatusCode::kUnsupportedOp, what + ": only tensor inputs are supported");
    const auto& tt = in.type().tensor_type();
    OperandType type;
    if (!ir_type_of(tt.elem_type(), &type))
      return Status(StatusCode::kUnsupportedOp,
                    what + ": element type " + onnx_type_name(tt.elem_type()) + " has no IR equivalent");
    if (!tt.has_shape())
      return Status(StatusCode::kUnsupportedOp, what + ": has no shape; export with fixed shapes");
    Shape dims;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value())
        return Status(StatusCode::kUnsupportedOp, what + ": dimension '" + d.dim_param() +
                                                      "' is symbolic; export with fixed input shapes");
      if (d.dim_value() <= 0 || d.dim_value() >= (1 << 24))
        return Status(StatusCode::kInvalidModel, what + ": bad dimension " + std::to_string(d.dim_value()));
      dims.push_back(d.dim_value());
    }
    if (dims.empty())
      return Status(StatusCode::kUnsupportedOp, what + ": scalar model inputs are not supported");
    bool nhwc = false;
    if (dims.size() == 4 && (type == OperandType::TENSOR_FLOAT32 || type == OperandType::TENSOR_QUANT8_ASYMM ||
                             type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED)) {
      auto it = consumers_.find(in.name());
      if (it != consumers_.end())
        for (int c : it->second)
          if (wants_nhwc_input(g.node(c).op_type()) && g.node(c).input(0) == in.name()) nhwc = true;
    }
    Perm perm = nhwc ? kNhwc : identity_perm(dims.size());
    uint32_t op = add_tensor(type, permute(dims, perm), in.name());
    if (type == OperandType::TENSOR_QUANT8_ASYMM || type == OperandType::TENSOR_QUANT8_ASYMM_SIGNED)
      model_->operands[op].scale = 1.f;  // set properly by the op that dequantizes it
    model_->inputs.push_back(op);
    model_->metadata.input_source_layouts.push_back(nhwc ? "NCHW" : "");
    values_[in.name()] = runtime(op, dims, perm, tt.elem_type());
  }
  if (model_->inputs.empty()) return Status(StatusCode::kUnsupportedOp, "the graph has no runtime inputs");
  return Status::ok();
}

Status Converter::translate_node(int index) {
  node_index_ = index;
  node_ = &proto_.graph().node(index);
  const onnx::NodeProto& n = *node_;
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return unsupported("operator domain '" + n.domain() + "' is not supported");
  // Every operator has at least one output; translators name their result after output(0).
  if (n.output_size() == 0) return invalid("the node has no outputs");
  node_inputs_.assign(n.input_size(), nullptr);
  bool all_const = true;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    auto it = values_.find(n.input(i));
    if (it == values_.end())
      return invalid("input '" + n.input(i) + "' is not produced by any earlier node or initializer");
    node_inputs_[i] = &it->second;
    all_const = all_const && it->second.is_const;
  }
  Status s;
  try {
    if (!(all_const && fold_constant_node(*this, &s)) && !try_fold_qdq(&s)) {
      const auto& table = translator_table();
      auto it = table.find(n.op_type());
      if (it == table.end()) return unsupported("operator type '" + n.op_type() + "' is not supported");
      s = it->second(*this);
    }
  } catch (const MissingInput& e) {
    return invalid("missing input " + std::to_string(e.index) + " (the node has " + std::to_string(n.input_size()) +
                   ")");
  }
  if (!s.is_ok()) {
    // Errors from helpers may not carry the node yet.
    if (s.message().rfind("node ", 0) == 0) return s;
    return Status(s.code(), where() + ": " + s.message());
  }
  for (int i = 0; i < n.output_size(); ++i)
    if (!n.output(i).empty() && !values_.count(n.output(i)))
      return unsupported("output " + std::to_string(i) + " ('" + n.output(i) + "') is not supported");
  return Status::ok();
}

Status Converter::finish_outputs() {
  node_ = nullptr;
  std::unordered_set<uint32_t> used(model_->inputs.begin(), model_->inputs.end());
  for (const auto& o : proto_.graph().output()) {
    auto it = values_.find(o.name());
    if (it == values_.end())
      return Status(StatusCode::kInvalidModel, "graph output '" + o.name() + "' is not produced by any node");
    Value& v = it->second;
    std::string layout;
    uint32_t op;
    if (!v.is_const && v.rank() == 4 && v.home == kNhwc) {
      op = v.operands.at(kNhwc);
      layout = "NCHW";
    } else {
      NN_ASSIGN_OR_RETURN(op, onnx_order(v));
    }
    if (v.rank() == 0 && v.is_const)
      return Status(StatusCode::kUnsupportedOp, "graph output '" + o.name() + "' is a scalar constant");
    if (used.count(op) || model_->operands[op].is_constant()) {
      // A model output must be its own operand, written by an op: copy.
      const Operand src = model_->operands[op];  // a copy: adding operands moves them
      Shape d(src.dims.begin(), src.dims.end());
      std::vector<int32_t> shape(src.dims.begin(), src.dims.end());
      uint32_t s = const_i32({static_cast<int64_t>(shape.size())}, shape);
      uint32_t copy = emit(OperationType::RESHAPE, {op, s}, src.type, d);
      model_->operands[copy].scale = model_->operands[op].scale;
      model_->operands[copy].zero_point = model_->operands[op].zero_point;
      op = copy;
    }
    used.insert(op);
    model_->operands[op].name = o.name();
    model_->outputs.push_back(op);
    model_->metadata.output_source_layouts.push_back(layout);
  }
  return Status::ok();
}

void Converter::prune() {
  // Ops whose results nobody reads (superseded layouts, folded-away chains), then operands
  // no op or model input/output refers to; indices are renumbered.
  Model& m = *model_;
  std::vector<char> live(m.operands.size(), 0);
  for (uint32_t o : m.outputs) live[o] = 1;
  std::vector<char> keep(m.operations.size(), 0);
  for (size_t k = m.operations.size(); k-- > 0;) {
    const Operation& op = m.operations[k];
    for (uint32_t o : op.outputs) keep[k] |= live[o];
    if (keep[k])
      for (uint32_t i : op.inputs) live[i] = 1;
  }
  for (uint32_t i : m.inputs) live[i] = 1;
  for (size_t k = 0; k < m.operations.size(); ++k)
    if (keep[k])
      for (uint32_t o : m.operations[k].outputs) live[o] = 1;  // unread outputs of kept ops
  std::vector<uint32_t> remap(m.operands.size(), UINT32_MAX);
  std::vector<Operand> operands;
  for (size_t k = 0; k < m.operands.size(); ++k)
    if (live[k]) {
      remap[k] = static_cast<uint32_t>(operands.size());
      operands.push_back(std::move(m.operands[k]));
    }
  std::vector<Operation> ops;
  for (size_t k = 0; k < m.operations.size(); ++k) {
    if (!keep[k]) continue;
    Operation op = std::move(m.operations[k]);
    for (uint32_t& i : op.inputs) i = remap[i];
    for (uint32_t& i : op.outputs) i = remap[i];
    ops.push_back(std::move(op));
  }
  for (uint32_t& i : m.inputs) i = remap[i];
  for (uint32_t& i : m.outputs) i = remap[i];
  m.operands = std::move(operands);
  m.operations = std::move(ops);
}

void Converter::fill_metadata() {
  Metadata& md = model_->metadata;
  md.source_file = source_name_.substr(source_name_.find_last_of('/') + 1);
  md.converter_version = converter_version();
  for (const auto& p : proto_.metadata_props()) {
    if (p.key() == "task")
      md.task = p.value();
    else
      md.extra["onnx." + p.key()] = p.value();
  }
  md.extra["onnx.opset"] = std::to_string(opset_);
  if (!proto_.producer_name().empty())
    md.extra["onnx.producer"] = proto_.producer_name() + " " + proto_.producer_version();
  if (md.task.empty() && model_->inputs.size() == 1 && model_->outputs.size() == 1 &&
      md.input_source_layouts[0] == "NCHW") {
    const Operand& in = model_->operands[model_->inputs[0]];
    const Operand& out = model_->operands[model_->outputs[0]];
    // Image in, one score vector out: a classifier. Image in, per-pixel map of the same
    // size out: segmentation. Anything else is left for the user to state.
    if (out.dims.size() == 2 && out.dims[1] >= 10)
      md.task = "classification";
    else if (out.dims.size() == 4 && md.output_source_layouts[0] == "NCHW" && out.dims[1] == in.dims[1] &&
             out.dims[2] == in.dims[2])
      md.task = "segmentation";
  }
}

Result<std::shared_ptr<Model>> Converter::run() {
  model_ = std::make_shared<Model>();
  if (!proto_.has_graph()) return Status(StatusCode::kInvalidModel, "the model has no graph");
  NN_RETURN_IF_ERROR(load_graph());
  const int n = proto_.graph().node_size();
  // Constant nodes first: fusion decisions (Clip bounds, BatchNorm parameters) look ahead
  // at values torch emits as Constant nodes after the conv they follow.
  for (int i = 0; i < n; ++i)
    if (proto_.graph().node(i).op_type() == "Constant" && proto_.graph().node(i).input_size() == 0) {
      NN_RETURN_IF_ERROR(translate_node(i));
      absorbed_.insert(i);
    }
  for (int i = 0; i < n; ++i) {
    if (absorbed_.count(i)) continue;
    NN_RETURN_IF_ERROR(translate_node(i));
  }
  NN_RETURN_IF_ERROR(finish_outputs());
  prune();
  fill_metadata();
  Status s = model_->validate_and_infer_shapes();
  if (!s.is_ok()) return s.with_context("converted model");
  return model_;
}

}  // namespace nn::onnx_import

namespace nn {

Result<std::shared_ptr<Model>> import_onnx_buffer(std::span<const uint8_t> bytes,
                                                  const std::string& source_name) {
  if (bytes.empty()) return Status(StatusCode::kInvalidModel, source_name + ": empty ONNX buffer");
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return Status(StatusCode::kInvalidModel, source_name + ": ONNX buffer of " +
                                                 std::to_string(bytes.size()) +
                                                 " bytes exceeds protobuf's 2 GiB limit");
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status(StatusCode::kInvalidModel, source_name + ": not a valid ONNX protobuf (parse failed)");
  onnx_import::Converter converter(proto, source_name);
  auto result = converter.run();
  if (!result) return result.status().with_context(source_name);
  (*result)->metadata.source_sha256 = sha256_hex(bytes);
  return result;
}

Result<std::shared_ptr<Model>> import_onnx_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kIoError, path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status(StatusCode::kIoError, path + ": read failed");
  return import_onnx_buffer(bytes, path);
}

}  // namespace nn

namespace nn::onnx_import {

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
