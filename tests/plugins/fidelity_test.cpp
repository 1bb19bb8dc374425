// nnsegment's masks against MediaPipe's own runtime on the same frames: the masks
// @mediapipe/tasks-vision's ImageSegmenter (CPU) made from Megamind frames
// (bench/fidelity/setup.sh puts them in assets/fidelity/), compared with the element's
// output-mode=mask output for the same PNG frames. Skips, saying how to make the data,
// when it is absent (it needs chromium).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "npy.h"
#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr double kIouTarget = 0.99, kMadTarget = 0.01;

struct FrameSet {
  int width = 0, height = 0;
  std::vector<std::string> names;
};

// assets/fidelity/frames/frames.txt: "W H" then one frame name a line; empty when absent.
FrameSet frame_set() {
  FrameSet set;
  std::ifstream in(nn_test::asset("fidelity/frames/frames.txt"));
  if (!(in >> set.width >> set.height)) return {};
  for (std::string name; in >> name;) set.names.push_back(name);
  return set;
}

bool have_reference(const FrameSet& set) {
  return !set.names.empty() &&
         std::ifstream(nn_test::asset("fidelity/mediapipe/" + set.names[0] + ".npy")).good();
}

// The element's GRAY8 mask for one RGB frame, as probabilities.
cv::Mat element_mask(const cv::Mat& rgb, const std::string& props, const char* format = "RGB") {
  const std::string line = "nnsegment model=" + model_path() +
                           " delegate=cpu latency-budget=10000 threshold=0 output-mode=mask " + props;
  GstHarness* h = gst_harness_new_parse(line.c_str());
  EXPECT_NE(h, nullptr) << line;
  if (!h) return {};
  gst_harness_set_src_caps_str(h, caps_string(format, rgb.cols, rgb.rows).c_str());
  GstBuffer* out = gst_harness_push_and_pull(h, make_frame(format, rgb));
  cv::Mat mask;
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_GRAY8, rgb.cols, rgb.rows);
  GstVideoFrame frame;
  if (out && gst_video_frame_map(&frame, &info, out, GST_MAP_READ)) {
    const cv::Mat gray(rgb.rows, rgb.cols, CV_8UC1, GST_VIDEO_FRAME_PLANE_DATA(&frame, 0),
                       GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0));
    gray.convertTo(mask, CV_32F, 1.0 / 255.0);
    gst_video_frame_unmap(&frame);
  }
  EXPECT_FALSE(mask.empty()) << line << ": no GRAY8 mask";
  if (out) gst_buffer_unref(out);
  gst_harness_teardown(h);
  return mask;
}

struct Agreement {
  double iou = 0, mad = 0;
};

Agreement compare(const cv::Mat& ours, const cv::Mat& ref) {
  const cv::Mat a = ours > 0.5, b = ref > 0.5;
  const double uni = cv::countNonZero(a | b), both = cv::countNonZero(a & b);
  cv::Mat diff;
  cv::absdiff(ours, ref, diff);
  return {uni == 0 ? 1.0 : both / uni, cv::mean(diff)[0]};
}

class FidelityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
    set_ = frame_set();
    if (!have_reference(set_))
      GTEST_SKIP() << "no MediaPipe reference masks in " << nn_test::asset("fidelity")
                   << ": run bash bench/fidelity/setup.sh (needs chromium and npm) to make them";
  }
  cv::Mat frame(const std::string& name) {
    const cv::Mat bgr = cv::imread(nn_test::asset("fidelity/frames/" + name + ".png"), cv::IMREAD_COLOR);
    cv::Mat rgb;
    if (!bgr.empty()) cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    return rgb;
  }
  cv::Mat reference(const std::string& name) {
    auto npy = nn::tools::read_npy(nn_test::asset("fidelity/mediapipe/" + name + ".npy"));
    if (!npy.is_ok()) {
      ADD_FAILURE() << npy.status().to_string();
      return {};
    }
    std::vector<float> values = npy.value().to_f32();
    if (values.size() != static_cast<size_t>(set_.width) * set_.height) {
      ADD_FAILURE() << name << ".npy: " << values.size() << " values, frame is " << set_.width << "x"
                    << set_.height;
      return {};
    }
    return cv::Mat(set_.height, set_.width, CV_32F, values.data()).clone();
  }
  FrameSet set_;
};

// The default front end and mask upsampling for MediaPipe's selfie model are MediaPipe's:
// every frame's mask matches its runtime's.
TEST_F(FidelityTest, DefaultMatchesMediaPipeOnEveryFrame) {
  double mad_sum = 0;
  for (const std::string& name : set_.names) {
    const cv::Mat rgb = frame(name), ref = reference(name);
    ASSERT_FALSE(rgb.empty()) << name << ".png";
    ASSERT_FALSE(ref.empty());
    const cv::Mat ours = element_mask(rgb, "");
    ASSERT_EQ(ours.size(), ref.size());
    const Agreement a = compare(ours, ref);
    EXPECT_GE(a.iou, kIouTarget) << "frame " << name;
    EXPECT_LE(a.mad, kMadTarget) << "frame " << name;
    mad_sum += a.mad;
  }
  // The same masks, up to the GRAY8 output's rounding (most pixels are exactly 0 or 1, so
  // its mean is far below 1/1020): bicubic mask upsampling, say, stays within the targets
  // above, not within this.
  EXPECT_LE(mad_sum / set_.names.size(), 5e-4);
}

// Four-byte packed frames, either channel order, take the same path to the same masks.
TEST_F(FidelityTest, PackedFormatsMatchToo) {
  for (const char* format : {"RGBA", "BGRx", "BGR"}) {
    for (size_t i = 2; i < set_.names.size(); i += 8) {
      const cv::Mat ours = element_mask(frame(set_.names[i]), "", format), ref = reference(set_.names[i]);
      ASSERT_EQ(ours.size(), ref.size());
      const Agreement a = compare(ours, ref);
      EXPECT_GE(a.iou, kIouTarget) << format << " frame " << set_.names[i];
      EXPECT_LE(a.mad, 5e-4) << format << " frame " << set_.names[i];
    }
  }
}

// nnmask (and nnrun) share the front end (nn/image/preprocess.h) and upsample as MediaPipe
// does: its masks are MediaPipe's too.
TEST_F(FidelityTest, NnmaskMatchesMediaPipe) {
  const std::string nnmask = std::string(NN_BINARY_DIR) + "/engine/nnmask";
  const std::string out = std::string(NN_TEST_OUT_DIR) + "/fidelity_nnmask.png";
  for (size_t i = 1; i < set_.names.size(); i += 8) {
    const std::string& name = set_.names[i];
    const std::string cmd = nnmask + " " + model_path() + " " +
                            nn_test::asset("fidelity/frames/" + name + ".png") + " -d cpu -o " + out +
                            " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const cv::Mat gray = cv::imread(out, cv::IMREAD_GRAYSCALE);
    ASSERT_FALSE(gray.empty()) << out;
    cv::Mat ours;
    gray.convertTo(ours, CV_32F, 1.0 / 255.0);
    const cv::Mat ref = reference(name);
    ASSERT_EQ(ours.size(), ref.size());
    const Agreement a = compare(ours, ref);
    EXPECT_GE(a.iou, kIouTarget) << "frame " << name;
    EXPECT_LE(a.mad, 5e-4) << "frame " << name;
  }
}

// sampling=area is really another front end (the option is not ignored): its masks differ
// from MediaPipe's by far more than GRAY8 rounding on these frames.
TEST_F(FidelityTest, AreaSamplingIsAnotherFrontEnd) {
  double worst_mad = 0;
  for (size_t i = 0; i < set_.names.size(); i += 4) {
    const cv::Mat ours = element_mask(frame(set_.names[i]), "sampling=area");
    const cv::Mat ref = reference(set_.names[i]);
    ASSERT_EQ(ours.size(), ref.size());
    worst_mad = std::max(worst_mad, compare(ours, ref).mad);
  }
  EXPECT_GT(worst_mad, 0.005);
}

}  // namespace

NN_GST_TEST_MAIN()
