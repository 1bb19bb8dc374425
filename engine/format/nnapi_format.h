// Internal constants and little-endian helpers of the .nnapi file, shared by the reader,
// the writer, nninspect and the format tests. The layout is documented in SPEC.md beside
// this file; change both together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nn/format/nnapi_file.h"
#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::nnapi_format {

inline constexpr uint8_t kMagic[8] = {'N', 'N', 'A', 'P', 'I', 0x00, 0x1a, '\n'};
inline constexpr uint16_t kVersionMajor = 1;
// The newest minor this reader reads. Plain models are written as 1.0 (1.1 added nothing
// to them); streaming models (STREAM + STAGE_MODELS sections) as 1.1.
inline constexpr uint16_t kVersionMinor = 1;
inline constexpr uint16_t kVersionMinorModel = 0;
inline constexpr uint16_t kVersionMinorStream = 1;
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kSectionEntrySize = 24;
inline constexpr uint64_t kConstantAlignment = 64;
inline constexpr uint32_t kMaxRank = 8;
// Header flags: the low 16 bits are features a reader must understand (none in 1.0, so any
// set bit is refused); the high 16 bits are hints a reader may ignore.
inline constexpr uint32_t kRequiredFlagsMask = 0x0000ffffu;
// Section flags: an unknown section with this bit set makes the file unreadable.
inline constexpr uint32_t kSectionRequired = 1u;

// Header field offsets.
inline constexpr size_t kOffMagic = 0;
inline constexpr size_t kOffVersionMajor = 8;
inline constexpr size_t kOffVersionMinor = 10;
inline constexpr size_t kOffFlags = 12;
inline constexpr size_t kOffFileSize = 16;
inline constexpr size_t kOffHeaderSize = 24;
inline constexpr size_t kOffSectionCount = 28;
inline constexpr size_t kOffSectionTable = 32;
inline constexpr size_t kOffChecksum = 40;
inline constexpr size_t kOffReserved = 44;  // 44..63: zero in 1.0

enum SectionType : uint32_t {
  kSectionOperands = 1,
  kSectionOperations = 2,
  kSectionModelIo = 3,
  kSectionConstants = 4,
  kSectionMetadata = 5,
  kSectionStream = 6,       // 1.1: a streaming model's framing and stage table (required)
  kSectionStageModels = 7,  // 1.1: the stages, each a whole 1.0 model image (required)
};

// "OPERANDS", ...; "UNKNOWN" for a type this reader does not know.
const char* section_type_name(uint32_t type);

// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, as zlib's crc32()).
// Pass the previous result as `crc` to continue over several spans.
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

// The header's checksum: CRC-32 of the whole file with the checksum field read as zero.
// `file` must hold at least kHeaderSize bytes.
uint32_t file_checksum(std::span<const uint8_t> file);

// The file's bytes for `model`, without validating it first (save_nnapi_file validates):
// tests use it to write files that are well-formed but describe a broken model. Indices
// are written as they are; constants must hold `length` readable bytes.
std::vector<uint8_t> encode_model(const Model& model);

// Header and section table (parse_info in the reader); require_checksum false lets tools
// report a mismatch instead of failing.
Result<NnapiFileInfo> parse_file_info(std::span<const uint8_t> bytes, bool require_checksum);
// One model image (a whole file, or one stage of a streaming file); `keepalive` owns
// `bytes`, constants point into them.
Result<std::shared_ptr<Model>> parse_model(std::span<const uint8_t> bytes, std::shared_ptr<const void> keepalive);

// A file mapped read-only; `keepalive` unmaps it when the last user lets go.
struct MappedFile {
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> keepalive;
};
Result<MappedFile> map_file(const std::string& path);
// Writes path + ".tmp", fsyncs, renames over path; a failure leaves path as it was.
Status write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);

// Header + section table over `bytes` (which hold kHeaderSize + entries x 24 reserved
// bytes at the start), then the checksum. Entries: {type, flags, offset, length}.
struct SectionEntry {
  uint32_t type = 0, flags = 0;
  uint64_t offset = 0, length = 0;
};
void finish_file(std::vector<uint8_t>& bytes, uint16_t version_minor, const std::vector<SectionEntry>& sections);

inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
inline uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
inline uint64_t load_u64(const uint8_t* p) {
  return uint64_t{load_u32(p)} | (uint64_t{load_u32(p + 4)} << 32);
}
inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace nn::nnapi_format
