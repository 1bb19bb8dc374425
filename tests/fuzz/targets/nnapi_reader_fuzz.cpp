// libFuzzer target: the .nnapi reader (header, section table, checksum, every section's
// parser) and what follows a successful load (model_checks.h).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model_checks.h"
#include "nn/format/nnapi_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)nn::read_nnapi_file_info(bytes);  // what nninspect shows, also for broken files
  auto model = nn::load_nnapi_buffer(bytes);
  if (model.is_ok()) nn::fuzz::check_loaded_model(*model.value());
  return 0;
}
