// IR -> ONNX: the driver (graph boundary, names, layouts, initializers, file writing).
// The per-op translations live in onnx_export_ops.cpp.
#include "nn/export/onnx_export.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "export/onnx_exporter.h"
#include "nn/import/import.h"

namespace nn {
namespace onnx_export {

namespace {

Status internal(std::string message) {
  return {StatusCode::kInternal, std::move(message)};
}
Status unsupported(std::string message) {
  return {StatusCode::kUnsupportedOp, std::move(message)};
}

std::string operand_label(const Model& m, uint32_t index) {
  const std::string& name = m.operands[index].name;
  return "operand " + std::to_string(index) + (name.empty() ? "" : " '" + name + "'");
}

// Legal-looking ONNX names: anything printable goes, but empty names mean "absent".
std::string clean_name(std::string_view base, std::string_view fallback) {
  std::string s(base.empty() ? fallback : base);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = '_';
  return s;
}

// Reorders an NHWC-ordered 4-D block of `elem`-byte elements to NCHW.
std::vector<uint8_t> nhwc_to_nchw(const uint8_t* src, const Dims& d, size_t elem) {
  const size_t n = d[0], h = d[1], w = d[2], c = d[3];
  std::vector<uint8_t> out(n * h * w * c * elem);
  for (size_t in = 0; in < n; ++in)
    for (size_t ih = 0; ih < h; ++ih)
      for (size_t iw = 0; iw < w; ++iw)
        for (size_t ic = 0; ic < c; ++ic)
          std::memcpy(&out[(((in * c + ic) * h + ih) * w + iw) * elem],
                      &src[(((in * h + ih) * w + iw) * c + ic) * elem], elem);
  return out;
}

void set_tensor_type(onnx::ValueInfoProto& vi, int32_t elem_type, const std::vector<int64_t>& dims) {
  auto* tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

}  // namespace

void attr_int(onnx::NodeProto& n, const char* name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void attr_float(onnx::NodeProto& n, const char* name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void attr_string(onnx::NodeProto& n, const char* name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void attr_ints(onnx::NodeProto& n, const char* name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

std::vector<int64_t> onnx_dims(const Dims& d, Layout layout) {
  if (d.size() == 4 && layout == Layout::kNchw) return {d[0], d[3], d[1], d[2]};
  return std::vector<int64_t>(d.begin(), d.end());
}

std::string Exporter::temp(std::string_view base) {
  std::string name = clean_name(base, "t");
  if (used_names_.insert(name).second) return name;
  for (int k = 1;; ++k) {
    std::string candidate = name + "_" + std::to_string(k);
    if (used_names_.insert(candidate).second) return candidate;
  }
}

onnx::NodeProto& Exporter::node(std::string_view type, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = g_.add_node();
  n->set_op_type(std::string(type));
  n->set_name(outputs.empty() ? std::string(type) : outputs[0]);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

std::string Exporter::init_f32(std::string_view base, const std::vector<int64_t>& dims,
                               const std::vector<float>& data) {
  onnx::TensorProto* t = g_.add_initializer();
  const std::string name = temp(base);
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data.data(), data.size() * sizeof(float));
  return name;
}

std::string Exporter::init_i64(std::string_view base, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = g_.add_initializer();
  const std::string name = temp(base);
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  t->set_raw_data(values.data(), values.size() * sizeof(int64_t));
  return name;
}

std::string Exporter::scalar1_f32(float v) {
  auto it = scalars_.find(v);
  if (it != scalars_.end()) return it->second;
  std::string name = init_f32("const_" + std::to_string(v), {1}, {v});
  scalars_[v] = name;
  return name;
}

std::string Exporter::convert(const std::string& name, const Dims& d, Layout from, Layout to,
                              std::string out) {
  if (out.empty()) out = temp(name + (to == Layout::kNchw ? "/nchw" : "/nhwc"));
  if (from == to) {
    node("Identity", {name}, {out});
    return out;
  }
  // When only unit dims move the element order is unchanged and a Reshape is enough.
  static constexpr int kOrder[2][4] = {{0, 1, 2, 3}, {0, 3, 1, 2}};
  std::vector<int> a, b;
  for (int ax : kOrder[static_cast<int>(from)])
    if (d[ax] != 1) a.push_back(ax);
  for (int ax : kOrder[static_cast<int>(to)])
    if (d[ax] != 1) b.push_back(ax);
  if (a == b) {
    node("Reshape", {name, init_i64(out + "/shape", onnx_dims(d, to))}, {out});
  } else {
    auto& n = node("Transpose", {name}, {out});
    attr_ints(n, "perm",
              to == Layout::kNchw ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{0, 2, 3, 1});
  }
  return out;
}

Status Exporter::activation(int32_t fuse, const std::string& in, const std::string& out) {
  switch (fuse) {
    case 0:
      node("Identity", {in}, {out});
      return Status::ok();
    case 1:
      node("Relu", {in}, {out});
      return Status::ok();
    case 2:
      // Exact, but OpenCV 4.6 cannot read Clip bounds given as inputs (no model we export uses it).
      node("Clip", {in, scalar1_f32(-1.f), scalar1_f32(1.f)}, {out});
      return Status::ok();
    case 3: {
      // min(max(x, 0), 6) as 6 * HardSigmoid(x; 1/6, 0): readable by ONNX Runtime and OpenCV 4.6
      // alike; x * (1/6) * 6 is x to within 2 ulp.
      const std::string unit = temp(out + "/relu6_unit");
      auto& hs = node("HardSigmoid", {in}, {unit});
      attr_float(hs, "alpha", 1.f / 6.f);
      attr_float(hs, "beta", 0.f);
      node("Mul", {unit, scalar1_f32(6.f)}, {out});
      return Status::ok();
    }
    default:
      return Status(StatusCode::kInvalidModel,
                    "fused activation code " + std::to_string(fuse) + " is not 0..3");
  }
}

Result<std::vector<float>> Exporter::const_f32(uint32_t index) const {
  auto it = folded_.find(index);
  if (it != folded_.end()) return it->second;
  const Operand& o = m_.operands[index];
  if (!o.is_constant()) return unsupported(operand_label(m_, index) + " must be a constant");
  if (o.type != OperandType::TENSOR_FLOAT32)
    return unsupported(operand_label(m_, index) + " is " + std::string(operand_type_name(o.type)) +
                       ", the exporter needs TENSOR_FLOAT32");
  if (o.length < o.byte_size() || !o.data) return internal(operand_label(m_, index) + " holds too few bytes");
  const float* p = o.as<float>();
  return std::vector<float>(p, p + num_elements(o.dims));
}

Result<std::vector<int32_t>> Exporter::const_i32(uint32_t index) const {
  const Operand& o = m_.operands[index];
  if (!o.is_constant() || o.type != OperandType::TENSOR_INT32)
    return unsupported(operand_label(m_, index) + " must be a constant TENSOR_INT32");
  if (o.length < o.byte_size() || !o.data) return internal(operand_label(m_, index) + " holds too few bytes");
  const int32_t* p = o.as<int32_t>();
  return std::vector<int32_t>(p, p + num_elements(o.dims));
}

Result<std::string> Exporter::constant(uint32_t index, Layout layout) {
  const Operand& o = m_.operands[index];
  int32_t elem_type;
  size_t elem;
  std::vector<uint8_t> bytes;
  if (auto it = folded_.find(index); it != folded_.end()) {
    elem_type = onnx::TensorProto::FLOAT;
    elem = 4;
    bytes.resize(it->second.size() * 4);
    std::memcpy(bytes.data(), it->second.data(), bytes.size());
  } else {
    switch (o.type) {
      case OperandType::TENSOR_FLOAT32:
        elem_type = onnx::TensorProto::FLOAT;
        break;
      case OperandType::TENSOR_INT32:
        elem_type = onnx::TensorProto::INT32;
        break;
      case OperandType::TENSOR_FLOAT16:
        elem_type = onnx::TensorProto::FLOAT16;
        break;
      case OperandType::TENSOR_BOOL8:
        elem_type = onnx::TensorProto::BOOL;
        break;
      default:
        return unsupported(operand_label(m_, index) + " is a " + std::string(operand_type_name(o.type)) +
                           " constant; the ONNX exporter handles float graphs only");
    }
    elem = element_size(o.type);
    if (o.length < o.byte_size() || !o.data)
      return internal(operand_label(m_, index) + " holds too few bytes");
    bytes.assign(o.data, o.data + o.byte_size());
  }
  if (layout == Layout::kNchw) bytes = nhwc_to_nchw(bytes.data(), o.dims, elem);
  onnx::TensorProto* t = g_.add_initializer();
  const std::string name =
      temp(clean_name(o.name, "const_" + std::to_string(index)) + (layout == Layout::kNchw ? "/nchw" : ""));
  t->set_name(name);
  t->set_data_type(elem_type);
  for (int64_t d : onnx_dims(o.dims, layout)) t->add_dims(d);
  t->set_raw_data(bytes.data(), bytes.size());
  return name;
}

Result<std::string> Exporter::value(uint32_t index, Layout layout) {
  if (index >= m_.operands.size()) return internal("operand " + std::to_string(index) + " out of range");
  const Operand& o = m_.operands[index];
  if (o.dims.size() != 4) layout = Layout::kIr;
  if (!names_[index][static_cast<int>(layout)].empty()) return names_[index][static_cast<int>(layout)];
  if (is_constant(index)) {
    NN_ASSIGN_OR_RETURN(std::string name, constant(index, layout));
    names_[index][static_cast<int>(layout)] = name;
    return name;
  }
  const Layout have = layout == Layout::kIr ? Layout::kNchw : Layout::kIr;
  const std::string src = names_[index][static_cast<int>(have)];
  if (src.empty()) return internal(operand_label(m_, index) + " is read before any op writes it");
  return convert(src, o.dims, have, layout, define(index, layout));
}

Layout Exporter::preferred_layout(uint32_t index) const {
  const Operand& o = m_.operands[index];
  if (o.dims.size() != 4) return Layout::kIr;
  if (is_constant(index) || !names_[index][1].empty()) return Layout::kNchw;
  return names_[index][0].empty() ? Layout::kNchw : Layout::kIr;
}

std::string Exporter::define(uint32_t index, Layout layout) {
  if (m_.operands[index].dims.size() != 4) layout = Layout::kIr;
  std::string name;
  auto it = public_outputs_.find(index);
  if (it != public_outputs_.end() && it->second.layout == layout)
    name = it->second.name;  // reserved in used_names_ already
  else
    name = temp(m_.operands[index].name);
  names_[index][static_cast<int>(layout)] = name;
  return name;
}

Status Exporter::declare_inputs() {
  const Metadata& md = m_.metadata;
  for (size_t i = 0; i < m_.inputs.size(); ++i) {
    const uint32_t index = m_.inputs[i];
    const Operand& o = m_.operands[index];
    if (o.type != OperandType::TENSOR_FLOAT32)
      return unsupported("model input " + std::to_string(i) + " is " +
                         std::string(operand_type_name(o.type)) +
                         "; the ONNX exporter handles float32 inputs only");
    const bool nchw =
        o.dims.size() == 4 && i < md.input_source_layouts.size() && md.input_source_layouts[i] == "NCHW";
    const Layout layout = nchw ? Layout::kNchw : Layout::kIr;
    const std::string name = temp(clean_name(o.name, "input_" + std::to_string(i)));
    names_[index][static_cast<int>(layout)] = name;
    auto* vi = g_.add_input();
    vi->set_name(name);
    set_tensor_type(*vi, onnx::TensorProto::FLOAT, onnx_dims(o.dims, layout));
  }
  return Status::ok();
}

Status Exporter::declare_outputs() {
  const Metadata& md = m_.metadata;
  std::set<uint32_t> inputs(m_.inputs.begin(), m_.inputs.end());
  for (size_t j = 0; j < m_.outputs.size(); ++j) {
    const uint32_t index = m_.outputs[j];
    const Operand& o = m_.operands[index];
    const bool nchw =
        o.dims.size() == 4 && j < md.output_source_layouts.size() && md.output_source_layouts[j] == "NCHW";
    Public p{temp(clean_name(o.name, "output_" + std::to_string(j))), nchw ? Layout::kNchw : Layout::kIr};
    // An op writes the public name directly unless the operand is also an input, another
    // output, or a constant; those get an Identity at the end.
    if (!inputs.count(index) && !public_outputs_.count(index) && !o.is_constant()) public_outputs_[index] = p;
    outputs_.push_back(p);
    auto* vi = g_.add_output();
    vi->set_name(p.name);
    set_tensor_type(*vi, onnx::TensorProto::FLOAT, onnx_dims(o.dims, p.layout));
  }
  return Status::ok();
}

Status Exporter::connect_outputs() {
  for (size_t j = 0; j < m_.outputs.size(); ++j) {
    // Ops refuse non-float results first, naming themselves; this catches an output that no
    // op writes (a model input or constant of another type).
    const Operand& o = m_.operands[m_.outputs[j]];
    if (o.type != OperandType::TENSOR_FLOAT32)
      return unsupported("model output " + std::to_string(j) + " is " +
                         std::string(operand_type_name(o.type)) +
                         "; the ONNX exporter handles float32 outputs only");
    NN_ASSIGN_OR_RETURN(std::string name, value(m_.outputs[j], outputs_[j].layout));
    if (name != outputs_[j].name) node("Identity", {name}, {outputs_[j].name});
  }
  return Status::ok();
}

Status Exporter::run() {
  names_.assign(m_.operands.size(), {});
  NN_RETURN_IF_ERROR(declare_outputs());  // reserves the public output names first
  NN_RETURN_IF_ERROR(declare_inputs());
  for (size_t i = 0; i < m_.operations.size(); ++i) {
    const Operation& op = m_.operations[i];
    const std::string context = "op " + std::to_string(i) + " " + std::string(operation_type_name(op.type));
    if (q_ && (op.type == OperationType::QUANTIZE || op.type == OperationType::DEQUANTIZE) &&
        !is_constant(op.inputs[0])) {
      NN_RETURN_IF_ERROR(quantize_op(op).with_context(context));
      continue;
    }
    // Runtime tensors must be float32 (a quantized model arrives as its float view).
    for (uint32_t out : op.outputs)
      if (m_.operands[out].type != OperandType::TENSOR_FLOAT32)
        return unsupported(context + ": writes " + operand_label(m_, out) + " of type " +
                           std::string(operand_type_name(m_.operands[out].type)) +
                           "; the ONNX exporter handles float32 graphs only");
    NN_RETURN_IF_ERROR(translate(*this, op).with_context(context));
    if (q_) requantize_outputs(op);
  }
  return connect_outputs();
}

}  // namespace onnx_export

Result<std::vector<uint8_t>> export_onnx_buffer(const Model& source) {
  // Work on a copy whose shapes are freshly inferred: the exporter reads every operand's dims.
  Model model = source;
  NN_RETURN_IF_ERROR(model.validate_and_infer_shapes());
  if (model.inputs.empty() || model.outputs.empty())
    return Status(StatusCode::kInvalidModel, "the model has no inputs or no outputs");

  onnx::ModelProto proto;
  proto.set_ir_version(7);
  proto.set_producer_name("nnpipe");
  proto.set_producer_version(converter_version());
  proto.set_doc_string("exported by nnpipe from " + (model.metadata.source_file.empty()
                                                         ? std::string("an IR model")
                                                         : model.metadata.source_file));
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxExportOpset);
  auto add_meta = [&](const std::string& key, const std::string& value) {
    if (value.empty()) return;
    auto* p = proto.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  };
  add_meta("task", model.metadata.task);
  add_meta("input_color", model.metadata.input_color);
  add_meta("output_meaning", model.metadata.output_meaning);
  add_meta("source_file", model.metadata.source_file);

  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(model.metadata.source_file.empty() ? "nnpipe" : model.metadata.source_file);
  // A quantized model goes out as QDQ: its float view, with what was int8 said by
  // QuantizeLinear / DequantizeLinear (onnx_export_qdq.cpp).
  onnx_export::QuantInfo quant;
  NN_ASSIGN_OR_RETURN(Model view, onnx_export::dequantized_view(model, &quant));
  if (!quant.empty()) model = std::move(view);
  onnx_export::Exporter exporter(model, *graph, quant.empty() ? nullptr : &quant);
  NN_RETURN_IF_ERROR(exporter.run());

  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    return Status(StatusCode::kInternal, "serializing the ONNX model failed (over 2 GiB?)");
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

Status export_onnx(const Model& model, const std::string& path) {
  NN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, export_onnx_buffer(model));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status(StatusCode::kIoError, tmp + ": cannot open for writing");
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return Status(StatusCode::kIoError, tmp + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return Status(StatusCode::kIoError, path + ": rename failed: " + ec.message());
  }
  return Status::ok();
}

}  // namespace nn
