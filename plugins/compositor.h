// The plain C++ side of nnbackground: turns a low-resolution person mask into a
// full-resolution alpha (edge-refined against the frame) and composites a new background.
//
// Cost model (why it is built this way): everything that needs a large neighbourhood --
// the guided filter's box sums and the background blur -- runs on a "work" copy of the
// frame no wider than ~480 px (imageops' make_work_image; nnsegment makes it once, on its
// way to the model input, and hands it over in the mask meta). Only three things touch full-resolution pixels: the luma
// that the guided filter's linear coefficients are applied to, the upsampled background,
// and the final blend (split over cores with cv::parallel_for_).
#pragma once

#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "nn/status.h"

namespace nn::plugins {

enum class BackgroundMode { kBlur, kColor, kImage, kTransparent, kVideo };

// The mask as GstNnMaskMeta carries it, borrowed.
struct MaskView {
  bool is_float = true;  // else uint8 0..255
  int width = 0, height = 0;
  size_t stride = 0;
  const void* data = nullptr;
  int frame_width = 0, frame_height = 0;  // the frame the rect refers to
  double rect_x = 0, rect_y = 0, rect_w = 0, rect_h = 0;
  // Optional: the frame at work resolution (make_work_image) in the frame's own format, or
  // for YUV frames (process_yuv) packed Y, U, V (make_yuv_work_image), as nnsegment made it
  // (GstNnMaskMeta's small frame). Used when its size is work_size of the frame; the
  // caller checks the format. Saves reading the whole frame once.
  const void* small_data = nullptr;
  int small_width = 0, small_height = 0;
  size_t small_stride = 0;
};

// Where R, G, B (and alpha) sit in a packed pixel.
struct PackedLayout {
  int channels = 4;  // 3 or 4
  int r = 0, g = 1, b = 2;
  int alpha = 3;  // -1: no alpha channel (RGB, BGR, RGBx, BGRx)
};

// A planar YUV 4:2:0 frame, borrowed: I420 (Y, U, V planes) or NV12 (Y, interleaved UV in
// `u`). Chroma planes are (width + 1) / 2 x (height + 1) / 2.
struct YuvFrame {
  bool nv12 = false;
  int width = 0, height = 0;
  uint8_t* y = nullptr;
  size_t y_stride = 0;
  uint8_t* u = nullptr;  // NV12: the UV plane
  size_t u_stride = 0;
  uint8_t* v = nullptr;  // NV12: unused
  size_t v_stride = 0;
  // The stream's colour matrix (Kr, Kb) and range: backgrounds given in RGB (colour,
  // image, video) are converted with it.
  double kr = 0.299, kb = 0.114;
  bool full_range = false;
};

// RGB(A) pixels -> Y at full size and U, V at half size (2x2 means), with the matrix and
// range of `like` (its planes are not touched). The inverse of nnsegment's YUV -> RGB.
void rgb_to_yuv420(const cv::Mat& rgb, const PackedLayout& layout, const YuvFrame& like, cv::Mat& y, cv::Mat& u,
                   cv::Mat& v);

struct CompositorSettings {
  BackgroundMode mode = BackgroundMode::kBlur;
  double blur_sigma = 16.0;  // Gaussian sigma in frame pixels
  uint32_t color_argb = 0xFF00B140;
  bool refine = true;    // guided filter against the frame's luma
  double feather = 2.0;  // extra softening of the mask edge, in frame pixels
  // kVideo: the background frame, already at the frame's size and channel layout (see
  // cover_and_convert). Null or mismatched: the background is blurred instead.
  const cv::Mat* background = nullptr;
  // Under load (nnbackground adaptive=true when a frame's deadline is near): no edge
  // refinement, and the blurred background of a recent frame is reused (up to
  // kMaxBackgroundReuse frames in a row). 1080p: about 40% of the full cost.
  bool fast = false;
  // The full-resolution row loops (alpha, blend) on the calling thread alone, no helper
  // threads: nnbackground's choice when the streaming thread is real-time, which must not
  // wait for a normal-priority helper that any busy process can preempt mid-rows.
  bool serial = false;
};

// Scales `src` to cover `size` (aspect kept, the overflow cropped evenly) and reorders its
// channels from `from` to `to` (alpha 255 where `from` has none).
void cover_and_convert(const cv::Mat& src, const PackedLayout& from, cv::Size size, const PackedLayout& to,
                       cv::Mat& dst);

class Compositor {
 public:
  // Loads the background image (OpenCV: PNG, JPEG, ...). Errors name the file.
  Status set_image(const std::string& path);
  bool has_image() const { return !image_bgr_.empty(); }

  // Composites in place. frame wraps the mapped video frame (CV_8UC3 or CV_8UC4).
  void process(cv::Mat& frame, const PackedLayout& layout, const MaskView& mask, const CompositorSettings& s);
  // The same on the planes of a YUV 4:2:0 frame, never converted to RGB: the guided filter
  // is guided by the frame's own Y, the blur runs on a Y/U/V work image, and each plane is
  // blended with the alpha at its resolution. kTransparent (no alpha channel) composites
  // over black; kVideo's background is packed RGB at the frame's size (converted here).
  void process_yuv(const YuvFrame& frame, const MaskView& mask, const CompositorSettings& s);

  // CPU time of the calling thread per stage of the last process() call (work done by
  // cv::parallel_for_ helpers is not included: profile with cv::setNumThreads(1)).
  struct StageTimes {
    double work_ms = 0;        // downscale + mask resampling + guided filter
    double alpha_ms = 0;       // full-resolution alpha
    double background_ms = 0;  // blurred / scaled background
    double blend_ms = 0;
    // CPU time other threads spent in process()'s own parallel loops (alpha, blend); OpenCV
    // functions that parallelize internally are not included.
    double helper_ms = 0;
  };
  const StageTimes& last_stage_times() const { return times_; }
  // Whether the last process() reused a recent frame's blurred background (fast frames).
  bool last_reused_background() const { return last_reused_; }
  // Whether the last process() took its work image from the MaskView (small_data).
  bool last_used_shared_work_image() const { return small_shared_; }

 private:
  // One process() / process_yuv() call: laps of the thread's CPU time for times_, and a work
  // image borrowed from the meta forgotten when the call returns (the buffer goes on).
  class Call {
   public:
    explicit Call(Compositor& c);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    double lap();

   private:
    Compositor& c_;
    double t_;
  };

  static constexpr int kMaxBackgroundReuse = 2;

  void make_work_alpha(const cv::Mat& frame, const PackedLayout& layout, const MaskView& mask,
                       const CompositorSettings& s, bool refine, bool need_small);
  void make_blurred_background(const CompositorSettings& s, int frame_width);
  // The coefficients for the frame: coef_full_ has one (A, B) per block of 2^shift x 2^shift
  // pixels (shift 1; 2 when the work grid is 8x or more smaller than the frame).
  static int coefficient_shift(int frame_width);
  void upsample_coefficients(int frame_width, int frame_height, int shift);
  // cv::parallel_for_ over rows [0, rows), counting other threads' CPU time in helper_ms;
  // the calling thread alone when the settings ask for serial.
  template <class Body>
  void parallel_rows(int rows, const Body& body);
  const cv::Mat& scaled_image(const cv::Size& size, const PackedLayout& layout);

  // Work resolution buffers, reused across frames.
  cv::Mat small_;        // frame at work size, frame channels (read only: it may be the meta's)
  bool small_shared_ = false;
  bool serial_ = false;  // this call's CompositorSettings::serial
  cv::Mat small_luma_;   // CV_32F 0..1
  cv::Mat coarse_mask_;  // CV_32F mask resampled to work size
  cv::Mat guide_stats_, guide_means_;   // CV_32FC4 (I, p, I*I, I*p) and their box means
  cv::Mat guide_ab_, guide_ab_mean_;    // CV_32FC2 (a, b) and their box means
  cv::Mat small_alpha_;  // CV_32F refined alpha at work size
  cv::Mat small_bg_;     // CV_8UC(n) blurred background at work size
  cv::Mat weighted_, weight_;  // the blur's (1 - alpha)-weighted image and the weights
  // Full resolution buffers.
  cv::Mat coef_small_;   // CV_32FC2 (A, B) at work size: alpha * 255 = A * luma + B (luma 0..255)
  cv::Mat luma_, coef_full_, alpha_, alpha_n_, background_;
  // YUV frames: the background's planes (chroma interleaved for NV12), with what they
  // hold (blur key, or colour / image key).
  cv::Mat bg_y_, bg_u_, bg_v_, bg_uv_;
  uint64_t bg_yuv_key_ = 0;  // 0: nothing reusable (blur: blur_key_ decides)
  cv::Scalar background_color_ = cv::Scalar::all(-1);  // what background_ holds in colour mode
  // What background_ holds in blur mode (for fast frames' reuse); empty size: nothing.
  struct BlurKey {
    cv::Size frame;
    int type = -1, red = -1;  // red: the layout's R index (RGBA and BGRA share a type)
    double sigma = 0;
    bool operator==(const BlurKey&) const = default;
  } blur_key_;
  int blur_reuses_ = 0;
  bool last_reused_ = false;
  // Image mode.
  cv::Mat image_bgr_;
  cv::Mat image_scaled_;
  cv::Size image_scaled_size_;
  int image_scaled_key_ = -1;
  StageTimes times_;
};

}  // namespace nn::plugins
