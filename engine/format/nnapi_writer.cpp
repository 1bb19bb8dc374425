// Writes a .nnapi file (SPEC.md): header, section table, the four record sections, then
// the constants, each 64-byte aligned. The whole file is built in memory, written to
// path + ".tmp" and renamed over path, so a failed save never leaves a torn file.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "format/nnapi_codec.h"
#include "format/nnapi_format.h"
#include "nn/format/nnapi_file.h"

namespace nn {

namespace {

using namespace nnapi_format;

struct Section {
  uint32_t type;
  uint64_t offset;
  uint64_t length;
};

// Everything a 32-bit count or length field must hold.
Status check_limits(const Model& m) {
  constexpr size_t kMax = 0xffffffffu;
  if (m.operands.size() > kMax || m.operations.size() > kMax)
    return {StatusCode::kInvalidArgument, "model too large for the .nnapi format"};
  for (size_t i = 0; i < m.operands.size(); ++i)
    if (m.operands[i].name.size() > kMax)
      return {StatusCode::kInvalidArgument, "operand " + std::to_string(i) + ": name too long"};
  const Metadata& md = m.metadata;
  if (!md.input_source_layouts.empty() && md.input_source_layouts.size() != m.inputs.size())
    return {StatusCode::kInvalidArgument,
            "metadata: input_source_layouts has " + std::to_string(md.input_source_layouts.size()) +
                " entries, the model has " + std::to_string(m.inputs.size()) + " inputs"};
  if (!md.output_source_layouts.empty() && md.output_source_layouts.size() != m.outputs.size())
    return {StatusCode::kInvalidArgument,
            "metadata: output_source_layouts has " + std::to_string(md.output_source_layouts.size()) +
                " entries, the model has " + std::to_string(m.outputs.size()) + " outputs"};
  return Status::ok();
}

}  // namespace

std::vector<uint8_t> nnapi_format::encode_model(const Model& m) {
  // Constants first, to know each operand's offset inside the constant section.
  std::vector<uint64_t> data_offset(m.operands.size(), 0);
  uint64_t constants_size = 0;
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const Operand& o = m.operands[i];
    if (!o.is_constant() || o.length == 0) continue;
    data_offset[i] = constants_size;
    constants_size =
        (constants_size + o.length + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
  }

  ByteWriter operands;
  operands.u32(static_cast<uint32_t>(m.operands.size()));
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const Operand& o = m.operands[i];
    operands.i32(static_cast<int32_t>(o.type));
    operands.i32(static_cast<int32_t>(o.lifetime));
    operands.indices(o.dims);
    operands.f32(o.scale);
    operands.i32(o.zero_point);
    operands.u32(o.channel_quant.channel_dim);
    operands.floats(o.channel_quant.scales);
    operands.string(o.name);
    const bool has_data = o.is_constant() && o.length > 0;
    operands.u64(has_data ? data_offset[i] : 0);
    operands.u64(has_data ? o.length : 0);
  }

  ByteWriter operations;
  operations.u32(static_cast<uint32_t>(m.operations.size()));
  for (const Operation& op : m.operations) {
    operations.i32(static_cast<int32_t>(op.type));
    operations.indices(op.inputs);
    operations.indices(op.outputs);
  }

  ByteWriter io;
  io.indices(m.inputs);
  io.indices(m.outputs);

  ByteWriter metadata;
  const Metadata& md = m.metadata;
  metadata.string(md.task);
  metadata.string(md.input_color);
  metadata.floats(md.input_mean);
  metadata.floats(md.input_std);
  metadata.string(md.output_meaning);
  metadata.string(md.source_file);
  metadata.string(md.source_sha256);
  metadata.string(md.converter_version);
  metadata.strings(md.input_source_layouts);
  metadata.strings(md.output_source_layouts);
  metadata.u32(static_cast<uint32_t>(md.extra.size()));
  for (const auto& [key, value] : md.extra) {
    metadata.string(key);
    metadata.string(value);
  }

  // Layout: header | section table | operands | operations | model io | metadata | constants.
  const uint32_t section_count = 5;
  ByteWriter file;
  file.bytes().resize(kHeaderSize + section_count * kSectionEntrySize, 0);
  std::vector<Section> sections;
  auto append = [&](uint32_t type, ByteWriter& w) {
    file.align(8);
    sections.push_back({type, file.size(), w.size()});
    file.bytes().insert(file.bytes().end(), w.bytes().begin(), w.bytes().end());
  };
  append(kSectionOperands, operands);
  append(kSectionOperations, operations);
  append(kSectionModelIo, io);
  append(kSectionMetadata, metadata);
  file.align(kConstantAlignment);
  const uint64_t constants_offset = file.size();
  sections.push_back({kSectionConstants, constants_offset, constants_size});
  std::vector<uint8_t>& bytes = file.bytes();
  bytes.resize(constants_offset + constants_size, 0);
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const Operand& o = m.operands[i];
    if (o.is_constant() && o.length > 0)
      std::memcpy(bytes.data() + constants_offset + data_offset[i], o.data, o.length);
  }

  std::vector<SectionEntry> entries;
  for (const Section& sec : sections) entries.push_back({sec.type, 0, sec.offset, sec.length});
  finish_file(bytes, kVersionMinorModel, entries);
  return bytes;
}

void nnapi_format::finish_file(std::vector<uint8_t>& bytes, uint16_t version_minor,
                               const std::vector<SectionEntry>& sections) {
  uint8_t* h = bytes.data();
  std::memcpy(h + kOffMagic, kMagic, sizeof kMagic);
  store_u16(h + kOffVersionMajor, kVersionMajor);
  store_u16(h + kOffVersionMinor, version_minor);
  store_u32(h + kOffFlags, 0);
  store_u64(h + kOffFileSize, bytes.size());
  store_u32(h + kOffHeaderSize, kHeaderSize);
  store_u32(h + kOffSectionCount, static_cast<uint32_t>(sections.size()));
  store_u64(h + kOffSectionTable, kHeaderSize);
  for (size_t i = 0; i < sections.size(); ++i) {
    uint8_t* e = h + kHeaderSize + i * kSectionEntrySize;
    store_u32(e, sections[i].type);
    store_u32(e + 4, sections[i].flags);
    store_u64(e + 8, sections[i].offset);
    store_u64(e + 16, sections[i].length);
  }
  store_u32(h + kOffChecksum, 0);
  store_u32(h + kOffChecksum, file_checksum(bytes));
}

namespace {

Status io_error(const std::string& path, const char* what, int err) {
  return {StatusCode::kIoError, path + ": " + what + ": " + std::strerror(err)};
}

}  // namespace

Status nnapi_format::write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(tmp, "cannot create", errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return io_error(tmp, "write failed", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return io_error(tmp, "cannot flush", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return io_error(path, "cannot rename the .tmp file into place", err);
  }
  return Status::ok();
}

Status save_nnapi_file(const Model& model, const std::string& path) {
  // Validate a copy: the caller's model stays as it was, and the file gets the normalized
  // lifetimes (MODEL_INPUT / MODEL_OUTPUT) and inferred dims.
  Model checked = model;
  Status valid = checked.validate_and_infer_shapes();
  if (!valid.is_ok()) return valid.with_context("cannot save " + path + ": model does not validate");
  NN_RETURN_IF_ERROR(check_limits(checked).with_context("cannot save " + path));
  return nnapi_format::write_file_atomically(path, nnapi_format::encode_model(checked));
}

}  // namespace nn
