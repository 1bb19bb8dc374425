// Image -> model input, the one place for it: how a frame is resampled to the input size
// (Sampling), and how a pixel becomes a tensor element (InputEncoding: channel order,
// normalisation, quantisation). The CLIs (nnrun, nnmask) and nnsegment both use it, so an
// image gives the same input tensor everywhere.
//
// The normalisation rule: normalized = (pixel - mean[c]) / std[c], pixel in [0, 255];
// one value given means that value for every channel, three mean one per channel, none
// means mean 0, std 255 (the [0, 1] input of MediaPipe's models). A quantized input
// stores clamp(round(normalized / scale) + zero_point), rounding half away from zero as
// the engine's QUANTIZE does.
//
// Sampling::kMediaPipe is MediaPipe's ImageToTensorCalculator (OpenCV converter, CPU) for
// a whole-image ROI without rotation, keep_aspect_ratio false: cv::getPerspectiveTransform
// from the ROI's corners (0,0)..(W,H) to the tensor's (0,0)..(w,h), cv::warpPerspective
// with INTER_LINEAR on the 8-bit image, border replicate; so input pixel i reads the frame
// bilinearly at x = i * W / w (corner-aligned, not pixel-centre-aligned: the content sits
// (W / w - 1) / 2 frame pixels left of a centred resize), no averaging. The values are then
// scaled to the float range as above. It is what MediaPipe Tasks' ImageSegmenter feeds its
// selfie models (checked against @mediapipe/tasks-vision with bench/fidelity.py).
// Sampling::kArea averages the frame pixels each input pixel covers (cv::INTER_AREA): no
// aliasing when the frame is many times the input size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::image {

enum class Sampling { kArea, kMediaPipe };

// "area" / "mediapipe".
const char* sampling_name(Sampling sampling);
std::optional<Sampling> parse_sampling(std::string_view name);

// Metadata key naming the sampling a model was trained with ("mediapipe"); the TFLite
// importer sets it for MediaPipe's selfie models.
inline constexpr const char* kSamplingMetadataKey = "image_sampling";
// The model's own sampling: the metadata's kSamplingMetadataKey (for .nnapi files converted
// before it existed, MediaPipe's for a TFLite description naming a selfie segmentation
// model), else kArea.
Sampling default_sampling(const Metadata& metadata);

// A borrowed 8-bit image: `channels` (1..4) interleaved bytes per pixel, rows `stride` bytes apart.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0, height = 0;
  size_t stride = 0;
  int channels = 3;
};

// Resamples src to dst_w x dst_h into dst (same channels, rows dst_stride bytes apart).
Status resample(const ImageView& src, Sampling sampling, int dst_w, int dst_h, uint8_t* dst,
                size_t dst_stride);

// Where the image lies in the model input, in input pixels.
struct InputRect {
  int x = 0, y = 0, width = 0, height = 0;
};

// What a caller may set instead of the metadata (empty / unset: the metadata decides).
// The names are the caller's option names, used in error messages.
struct EncodingOverrides {
  std::vector<float> mean, std;
  std::optional<bool> bgr;
  std::string mean_name = "mean", std_name = "std";
};

// How pixels become one [1,H,W,3] image input's elements.
struct InputEncoding {
  int width = 0, height = 0;  // the input's W and H
  bool bgr = false;           // channel 0 of the input is blue
  float mean[3] = {0.f, 0.f, 0.f};
  float inv_std[3] = {1.f / 255.f, 1.f / 255.f, 1.f / 255.f};
  OperandType type = OperandType::TENSOR_FLOAT32;
  float scale = 1.f;
  int32_t zero_point = 0;

  // From the model's input `input_index` and its metadata (input_color, input_mean,
  // input_std) under `overrides`. kInvalidModel when the input is not [1,H,W,3] float32
  // or quant8; kInvalidArgument for a mean/std that is not one or three values, or a std <= 0.
  static Result<InputEncoding> for_input(const Model& model, size_t input_index = 0,
                                         const EncodingOverrides& overrides = {});

  // Stores element `index` (of the input's flat NHWC buffer `tensor`), input channel
  // `channel`, from a pixel value in [0, 255] of that channel's colour.
  void put(void* tensor, size_t index, int channel, float pixel) const {
    const float v = (pixel - mean[channel]) * inv_std[channel];
    if (type == OperandType::TENSOR_FLOAT32)
      static_cast<float*>(tensor)[index] = v;
    else
      store_quantized(tensor, index, v);
  }
  // The input element for a black (all zero) pixel, for padding: put(..., 0.f) per channel.
  void fill_black(void* tensor) const;

 private:
  void store_quantized(void* tensor, size_t index, float v) const;
};

// Writes an RGB(A) or BGR(A) image (3 or 4 channels, `image_bgr` saying which order),
// already at rect's size, into the input at rect. Padding outside rect is left as it is
// (fill_black first to pad).
Status encode(const ImageView& image, bool image_bgr, const InputEncoding& encoding, const InputRect& rect,
              void* tensor);

// The whole front end for an image file or frame: resampled to the input size (stretched,
// aspect ratio not kept) with `sampling`, then encoded. tensor: input_index's buffer.
Status image_to_tensor(const ImageView& image, bool image_bgr, const InputEncoding& encoding,
                       Sampling sampling, void* tensor);

}  // namespace nn::image
