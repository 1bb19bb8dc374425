// Image -> model input: resampling (OpenCV) and the pixel encoding rule. See preprocess.h.
#include "nn/image/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace nn::image {

const char* sampling_name(Sampling sampling) {
  return sampling == Sampling::kMediaPipe ? "mediapipe" : "area";
}

std::optional<Sampling> parse_sampling(std::string_view name) {
  if (name == "area") return Sampling::kArea;
  if (name == "mediapipe") return Sampling::kMediaPipe;
  return std::nullopt;
}

Sampling default_sampling(const Metadata& metadata) {
  auto it = metadata.extra.find(kSamplingMetadataKey);
  if (it != metadata.extra.end()) return parse_sampling(it->second).value_or(Sampling::kArea);
  // .nnapi files converted before the key existed: MediaPipe's converter names its selfie
  // models in the TFLite description, which the file keeps.
  it = metadata.extra.find("tflite_description");
  if (it != metadata.extra.end() && it->second.find("selfiesegmentation") != std::string::npos)
    return Sampling::kMediaPipe;
  return Sampling::kArea;
}

namespace {

bool valid(const ImageView& v) {
  return v.data && v.width > 0 && v.height > 0 && v.channels >= 1 && v.channels <= 4 &&
         v.stride >= static_cast<size_t>(v.width) * v.channels;
}

cv::Mat wrap(const ImageView& v) {
  return cv::Mat(v.height, v.width, CV_8UC(v.channels), const_cast<uint8_t*>(v.data), v.stride);
}

// MediaPipe's ImageToTensor (image_to_tensor_converter_opencv.cc) for the ROI that is the
// whole image: the ROI's corners as cv::boxPoints gives them (bottom-left first), mapped to
// the tensor's corners, the same OpenCV calls.
void warp_like_mediapipe(const cv::Mat& src, cv::Mat& dst, int dst_w, int dst_h) {
  const cv::RotatedRect roi(cv::Point2f(0.5f * src.cols, 0.5f * src.rows),
                            cv::Size2f(static_cast<float>(src.cols), static_cast<float>(src.rows)), 0.f);
  cv::Mat src_points;
  cv::boxPoints(roi, src_points);
  const float w = static_cast<float>(dst_w), h = static_cast<float>(dst_h);
  float dst_corners[8] = {0.f, h, 0.f, 0.f, w, 0.f, w, h};
  const cv::Mat dst_points(4, 2, CV_32F, dst_corners);
  const cv::Mat projection = cv::getPerspectiveTransform(src_points, dst_points);
  cv::warpPerspective(src, dst, projection, cv::Size(dst_w, dst_h), cv::INTER_LINEAR, cv::BORDER_REPLICATE);
}

Result<std::vector<float>> per_channel(const std::vector<float>& values, float fallback,
                                       const std::string& name, bool from_metadata) {
  if (values.size() != 0 && values.size() != 1 && values.size() != 3)
    return Status(StatusCode::kInvalidArgument, name + ": give one value or three (one per channel), got " +
                                                    std::to_string(values.size()) +
                                                    (from_metadata ? " (from the model's metadata)" : ""));
  if (values.empty()) return std::vector<float>(3, fallback);
  if (values.size() == 1) return std::vector<float>(3, values[0]);
  return values;
}

}  // namespace

Status resample(const ImageView& src, Sampling sampling, int dst_w, int dst_h, uint8_t* dst,
                size_t dst_stride) {
  if (!valid(src))
    return Status(StatusCode::kInvalidArgument,
                  "resample: empty or malformed image (" + std::to_string(src.width) + "x" +
                      std::to_string(src.height) + ", " + std::to_string(src.channels) + " channels)");
  if (dst_w <= 0 || dst_h <= 0 || !dst || dst_stride < static_cast<size_t>(dst_w) * src.channels)
    return Status(StatusCode::kInvalidArgument,
                  "resample: bad target " + std::to_string(dst_w) + "x" + std::to_string(dst_h));
  const cv::Mat in = wrap(src);
  cv::Mat out(dst_h, dst_w, in.type(), dst, dst_stride);
  if (sampling == Sampling::kMediaPipe) {
    warp_like_mediapipe(in, out, dst_w, dst_h);
  } else {
    cv::resize(in, out, out.size(), 0, 0, cv::INTER_AREA);
  }
  // OpenCV reallocates when the target does not fit its expectations; it always does here.
  if (out.data != dst) return Status(StatusCode::kInternal, "resample: OpenCV did not write into the target");
  return Status::ok();
}

Result<InputEncoding> InputEncoding::for_input(const Model& model, size_t input_index,
                                               const EncodingOverrides& overrides) {
  if (input_index >= model.inputs.size())
    return Status(StatusCode::kInvalidArgument, "input " + std::to_string(input_index) +
                                                    " does not exist (model has " +
                                                    std::to_string(model.inputs.size()) + ")");
  const Operand& in = model.operands[model.inputs[input_index]];
  if (in.dims.size() != 4 || in.dims[0] != 1 || in.dims[3] != 3 || in.dims[1] == 0 || in.dims[2] == 0)
    return Status(StatusCode::kInvalidModel, "input " + std::to_string(input_index) + " is " +
                                                 dims_to_string(in.dims) + ", not an RGB image [1,H,W,3]");
  if (in.type != OperandType::TENSOR_FLOAT32 && in.type != OperandType::TENSOR_QUANT8_ASYMM &&
      in.type != OperandType::TENSOR_QUANT8_ASYMM_SIGNED)
    return Status(StatusCode::kInvalidModel, "input " + std::to_string(input_index) + " type " +
                                                 std::string(operand_type_name(in.type)) +
                                                 " not supported (float32 or quant8)");
  InputEncoding e;
  e.height = static_cast<int>(in.dims[1]);
  e.width = static_cast<int>(in.dims[2]);
  e.type = in.type;
  e.scale = in.type == OperandType::TENSOR_FLOAT32 ? 1.f : in.scale;
  e.zero_point = in.zero_point;
  if (e.type != OperandType::TENSOR_FLOAT32 && !(e.scale > 0.f))
    return Status(StatusCode::kInvalidModel, "input " + std::to_string(input_index) +
                                                 ": quantization scale " + std::to_string(e.scale) +
                                                 " is not > 0");
  const Metadata& md = model.metadata;
  e.bgr = overrides.bgr.value_or(md.input_color == "BGR");
  const bool mean_md = overrides.mean.empty(), std_md = overrides.std.empty();
  auto mean = per_channel(mean_md ? md.input_mean : overrides.mean, 0.f, overrides.mean_name, mean_md);
  if (!mean.is_ok()) return mean.status();
  auto sd = per_channel(std_md ? md.input_std : overrides.std, 255.f, overrides.std_name, std_md);
  if (!sd.is_ok()) return sd.status();
  for (int c = 0; c < 3; ++c) {
    const float s = sd.value()[c];
    if (!(s > 0.f) || !std::isfinite(s))
      return Status(StatusCode::kInvalidArgument, overrides.std_name + ": " + std::to_string(s) +
                                                      " is not a standard deviation (it must be > 0)" +
                                                      (std_md ? " (from the model's metadata)" : ""));
    if (!std::isfinite(mean.value()[c]))
      return Status(StatusCode::kInvalidArgument, overrides.mean_name + ": not a finite number");
    e.mean[c] = mean.value()[c];
    e.inv_std[c] = 1.f / s;
  }
  return e;
}

void InputEncoding::store_quantized(void* tensor, size_t index, float v) const {
  const float q = std::round(v / scale) + static_cast<float>(zero_point);
  if (type == OperandType::TENSOR_QUANT8_ASYMM)
    static_cast<uint8_t*>(tensor)[index] = static_cast<uint8_t>(std::clamp(q, 0.f, 255.f));
  else
    static_cast<int8_t*>(tensor)[index] = static_cast<int8_t>(std::clamp(q, -128.f, 127.f));
}

void InputEncoding::fill_black(void* tensor) const {
  const size_t n = static_cast<size_t>(width) * height;
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) put(tensor, i * 3 + c, c, 0.f);
}

Status encode(const ImageView& image, bool image_bgr, const InputEncoding& e, const InputRect& rect,
              void* tensor) {
  if (!valid(image) || image.channels < 3)
    return Status(StatusCode::kInvalidArgument, "encode: need a 3- or 4-channel image");
  if (image.width != rect.width || image.height != rect.height || rect.x < 0 || rect.y < 0 ||
      rect.x + rect.width > e.width || rect.y + rect.height > e.height)
    return Status(StatusCode::kInvalidArgument,
                  "encode: a " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                      " image does not fit rect " + std::to_string(rect.width) + "x" +
                      std::to_string(rect.height) + "+" + std::to_string(rect.x) + "+" +
                      std::to_string(rect.y) + " of a " + std::to_string(e.width) + "x" +
                      std::to_string(e.height) + " input");
  // Input channel m reads image channel src[m].
  int src[3];
  for (int m = 0; m < 3; ++m) src[m] = (e.bgr != image_bgr) ? 2 - m : m;
  for (int y = 0; y < rect.height; ++y) {
    const uint8_t* row = image.data + static_cast<size_t>(y) * image.stride;
    size_t base = (static_cast<size_t>(y + rect.y) * e.width + rect.x) * 3;
    for (int x = 0; x < rect.width; ++x, base += 3) {
      const uint8_t* px = row + static_cast<size_t>(x) * image.channels;
      for (int m = 0; m < 3; ++m) e.put(tensor, base + m, m, px[src[m]]);
    }
  }
  return Status::ok();
}

Status image_to_tensor(const ImageView& image, bool image_bgr, const InputEncoding& e, Sampling sampling,
                       void* tensor) {
  std::vector<uint8_t> small(static_cast<size_t>(e.width) * e.height * std::max(1, image.channels));
  const size_t stride = static_cast<size_t>(e.width) * image.channels;
  if (Status s = resample(image, sampling, e.width, e.height, small.data(), stride); !s.is_ok()) return s;
  const ImageView view{small.data(), e.width, e.height, stride, image.channels};
  return encode(view, image_bgr, e, InputRect{0, 0, e.width, e.height}, tensor);
}

}  // namespace nn::image
