// The ONNX node being translated, as the translators see it: its inputs (resolved to
// values before dispatch), its attributes with defaults, and errors that name it.
#include "import/onnx/converter.h"

namespace nn::onnx_import {

bool Converter::has_input(size_t i) const {
  return i < num_inputs() && !node_->input(static_cast<int>(i)).empty();
}
bool Converter::has_output(size_t i) const {
  return i < num_outputs() && !node_->output(static_cast<int>(i)).empty();
}
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

}  // namespace nn::onnx_import
