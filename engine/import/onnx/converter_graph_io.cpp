// The ONNX graph's edges as the IR's: the opset, initializers (host constants), who reads
// each value, the model inputs (each in NHWC when an op that wants NHWC reads it, else in
// ONNX order; the source layout recorded), then the model outputs (back to the source
// layout, each its own operand), pruning what no output needs, and the metadata.
#include <unordered_set>

#include "import/onnx/converter.h"

namespace nn::onnx_import {

bool wants_nhwc_input(const std::string& op) {
  static const std::unordered_set<std::string> ops = {
      "Conv",          "ConvTranspose",      "MaxPool",      "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "BatchNormalization", "Resize",       "Upsample",    "InstanceNormalization",
      "LRN",           "DepthToSpace",       "SpaceToDepth", "QLinearConv"};
  return ops.count(op) != 0;
}

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

}  // namespace nn::onnx_import
