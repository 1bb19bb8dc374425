// CRC-32 of the .nnapi payload. Slicing-by-4 tables: fast enough that checking a 14 MB
// model costs a few milliseconds, small enough to read.
#include <array>

#include "format/nnapi_format.h"

namespace nn::nnapi_format {

namespace {

using Tables = std::array<std::array<uint32_t, 256>, 4>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i)
    for (size_t s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc) {
  crc = ~crc;
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 4) {
    crc ^= load_u32(p);
    crc = kTables[3][crc & 0xff] ^ kTables[2][(crc >> 8) & 0xff] ^ kTables[1][(crc >> 16) & 0xff] ^
          kTables[0][crc >> 24];
    p += 4;
    n -= 4;
  }
  while (n--) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

uint32_t file_checksum(std::span<const uint8_t> file) {
  static constexpr uint8_t kZero[4] = {0, 0, 0, 0};
  uint32_t crc = crc32(file.first(kOffChecksum));
  crc = crc32(kZero, crc);
  return crc32(file.subspan(kOffChecksum + 4), crc);
}

const char* section_type_name(uint32_t type) {
  switch (type) {
    case kSectionOperands:
      return "OPERANDS";
    case kSectionOperations:
      return "OPERATIONS";
    case kSectionModelIo:
      return "MODEL_IO";
    case kSectionConstants:
      return "CONSTANTS";
    case kSectionMetadata:
      return "METADATA";
    case kSectionStream:
      return "STREAM";
    case kSectionStageModels:
      return "STAGE_MODELS";
  }
  return "UNKNOWN";
}

}  // namespace nn::nnapi_format
