#include "calibration_set.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>
#include <opencv2/videoio/registry.hpp>

#include "nn/image/preprocess.h"
#include "npy.h"
#include "tensor_io.h"

namespace nn::tools {

struct CalibrationSet::Frame {
  cv::Mat bgr;
};

namespace {

std::string lower_extension(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

bool is_image(const std::string& ext) {
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp" || ext == ".npy";
}

bool is_video(const std::string& ext) {
  return ext == ".avi" || ext == ".mp4" || ext == ".mkv" || ext == ".mov" || ext == ".webm";
}

}  // namespace

Result<CalibrationSet> CalibrationSet::open(const std::string& dir, size_t frames_per_video) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status(StatusCode::kIoError, dir + ": not a directory");
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = lower_extension(e.path());
    if (e.is_regular_file() && (is_image(ext) || is_video(ext))) files.push_back(e.path());
  }
  if (ec) return Status(StatusCode::kIoError, dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  CalibrationSet set;
  for (const auto& f : files) {
    if (!is_video(lower_extension(f))) {
      set.samples_.push_back({f.string(), -1, nullptr});
      continue;
    }
    // Decoded front to back (seeking is not frame-exact in every container), keeping
    // the wanted frames; the frame count the container declares picks them.
    // FFmpeg where OpenCV has it: its GStreamer backend prints criticals on a broken file.
    const int backend = cv::videoio_registry::hasBackend(cv::CAP_FFMPEG) ? cv::CAP_FFMPEG : cv::CAP_ANY;
    cv::VideoCapture cap(f.string(), backend);
    const double declared = cap.isOpened() ? cap.get(cv::CAP_PROP_FRAME_COUNT) : 0;
    if (!cap.isOpened() || !(declared >= 1))
      return Status(StatusCode::kIoError, f.string() + ": cannot read video (not a video OpenCV can decode)");
    const size_t count = static_cast<size_t>(declared);
    const size_t take = std::min(count, std::max<size_t>(1, frames_per_video));
    std::set<size_t> wanted;
    for (size_t k = 0; k < take; ++k) wanted.insert(k * count / take);
    size_t index = 0, kept = 0;
    cv::Mat frame;
    while (index <= *wanted.rbegin() && cap.read(frame)) {
      if (wanted.count(index)) {
        auto image = std::make_shared<Frame>();
        image->bgr = frame.clone();
        set.samples_.push_back({f.string(), static_cast<int>(index), std::move(image)});
        ++kept;
      }
      ++index;
    }
    if (kept == 0) return Status(StatusCode::kIoError, f.string() + ": cannot read video (no frame decodes)");
  }
  return set;
}

size_t CalibrationSet::videos() const {
  std::set<std::string> v;
  for (const Sample& s : samples_)
    if (s.frame >= 0) v.insert(s.path);
  return v.size();
}

std::string CalibrationSet::describe(size_t i) const {
  const Sample& s = samples_.at(i);
  return s.frame < 0 ? s.path : s.path + " frame " + std::to_string(s.frame);
}

void CalibrationSet::truncate(size_t n) {
  if (n < samples_.size()) samples_.resize(n);
}

Status CalibrationSet::to_input(size_t i, const Model& model, size_t input_index, void* dst) const {
  const Sample& s = samples_.at(i);
  if (s.image) {
    auto encoding = image::InputEncoding::for_input(model, input_index);
    if (!encoding.is_ok()) return encoding.status();
    const cv::Mat& bgr = s.image->bgr;
    const image::ImageView view{bgr.data, bgr.cols, bgr.rows, bgr.step[0], 3};
    return image::image_to_tensor(view, /*image_bgr=*/true, encoding.value(), image::default_sampling(model.metadata),
                                  dst)
        .with_context(describe(i));
  }
  if (lower_extension(s.path) != ".npy") return image_to_input(s.path, model, input_index, dst);
  auto array = read_npy(s.path);
  if (!array) return array.status().with_context(s.path);
  const std::string layout =
      input_index < model.metadata.input_source_layouts.size() ? model.metadata.input_source_layouts[input_index] : "";
  return npy_to_input(*array, model.operands[model.inputs[input_index]], layout, dst).with_context(s.path);
}

}  // namespace nn::tools
