// reduce_rgba / shrink_area (plugins/imageops.cpp) against exact block averages and
// OpenCV's INTER_AREA, on random frames with odd sizes (SIMD body and scalar tail both).
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "imageops.h"

namespace {

cv::Mat random_rgba(int w, int h) {
  cv::Mat m(h, w, CV_8UC4);
  cv::RNG rng(1234);
  rng.fill(m, cv::RNG::UNIFORM, 0, 256);
  return m;
}

// Exact (rounded) means of factor x factor blocks.
cv::Mat block_means(const cv::Mat& src, int factor) {
  cv::Mat out(src.rows / factor, src.cols / factor, CV_8UC4);
  const int n = factor * factor;
  for (int y = 0; y < out.rows; ++y)
    for (int x = 0; x < out.cols; ++x)
      for (int c = 0; c < 4; ++c) {
        int sum = 0;
        for (int dy = 0; dy < factor; ++dy)
          for (int dx = 0; dx < factor; ++dx) sum += src.at<cv::Vec4b>(factor * y + dy, factor * x + dx)[c];
        out.at<cv::Vec4b>(y, x)[c] = static_cast<uint8_t>((sum + n / 2) / n);
      }
  return out;
}

class Reduce : public ::testing::TestWithParam<int> {};

TEST_P(Reduce, MatchesBlockMeansWithinRounding) {
  const int factor = GetParam();
  const cv::Mat src = random_rgba(1923, 1081);  // odd: partial blocks left out, scalar tail
  cv::Mat got;
  if (!nn::plugins::reduce_rgba(src, got, factor)) GTEST_SKIP() << "no AVX2 here";
  const cv::Mat want = block_means(src, factor);
  ASSERT_EQ(got.size(), want.size());
  cv::Mat diff;
  cv::absdiff(got, want, diff);
  double max_diff = 0;
  cv::minMaxLoc(diff.reshape(1), nullptr, &max_diff);
  // Pairwise rounding averages (vpavgb) round up at each level: under one step per level.
  EXPECT_LE(max_diff, factor == 2 ? 1.0 : 2.0);
  const cv::Scalar mean = cv::mean(diff);
  EXPECT_LT((mean[0] + mean[1] + mean[2] + mean[3]) / 4, 1.0);
  // The last columns (past the last 8 SIMD outputs) are exact.
  for (int x = got.cols - got.cols % 8; x < got.cols; ++x)
    EXPECT_EQ(got.at<cv::Vec4b>(got.rows - 1, x), want.at<cv::Vec4b>(got.rows - 1, x)) << "x " << x;
}

INSTANTIATE_TEST_SUITE_P(Factors, Reduce, ::testing::Values(2, 4));

TEST(Reduce, RefusesOtherTypesAndFactors) {
  cv::Mat rgb(64, 64, CV_8UC3, cv::Scalar::all(7)), out;
  EXPECT_FALSE(nn::plugins::reduce_rgba(rgb, out, 2));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(nn::plugins::reduce_rgba(random_rgba(64, 64), out, 3));
  EXPECT_FALSE(nn::plugins::reduce_rgba(random_rgba(3, 3), out, 4));
}

// 1080p -> the compositor's work size and the model's input size: close to INTER_AREA.
TEST(ShrinkArea, CloseToInterArea) {
  cv::Mat src = random_rgba(1920, 1080);
  cv::GaussianBlur(src, src, cv::Size(0, 0), 3);  // image-like: smooth, not white noise
  for (const cv::Size target : {cv::Size(480, 270), cv::Size(256, 256), cv::Size(427, 240)}) {
    cv::Mat got, want, diff;
    nn::plugins::shrink_area(src, got, target);
    cv::resize(src, want, target, 0, 0, cv::INTER_AREA);
    ASSERT_EQ(got.size(), target);
    cv::absdiff(got, want, diff);
    const cv::Scalar mean = cv::mean(diff);
    EXPECT_LT((mean[0] + mean[1] + mean[2] + mean[3]) / 4, 1.5) << target;
  }
}

// The compositor's work size: an integer factor down to at most ~480 px wide.
TEST(WorkImage, SizeRule) {
  EXPECT_EQ(nn::plugins::work_size({1920, 1080}), cv::Size(480, 270));
  EXPECT_EQ(nn::plugins::work_size({3840, 2160}), cv::Size(480, 270));
  EXPECT_EQ(nn::plugins::work_size({1280, 720}), cv::Size(427, 240));
  EXPECT_EQ(nn::plugins::work_size({385, 289}), cv::Size(385, 289));
  EXPECT_EQ(nn::plugins::work_factor(3840), 8);
}

// nnsegment makes the work image and then the model input inside one ShrinkMemo: the
// results must be exactly those made without it, and at 1080p and 4K the model input's
// block averages must come from the memo (the frame read once).
TEST(WorkImage, ShrinkMemoGivesTheSameImagesAndSkipsRepeatedSteps) {
  struct Case {
    cv::Size frame;
    int type;
    bool shares;
  };
  for (const Case c : {Case{{1920, 1080}, CV_8UC4, true}, Case{{3840, 2160}, CV_8UC4, true},
                       Case{{1280, 720}, CV_8UC4, true}, Case{{1281, 721}, CV_8UC3, true},
                       Case{{385, 289}, CV_8UC4, false}, Case{{1920, 1080}, CV_8UC1, true},
                       Case{{960, 540}, CV_8UC2, true}}) {
    cv::Mat frame(c.frame, c.type);
    cv::RNG(7).fill(frame, cv::RNG::UNIFORM, 0, 256);
    cv::GaussianBlur(frame, frame, cv::Size(0, 0), 2);
    cv::Mat work_alone, input_alone, work, input;
    nn::plugins::make_work_image(frame, work_alone);
    nn::plugins::shrink_area(frame, input_alone, cv::Size(256, 256));
    size_t hits = 0;
    {
      nn::plugins::ShrinkMemo memo;
      nn::plugins::make_work_image(frame, work);
      const size_t after_work = memo.hits();
      nn::plugins::shrink_area(frame, input, cv::Size(256, 256));
      hits = memo.hits() - after_work;
    }
    EXPECT_EQ(nn::plugins::ShrinkMemo::active(), nullptr);
    ASSERT_EQ(work.size(), nn::plugins::work_size(c.frame));
    EXPECT_EQ(cv::norm(work, work_alone, cv::NORM_INF), 0) << c.frame;
    EXPECT_EQ(cv::norm(input, input_alone, cv::NORM_INF), 0) << c.frame;
    if (c.shares)
      EXPECT_GE(hits, 1u) << c.frame << ": the model input re-read the frame";
    else
      EXPECT_EQ(hits, 0u) << c.frame;
  }
}

}  // namespace
