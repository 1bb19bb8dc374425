// libFuzzer target: the .nnapi reader (header, section table, checksum, every section's
// parser) and what follows a successful load (model_checks.h).
// Each input is read twice: as it is (the header and checksum checks), and re-sealed (file
// size and CRC-32 fields made to fit) so that mutations reach the section parsers behind
// the checksum; libFuzzer cannot forge a CRC by itself.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "format/nnapi_format.h"
#include "model_checks.h"
#include "nn/format/nnapi_file.h"

namespace {

void load(std::span<const uint8_t> bytes) {
  (void)nn::read_nnapi_file_info(bytes);  // what nninspect shows, also for broken files
  auto model = nn::load_nnapi_buffer(bytes);
  if (model.is_ok()) nn::fuzz::check_loaded_model(*model.value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fmt = nn::nnapi_format;
  load({data, size});
  if (size < fmt::kHeaderSize) return 0;
  std::vector<uint8_t> sealed(data, data + size);
  fmt::store_u64(sealed.data() + fmt::kOffFileSize, sealed.size());
  fmt::store_u32(sealed.data() + fmt::kOffChecksum, fmt::file_checksum(sealed));
  load(sealed);
  return 0;
}
