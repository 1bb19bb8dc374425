// PyTorch's NNAPI models (torch.backends._nnapi.prepare.convert_model_to_nnapi) -> the IR.
// Such a .pt holds the NNAPI model as a list of the calls an app makes (PyTorch's
// serialized format, version 1: operands, values, operations, inputs, outputs; values
// inline or as (buffer, offset, length) into the module's weights), plus per input and
// output a memory format: 0 = contiguous (NCHW for 4-d), 1 = channels-last (the NNAPI
// tensor is NHWC), 2 = scalar or vector. The IR is NHWC: 4-d inputs and outputs become
// NHWC with source layout "NCHW" (as the ONNX importer does), NCHW ops are rewritten by
// passes/nchw_layout, and the transposes that cancel are dropped.
#include <cstring>

#include "import/pytorch_nnapi/torchscript_archive.h"
#include "nn/import/import.h"
#include "passes/nchw_layout.h"

namespace nn {

namespace {

using torchscript::Value;
using torchscript::ValuePtr;

// Finds the NnapiModule: the object that has a ser_model tensor, anywhere below the root.
ValuePtr find_nnapi_module(const ValuePtr& v, int depth = 0) {
  if (!v || depth > 8 || v->kind != Value::Kind::kObject) return nullptr;
  if (ValuePtr ser = v->attr("ser_model"); ser && ser->kind == Value::Kind::kTensor) return v;
  for (const auto& [k, child] : v->dict)
    if (ValuePtr found = find_nnapi_module(child, depth + 1)) return found;
  return nullptr;
}

std::vector<int64_t> int_list(const ValuePtr& v) {
  std::vector<int64_t> out;
  if (v && v->kind == Value::Kind::kList)
    for (const auto& item : v->items) out.push_back(item->i);
  return out;
}

class Reader {
 public:
  Reader(const std::vector<uint8_t>& bytes, std::string where) : b_(bytes), where_(std::move(where)) {}
  Status u32(uint32_t* v) {
    if (pos_ + 4 > b_.size()) return short_by("a 4-byte field");
    std::memcpy(v, &b_[pos_], 4);
    pos_ += 4;
    return Status::ok();
  }
  Status i32(int32_t* v) { return u32(reinterpret_cast<uint32_t*>(v)); }
  Status f32(float* v) { return u32(reinterpret_cast<uint32_t*>(v)); }
  Status bytes(size_t n, const uint8_t** p) {
    if (n > b_.size() - pos_) return short_by(std::to_string(n) + " bytes");
    *p = &b_[pos_];
    pos_ += n;
    return Status::ok();
  }
  size_t pos() const { return pos_; }

 private:
  Status short_by(const std::string& what) {
    return Status(StatusCode::kInvalidModel, where_ + ": serialized NNAPI model ends at byte " + std::to_string(pos_) +
                                                 " before " + what);
  }
  const std::vector<uint8_t>& b_;
  std::string where_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::shared_ptr<Model>> import_pytorch_nnapi_file(const std::string& path) {
  NN_ASSIGN_OR_RETURN(torchscript::Archive archive, torchscript::Archive::open(path));
  NN_ASSIGN_OR_RETURN(ValuePtr root, archive.load_data_pkl());
  ValuePtr module = find_nnapi_module(root);
  if (!module)
    return Status(StatusCode::kInvalidModel,
                  path + ": no NNAPI model in it (no module with a ser_model tensor; was it made by "
                         "torch.backends._nnapi.prepare.convert_model_to_nnapi?)");
  const torchscript::Tensor& ser = *module->attr("ser_model")->tensor;
  std::vector<std::shared_ptr<const torchscript::Tensor>> weights;
  if (ValuePtr w = module->attr("weights"); w && w->kind == Value::Kind::kList)
    for (const auto& t : w->items) {
      if (!t || t->kind != Value::Kind::kTensor)
        return Status(StatusCode::kInvalidModel, path + ": weights list holds a non-tensor");
      weights.push_back(t->tensor);
    }
  const std::vector<int64_t> in_formats = int_list(module->attr("inp_mem_fmts"));
  const std::vector<int64_t> out_formats = int_list(module->attr("out_mem_fmts"));

  const std::string where = path + ": ser_model";
  Reader r(ser.bytes, where);
  int32_t version = 0, operand_count = 0, value_count = 0, operation_count = 0, input_count = 0, output_count = 0;
  NN_RETURN_IF_ERROR(r.i32(&version));
  NN_CHECK_OR_RETURN(version == 1, StatusCode::kInvalidModel,
                     where + ": serialized model version " + std::to_string(version) + " (this reads version 1)");
  for (int32_t* v : {&operand_count, &value_count, &operation_count, &input_count, &output_count}) {
    NN_RETURN_IF_ERROR(r.i32(v));
    NN_CHECK_OR_RETURN(*v >= 0 && *v < (1 << 24), StatusCode::kInvalidModel, where + ": a count is out of range");
  }
  struct OperandHeader {
    int32_t type;
    uint32_t rank;
    float scale;
    int32_t zero_point;
  };
  struct ValueHeader {
    int32_t index, source;
    uint32_t length;
  };
  struct OperationHeader {
    int32_t type;
    uint32_t inputs, outputs;
  };
  std::vector<OperandHeader> operand_headers(static_cast<size_t>(operand_count));
  std::vector<ValueHeader> value_headers(static_cast<size_t>(value_count));
  std::vector<OperationHeader> operation_headers(static_cast<size_t>(operation_count));
  for (auto& o : operand_headers) {
    NN_RETURN_IF_ERROR(r.i32(&o.type));
    NN_RETURN_IF_ERROR(r.u32(&o.rank));
    NN_RETURN_IF_ERROR(r.f32(&o.scale));
    NN_RETURN_IF_ERROR(r.i32(&o.zero_point));
  }
  for (auto& v : value_headers) {
    NN_RETURN_IF_ERROR(r.i32(&v.index));
    NN_RETURN_IF_ERROR(r.i32(&v.source));
    NN_RETURN_IF_ERROR(r.u32(&v.length));
  }
  for (auto& o : operation_headers) {
    NN_RETURN_IF_ERROR(r.i32(&o.type));
    NN_RETURN_IF_ERROR(r.u32(&o.inputs));
    NN_RETURN_IF_ERROR(r.u32(&o.outputs));
  }

  auto model = std::make_shared<Model>();
  for (size_t i = 0; i < operand_headers.size(); ++i) {
    const OperandHeader& h = operand_headers[i];
    auto type = operand_type_from_int(h.type);
    NN_CHECK_OR_RETURN(type.has_value(), StatusCode::kInvalidModel,
                       where + ": operand " + std::to_string(i) + " has unknown type " + std::to_string(h.type));
    NN_CHECK_OR_RETURN(h.rank <= 8, StatusCode::kInvalidModel, where + ": operand " + std::to_string(i) + " rank " + std::to_string(h.rank));
    Operand o;
    o.type = *type;
    for (uint32_t d = 0; d < h.rank; ++d) {
      uint32_t dim;
      NN_RETURN_IF_ERROR(r.u32(&dim));
      o.dims.push_back(dim);
    }
    o.scale = h.scale;
    o.zero_point = h.zero_point;
    o.name = "operand " + std::to_string(i);
    model->add_operand(std::move(o));
  }
  for (size_t k = 0; k < value_headers.size(); ++k) {
    const ValueHeader& h = value_headers[k];
    const std::string label = where + ": value " + std::to_string(k);
    NN_CHECK_OR_RETURN(h.index >= 0 && h.index < operand_count, StatusCode::kInvalidModel,
                       label + " names operand " + std::to_string(h.index));
    const uint8_t* stored;
    NN_RETURN_IF_ERROR(r.bytes((h.length + 3u) / 4u * 4u, &stored));
    const uint8_t* data = nullptr;
    size_t length = 0;
    if (h.source == 0) {  // immediate
      data = stored;
      length = h.length;
    } else if (h.source == 2) {  // numbered buffer: (buffer, offset, length) into the weights
      NN_CHECK_OR_RETURN(h.length == 12, StatusCode::kInvalidModel, label + ": a buffer reference is 12 bytes");
      uint32_t ref[3];
      std::memcpy(ref, stored, 12);
      NN_CHECK_OR_RETURN(ref[0] < weights.size(), StatusCode::kInvalidModel,
                         label + ": weight buffer " + std::to_string(ref[0]) + " of " + std::to_string(weights.size()));
      const auto& w = weights[ref[0]]->bytes;
      NN_CHECK_OR_RETURN(static_cast<uint64_t>(ref[1]) + ref[2] <= w.size(), StatusCode::kInvalidModel,
                         label + ": runs past weight buffer " + std::to_string(ref[0]));
      data = w.data() + ref[1];
      length = ref[2];
    } else {
      return Status(StatusCode::kInvalidModel, label + ": source type " + std::to_string(h.source) + " is not supported");
    }
    Operand& o = model->operands[static_cast<size_t>(h.index)];
    const size_t want = is_tensor_type(o.type) ? o.byte_size() : element_size(o.type);
    NN_CHECK_OR_RETURN(length == want, StatusCode::kInvalidModel,
                       label + ": " + std::to_string(length) + " bytes for " + std::string(operand_type_name(o.type)) +
                           " " + dims_to_string(o.dims) + " (" + std::to_string(want) + " expected)");
    Operand constant = o;
    const uint32_t tmp = model->add_constant(o.type, o.dims, data, length, o.name);
    constant.lifetime = Lifetime::CONSTANT;
    constant.data = model->operands[tmp].data;
    constant.length = length;
    constant.keepalive = model->operands[tmp].keepalive;
    model->operands.pop_back();
    model->operands[static_cast<size_t>(h.index)] = std::move(constant);
  }
  for (size_t k = 0; k < operation_headers.size(); ++k) {
    const OperationHeader& h = operation_headers[k];
    auto type = operation_type_from_int(h.type);
    NN_CHECK_OR_RETURN(type.has_value() && !is_extension(*type), StatusCode::kUnsupportedOp,
                       where + ": operation " + std::to_string(k) + " has NNAPI code " + std::to_string(h.type) +
                           ", which nnpipe does not implement");
    Operation op{*type, {}, {}};
    for (uint32_t j = 0; j < h.inputs + h.outputs; ++j) {
      uint32_t i;
      NN_RETURN_IF_ERROR(r.u32(&i));
      NN_CHECK_OR_RETURN(i < static_cast<uint32_t>(operand_count), StatusCode::kInvalidModel,
                         where + ": operation " + std::to_string(k) + " names operand " + std::to_string(i));
      (j < h.inputs ? op.inputs : op.outputs).push_back(i);
    }
    model->operations.push_back(std::move(op));
  }
  for (int32_t j = 0; j < input_count + output_count; ++j) {
    uint32_t i;
    NN_RETURN_IF_ERROR(r.u32(&i));
    NN_CHECK_OR_RETURN(i < static_cast<uint32_t>(operand_count), StatusCode::kInvalidModel,
                       where + ": model input/output names operand " + std::to_string(i));
    (j < input_count ? model->inputs : model->outputs).push_back(i);
  }
  NN_CHECK_OR_RETURN(in_formats.size() == model->inputs.size() && out_formats.size() == model->outputs.size(),
                     StatusCode::kInvalidModel,
                     path + ": inp_mem_fmts / out_mem_fmts do not match the model's inputs and outputs");
  for (uint32_t i : model->inputs) model->operands[i].lifetime = Lifetime::MODEL_INPUT;
  for (uint32_t o : model->outputs) model->operands[o].lifetime = Lifetime::MODEL_OUTPUT;

  // 4-d inputs and outputs in NHWC, the user's layout (NCHW) in the metadata. A contiguous
  // (NCHW) NNAPI tensor gets a transpose inside the model; a channels-last one already is NHWC.
  static constexpr int32_t kToNchw[4] = {0, 3, 1, 2};
  static constexpr int32_t kToNhwc[4] = {0, 2, 3, 1};
  std::vector<Operation> head, tail;
  for (size_t k = 0; k < model->inputs.size(); ++k) {
    const bool image = model->operands[model->inputs[k]].dims.size() == 4;
    model->metadata.input_source_layouts.push_back(image ? "NCHW" : "");
    if (!image || in_formats[k] != 0) continue;
    const uint32_t nchw = model->inputs[k];
    Operand nhwc = model->operands[nchw];
    const Dims d = nhwc.dims;
    nhwc.dims = {d[0], d[2], d[3], d[1]};
    nhwc.name = "input " + std::to_string(k);
    model->operands[nchw].lifetime = Lifetime::TEMPORARY;
    const uint32_t input = model->add_operand(std::move(nhwc));
    head.push_back({OperationType::TRANSPOSE, {input, model->add_constant_i32({4}, kToNchw)}, {nchw}});
    model->inputs[k] = input;
  }
  for (size_t k = 0; k < model->outputs.size(); ++k) {
    const bool image = model->operands[model->outputs[k]].dims.size() == 4;
    model->metadata.output_source_layouts.push_back(image ? "NCHW" : "");
    if (!image || out_formats[k] != 0) continue;
    const uint32_t nchw = model->outputs[k];
    model->operands[nchw].lifetime = Lifetime::TEMPORARY;
    Operand nhwc;
    nhwc.type = model->operands[nchw].type;
    nhwc.scale = model->operands[nchw].scale;
    nhwc.zero_point = model->operands[nchw].zero_point;
    nhwc.lifetime = Lifetime::MODEL_OUTPUT;
    nhwc.name = "output " + std::to_string(k);
    const uint32_t output = model->add_operand(std::move(nhwc));
    tail.push_back({OperationType::TRANSPOSE, {nchw, model->add_constant_i32({4}, kToNhwc)}, {output}});
    model->outputs[k] = output;
  }
  model->operations.insert(model->operations.begin(), head.begin(), head.end());
  model->operations.insert(model->operations.end(), tail.begin(), tail.end());
  rewrite_nchw_layout(*model);
  // Temporaries' dims come from shape inference (NCHW ones changed shape).
  for (Operand& o : model->operands)
    if (o.lifetime == Lifetime::TEMPORARY || o.lifetime == Lifetime::MODEL_OUTPUT) o.dims.clear();
  NN_RETURN_IF_ERROR(model->validate_and_infer_shapes().with_context(path));
  const std::string base = path.substr(path.find_last_of('/') + 1);
  model->metadata.source_file = base;
  model->metadata.converter_version = converter_version();
  model->metadata.extra["source_format"] = "pytorch_nnapi";
  return model;
}

}  // namespace nn
