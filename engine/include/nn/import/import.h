// Importers: a framework model -> the IR, bridging layouts and semantics once, here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn {

// TFLite flatbuffer (float models, FP16 weights behind DEQUANTIZE, MediaPipe's
// Convolution2DTransposeBias custom op). Unsupported ops are refused by name.
Result<std::shared_ptr<Model>> import_tflite_file(const std::string& path);
Result<std::shared_ptr<Model>> import_tflite_buffer(std::span<const uint8_t> bytes,
                                                    const std::string& source_name = "buffer");

// ONNX protobuf. NCHW inputs/outputs become NHWC; metadata records the source layout.
Result<std::shared_ptr<Model>> import_onnx_file(const std::string& path);
Result<std::shared_ptr<Model>> import_onnx_buffer(std::span<const uint8_t> bytes,
                                                  const std::string& source_name = "buffer");

// PyTorch's NNAPI model (.pt from torch.backends._nnapi.prepare.convert_model_to_nnapi):
// the serialized NNAPI model and its weights read from the TorchScript zip; NCHW ops and
// 4-d inputs/outputs become NHWC, metadata records the source layout.
Result<std::shared_ptr<Model>> import_pytorch_nnapi_file(const std::string& path);

// By extension: .nnapi (loaded), .tflite, .onnx or .pt (PyTorch NNAPI; converted in memory).
Result<std::shared_ptr<Model>> load_model(const std::string& path);

// nnpipe's version, written into converted files' metadata.
const char* converter_version();

}  // namespace nn
