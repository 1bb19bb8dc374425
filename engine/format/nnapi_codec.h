// The bounds-checked reading cursor and the byte writer shared by the .nnapi model
// reader and writer and the streaming-model sections (stream_file.cpp). Internal.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "format/nnapi_format.h"
#include "nn/status.h"

namespace nn::nnapi_format {

inline Status invalid_file(std::string message) {
  return {StatusCode::kInvalidModel, std::move(message)};
}

// a + b <= limit, without overflow.
inline bool fits(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

// A bounds-checked little-endian cursor over one section. `where_` names the record being
// read ("operand 7") so a failure reads "operands section: operand 7: truncated reading dims".
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const char* section) : bytes_(bytes), section_(section) {}

  void set_record(std::string where) { where_ = std::move(where); }
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t position() const { return pos_; }

  Status error(const std::string& message) const {
    return invalid_file(std::string(section_) + " section: " + (where_.empty() ? "" : where_ + ": ") + message);
  }

  Status u32(uint32_t& v, const char* field) {
    NN_RETURN_IF_ERROR(need(4, field));
    v = load_u32(bytes_.data() + pos_);
    pos_ += 4;
    return Status::ok();
  }
  Status i32(int32_t& v, const char* field) {
    uint32_t u = 0;
    NN_RETURN_IF_ERROR(u32(u, field));
    std::memcpy(&v, &u, 4);
    return Status::ok();
  }
  Status u64(uint64_t& v, const char* field) {
    NN_RETURN_IF_ERROR(need(8, field));
    v = load_u64(bytes_.data() + pos_);
    pos_ += 8;
    return Status::ok();
  }
  Status f32(float& v, const char* field) {
    uint32_t u = 0;
    NN_RETURN_IF_ERROR(u32(u, field));
    std::memcpy(&v, &u, 4);
    return Status::ok();
  }
  // A count of items each at least `min_item_bytes` long: refused before anything is
  // allocated when the rest of the section cannot hold that many.
  Status count(uint32_t& n, size_t min_item_bytes, const char* field) {
    NN_RETURN_IF_ERROR(u32(n, field));
    if (min_item_bytes && n > remaining() / min_item_bytes)
      return error(std::string(field) + " " + std::to_string(n) + " needs at least " +
                   std::to_string(uint64_t{n} * min_item_bytes) + " more bytes, " +
                   std::to_string(remaining()) + " left");
    return Status::ok();
  }
  Status string(std::string& s, const char* field) {
    uint32_t n = 0;
    NN_RETURN_IF_ERROR(u32(n, field));
    if (n > remaining())
      return error(std::string(field) + ": length " + std::to_string(n) + " past end of section (" +
                   std::to_string(remaining()) + " bytes left)");
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return Status::ok();
  }
  Status floats(std::vector<float>& v, const char* field) {
    uint32_t n = 0;
    NN_RETURN_IF_ERROR(count(n, 4, field));
    v.resize(n);
    for (uint32_t i = 0; i < n; ++i) NN_RETURN_IF_ERROR(f32(v[i], field));
    return Status::ok();
  }
  Status strings(std::vector<std::string>& v, const char* field) {
    uint32_t n = 0;
    NN_RETURN_IF_ERROR(count(n, 4, field));
    v.resize(n);
    for (uint32_t i = 0; i < n; ++i) NN_RETURN_IF_ERROR(string(v[i], field));
    return Status::ok();
  }
  // Trailing bytes are an error unless the file is a newer minor version, which may
  // append fields to a section's end.
  Status finish(bool allow_trailing) const {
    if (pos_ != bytes_.size() && !allow_trailing)
      return invalid_file(std::string(section_) + " section: " + std::to_string(remaining()) +
                     " trailing bytes after the last record");
    return Status::ok();
  }

 private:
  Status need(size_t n, const char* field) const {
    if (remaining() < n)
      return error(std::string("truncated reading ") + field + " (needs " + std::to_string(n) +
                   " bytes at offset " + std::to_string(pos_) + ", section has " +
                   std::to_string(bytes_.size()) + ")");
    return Status::ok();
  }

  std::span<const uint8_t> bytes_;
  const char* section_;
  std::string where_;
  size_t pos_ = 0;
};


class ByteWriter {
 public:
  std::vector<uint8_t>& bytes() { return bytes_; }
  size_t size() const { return bytes_.size(); }
  void u32(uint32_t v) {
    size_t at = grow(4);
    store_u32(bytes_.data() + at, v);
  }
  void i32(int32_t v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u32(u);
  }
  void u64(uint64_t v) {
    size_t at = grow(8);
    store_u64(bytes_.data() + at, v);
  }
  void f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u32(u);
  }
  void string(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void floats(const std::vector<float>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (float f : v) f32(f);
  }
  void strings(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const std::string& s : v) string(s);
  }
  void indices(const std::vector<uint32_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (uint32_t i : v) u32(i);
  }
  void align(size_t alignment) { bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, 0); }

 private:
  size_t grow(size_t n) {
    size_t at = bytes_.size();
    bytes_.resize(at + n);
    return at;
  }
  std::vector<uint8_t> bytes_;
};


}  // namespace nn::nnapi_format
