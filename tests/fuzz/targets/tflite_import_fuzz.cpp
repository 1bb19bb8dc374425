// libFuzzer target: the TFLite importer (flatbuffer verification, tensor/buffer tables,
// op conversion) and what follows a successful import (model_checks.h).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model_checks.h"
#include "nn/import/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = nn::import_tflite_buffer(std::span<const uint8_t>(data, size), "fuzz.tflite");
  if (model.is_ok()) nn::fuzz::check_loaded_model(*model.value());
  return 0;
}
