// TFLite importer: byte checks, the flatbuffers Verifier, tensors -> operands, the graph's
// inputs and outputs, metadata. Operator handlers are in tflite_ops.cpp.
#include "import/tflite/tflite_importer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>

#include "import/tflite/tflite_converter.h"
#include "passes/fold_pad.h"
#include "ir/sha256.h"
#include "nn/image/preprocess.h"
#include "nn/import/import.h"

namespace nn::tflite_import {

namespace {

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}
Status unsupported(std::string message) {
  return {StatusCode::kUnsupportedOp, std::move(message)};
}

std::string printable(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t c : bytes) {
    if (c >= 0x20 && c < 0x7f) {
      s += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      s += "\\x";
      s += kHex[c >> 4];
      s += kHex[c & 15];
    }
  }
  return s;
}

const char* tensor_type_name(tflite::TensorType t) {
  const char* name = tflite::EnumNameTensorType(t);
  return (name && *name) ? name : "unknown";
}

// The MediaPipe selfie segmentation models (npm @mediapipe/selfie_segmentation 0.1.1675465747).
// Their graph (selfie_segmentation_cpu.pbtxt) feeds RGB scaled to [0, 1] after a plain
// stretch to the tensor size, and the model ends in a sigmoid: the output is already the
// person probability.
struct KnownModel {
  const char* sha256;
  const char* name;
};
constexpr KnownModel kSelfieModels[] = {
    {"8d13b7fae74af625c641226813616a2117bd6bca19eb3b75574621fc08557f27", "selfie_segmentation"},
    {"4aafe6223bb8dac6fac8ca8ed56852870a33051ef3f6238822d282a109962894", "selfie_segmentation_landscape"},
};

void set_metadata(Model& model, const tflite::Model& fb, const std::string& source_name,
                  const std::string& sha256) {
  Metadata& md = model.metadata;
  md.source_file = source_name.substr(source_name.find_last_of('/') + 1);
  md.source_sha256 = sha256;
  md.converter_version = converter_version();
  md.extra["source_format"] = "tflite";
  if (fb.description()) md.extra["tflite_description"] = fb.description()->str();
  for (uint32_t i : model.inputs)
    md.input_source_layouts.push_back(model.operands[i].dims.size() == 4 ? "NHWC" : "");
  for (uint32_t i : model.outputs)
    md.output_source_layouts.push_back(model.operands[i].dims.size() == 4 ? "NHWC" : "");

  bool selfie = std::any_of(std::begin(kSelfieModels), std::end(kSelfieModels),
                            [&](const KnownModel& k) { return sha256 == k.sha256; });
  // Re-packaged copies of the same network keep the converter's description.
  if (!selfie && fb.description() && fb.description()->str().find("selfiesegmentation") != std::string::npos)
    selfie = true;
  if (selfie && model.inputs.size() == 1 && model.outputs.size() == 1) {
    md.task = "segmentation";
    md.input_color = "RGB";
    md.input_mean = {0.f, 0.f, 0.f};
    md.input_std = {255.f, 255.f, 255.f};
    md.output_meaning = "person_probability";
    // Trained and shipped with MediaPipe's ImageToTensor front end (nn/image/preprocess.h).
    md.extra[image::kSamplingMetadataKey] = "mediapipe";
  }
}

}  // namespace

std::string builtin_name(int32_t code) {
  if (code >= tflite::BuiltinOperator_MIN && code <= tflite::BuiltinOperator_MAX) {
    const char* name = tflite::EnumNameBuiltinOperator(static_cast<tflite::BuiltinOperator>(code));
    if (name && *name) return name;
  }
  return "code " + std::to_string(code);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

// ---------------------------------------------------------------------------------------
// Tensors

Status Converter::check_tensor_index(int32_t t) const {
  if (t < 0 || static_cast<size_t>(t) >= num_tensors())
    return invalid("tensor index " + std::to_string(t) + " out of range (subgraph has " +
                   std::to_string(num_tensors()) + " tensors)");
  return Status::ok();
}

std::string Converter::tensor_label(int32_t t) const {
  std::string s = "tensor " + std::to_string(t);
  if (t >= 0 && static_cast<size_t>(t) < num_tensors() && tensor(t).name())
    s += " '" + tensor(t).name()->str() + "'";
  return s;
}

Result<Dims> Converter::tensor_dims(int32_t t) const {
  Dims dims;
  const auto* shape = tensor(t).shape();
  if (!shape) return dims;
  if (shape->size() > 8)
    return invalid(tensor_label(t) + ": rank " + std::to_string(shape->size()) + " exceeds 8");
  for (int32_t d : *shape) {
    if (d < 0)
      return unsupported(tensor_label(t) + ": dynamic dimension in shape (only static shapes are supported)");
    if (d >= (1 << 24)) return invalid(tensor_label(t) + ": dimension " + std::to_string(d) + " too large");
    dims.push_back(static_cast<uint32_t>(d));
  }
  // Each dim is < 2^24 but their product may not be: refuse tensors no device could hold.
  uint64_t elements = 1;
  for (uint32_t d : dims) {
    elements *= d;
    if (elements > (uint64_t{1} << 31))
      return invalid(tensor_label(t) + ": shape " + dims_to_string(dims) + " has over 2^31 elements");
  }
  return dims;
}

Result<std::optional<std::span<const uint8_t>>> Converter::constant_bytes(int32_t t) const {
  if (auto d = densified_.find(t); d != densified_.end())
    return std::optional<std::span<const uint8_t>>(std::span<const uint8_t>(d->second));
  const uint32_t b = tensor(t).buffer();
  const auto* buffers = fb_.buffers();
  if (b == 0) return std::optional<std::span<const uint8_t>>{};
  if (!buffers || b >= buffers->size())
    return invalid(tensor_label(t) + ": buffer " + std::to_string(b) + " out of range (model has " +
                   std::to_string(buffers ? buffers->size() : 0) + " buffers)");
  const tflite::Buffer* buffer = buffers->Get(b);
  if (buffer->offset() > 1)
    return unsupported(tensor_label(t) + ": buffer " + std::to_string(b) +
                       " keeps its data outside the flatbuffer (a model over 2 GB)");
  if (!buffer->data() || buffer->data()->size() == 0) return std::optional<std::span<const uint8_t>>{};
  return std::optional<std::span<const uint8_t>>(
      std::span<const uint8_t>(buffer->data()->data(), buffer->data()->size()));
}

bool Converter::is_constant(int32_t t) const {
  if (t < 0 || static_cast<size_t>(t) >= num_tensors()) return false;
  if (map_[t] >= 0) return m_.operands[map_[t]].is_constant();
  auto bytes = constant_bytes(t);
  return bytes.is_ok() && bytes.value().has_value();
}

Result<OperandType> Converter::ir_type(int32_t t) const {
  const tflite::Tensor& ts = tensor(t);
  const auto* q = ts.quantization();
  const size_t num_scales = (q && q->scale()) ? q->scale()->size() : 0;
  switch (ts.type()) {
    case tflite::TensorType_FLOAT32:
      return OperandType::TENSOR_FLOAT32;
    case tflite::TensorType_FLOAT16:
      return OperandType::TENSOR_FLOAT16;
    case tflite::TensorType_INT32:
      return OperandType::TENSOR_INT32;
    case tflite::TensorType_BOOL:
      return OperandType::TENSOR_BOOL8;
    case tflite::TensorType_UINT8:
      if (num_scales == 1) return OperandType::TENSOR_QUANT8_ASYMM;
      break;
    case tflite::TensorType_INT8:
      if (num_scales == 1) return OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
      if (num_scales > 1) return OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL;
      break;
    case tflite::TensorType_INT16:
      if (num_scales == 1) return OperandType::TENSOR_QUANT16_SYMM;
      break;
    case tflite::TensorType_INT64:
      return OperandType::TENSOR_INT32;  // constants only: narrowed in operand()
    default:
      break;
  }
  if (ts.type() == tflite::TensorType_UINT8 || ts.type() == tflite::TensorType_INT8 ||
      ts.type() == tflite::TensorType_INT16)
    return unsupported(tensor_label(t) + ": " + tensor_type_name(ts.type()) +
                       " without quantization parameters");
  return unsupported(tensor_label(t) + ": tensor type " + tensor_type_name(ts.type()) + " is not supported");
}

Result<std::vector<int32_t>> Converter::const_ints(int32_t t, const char* what) const {
  NN_RETURN_IF_ERROR(check_tensor_index(t));
  NN_ASSIGN_OR_RETURN(auto bytes, constant_bytes(t));
  if (!bytes) return unsupported(std::string(what) + " (" + tensor_label(t) + ") must be a constant");
  NN_ASSIGN_OR_RETURN(Dims dims, tensor_dims(t));
  const size_t n = num_elements(dims);
  const bool int64 = tensor(t).type() == tflite::TensorType_INT64;
  if (tensor(t).type() != tflite::TensorType_INT32 && !int64)
    return invalid(std::string(what) + " (" + tensor_label(t) + ") must be INT32 or INT64, got " +
                   tensor_type_name(tensor(t).type()));
  // The shape is checked against the buffer before anything is allocated: a corrupt file's
  // shape can claim billions of elements.
  const size_t width = int64 ? 8 : 4;
  if (n > bytes->size() / width || bytes->size() != n * width)
    return invalid(tensor_label(t) + ": buffer holds " + std::to_string(bytes->size()) + " bytes, shape " +
                   dims_to_string(dims) + " needs " + std::to_string(n) + " x " + std::to_string(width));
  std::vector<int32_t> values(n);
  if (!int64) {
    if (n) std::memcpy(values.data(), bytes->data(), n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, bytes->data() + 8 * i, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return unsupported(tensor_label(t) + ": INT64 value " + std::to_string(v) + " does not fit in int32");
      values[i] = static_cast<int32_t>(v);
    }
  }
  return values;
}

Result<float> Converter::const_float_scalar(int32_t t, const char* what) const {
  NN_RETURN_IF_ERROR(check_tensor_index(t));
  NN_ASSIGN_OR_RETURN(auto bytes, constant_bytes(t));
  if (!bytes) return unsupported(std::string(what) + " (" + tensor_label(t) + ") must be a constant");
  if (tensor(t).type() != tflite::TensorType_FLOAT32 || bytes->size() != 4)
    return unsupported(std::string(what) + " (" + tensor_label(t) + ") must be one FLOAT32 value");
  float v;
  std::memcpy(&v, bytes->data(), 4);
  return v;
}

Result<uint32_t> Converter::operand(int32_t t) {
  NN_RETURN_IF_ERROR(check_tensor_index(t));
  if (map_[t] >= 0) return static_cast<uint32_t>(map_[t]);
  NN_ASSIGN_OR_RETURN(OperandType type, ir_type(t));
  NN_ASSIGN_OR_RETURN(Dims dims, tensor_dims(t));
  NN_ASSIGN_OR_RETURN(auto bytes, constant_bytes(t));
  const tflite::Tensor& ts = tensor(t);
  const std::string name = ts.name() ? ts.name()->str() : std::string();
  uint32_t index;
  if (bytes) {
    if (ts.type() == tflite::TensorType_INT64) {
      NN_ASSIGN_OR_RETURN(std::vector<int32_t> narrowed, const_ints(t, "INT64 constant"));
      index = m_.add_constant_i32(dims, narrowed, name);
    } else {
      const size_t need = element_size(type) * num_elements(dims);
      if (bytes->size() != need)
        return invalid(tensor_label(t) + ": buffer holds " + std::to_string(bytes->size()) + " bytes, " +
                       tensor_type_name(ts.type()) + " " + dims_to_string(dims) + " needs " +
                       std::to_string(need));
      index = m_.add_constant(type, dims, bytes->data(), bytes->size(), name);
    }
  } else {
    if (ts.type() == tflite::TensorType_INT64)
      return unsupported(tensor_label(t) + ": INT64 tensors computed at run time are not supported");
    if (ts.is_variable()) return unsupported(tensor_label(t) + ": variable tensors are not supported");
    index = m_.add_tensor(type, dims, name);
    declared_.emplace_back(index, t);
  }
  if (ts.sparsity()) return unsupported(tensor_label(t) + ": sparse tensors are not supported");
  Operand& o = m_.operands[index];
  if (const auto* q = ts.quantization(); q && q->scale() && q->scale()->size() > 0) {
    const auto* zp = q->zero_point();
    if (q->scale()->size() == 1) {
      o.scale = q->scale()->Get(0);
      o.zero_point = (zp && zp->size() > 0) ? static_cast<int32_t>(zp->Get(0)) : 0;
    } else if (type == OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL) {
      const int32_t dim = q->quantized_dimension();
      if (dim < 0 || static_cast<size_t>(dim) >= dims.size() || dims[dim] != q->scale()->size())
        return invalid(tensor_label(t) + ": " + std::to_string(q->scale()->size()) +
                       " per-channel scales do not match dimension " + std::to_string(dim) + " of " +
                       dims_to_string(dims));
      if (zp)
        for (int64_t z : *zp)
          if (z != 0)
            return unsupported(tensor_label(t) + ": per-channel quantization with a non-zero zero point");
      o.channel_quant.channel_dim = static_cast<uint32_t>(dim);
      o.channel_quant.scales.assign(q->scale()->begin(), q->scale()->end());
    }
  }
  map_[t] = index;
  return index;
}

Result<uint32_t> Converter::output_operand(int32_t t) {
  NN_RETURN_IF_ERROR(check_tensor_index(t));
  if (map_[t] >= 0) return invalid(tensor_label(t) + " is written by more than one op (or is a model input)");
  if (is_constant(t)) return invalid(tensor_label(t) + " is a constant but an op writes it");
  return operand(t);
}

Result<bool> Converter::try_fold_dequantize(int32_t in, int32_t out) {
  NN_RETURN_IF_ERROR(check_tensor_index(in));
  NN_RETURN_IF_ERROR(check_tensor_index(out));
  NN_ASSIGN_OR_RETURN(auto bytes, constant_bytes(in));
  if (!bytes) return false;
  if (tensor(out).type() != tflite::TensorType_FLOAT32)
    return unsupported(tensor_label(out) + ": DEQUANTIZE to " + tensor_type_name(tensor(out).type()));
  if (map_[out] >= 0) return invalid(tensor_label(out) + " is written by more than one op");
  NN_ASSIGN_OR_RETURN(Dims dims, tensor_dims(in));
  NN_ASSIGN_OR_RETURN(Dims out_dims, tensor_dims(out));
  if (num_elements(out_dims) != num_elements(dims))
    return invalid("DEQUANTIZE " + tensor_label(in) + " " + dims_to_string(dims) + " -> " +
                   tensor_label(out) + " " + dims_to_string(out_dims) + ": element counts differ");
  const size_t n = num_elements(dims);
  // Every element takes a byte or more: a shape the buffer cannot hold is refused before
  // the floats are allocated (a corrupt shape can claim billions).
  if (n > bytes->size())
    return invalid(tensor_label(in) + ": buffer holds " + std::to_string(bytes->size()) + " bytes for " +
                   dims_to_string(dims) + " (" + std::to_string(n) + " elements)");
  std::vector<float> values(n);
  const tflite::Tensor& ts = tensor(in);
  auto check_size = [&](size_t element) -> Status {
    if (bytes->size() != n * element)
      return invalid(tensor_label(in) + ": buffer holds " + std::to_string(bytes->size()) + " bytes, " +
                     dims_to_string(dims) + " " + tensor_type_name(ts.type()) + " needs " +
                     std::to_string(n * element));
    return Status::ok();
  };
  if (ts.type() == tflite::TensorType_FLOAT16) {
    NN_RETURN_IF_ERROR(check_size(2));
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes->data() + 2 * i, 2);
      values[i] = half_to_float(h);
    }
  } else if (ts.type() == tflite::TensorType_INT8 || ts.type() == tflite::TensorType_UINT8) {
    NN_RETURN_IF_ERROR(check_size(1));
    const auto* q = ts.quantization();
    if (!q || !q->scale() || q->scale()->size() == 0)
      return invalid(tensor_label(in) + ": quantized constant without a scale");
    const auto& scales = *q->scale();
    const auto* zps = q->zero_point();
    // Per-channel: channel = (i / inner) % dims[qdim]; per-tensor: one scale.
    size_t inner = 1, channels = 1;
    if (scales.size() > 1) {
      const int32_t qdim = q->quantized_dimension();
      if (qdim < 0 || static_cast<size_t>(qdim) >= dims.size() || dims[qdim] != scales.size())
        return invalid(tensor_label(in) + ": per-channel scales do not match its shape " +
                       dims_to_string(dims));
      for (size_t d = qdim + 1; d < dims.size(); ++d) inner *= dims[d];
      channels = scales.size();
    }
    for (size_t i = 0; i < n; ++i) {
      const size_t c = (i / inner) % channels;
      const int64_t zp = (zps && c < zps->size()) ? zps->Get(c) : 0;
      const int32_t q8 = ts.type() == tflite::TensorType_INT8 ? static_cast<int8_t>(bytes->data()[i])
                                                              : static_cast<int32_t>(bytes->data()[i]);
      values[i] = scales.Get(static_cast<uint32_t>(c)) * static_cast<float>(q8 - zp);
    }
  } else {
    return unsupported("DEQUANTIZE of a " + std::string(tensor_type_name(ts.type())) + " constant (" +
                       tensor_label(in) + ")");
  }
  const std::string name = tensor(out).name() ? tensor(out).name()->str() : std::string();
  map_[out] = m_.add_constant_f32(out_dims, values, name);
  return true;
}

// ---------------------------------------------------------------------------------------
// The graph

Status Converter::convert() {
  NN_CHECK_OR_RETURN(graph_.tensors() && graph_.tensors()->size() > 0, StatusCode::kInvalidModel,
                     "subgraph 0 has no tensors");
  NN_CHECK_OR_RETURN(graph_.inputs() && graph_.inputs()->size() > 0, StatusCode::kInvalidModel,
                     "subgraph 0 has no inputs");
  NN_CHECK_OR_RETURN(graph_.outputs() && graph_.outputs()->size() > 0, StatusCode::kInvalidModel,
                     "subgraph 0 has no outputs");
  for (uint32_t k = 0; k < graph_.inputs()->size(); ++k) {
    const int32_t t = graph_.inputs()->Get(k);
    NN_RETURN_IF_ERROR(check_tensor_index(t).with_context("model input " + std::to_string(k)));
    if (is_constant(t))
      return invalid("model input " + std::to_string(k) + " (" + tensor_label(t) + ") is a constant");
    if (map_[t] >= 0)
      return invalid("model input " + std::to_string(k) + " (" + tensor_label(t) + ") is listed twice");
    Result<uint32_t> index = operand(t);
    if (!index.is_ok()) return index.status().with_context("model input " + std::to_string(k));
    m_.inputs.push_back(index.value());
  }
  if (graph_.operators()) {
    for (uint32_t k = 0; k < graph_.operators()->size(); ++k) {
      const tflite::Operator& op = *graph_.operators()->Get(k);
      cur_ = &op;
      Status s = convert_op(op);
      if (!s.is_ok()) {
        // "op N: builtin X (code C) is not supported" names the op already; anything else
        // gets "op N NAME: " in front, NAME being TFLite's operator name.
        std::string where = "op " + std::to_string(k);
        if (!refused_by_name_) {
          const auto* codes = fb_.operator_codes();
          if (codes && op.opcode_index() < codes->size()) {
            const tflite::OperatorCode& oc = *codes->Get(op.opcode_index());
            const int32_t code = std::max<int32_t>(oc.deprecated_builtin_code(), oc.builtin_code());
            if (code == tflite::BuiltinOperator_CUSTOM && oc.custom_code())
              where += " custom '" + oc.custom_code()->str() + "'";
            else
              where += " " + builtin_name(code);
          }
        }
        return s.with_context(where);
      }
    }
  }
  cur_ = nullptr;
  for (uint32_t k = 0; k < graph_.outputs()->size(); ++k) {
    const int32_t t = graph_.outputs()->Get(k);
    NN_RETURN_IF_ERROR(check_tensor_index(t).with_context("model output " + std::to_string(k)));
    if (map_[t] < 0)
      return invalid("model output " + std::to_string(k) + " (" + tensor_label(t) +
                     ") is not produced by any op");
    const uint32_t index = static_cast<uint32_t>(map_[t]);
    if (m_.operands[index].is_constant())
      return unsupported("model output " + std::to_string(k) + " (" + tensor_label(t) + ") is a constant");
    if (std::find(m_.inputs.begin(), m_.inputs.end(), index) != m_.inputs.end())
      return unsupported("model output " + std::to_string(k) + " (" + tensor_label(t) +
                         ") is also a model input");
    m_.outputs.push_back(index);
  }
  return Status::ok();
}

Status Converter::check_declared_shapes() const {
  for (const auto& [index, t] : declared_) {
    const auto* shape = tensor(t).shape();
    if (!shape) continue;
    Dims declared(shape->begin(), shape->end());
    const Dims& inferred = m_.operands[index].dims;
    // TFLite writes [] for some scalars and for tensors of unknown shape: nothing to compare.
    if (declared.empty()) continue;
    if (declared != inferred)
      return invalid(tensor_label(t) + ": the file declares " + dims_to_string(declared) +
                     " but the ops produce " + dims_to_string(inferred));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------
// Entry points

Result<std::shared_ptr<Model>> import_buffer(std::span<const uint8_t> bytes, const std::string& source_name,
                                             const ImportOptions& options) {
  const std::string where = "tflite '" + source_name + "'";
  if (bytes.size() < 8)
    return Status(StatusCode::kInvalidModel,
                  where + ": " + std::to_string(bytes.size()) + " bytes is too small to be a TFLite model");
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Status(StatusCode::kInvalidModel,
                  where + ": " + std::to_string(bytes.size()) + " bytes exceeds the 2 GB flatbuffer limit");
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), tflite::ModelIdentifier()))
    return Status(StatusCode::kInvalidModel, where + ": not a TFLite model: file identifier is '" +
                                                 printable(bytes.subspan(4, 4)) + "', expected 'TFL3'");

  // flatbuffers reads scalars in place: give it storage aligned like the flatbuffer expects.
  std::vector<uint8_t> aligned_copy;
  std::span<const uint8_t> data = bytes;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 16 != 0) {
    aligned_copy.assign(bytes.begin(), bytes.end());  // std::vector storage is malloc-aligned
    data = aligned_copy;
  }
  flatbuffers::Verifier::Options verify_options;
  verify_options.max_tables = 10'000'000;
  flatbuffers::Verifier verifier(data.data(), data.size(), verify_options);
  if (!tflite::VerifyModelBuffer(verifier))
    return Status(StatusCode::kInvalidModel,
                  where +
                      ": corrupt TFLite flatbuffer: the flatbuffers verifier rejected it "
                      "(truncated file, bad offset or table)");

  const tflite::Model& fb = *tflite::GetModel(data.data());
  if (fb.version() != 3)
    return Status(StatusCode::kInvalidModel,
                  where + ": schema version " + std::to_string(fb.version()) + ", expected 3");
  if (!fb.subgraphs() || fb.subgraphs()->size() == 0)
    return Status(StatusCode::kInvalidModel, where + ": the model has no subgraphs");

  auto model = std::make_shared<Model>();
  try {
    Converter converter(fb, *fb.subgraphs()->Get(0), *model);
    Status s = converter.convert();
    if (!s.is_ok()) return s.with_context(where);
    set_metadata(*model, fb, source_name, sha256_hex(bytes));
    if (!options.validate) return model;
    s = model->validate_and_infer_shapes();
    if (!s.is_ok()) return s.with_context(where);
    s = converter.check_declared_shapes();
    if (!s.is_ok()) return s.with_context(where);
    if (fold_pad_into_conv(*model) > 0) {  // Keras' ZeroPadding2D before a conv: the conv's own padding
      s = model->validate_and_infer_shapes();
      if (!s.is_ok()) return s.with_context(where + ": after folding PAD into convolutions");
    }
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, where + ": out of memory while importing");
  }
  return model;
}

}  // namespace nn::tflite_import

namespace nn {

Result<std::shared_ptr<Model>> import_tflite_buffer(std::span<const uint8_t> bytes,
                                                    const std::string& source_name) {
  return tflite_import::import_buffer(bytes, source_name);
}

Result<std::shared_ptr<Model>> import_tflite_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return Status(StatusCode::kIoError, "cannot open '" + path + "'");
  const std::streamoff size = file.tellg();
  if (size < 0) return Status(StatusCode::kIoError, "cannot read the size of '" + path + "'");
  if (static_cast<uint64_t>(size) >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Status(StatusCode::kInvalidModel, "tflite '" + path + "': " + std::to_string(size) +
                                                 " bytes exceeds the 2 GB flatbuffer limit");
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(size) + " bytes for '" + path + "'");
  }
  file.seekg(0);
  if (size > 0 && !file.read(reinterpret_cast<char*>(bytes.data()), size))
    return Status(StatusCode::kIoError, "cannot read '" + path + "'");
  return tflite_import::import_buffer(bytes, path);
}

}  // namespace nn
