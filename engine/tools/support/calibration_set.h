// A calibration folder as `nnconvert --quantize` reads it: images, .npy input tensors, and
// videos, of which evenly spread frames are samples (a clip shows more poses and scenes
// than a few extracted frames).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "nn/ir/model.h"
#include "nn/status.h"

namespace nn::tools {

class CalibrationSet {
 public:
  // The folder's samples, sorted by file name: each .jpg/.jpeg/.png/.bmp image and .npy
  // tensor once, each .avi/.mp4/.mkv/.mov/.webm video's `frames_per_video` frames evenly
  // spread over it (all of them when it has fewer). A video OpenCV cannot decode, or one
  // with no frame, is an error naming it; an unreadable image fails when it is read.
  static Result<CalibrationSet> open(const std::string& dir, size_t frames_per_video);

  size_t size() const { return samples_.size(); }
  size_t videos() const;
  // "dir/a.png", or "dir/clip.avi frame 120": what an error names.
  std::string describe(size_t i) const;
  // Sample i as the model's input `input_index` (IR layout): images and frames through the
  // tools' pre-processing (image_to_input), .npy in the source model's layout.
  Status to_input(size_t i, const Model& model, size_t input_index, void* dst) const;
  // Keeps the first n samples.
  void truncate(size_t n);

  struct Frame;  // a decoded video frame (OpenCV's, kept out of this header)

 private:
  struct Sample {
    std::string path;
    int frame = -1;                // >= 0: the video frame's index
    std::shared_ptr<Frame> image;  // the frame, decoded when the folder is read
  };
  std::vector<Sample> samples_;
};

}  // namespace nn::tools
