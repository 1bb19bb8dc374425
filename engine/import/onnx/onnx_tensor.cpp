#include "import/onnx/onnx_tensor.h"

#include <cmath>
#include <cstring>

#include "onnx/onnx_pb.h"

namespace nn::onnx_import {

namespace {

// TensorProto::DataType values (onnx.proto).
enum : int32_t {
  kFLOAT = 1,
  kUINT8 = 2,
  kINT8 = 3,
  kUINT16 = 4,
  kINT16 = 5,
  kINT32 = 6,
  kINT64 = 7,
  kSTRING = 8,
  kBOOL = 9,
  kFLOAT16 = 10,
  kDOUBLE = 11,
  kUINT32 = 12,
  kUINT64 = 13,
  kCOMPLEX64 = 14,
  kCOMPLEX128 = 15,
  kBFLOAT16 = 16
};

constexpr size_t kMaxElements = size_t{1} << 31;

size_t raw_size(int32_t type) {
  switch (type) {
    case kFLOAT:
    case kINT32:
    case kUINT32:
      return 4;
    case kUINT8:
    case kINT8:
    case kBOOL:
      return 1;
    case kUINT16:
    case kINT16:
    case kFLOAT16:
    case kBFLOAT16:
      return 2;
    case kINT64:
    case kDOUBLE:
    case kUINT64:
      return 8;
    default:
      return 0;
  }
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

double decode_raw(const uint8_t* p, int32_t type) {
  switch (type) {
    case kFLOAT: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case kDOUBLE: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case kUINT8:
      return p[0];
    case kINT8:
      return static_cast<int8_t>(p[0]);
    case kBOOL:
      return p[0] ? 1 : 0;
    case kUINT16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case kINT16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case kINT32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case kUINT32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case kINT64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case kUINT64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case kFLOAT16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return half_to_float(x);
    }
    case kBFLOAT16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      uint32_t bits = uint32_t{x} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return 0;
  }
}

}  // namespace

int64_t HostTensor::i(size_t k) const {
  double x = v[k];
  constexpr double kLim = 4611686018427387904.0;  // 2^62
  if (!(x < kLim)) return int64_t{1} << 62;       // also NaN
  if (x < -kLim) return -(int64_t{1} << 62);
  return static_cast<int64_t>(x);
}

size_t dims_numel(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string onnx_type_name(int32_t t) {
  static const char* names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t <= 16) return names[t];
  return "type " + std::to_string(t);
}

bool elem_kind_of(int32_t t, ElemKind* kind) {
  switch (t) {
    case kFLOAT:
    case kDOUBLE:
    case kFLOAT16:
    case kBFLOAT16:
      *kind = ElemKind::kFloat;
      return true;
    case kINT16:
    case kUINT16:
    case kINT32:
    case kINT64:
    case kUINT32:
    case kUINT64:
      *kind = ElemKind::kInt;
      return true;
    case kUINT8:
      *kind = ElemKind::kUint8;
      return true;
    case kINT8:
      *kind = ElemKind::kInt8;
      return true;
    case kBOOL:
      *kind = ElemKind::kBool;
      return true;
    default:
      return false;
  }
}

bool ir_type_of(int32_t t, OperandType* type) {
  switch (t) {
    case kFLOAT:
      *type = OperandType::TENSOR_FLOAT32;
      return true;
    case kINT32:
    case kINT64:
      *type = OperandType::TENSOR_INT32;
      return true;
    case kBOOL:
      *type = OperandType::TENSOR_BOOL8;
      return true;
    case kUINT8:
      *type = OperandType::TENSOR_QUANT8_ASYMM;
      return true;
    case kINT8:
      *type = OperandType::TENSOR_QUANT8_ASYMM_SIGNED;
      return true;
    default:
      return false;
  }
}

Result<HostTensor> tensor_from_proto(const onnx::TensorProto& t) {
  const std::string name = "tensor '" + t.name() + "'";
  HostTensor h;
  h.onnx_type = t.data_type();
  if (!elem_kind_of(h.onnx_type, &h.kind))
    return Status(StatusCode::kUnsupportedOp,
                  name + ": data type " + onnx_type_name(h.onnx_type) + " unsupported");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return Status(StatusCode::kUnsupportedOp,
                  name + ": external data is not supported (re-save with the weights inside)");
  if (t.has_segment())
    return Status(StatusCode::kUnsupportedOp, name + ": segmented tensors are not supported");
  size_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return Status(StatusCode::kInvalidModel, name + ": negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxElements / static_cast<size_t>(d))
      return Status(StatusCode::kInvalidModel, name + ": too many elements");
    n *= static_cast<size_t>(d);
    h.dims.push_back(d);
  }
  const int32_t type = h.onnx_type;
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    size_t es = raw_size(type);
    if (raw.size() != n * es)
      return Status(StatusCode::kInvalidModel, name + ": raw_data holds " + std::to_string(raw.size()) +
                                                   " bytes, dims " + dims_str(h.dims) + " of " +
                                                   onnx_type_name(type) + " need " + std::to_string(n * es));
    h.v.resize(n);  // only once the file holds the data: dims alone must not allocate
    const uint8_t* p = reinterpret_cast<const uint8_t*>(raw.data());
    for (size_t k = 0; k < n; ++k) h.v[k] = decode_raw(p + k * es, type);
    return h;
  }
  auto size_error = [&](const char* field, size_t have) {
    return Status(StatusCode::kInvalidModel, name + ": " + field + " holds " + std::to_string(have) +
                                                 " values, dims " + dims_str(h.dims) + " need " +
                                                 std::to_string(n));
  };
  // The typed field must hold the n values before they are allocated (a corrupt file's dims
  // alone could ask for gigabytes).
  const size_t typed = type == kFLOAT                       ? size_t(t.float_data_size())
                       : type == kDOUBLE                    ? size_t(t.double_data_size())
                       : type == kINT64                     ? size_t(t.int64_data_size())
                       : type == kUINT32 || type == kUINT64 ? size_t(t.uint64_data_size())
                                                            : size_t(t.int32_data_size());
  const char* field = type == kFLOAT                       ? "float_data"
                      : type == kDOUBLE                    ? "double_data"
                      : type == kINT64                     ? "int64_data"
                      : type == kUINT32 || type == kUINT64 ? "uint64_data"
                                                           : "int32_data";
  if (typed != n) return size_error(field, typed);
  h.v.resize(n);
  switch (type) {
    case kFLOAT:
      for (size_t k = 0; k < n; ++k) h.v[k] = t.float_data(static_cast<int>(k));
      break;
    case kDOUBLE:
      for (size_t k = 0; k < n; ++k) h.v[k] = t.double_data(static_cast<int>(k));
      break;
    case kINT64:
      for (size_t k = 0; k < n; ++k) h.v[k] = static_cast<double>(t.int64_data(static_cast<int>(k)));
      break;
    case kUINT32:
    case kUINT64:
      for (size_t k = 0; k < n; ++k) h.v[k] = static_cast<double>(t.uint64_data(static_cast<int>(k)));
      break;
    case kFLOAT16:
    case kBFLOAT16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t bits = static_cast<uint16_t>(t.int32_data(static_cast<int>(k)));
        h.v[k] = decode_raw(reinterpret_cast<const uint8_t*>(&bits), type);
      }
      break;
    default:  // int32, int16, uint16, int8, uint8, bool: int32_data
      for (size_t k = 0; k < n; ++k) {
        int32_t x = t.int32_data(static_cast<int>(k));
        h.v[k] = type == kBOOL ? (x != 0) : x;
      }
      break;
  }
  return h;
}

HostTensor transpose_host(const HostTensor& t, const std::vector<int>& perm) {
  HostTensor out = t;
  const size_t r = t.dims.size();
  for (size_t i = 0; i < r; ++i) out.dims[i] = t.dims[perm[i]];
  std::vector<size_t> in_stride(r, 1);
  for (size_t i = r; i-- > 1;) in_stride[i - 1] = in_stride[i] * static_cast<size_t>(t.dims[i]);
  std::vector<size_t> idx(r, 0);
  for (size_t k = 0; k < out.v.size(); ++k) {
    size_t src = 0;
    for (size_t i = 0; i < r; ++i) src += idx[i] * in_stride[perm[i]];
    out.v[k] = t.v[src];
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < static_cast<size_t>(out.dims[i])) break;
      idx[i] = 0;
    }
  }
  return out;
}

}  // namespace nn::onnx_import
