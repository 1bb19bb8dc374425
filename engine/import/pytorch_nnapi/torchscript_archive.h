// Reading a TorchScript file (torch.jit.save): a zip of stored (uncompressed) entries
// whose data.pkl is a pickle of the module's attributes, with tensors' bytes in data/<key>.
// Enough of zip and of pickle protocol 2 for module attributes: objects, dicts, lists,
// tuples, strings, numbers, and tensors (any dtype, any strides, copied contiguous).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/status.h"

namespace nn::torchscript {

// A tensor rebuilt from its storage: contiguous bytes in row-major order.
struct Tensor {
  std::string dtype;  // the storage class: "FloatStorage", "IntStorage", "ByteStorage", ...
  size_t element_size = 0;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> bytes;
};

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kObject, kTensor, kStorage };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                    // string; global / object / storage class name
  std::vector<ValuePtr> items;      // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;  // dict; an object's attributes (BUILD state)
  std::shared_ptr<Tensor> tensor;
  std::string storage_key;          // storage: data/<key>
  int64_t storage_numel = 0;

  // An object's or dict's entry by string key; nullptr when absent.
  ValuePtr attr(const std::string& name) const;
};

class Archive {
 public:
  static Result<Archive> open(const std::string& path);
  // The unpickled data.pkl: the root module object.
  Result<ValuePtr> load_data_pkl() const;

 private:
  Result<std::vector<uint8_t>> entry(const std::string& name) const;  // under the archive's folder
  std::string path_;
  std::string prefix_;  // "<archive name>/"
  std::shared_ptr<const std::vector<uint8_t>> file_;
  struct Entry {
    uint64_t offset = 0, size = 0;
    uint16_t method = 0;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace nn::torchscript
