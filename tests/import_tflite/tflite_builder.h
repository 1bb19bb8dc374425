// Builds tiny .tflite flatbuffers in tests, with the importer's own generated schema
// header, so each test states exactly the graph it feeds the importer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "import/tflite/tflite_schema_generated.h"

namespace tflite_test {

class TinyModel {
 public:
  TinyModel() { buffers_.push_back(tflite::CreateBuffer(fbb_)); }  // buffer 0: the empty sentinel

  // A tensor; with data it is a constant (its own buffer).
  int tensor(std::vector<int32_t> shape, tflite::TensorType type, const std::string& name,
             const void* data = nullptr, size_t length = 0, const std::vector<float>& scales = {},
             int32_t quantized_dimension = 0, const std::vector<int64_t>& zero_points_in = {}) {
    uint32_t buffer = 0;
    if (data) {
      fbb_.ForceVectorAlignment(length, 1, 16);
      auto bytes = fbb_.CreateVector(static_cast<const uint8_t*>(data), length);
      buffers_.push_back(tflite::CreateBuffer(fbb_, bytes));
      buffer = static_cast<uint32_t>(buffers_.size() - 1);
    }
    flatbuffers::Offset<tflite::QuantizationParameters> quant = 0;
    if (!scales.empty()) {
      std::vector<int64_t> zero_points = zero_points_in;
      zero_points.resize(scales.size(), 0);
      quant = tflite::CreateQuantizationParametersDirect(fbb_, nullptr, nullptr, &scales, &zero_points,
                                                         tflite::QuantizationDetails_NONE, 0,
                                                         quantized_dimension);
    }
    tensors_.push_back(tflite::CreateTensorDirect(fbb_, &shape, type, buffer, name.c_str(), quant));
    return static_cast<int>(tensors_.size() - 1);
  }
  template <typename T>
  int constant(std::vector<int32_t> shape, tflite::TensorType type, const std::string& name,
               const std::vector<T>& values) {
    return tensor(std::move(shape), type, name, values.data(), values.size() * sizeof(T));
  }

  // An operator code. deprecated < 0: min(code, 127) as current converters write it.
  int opcode(int32_t code, const std::string& custom = "", int deprecated = -1) {
    const int8_t dep = static_cast<int8_t>(deprecated >= 0 ? deprecated : std::min(code, 127));
    codes_.push_back(tflite::CreateOperatorCodeDirect(fbb_, dep, custom.empty() ? nullptr : custom.c_str(), 1,
                                                      static_cast<tflite::BuiltinOperator>(code)));
    return static_cast<int>(codes_.size() - 1);
  }

  void op(int opcode_index, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
          tflite::BuiltinOptions options_type = tflite::BuiltinOptions_NONE,
          flatbuffers::Offset<void> options = 0, const std::vector<uint8_t>* custom_options = nullptr) {
    ops_.push_back(tflite::CreateOperatorDirect(fbb_, static_cast<uint32_t>(opcode_index), &inputs, &outputs,
                                                options_type, options, custom_options));
  }

  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

  std::vector<uint8_t> finish(std::vector<int32_t> inputs, std::vector<int32_t> outputs,
                              const char* description = "tiny") {
    auto graph = tflite::CreateSubGraphDirect(fbb_, &tensors_, &inputs, &outputs, &ops_, "main");
    std::vector<flatbuffers::Offset<tflite::SubGraph>> graphs = {graph};
    auto model = tflite::CreateModelDirect(fbb_, 3, &codes_, &graphs, description, &buffers_);
    tflite::FinishModelBuffer(fbb_, model);
    return std::vector<uint8_t>(fbb_.GetBufferPointer(), fbb_.GetBufferPointer() + fbb_.GetSize());
  }

 private:
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<flatbuffers::Offset<tflite::Buffer>> buffers_;
  std::vector<flatbuffers::Offset<tflite::Tensor>> tensors_;
  std::vector<flatbuffers::Offset<tflite::OperatorCode>> codes_;
  std::vector<flatbuffers::Offset<tflite::Operator>> ops_;
};

}  // namespace tflite_test
