// Small OpenCV helpers shared by the plugin's C++ cores.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "mask_sampling.h"  // mask_to_grid: a mask back onto the frame

namespace nn::plugins {

// Averages factor x factor blocks (2 or 4) of a CV_8UC4 image in one pass (AVX2), into
// (cols / factor) x (rows / factor); a trailing partial block is left out. False (dst
// untouched) for other types or factors, or without AVX2.
bool reduce_rgba(const cv::Mat& src, cv::Mat& dst, int factor);

// Shrinks with area averaging, fast: while the image is more than twice the target, block
// averages (4-channel: reduce_rgba, by 4 when the target allows) or a bilinear resize to
// exactly half size (which averages 2x2 blocks, like INTER_AREA, at a fraction of
// INTER_AREA's cost on non-integer factors); INTER_AREA does the rest, or INTER_LINEAR
// with final = cv::INTER_LINEAR where a little aliasing does not matter (the remaining
// factor is under 2: a fraction of INTER_AREA's cost; bench/README.md, "Where a 1080p
// frame's CPU goes", has the figures).
void shrink_area(const cv::Mat& src, cv::Mat& dst, cv::Size target, int final = cv::INTER_AREA);

// While a ShrinkMemo lives on a thread, shrink_area() on that thread keeps every reduction
// step it makes (source pixels, factor -> result) and takes a step it made before from the
// memo instead of computing it again. Results are the same with or without it. nnsegment
// makes the compositor's work image and then the model input inside one memo, so the frame
// is read once for both (1080p and 4K: both go through the same block averages). The memo
// holds references to the results, so the sources it keys on stay alive while it lives.
class ShrinkMemo {
 public:
  ShrinkMemo();
  ~ShrinkMemo();
  ShrinkMemo(const ShrinkMemo&) = delete;
  ShrinkMemo& operator=(const ShrinkMemo&) = delete;

  struct Step {
    const uchar* data;
    cv::Size size;
    size_t step;
    int type, factor;
    cv::Mat result;
  };
  // The active memo of this thread, or null.
  static ShrinkMemo* active();
  const cv::Mat* find(const cv::Mat& src, int factor) const;
  void add(const cv::Mat& src, int factor, const cv::Mat& result);
  size_t hits() const { return hits_; }

 private:
  std::vector<Step> steps_;
  ShrinkMemo* outer_;
  mutable size_t hits_ = 0;
};

// The compositor's work resolution (nnbackground's guided filter and background blur): the
// frame shrunk by an integer factor to at most ~480 px wide (1920 -> 480 by 4, 3840 -> 480
// by 8, 1280 -> 427 by 3). work_factor is that factor (>= 1).
int work_factor(int frame_width);
cv::Size work_size(cv::Size frame);
// The work image: the frame at work_size, by shrink_area with a bilinear last step (its
// readers, a box filter and a blur, do not mind a little aliasing). The one rule nnsegment
// (which makes it once and passes it on in the mask meta) and the compositor share.
void make_work_image(const cv::Mat& frame, cv::Mat& dst);
// The same for a planar YUV 4:2:0 frame: Y, U and V at the work size of the frame (Y's
// size) as one packed 3-channel image (4:4:4, GStreamer's v308), each plane by
// shrink_area with a bilinear last step. `v` empty: `u` is NV12's interleaved UV plane.
void make_yuv_work_image(const cv::Mat& y, const cv::Mat& u, const cv::Mat& v, cv::Mat& dst);

}  // namespace nn::plugins
