// mask_to_grid, the mask's way back to the frame: for a stretched input it is MediaPipe's
// TensorsToSegmentation resampling (bilinear between pixel centres, edges repeated),
// checked against that formula written out here; letterbox padding is never read; outside
// a rectangle smaller than the frame the mask is 0.
#include <cmath>
#include <random>

#include "mask_sampling.h"
#include "plugin_test_util.h"

namespace {

// MediaPipe's cv::resize(INTER_LINEAR) convention, written out: output pixel x reads the
// mask at u = (x + 0.5) * in / out - 0.5, clamped to the first and last cell.
float centre_aligned_bilinear(const cv::Mat& m, int x, int y, cv::Size out) {
  const auto coord = [](int i, int in, int n, int* i0, float* t) {
    float u = (i + 0.5f) * in / n - 0.5f;
    u = std::max(u, 0.f);
    *i0 = std::min(static_cast<int>(std::floor(u)), in - 1);
    *t = std::min(u - *i0, 1.f);
    if (*i0 == in - 1) *t = 0.f;
  };
  int x0, y0;
  float tx, ty;
  coord(x, m.cols, out.width, &x0, &tx);
  coord(y, m.rows, out.height, &y0, &ty);
  const int x1 = std::min(x0 + 1, m.cols - 1), y1 = std::min(y0 + 1, m.rows - 1);
  const float top = m.at<float>(y0, x0) * (1 - tx) + m.at<float>(y0, x1) * tx;
  const float bottom = m.at<float>(y1, x0) * (1 - tx) + m.at<float>(y1, x1) * tx;
  return top * (1 - ty) + bottom * ty;
}

TEST(MaskSampling, StretchIsMediaPipesCentreAlignedBilinear) {
  cv::Mat mask(256, 256, CV_32F);
  cv::randu(mask, 0.f, 1.f);
  cv::Mat up;
  nn::plugins::mask_to_grid(mask, 0, 0, 720, 528, 720, 528, cv::Size(720, 528), up);
  ASSERT_EQ(up.size(), cv::Size(720, 528));
  ASSERT_EQ(up.type(), CV_32F);
  double worst = 0;
  for (int y = 0; y < up.rows; y += 7)
    for (int x = 0; x < up.cols; x += 3)
      worst = std::max(worst, std::abs(static_cast<double>(up.at<float>(y, x)) -
                                       centre_aligned_bilinear(mask, x, y, up.size())));
  EXPECT_LT(worst, 1e-3);  // OpenCV's float taps are rounded to 11 bits of a pixel
}

TEST(MaskSampling, LetterboxPaddingIsNeverRead) {
  // A 16x16 mask over a 16x8 frame letterboxed into it: rows 0..3 and 12..15 are padding.
  cv::Mat mask(16, 16, CV_32F, cv::Scalar(0.25f));
  mask.rowRange(0, 4).setTo(1000.f);
  mask.rowRange(12, 16).setTo(1000.f);
  cv::Mat up;
  nn::plugins::mask_to_grid(mask, 0, -4, 16, 16, 16, 8, cv::Size(64, 32), up);
  double lo, hi;
  cv::minMaxLoc(up, &lo, &hi);
  EXPECT_FLOAT_EQ(static_cast<float>(lo), 0.25f);
  EXPECT_FLOAT_EQ(static_cast<float>(hi), 0.25f);
}

TEST(MaskSampling, OutsideASmallerRectIsZero) {
  const cv::Mat mask(4, 4, CV_32F, cv::Scalar(1.f));
  cv::Mat up;
  nn::plugins::mask_to_grid(mask, 8, 8, 8, 8, 32, 32, cv::Size(32, 32), up);
  EXPECT_FLOAT_EQ(up.at<float>(0, 0), 0.f);
  EXPECT_FLOAT_EQ(up.at<float>(31, 31), 0.f);
  EXPECT_FLOAT_EQ(up.at<float>(12, 12), 1.f);
}

}  // namespace

NN_GST_TEST_MAIN()
