#include "tensor_io.h"

#include <cstring>
#include <random>

#include <opencv2/imgcodecs.hpp>

namespace nn::tools {

void nchw_to_nhwc(const uint8_t* src, uint8_t* dst, const Dims& d, size_t es) {
  const size_t N = d[0], H = d[1], W = d[2], C = d[3];
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t h = 0; h < H; ++h)
        for (size_t w = 0; w < W; ++w)
          std::memcpy(dst + (((n * H + h) * W + w) * C + c) * es, src + (((n * C + c) * H + h) * W + w) * es, es);
}

void nhwc_to_nchw(const uint8_t* src, uint8_t* dst, const Dims& d, size_t es) {
  const size_t N = d[0], H = d[1], W = d[2], C = d[3];
  for (size_t n = 0; n < N; ++n)
    for (size_t c = 0; c < C; ++c)
      for (size_t h = 0; h < H; ++h)
        for (size_t w = 0; w < W; ++w)
          std::memcpy(dst + (((n * C + c) * H + h) * W + w) * es, src + (((n * H + h) * W + w) * C + c) * es, es);
}

Dims source_dims(const Operand& operand, const std::string& layout) {
  const Dims& d = operand.dims;
  if (layout == "NCHW" && d.size() == 4) return {d[0], d[3], d[1], d[2]};
  return d;
}

namespace {
std::string npy_dtype_for(OperandType t) {
  switch (t) {
    case OperandType::TENSOR_FLOAT32: return "f4";
    case OperandType::TENSOR_INT32: return "i4";
    case OperandType::TENSOR_BOOL8: return "b1";
    case OperandType::TENSOR_QUANT8_ASYMM: return "u1";
    default: return "";
  }
}
}  // namespace

Status npy_to_input(const NpyArray& array, const Operand& operand, const std::string& layout, void* dst) {
  Dims want = source_dims(operand, layout);
  std::vector<int64_t> want64(want.begin(), want.end());
  if (array.shape != want64) {
    std::string got = "(";
    for (int64_t v : array.shape) got += std::to_string(v) + ",";
    return Status(StatusCode::kInvalidArgument, "input shape " + got + ") does not match the model's " +
                                                    dims_to_string(want) + (layout.empty() ? "" : " (" + layout + ")"));
  }
  std::vector<uint8_t> converted;
  const uint8_t* src = array.bytes.data();
  std::string dtype = npy_dtype_for(operand.type);
  if (dtype.empty())
    return Status(StatusCode::kInvalidArgument, "input type " + std::string(operand_type_name(operand.type)) +
                                                    " cannot be read from .npy");
  if (array.dtype != dtype) {
    if (operand.type == OperandType::TENSOR_FLOAT32) {
      std::vector<float> f = array.to_f32();
      converted.resize(f.size() * 4);
      std::memcpy(converted.data(), f.data(), converted.size());
      src = converted.data();
    } else if (operand.type == OperandType::TENSOR_INT32 && array.dtype == "i8") {
      size_t n = array.count();
      converted.resize(n * 4);
      for (size_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, &array.bytes[i * 8], 8);
        int32_t w = static_cast<int32_t>(v);
        std::memcpy(&converted[i * 4], &w, 4);
      }
      src = converted.data();
    } else {
      return Status(StatusCode::kInvalidArgument, "input dtype " + array.dtype + " does not match the model's " +
                                                      std::string(operand_type_name(operand.type)));
    }
  }
  if (layout == "NCHW" && operand.dims.size() == 4)
    nchw_to_nhwc(src, static_cast<uint8_t*>(dst), operand.dims, element_size(operand.type));
  else
    std::memcpy(dst, src, operand.byte_size());
  return Status::ok();
}

NpyArray output_to_npy(const Operand& operand, const std::string& layout, const void* src) {
  NpyArray a;
  a.dtype = npy_dtype_for(operand.type);
  if (a.dtype.empty()) a.dtype = "u1";
  Dims d = source_dims(operand, layout);
  a.shape.assign(d.begin(), d.end());
  a.bytes.resize(operand.byte_size());
  if (layout == "NCHW" && operand.dims.size() == 4)
    nhwc_to_nchw(static_cast<const uint8_t*>(src), a.bytes.data(), operand.dims, element_size(operand.type));
  else
    std::memcpy(a.bytes.data(), src, a.bytes.size());
  return a;
}

Status image_to_input(const std::string& path, const Model& model, size_t input_index, void* dst,
                      std::optional<image::Sampling> sampling) {
  auto encoding = image::InputEncoding::for_input(model, input_index);
  if (!encoding.is_ok()) return encoding.status();
  cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
  if (bgr.empty()) return Status(StatusCode::kIoError, path + ": cannot read image");
  const image::ImageView view{bgr.data, bgr.cols, bgr.rows, bgr.step[0], 3};
  return image::image_to_tensor(view, /*image_bgr=*/true, encoding.value(),
                                sampling.value_or(image::default_sampling(model.metadata)), dst);
}

void random_input(const Operand& operand, uint32_t seed, void* dst) {
  std::mt19937 rng(seed);
  size_t n = num_elements(operand.dims);
  if (operand.type == OperandType::TENSOR_FLOAT32) {
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    float* p = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) p[i] = dist(rng);
  } else {
    std::memset(dst, 0, operand.byte_size());
  }
}

}  // namespace nn::tools
