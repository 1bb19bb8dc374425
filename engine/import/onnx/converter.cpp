// ONNX protobuf -> IR, the walk: each node in graph order is folded (all-constant inputs,
// fold_constant.cpp), folded with its QuantizeLinear / DequantizeLinear neighbours
// (ops_quant.cpp) or dispatched to its op's translator (ops_*.cpp); an activation or a
// BatchNormalization that follows an op can be absorbed into it. The graph's edges (its
// initializers, inputs, outputs and metadata) are converter_graph_io.cpp; the node being
// translated is converter_node.cpp; values, layouts and IR operands converter_values.cpp.
#include "import/onnx/converter.h"

#include <cmath>
#include <fstream>
#include <limits>

#include "ir/sha256.h"

namespace nn::onnx_import {

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

Converter::Converter(const onnx::ModelProto& proto, std::string source_name)
    : proto_(proto), source_name_(std::move(source_name)) {}

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

// ---------------------------------------------------------------- absorbing the next node

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
