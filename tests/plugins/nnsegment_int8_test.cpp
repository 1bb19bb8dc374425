// nnsegment takes the int8 selfie model (nnconvert --quantize int8) unchanged: float in and
// out at the model's edges, the same element, a mask that matches the float model's on a
// Megamind frame the quantization never saw.
#include <algorithm>
#include <filesystem>

#include <opencv2/videoio.hpp>

#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"
#include "nn/quantize/quantize.h"
#include "plugin_test_util.h"
#include "tensor_io.h"

using namespace nn_gst_test;

namespace {

// Megamind.avi frames at `indices` (RGB).
std::vector<cv::Mat> megamind_frames(const std::vector<int>& indices) {
  cv::VideoCapture cap(nn_test::asset("media/Megamind.avi"));
  std::vector<cv::Mat> out;
  cv::Mat bgr;
  for (int i = 0; cap.read(bgr) && out.size() < indices.size(); ++i)
    if (std::find(indices.begin(), indices.end(), i) != indices.end()) {
      cv::Mat rgb;
      cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
      out.push_back(rgb);
    }
  return out;
}

// The int8 selfie model, calibrated on frames 0, 3, ..., 87 (as bench/int8.py).
std::string int8_selfie() {
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/selfie_int8.nnapi";
  auto f = nn::load_model(model_path());
  EXPECT_TRUE(f.is_ok());
  const std::string dir = std::string(NN_TEST_OUT_DIR) + "/int8_calibration";
  std::filesystem::create_directories(dir);
  std::vector<int> idx;
  for (int i = 0; i < 90; i += 3) idx.push_back(i);
  std::vector<std::string> files;
  for (const cv::Mat& rgb : megamind_frames(idx)) {
    files.push_back(dir + "/" + std::to_string(files.size()) + ".png");
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    cv::imwrite(files.back(), bgr);
  }
  EXPECT_EQ(files.size(), 30u);
  const nn::Model& m = **f;
  auto provider = [&](size_t i, std::vector<nn::Tensor>& in) {
    return nn::tools::image_to_input(files[i], m, 0, in[0].data());
  };
  auto q = nn::quantize::quantize_model(m, files.size(), provider, {});
  EXPECT_TRUE(q.is_ok()) << q.status().to_string();
  EXPECT_TRUE(nn::save_nnapi_file(*q, path).is_ok());
  std::filesystem::remove_all(dir);
  return path;
}

// nnsegment's GRAY8 mask of one frame.
cv::Mat segment(const std::string& model, const cv::Mat& rgb) {
  const std::string line = "nnsegment model=" + model + " latency-budget=10000 output-mode=mask";
  GstHarness* h = gst_harness_new_parse(line.c_str());
  EXPECT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, caps_string("RGBx", rgb.cols, rgb.rows).c_str());
  EXPECT_EQ(gst_harness_push(h, make_frame("RGBx", rgb, 0, 33 * GST_MSECOND)), GST_FLOW_OK);
  GstBuffer* out = gst_harness_pull(h);
  EXPECT_NE(out, nullptr);
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_GRAY8, rgb.cols, rgb.rows);
  GstVideoFrame frame;
  EXPECT_TRUE(gst_video_frame_map(&frame, &info, out, GST_MAP_READ));
  cv::Mat m(rgb.rows, rgb.cols, CV_8UC1);
  for (int y = 0; y < rgb.rows; ++y)
    memcpy(m.ptr(y),
           static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0)) + y * GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
           rgb.cols);
  gst_video_frame_unmap(&frame);
  EXPECT_NE(gst_buffer_get_nn_mask_meta(out), nullptr);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
  return m;
}

TEST(NnSegmentInt8, TakesTheInt8SelfieAndMatchesTheFloatMask) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  ASSERT_TRUE(nn_test::require_asset("media/Megamind.avi"));
  const std::string int8_model = int8_selfie();
  const std::vector<cv::Mat> frames = megamind_frames({150});  // a test frame: two people
  ASSERT_EQ(frames.size(), 1u);
  const cv::Mat f = segment(model_path(), frames[0]) > 127;
  const cv::Mat q = segment(int8_model, frames[0]) > 127;
  const double inter = cv::countNonZero(f & q), uni = cv::countNonZero(f | q);
  ASSERT_GT(uni, 0.05 * f.total()) << "the frame has a person";
  EXPECT_GT(inter / uni, 0.95) << "int8 vs float mask IoU";
  std::printf("nnsegment on Megamind frame 150: int8 vs float mask IoU %.4f\n", inter / uni);
}

}  // namespace

NN_GST_TEST_MAIN()
