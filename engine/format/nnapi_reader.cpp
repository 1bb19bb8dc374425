// Reads a .nnapi file (SPEC.md). Every offset, length and count is checked against what
// holds it before it is used, with overflow-safe arithmetic; errors name the field that
// failed. The model is built in a local and handed out only after it validates, so a
// failed load leaves nothing behind.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "format/nnapi_codec.h"
#include "format/nnapi_format.h"
#include "nn/format/nnapi_file.h"

namespace nn {

namespace {

using namespace nnapi_format;

Status invalid(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string describe_magic(std::span<const uint8_t> bytes) {
  std::string s;
  for (size_t i = 0; i < 8 && i < bytes.size(); ++i) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", bytes[i]);
    s += buf;
  }
  return s;
}

// Header and section table: everything but the sections' contents.
// With require_checksum, a mismatch is an error, raised before anything the checksum
// covers (the section table) is looked at.
}  // namespace

Result<NnapiFileInfo> nnapi_format::parse_file_info(std::span<const uint8_t> bytes, bool require_checksum) {
  const uint64_t actual = bytes.size();
  if (actual < kHeaderSize)
    return invalid("truncated: file has " + std::to_string(actual) + " bytes, the header alone needs " +
                   std::to_string(kHeaderSize));
  const uint8_t* h = bytes.data();
  if (std::memcmp(h + kOffMagic, kMagic, sizeof kMagic) != 0)
    return invalid("bad magic: expected 4e 4e 41 50 49 00 1a 0a (\"NNAPI\\0\\x1a\\n\"), got " +
                   describe_magic(bytes));
  NnapiFileInfo info;
  info.version_major = load_u16(h + kOffVersionMajor);
  info.version_minor = load_u16(h + kOffVersionMinor);
  info.flags = load_u32(h + kOffFlags);
  info.file_size = load_u64(h + kOffFileSize);
  info.header_size = load_u32(h + kOffHeaderSize);
  const uint32_t section_count = load_u32(h + kOffSectionCount);
  const uint64_t table_offset = load_u64(h + kOffSectionTable);
  info.stored_checksum = load_u32(h + kOffChecksum);
  const std::string version = std::to_string(info.version_major) + "." + std::to_string(info.version_minor);

  if (info.version_major != kVersionMajor)
    return invalid("unsupported version " + version + ": this reader reads " + std::to_string(kVersionMajor) +
                   ".x");
  if (info.file_size > actual)
    return invalid("truncated: header says " + std::to_string(info.file_size) + " bytes, file has " +
                   std::to_string(actual));
  if (info.file_size < actual)
    return invalid("file size mismatch: header says " + std::to_string(info.file_size) + " bytes, file has " +
                   std::to_string(actual) + " (trailing bytes)");
  if (info.header_size < kHeaderSize || info.header_size > actual)
    return invalid("header_size " + std::to_string(info.header_size) + " out of range [" +
                   std::to_string(kHeaderSize) + ", file size " + std::to_string(actual) + "]");
  info.computed_checksum = file_checksum(bytes);
  info.checksum_ok = info.computed_checksum == info.stored_checksum;
  if (require_checksum && !info.checksum_ok)
    return invalid("checksum mismatch: header says " + hex32(info.stored_checksum) + ", the file's " +
                   std::to_string(actual) + " bytes give " + hex32(info.computed_checksum));
  if (info.version_minor <= kVersionMinor) {
    // A newer minor may grow the header or use its reserved bytes; this one does not.
    if (info.header_size != kHeaderSize)
      return invalid("header_size " + std::to_string(info.header_size) + " in a version " + version +
                     " file, expected " + std::to_string(kHeaderSize));
    for (size_t i = kOffReserved; i < kHeaderSize; ++i)
      if (h[i] != 0)
        return invalid("reserved header byte " + std::to_string(i) + " is " + std::to_string(h[i]) +
                       ", must be 0 in a version " + version + " file");
  }
  if (info.flags & kRequiredFlagsMask)
    return invalid("unsupported required flags " + hex32(info.flags & kRequiredFlagsMask) + " in a version " +
                   version + " file");

  if (table_offset < info.header_size || table_offset > actual ||
      section_count > (actual - table_offset) / kSectionEntrySize)
    return invalid("section table: offset " + std::to_string(table_offset) + " + " +
                   std::to_string(section_count) + " entries x " + std::to_string(kSectionEntrySize) +
                   " bytes outside the file (header " + std::to_string(info.header_size) + " bytes, file " +
                   std::to_string(actual) + " bytes)");
  info.sections.reserve(section_count);
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint8_t* e = h + table_offset + uint64_t{i} * kSectionEntrySize;
    NnapiSectionInfo s;
    s.type = load_u32(e);
    s.flags = load_u32(e + 4);
    s.offset = load_u64(e + 8);
    s.length = load_u64(e + 16);
    s.type_name = section_type_name(s.type);
    const std::string where =
        "section " + std::to_string(i) + " (" + s.type_name + " " + std::to_string(s.type) + ")";
    if (s.offset < info.header_size)
      return invalid(where + ": offset " + std::to_string(s.offset) + " inside the " +
                     std::to_string(info.header_size) + "-byte header");
    if (!fits(s.offset, s.length, actual))
      return invalid(where + ": offset " + std::to_string(s.offset) + " + length " +
                     std::to_string(s.length) + " past end of file (size " + std::to_string(actual) + ")");
    for (const NnapiSectionInfo& other : info.sections)
      if (other.type == s.type && std::string_view(s.type_name) != "UNKNOWN")
        return invalid(where + ": duplicate section type");
    info.sections.push_back(std::move(s));
  }
  return info;
}

namespace {

struct SectionSpans {
  std::span<const uint8_t> operands, operations, model_io, constants, metadata;
  bool has_operands = false, has_operations = false, has_model_io = false, has_metadata = false;
};

Result<SectionSpans> locate_sections(std::span<const uint8_t> bytes, const NnapiFileInfo& info) {
  SectionSpans out;
  for (const NnapiSectionInfo& s : info.sections)
    if (s.type == kSectionStream)
      return invalid(
          "a streaming model (its stages and framing in a STREAM section), not a single model: load it "
          "with nn::audio::load_stream_model (nnrun, nninspect and nndenoise read it)");
  for (size_t i = 0; i < info.sections.size(); ++i) {
    const NnapiSectionInfo& s = info.sections[i];
    auto span = bytes.subspan(s.offset, s.length);
    switch (s.type) {
      case kSectionOperands:
        out.operands = span;
        out.has_operands = true;
        break;
      case kSectionOperations:
        out.operations = span;
        out.has_operations = true;
        break;
      case kSectionModelIo:
        out.model_io = span;
        out.has_model_io = true;
        break;
      case kSectionMetadata:
        out.metadata = span;
        out.has_metadata = true;
        break;
      case kSectionConstants:
        if (s.offset % kConstantAlignment != 0)
          return invalid("section " + std::to_string(i) + " (CONSTANTS): offset " + std::to_string(s.offset) +
                         " is not " + std::to_string(kConstantAlignment) + "-byte aligned");
        out.constants = span;
        break;
      default:
        if (s.flags & kSectionRequired)
          return invalid("section " + std::to_string(i) + ": unknown section type " + std::to_string(s.type) +
                         " is marked required (written by a newer nnpipe?)");
        break;  // an optional section from a newer writer: skipped
    }
  }
  if (!out.has_operands) return invalid("missing OPERANDS section");
  if (!out.has_operations) return invalid("missing OPERATIONS section");
  if (!out.has_model_io) return invalid("missing MODEL_IO section");
  return out;
}

bool known_lifetime(int32_t v) {
  switch (static_cast<Lifetime>(v)) {
    case Lifetime::TEMPORARY:
    case Lifetime::MODEL_INPUT:
    case Lifetime::MODEL_OUTPUT:
    case Lifetime::CONSTANT:
    case Lifetime::NO_VALUE:
      return true;
  }
  return false;
}

// type, lifetime, rank, scale, zero_point, channel_dim, scale count, name length, data offset, data length
constexpr size_t kMinOperandBytes = 4 * 8 + 8 * 2;

Status read_operands(Cursor& c, std::span<const uint8_t> constants,
                     const std::shared_ptr<const void>& keepalive, bool allow_trailing, Model& model) {
  uint32_t n = 0;
  NN_RETURN_IF_ERROR(c.count(n, kMinOperandBytes, "operand count"));
  model.operands.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    c.set_record("operand " + std::to_string(i));
    Operand& o = model.operands[i];
    int32_t type = 0, lifetime = 0;
    NN_RETURN_IF_ERROR(c.i32(type, "type"));
    auto t = operand_type_from_int(type);
    if (!t) return c.error("unknown operand type " + std::to_string(type));
    o.type = *t;
    NN_RETURN_IF_ERROR(c.i32(lifetime, "lifetime"));
    if (!known_lifetime(lifetime)) return c.error("unknown lifetime " + std::to_string(lifetime));
    o.lifetime = static_cast<Lifetime>(lifetime);
    uint32_t rank = 0;
    NN_RETURN_IF_ERROR(c.u32(rank, "rank"));
    if (rank > kMaxRank)
      return c.error("rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
    o.dims.resize(rank);
    for (uint32_t d = 0; d < rank; ++d) NN_RETURN_IF_ERROR(c.u32(o.dims[d], "dims"));
    NN_RETURN_IF_ERROR(c.f32(o.scale, "scale"));
    if (!std::isfinite(o.scale)) return c.error("scale is not finite");
    NN_RETURN_IF_ERROR(c.i32(o.zero_point, "zero_point"));
    NN_RETURN_IF_ERROR(c.u32(o.channel_quant.channel_dim, "channel_dim"));
    NN_RETURN_IF_ERROR(c.floats(o.channel_quant.scales, "channel scale count"));
    for (float s : o.channel_quant.scales)
      if (!std::isfinite(s)) return c.error("a channel scale is not finite");
    if (!o.channel_quant.scales.empty() && o.channel_quant.channel_dim >= rank)
      return c.error("channel_dim " + std::to_string(o.channel_quant.channel_dim) +
                     " out of range for rank " + std::to_string(rank));
    NN_RETURN_IF_ERROR(c.string(o.name, "name"));
    uint64_t offset = 0, length = 0;
    NN_RETURN_IF_ERROR(c.u64(offset, "data offset"));
    NN_RETURN_IF_ERROR(c.u64(length, "data length"));
    if (o.lifetime == Lifetime::CONSTANT) {
      if (!fits(offset, length, constants.size()))
        return c.error("data offset " + std::to_string(offset) + " + length " + std::to_string(length) +
                       " past end of constant section (size " + std::to_string(constants.size()) + ")");
      if (offset % kConstantAlignment != 0)
        return c.error("data offset " + std::to_string(offset) + " is not " +
                       std::to_string(kConstantAlignment) + "-byte aligned");
      o.data = length ? constants.data() + offset : nullptr;
      o.length = static_cast<size_t>(length);
      o.keepalive = keepalive;
    } else if (offset != 0 || length != 0) {
      return c.error("non-constant operand has data (offset " + std::to_string(offset) + ", length " +
                     std::to_string(length) + ")");
    }
  }
  c.set_record("");
  return c.finish(allow_trailing);
}

Status read_index_list(Cursor& c, std::vector<uint32_t>& v, const char* what, uint32_t num_operands) {
  uint32_t n = 0;
  NN_RETURN_IF_ERROR(c.count(n, 4, what));
  v.resize(n);
  for (uint32_t j = 0; j < n; ++j) {
    NN_RETURN_IF_ERROR(c.u32(v[j], what));
    if (v[j] >= num_operands)
      return c.error(std::string(what) + " " + std::to_string(j) + " refers to operand " +
                     std::to_string(v[j]) + ", model has " + std::to_string(num_operands) + " operands");
  }
  return Status::ok();
}

Status read_operations(Cursor& c, bool allow_trailing, Model& model) {
  const uint32_t num_operands = static_cast<uint32_t>(model.operands.size());
  uint32_t n = 0;
  NN_RETURN_IF_ERROR(c.count(n, 12, "operation count"));
  model.operations.reserve(n);
  for (uint32_t k = 0; k < n; ++k) {
    c.set_record("op " + std::to_string(k));
    int32_t code = 0;
    NN_RETURN_IF_ERROR(c.i32(code, "operation code"));
    auto type = operation_type_from_int(code);
    if (!type) return c.error("unknown operation code " + std::to_string(code));
    c.set_record("op " + std::to_string(k) + " " + std::string(operation_type_name(*type)));
    Operation op{*type, {}, {}};
    NN_RETURN_IF_ERROR(read_index_list(c, op.inputs, "input", num_operands));
    NN_RETURN_IF_ERROR(read_index_list(c, op.outputs, "output", num_operands));
    model.operations.push_back(std::move(op));
  }
  c.set_record("");
  return c.finish(allow_trailing);
}

Status read_model_io(Cursor& c, bool allow_trailing, Model& model) {
  const uint32_t num_operands = static_cast<uint32_t>(model.operands.size());
  NN_RETURN_IF_ERROR(read_index_list(c, model.inputs, "model input", num_operands));
  NN_RETURN_IF_ERROR(read_index_list(c, model.outputs, "model output", num_operands));
  return c.finish(allow_trailing);
}

Status read_metadata(Cursor& c, bool allow_trailing, Model& model) {
  Metadata& m = model.metadata;
  NN_RETURN_IF_ERROR(c.string(m.task, "task"));
  NN_RETURN_IF_ERROR(c.string(m.input_color, "input_color"));
  NN_RETURN_IF_ERROR(c.floats(m.input_mean, "input_mean"));
  NN_RETURN_IF_ERROR(c.floats(m.input_std, "input_std"));
  NN_RETURN_IF_ERROR(c.string(m.output_meaning, "output_meaning"));
  NN_RETURN_IF_ERROR(c.string(m.source_file, "source_file"));
  NN_RETURN_IF_ERROR(c.string(m.source_sha256, "source_sha256"));
  NN_RETURN_IF_ERROR(c.string(m.converter_version, "converter_version"));
  NN_RETURN_IF_ERROR(c.strings(m.input_source_layouts, "input_source_layouts"));
  NN_RETURN_IF_ERROR(c.strings(m.output_source_layouts, "output_source_layouts"));
  uint32_t n = 0;
  NN_RETURN_IF_ERROR(c.count(n, 8, "extra count"));
  for (uint32_t i = 0; i < n; ++i) {
    std::string key, value;
    NN_RETURN_IF_ERROR(c.string(key, "extra key"));
    NN_RETURN_IF_ERROR(c.string(value, "extra value"));
    if (!m.extra.emplace(std::move(key), std::move(value)).second)
      return c.error("extra entry " + std::to_string(i) + ": duplicate key");
  }
  NN_RETURN_IF_ERROR(c.finish(allow_trailing));
  if (!m.input_source_layouts.empty() && m.input_source_layouts.size() != model.inputs.size())
    return invalid("metadata section: input_source_layouts has " +
                   std::to_string(m.input_source_layouts.size()) + " entries, the model has " +
                   std::to_string(model.inputs.size()) + " inputs");
  if (!m.output_source_layouts.empty() && m.output_source_layouts.size() != model.outputs.size())
    return invalid("metadata section: output_source_layouts has " +
                   std::to_string(m.output_source_layouts.size()) + " entries, the model has " +
                   std::to_string(model.outputs.size()) + " outputs");
  return Status::ok();
}

}  // namespace

// `bytes` must stay alive as long as `keepalive` does; constants point into it.
Result<std::shared_ptr<Model>> nnapi_format::parse_model(std::span<const uint8_t> bytes,
                                                         std::shared_ptr<const void> keepalive) {
  NN_ASSIGN_OR_RETURN(NnapiFileInfo info, parse_file_info(bytes, /*require_checksum=*/true));
  NN_ASSIGN_OR_RETURN(SectionSpans sections, locate_sections(bytes, info));
  const bool newer_minor = info.version_minor > kVersionMinor;

  Model model;
  Cursor operands(sections.operands, "operands");
  NN_RETURN_IF_ERROR(read_operands(operands, sections.constants, keepalive, newer_minor, model));
  Cursor operations(sections.operations, "operations");
  NN_RETURN_IF_ERROR(read_operations(operations, newer_minor, model));
  Cursor io(sections.model_io, "model_io");
  NN_RETURN_IF_ERROR(read_model_io(io, newer_minor, model));
  if (sections.has_metadata) {
    Cursor metadata(sections.metadata, "metadata");
    NN_RETURN_IF_ERROR(read_metadata(metadata, newer_minor, model));
  }
  NN_RETURN_IF_ERROR(model.validate_and_infer_shapes());
  return std::make_shared<Model>(std::move(model));
}

namespace {

// A read-only private mapping of a whole file, unmapped when the last constant lets go.
struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, size);
  }
};

Status io_error(const std::string& path, const char* what) {
  return {StatusCode::kIoError, path + ": " + what + ": " + std::strerror(errno)};
}

}  // namespace

Result<NnapiFileInfo> read_nnapi_file_info(std::span<const uint8_t> bytes) {
  return parse_file_info(bytes, /*require_checksum=*/false);
}

Result<std::shared_ptr<Model>> load_nnapi_buffer(std::span<const uint8_t> bytes) {
  // Copy into a 64-byte aligned buffer so constants keep the alignment they have in a file.
  const size_t padded = (bytes.size() + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
  void* buffer = std::aligned_alloc(kConstantAlignment, padded ? padded : kConstantAlignment);
  if (!buffer)
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes.size()) + " bytes for the model");
  std::shared_ptr<const void> keepalive(buffer, [](const void* p) { std::free(const_cast<void*>(p)); });
  if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  return parse_model({static_cast<const uint8_t*>(buffer), bytes.size()}, std::move(keepalive));
}

Result<nnapi_format::MappedFile> nnapi_format::map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the load
  if (fd < 0) return io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = io_error(path, "cannot stat");
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kIoError, path + ": not a regular file");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    mapping->base = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping->base == MAP_FAILED) {
      Status s = io_error(path, "cannot mmap");
      ::close(fd);
      return s;
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  MappedFile file;
  if (mapping->base != MAP_FAILED) file.bytes = {static_cast<const uint8_t*>(mapping->base), mapping->size};
  file.keepalive = std::shared_ptr<const void>(mapping, mapping.get());
  return file;
}

Result<std::shared_ptr<Model>> load_nnapi_file(const std::string& path) {
  NN_ASSIGN_OR_RETURN(nnapi_format::MappedFile file, nnapi_format::map_file(path));
  auto result = nnapi_format::parse_model(file.bytes, std::move(file.keepalive));
  if (!result.is_ok()) return result.status().with_context(path);
  return result;
}

}  // namespace nn
