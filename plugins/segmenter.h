// The plain C++ side of nnsegment: loads a segmentation model, turns video frames into the
// model's input tensor, runs inference on nn::AsyncSession's worker and turns the output
// into a person-probability mask. It knows nothing of GStreamer (the element is glue),
// and nothing of delegates beyond their names.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "nn/image/preprocess.h"
#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "nn/status.h"

namespace nn::plugins {

enum class PixelLayout { kRGBA, kBGRA, kRGBx, kBGRx, kRGB, kBGR, kI420, kNV12 };

// A mapped frame, borrowed: planes point into the caller's memory.
struct FrameView {
  PixelLayout layout = PixelLayout::kRGBA;
  int width = 0;
  int height = 0;
  const uint8_t* planes[3] = {nullptr, nullptr, nullptr};
  int strides[3] = {0, 0, 0};
  // YUV layouts: the colour matrix (Kr, Kb) and whether Y/UV use the full 0..255 range.
  double kr = 0.299, kb = 0.114;
  bool full_range = false;
};

// How a frame becomes the model's input image. Stretch fills the input, distorting the
// aspect ratio (what MediaPipe's selfie models are trained on); letterbox scales to fit
// and pads the rest with black, so people keep their proportions on very wide or tall
// frames.
enum class ResizeMode { kStretch, kLetterbox };

// The part of the model input that holds the frame, in input pixels.
struct Placement {
  int x = 0, y = 0, width = 0, height = 0;
};

// A frame resampled to the part of the model input it fills (Segmenter::resample, on the
// streaming thread), in memory it owns: what the worker's last step (Segmenter::encode)
// reads after the frame itself has gone downstream.
struct ResampledFrame {
  PixelLayout layout = PixelLayout::kRGBA;
  Placement placement;
  // Packed layouts: image[0], 3 or 4 channels in the layout's order. I420 and NV12: Y, U
  // and V, each at the placement's size (4:4:4).
  cv::Mat image[3];
  double kr = 0.299, kb = 0.114;  // YUV: the frame's colour matrix and range
  bool full_range = false;
};

// Where the whole model input (and so the mask) lies in frame pixels; with letterbox it
// reaches outside the frame (GstNnMaskMeta's rect).
struct FrameRect {
  double x = 0, y = 0, width = 0, height = 0;
};

// The order of the colour channels the model reads.
enum class ChannelOrder { kFromModel, kRGB, kBGR };

struct SegmenterOptions {
  std::string model_path;
  std::vector<std::string> delegates = {"auto"};
  int threads = 1;
  bool strict_delegates = false;  // a named delegate that is missing fails open()
  double budget_ms = 0;           // per inference; the NNAPI delegate's deadline
  // Empty: the model's metadata decides (see Segmenter::open).
  std::string classes;     // foreground classes of a multi-class output, "15" or "3,15"
  std::string input_mean;  // one or three values in pixel units (0..255), "123.675,116.28,103.53"
  std::string input_std;   // one or three values > 0, "58.395,57.12,57.375"
  ChannelOrder channel_order = ChannelOrder::kFromModel;
  // How the frame is resampled to the input; unset: the model's own
  // (nn::image::default_sampling: MediaPipe's for its selfie models, else area).
  std::optional<image::Sampling> sampling;
};

// Output `index`'s shape as the source model has it: "[1,21,256,256] (NCHW)" for an ONNX
// image model (the IR holds it as NHWC), "[1,256,256,1]" otherwise.
std::string output_shape_in_model_layout(const Model& model, size_t index);

// A finished inference turned into a probability mask at the model's output resolution.
struct MaskResult {
  uint64_t tag = 0;
  Status status;
  int width = 0, height = 0;
  Tensor probability;  // FLOAT32 [height, width], 0..1, made on the worker (Segmenter::read_mask)
  double run_ms = 0;
  double cpu_ms = 0;  // the worker's CPU time for the inference (AsyncResult::cpu_ms)
};

class Segmenter {
 public:
  // Loads (or reuses `model` when non-null) and opens a session. Errors name the file.
  // The foreground of a multi-class output (C > 1) is the softmax probability summed over
  // options.classes, else the metadata's "foreground_classes" (ONNX metadata_props too) or
  // "person_class", else class 1 of a two-class output; more classes and none named is an
  // error (kInvalidArgument, as are malformed options). Normalisation: options, else the
  // metadata's input_mean / input_std / input_color, else [0,1] RGB (nn::image's rule).
  static Result<std::unique_ptr<Segmenter>> open(const SegmenterOptions& options,
                                                 std::shared_ptr<const Model> model = nullptr);
  // Joins the worker first: it reads this object's settings while it converts a mask.
  ~Segmenter() { async_.reset(); }
  // Loads the model and checks it is something we can drive: one [1,H,W,3] image input,
  // an output that reads as a mask: [1,H,W,C] or [1,H,W] with H, W >= 2 (in the model's
  // own layout: [1,C,H,W] for ONNX). Errors name the shape as the model has it.
  static Result<std::shared_ptr<const Model>> load(const std::string& path);

  int input_width() const { return in_w_; }
  int input_height() const { return in_h_; }
  const Model& model() const { return *model_; }

  image::Sampling sampling() const { return sampling_; }

  // The front end in two parts. resample (streaming thread): the frame shrunk to the input
  // size (its part of it with letterbox) into memory the result owns. When thumb is given
  // it receives a kThumbSize x kThumbSize grey thumbnail, for cheap scene-change detection.
  // encode (the worker, by submit): the resampled frame normalised (and YUV converted) into
  // the model input's layout at `tensor`, input 0's buffer, padding black.
  static constexpr int kThumbSize = 32;
  Result<ResampledFrame> resample(const FrameView& frame, ResizeMode resize,
                                  std::vector<uint8_t>* thumb = nullptr) const;
  Status encode(const ResampledFrame& frame, void* tensor) const;
  // Both parts into a new input tensor.
  Status preprocess(const FrameView& frame, ResizeMode resize, Tensor* out,
                    std::vector<uint8_t>* thumb = nullptr) const;
  Status preprocess(const FrameView& frame, Tensor* out, std::vector<uint8_t>* thumb = nullptr) const {
    return preprocess(frame, ResizeMode::kStretch, out, thumb);
  }
  // The geometry preprocess() uses for a frame of frame_w x frame_h.
  Placement placement(int frame_w, int frame_h, ResizeMode resize) const;
  FrameRect mask_rect(int frame_w, int frame_h, ResizeMode resize) const;
  // Hands a tensor to the worker; returns true when it replaced a waiting one.
  bool submit(Tensor input, uint64_t tag);
  // Hands a resampled frame to the worker, which encodes it straight into the session's
  // input buffer (no tensor made, no copy); returns true when it replaced a waiting one.
  bool submit(ResampledFrame frame, uint64_t tag);
  std::optional<MaskResult> take_latest();
  std::optional<MaskResult> wait_for(uint64_t min_tag, std::chrono::microseconds timeout);
  AsyncSession::Counters counters() const { return async_->counters(); }

  // The plan as "cpu (112 ops), vulkan (3 ops)" (delegates in first-use order; "none"
  // without partitions), and the number of partitions.
  std::string delegate_summary() const;
  size_t num_partitions() const;
  // Delegates the options named that are unavailable, with why ("nnapi: ... not found").
  std::vector<std::string> missing_delegates() const { return async_->session().report().missing_requested(); }
  // Inferences a delegate failed or ran past its deadline on, redone on the CPU.
  uint64_t runtime_fallbacks() const { return async_->session().runtime_fallbacks(); }

 private:
  Segmenter() = default;
  MaskResult to_mask(AsyncResult result) const;
  // The OutputReader of the session's worker: the output, read in place, becomes the
  // probability mask (sigmoid of logits, or the softmax over the foreground classes).
  Status read_mask(const Session& session, AsyncResult& result) const;

  std::shared_ptr<const Model> model_;
  std::unique_ptr<AsyncSession> async_;
  int in_w_ = 0, in_h_ = 0;
  image::InputEncoding encoding_;
  image::Sampling sampling_ = image::Sampling::kArea;
  int out_w_ = 0, out_h_ = 0, out_c_ = 1;
  std::vector<bool> foreground_;  // per output class (multi-class outputs)
  bool output_is_logits_ = false;
};

// Mean absolute difference of two thumbnails (0..255); 255 when they cannot be compared.
double thumb_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b);

// Temporal smoothing and soft thresholding of successive masks.
class MaskFilter {
 public:
  // smoothing: weight of the previous mask (0 = none). threshold: centre of a soft ramp
  // (0 disables it): p <= t - 0.2 -> 0, p >= t + 0.2 -> 1, linear in between. Writes
  // in.probability.size() values to out (the caller's buffer: the mask meta's own).
  void apply(const MaskResult& in, double smoothing, double threshold, float* out);
  void reset() { ema_.clear(); }

 private:
  std::vector<float> ema_;
  int w_ = 0, h_ = 0;
};

}  // namespace nn::plugins
