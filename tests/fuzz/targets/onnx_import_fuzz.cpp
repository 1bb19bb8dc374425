// libFuzzer target: the ONNX importer (protobuf parsing, initializers, constant folding,
// op conversion, NCHW -> NHWC bridging) and what follows a successful import (model_checks.h).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model_checks.h"
#include "nn/import/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = nn::import_onnx_buffer(std::span<const uint8_t>(data, size), "fuzz.onnx");
  if (model.is_ok()) nn::fuzz::check_loaded_model(*model.value());
  return 0;
}
