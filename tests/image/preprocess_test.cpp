// nn::image, the one front end: the normalisation rule (one mean for every channel), the
// quantisation rounding, MediaPipe's corner-aligned sampling, the model's own sampling from
// its metadata, the CLIs' image_to_input agreeing with it, and errors for bad input.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "nn/format/nnapi_file.h"
#include "nn/image/preprocess.h"
#include "nn/import/import.h"
#include "tensor_io.h"
#include "test_support.h"

namespace {

using nn::OperandType;
using nn::image::InputEncoding;
using nn::image::Sampling;

// A model with one [1,h,w,3] input of `type` (no ops: the front end reads only the input).
nn::Model image_model(int w, int h, OperandType type = OperandType::TENSOR_FLOAT32, float scale = 0.f,
                      int32_t zero_point = 0) {
  nn::Model m;
  nn::Operand in;
  in.type = type;
  in.dims = {1, static_cast<uint32_t>(h), static_cast<uint32_t>(w), 3};
  in.scale = scale;
  in.zero_point = zero_point;
  m.inputs.push_back(m.add_operand(in));
  return m;
}

nn::image::ImageView view(const cv::Mat& m) {
  return {m.data, m.cols, m.rows, m.step[0], m.channels()};
}

// One mean / std value is every channel's (the CLIs once applied it to channel 0 only).
TEST(ImagePreprocess, OneMeanValueIsEveryChannel) {
  nn::Model m = image_model(4, 3);
  m.metadata.input_mean = {127.5f};
  m.metadata.input_std = {127.5f};
  auto e = InputEncoding::for_input(m);
  NN_ASSERT_OK(e.status());
  const cv::Mat rgb(3, 4, CV_8UC3, cv::Scalar(100, 150, 200));
  std::vector<float> t(4 * 3 * 3);
  NN_ASSERT_OK(nn::image::encode(view(rgb), false, e.value(), {0, 0, 4, 3}, t.data()));
  for (size_t i = 0; i < t.size(); i += 3) {
    EXPECT_FLOAT_EQ(t[i + 0], (100 - 127.5f) / 127.5f);
    EXPECT_FLOAT_EQ(t[i + 1], (150 - 127.5f) / 127.5f);
    EXPECT_FLOAT_EQ(t[i + 2], (200 - 127.5f) / 127.5f);
  }
  // Three values: one per channel, in the model's channel order; no metadata: [0, 1].
  m.metadata.input_mean = {10.f, 20.f, 30.f};
  m.metadata.input_std = {1.f, 2.f, 4.f};
  m.metadata.input_color = "BGR";
  e = InputEncoding::for_input(m);
  NN_ASSERT_OK(e.status());
  NN_ASSERT_OK(nn::image::encode(view(rgb), false, e.value(), {0, 0, 4, 3}, t.data()));
  EXPECT_FLOAT_EQ(t[0], (200 - 10.f) / 1.f);  // blue first
  EXPECT_FLOAT_EQ(t[1], (150 - 20.f) / 2.f);
  EXPECT_FLOAT_EQ(t[2], (100 - 30.f) / 4.f);
  e = InputEncoding::for_input(image_model(4, 3));
  NN_ASSERT_OK(e.status());
  NN_ASSERT_OK(nn::image::encode(view(rgb), false, e.value(), {0, 0, 4, 3}, t.data()));
  EXPECT_FLOAT_EQ(t[0], 100 / 255.f);
}

// The CLIs' image_to_input is the same front end: same tensor as nn::image for a model
// with a one-value mean (where the two copies of the rule once disagreed).
TEST(ImagePreprocess, ToolsImageToInputIsTheHelper) {
  ASSERT_TRUE(nn_test::require_asset("media/messi5.jpg"));
  nn::Model m = image_model(64, 48);
  m.metadata.input_mean = {127.5f};
  m.metadata.input_std = {127.5f};
  std::vector<float> tools(64 * 48 * 3), helper(tools.size());
  const std::string path = nn_test::asset("media/messi5.jpg");
  NN_ASSERT_OK(nn::tools::image_to_input(path, m, 0, tools.data()));
  const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
  auto e = InputEncoding::for_input(m);
  NN_ASSERT_OK(e.status());
  NN_ASSERT_OK(nn::image::image_to_tensor(view(bgr), true, e.value(), Sampling::kArea, helper.data()));
  EXPECT_EQ(tools, helper);
  // And the rule itself, independently: channel 2 (blue) of pixel 0 from OpenCV's INTER_AREA.
  cv::Mat small;
  cv::resize(bgr, small, cv::Size(64, 48), 0, 0, cv::INTER_AREA);
  EXPECT_FLOAT_EQ(tools[2], (small.at<cv::Vec3b>(0, 0)[0] - 127.5f) / 127.5f);
  EXPECT_FLOAT_EQ(tools[0], (small.at<cv::Vec3b>(0, 0)[2] - 127.5f) / 127.5f);
}

// Quantized inputs round half away from zero (the engine's QUANTIZE rule), then clamp.
TEST(ImagePreprocess, QuantizedRoundsHalfAwayFromZero) {
  nn::Model u8 = image_model(1, 1, OperandType::TENSOR_QUANT8_ASYMM, 2.f, 10);
  u8.metadata.input_mean = {0.f};
  u8.metadata.input_std = {1.f};
  auto e = InputEncoding::for_input(u8);
  NN_ASSERT_OK(e.status());
  float storage[3];  // put() also has a float path: give it room so the compiler sees no overrun
  auto* q = reinterpret_cast<uint8_t*>(storage);
  e.value().put(q, 0, 0, 5.f);    // 2.5 -> 3 (nearbyint would give 2)
  e.value().put(q, 1, 1, 255.f);  // 127.5 -> 128, + 10 -> 138
  e.value().put(q, 2, 2, 0.f);
  EXPECT_EQ(q[0], 13);
  EXPECT_EQ(q[1], 138);
  EXPECT_EQ(q[2], 10);
  nn::Model s8 = image_model(1, 1, OperandType::TENSOR_QUANT8_ASYMM_SIGNED, 2.f, 0);
  s8.metadata.input_mean = {6.f};
  s8.metadata.input_std = {1.f};
  e = InputEncoding::for_input(s8);
  NN_ASSERT_OK(e.status());
  auto* s = reinterpret_cast<int8_t*>(storage);
  e.value().put(s, 0, 0, 1.f);    // -2.5 -> -3
  e.value().put(s, 1, 0, 255.f);  // 124.5 -> 125
  EXPECT_EQ(s[0], -3);
  EXPECT_EQ(s[1], 125);
}

// MediaPipe's ImageToTensor samples input pixel i at frame x = i * W / w (corner-aligned),
// bilinearly, with no averaging: on a ramp v(x) = x shrunk 4x, pixel i reads 4 i exactly,
// where area averaging and a centred bilinear resize read 4 i + 1.5.
TEST(ImagePreprocess, MediaPipeSamplingIsCornerAligned) {
  cv::Mat ramp(16, 256, CV_8UC3);
  for (int y = 0; y < ramp.rows; ++y)
    for (int x = 0; x < ramp.cols; ++x) ramp.at<cv::Vec3b>(y, x) = cv::Vec3b(x, x, y * 16);
  cv::Mat mp(4, 64, CV_8UC3), area(4, 64, CV_8UC3);
  NN_ASSERT_OK(nn::image::resample(view(ramp), Sampling::kMediaPipe, 64, 4, mp.data, mp.step[0]));
  NN_ASSERT_OK(nn::image::resample(view(ramp), Sampling::kArea, 64, 4, area.data, area.step[0]));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(mp.at<cv::Vec3b>(0, i)[0], 4 * i) << i;
    EXPECT_EQ(area.at<cv::Vec3b>(0, i)[0], 4 * i + 2) << i;  // 4 i + 1.5, rounded
  }
  for (int j = 0; j < 4; ++j) EXPECT_EQ(mp.at<cv::Vec3b>(j, 0)[2], 4 * j * 16) << j;
  // A non-integer factor (720 -> 256): x = i * 720 / 256, to OpenCV's 1/32-pixel steps.
  cv::Mat wide(4, 720, CV_8UC1);
  for (int x = 0; x < 720; ++x) wide.col(x).setTo(x / 3);
  cv::Mat out(4, 256, CV_8UC1);
  NN_ASSERT_OK(nn::image::resample(view(wide), Sampling::kMediaPipe, 256, 4, out.data, out.step[0]));
  for (int i = 0; i < 256; ++i) {
    const double x = i * 720.0 / 256.0, x0 = std::floor(x);
    const double expected = (static_cast<int>(x0) / 3) * (1 - (x - x0)) +
                            (std::min(719, static_cast<int>(x0) + 1) / 3) * (x - x0);
    EXPECT_NEAR(out.at<uint8_t>(0, i), expected, 0.6) << i;
  }
}

// The model's own sampling comes from its metadata: MediaPipe's for its selfie models.
TEST(ImagePreprocess, DefaultSamplingFromMetadata) {
  ASSERT_TRUE(nn_test::require_asset("models/selfie_segmentation.tflite"));
  auto selfie = nn::load_model(nn_test::asset("models/selfie_segmentation.tflite"));
  NN_ASSERT_OK(selfie.status());
  EXPECT_EQ(nn::image::default_sampling(selfie.value()->metadata), Sampling::kMediaPipe);
  EXPECT_EQ(nn::image::default_sampling(nn::Metadata{}), Sampling::kArea);
  // Kept through .nnapi conversion; and a file converted before the key existed still
  // names the model in its TFLite description.
  const std::string converted =
      (std::filesystem::temp_directory_path() / "nn_selfie_sampling.nnapi").string();
  NN_ASSERT_OK(nn::save_nnapi_file(*selfie.value(), converted));
  auto reloaded = nn::load_model(converted);
  std::remove(converted.c_str());
  NN_ASSERT_OK(reloaded.status());
  EXPECT_EQ(nn::image::default_sampling(reloaded.value()->metadata), Sampling::kMediaPipe);
  nn::Metadata old_file = selfie.value()->metadata;
  old_file.extra.erase(nn::image::kSamplingMetadataKey);
  EXPECT_EQ(nn::image::default_sampling(old_file), Sampling::kMediaPipe);
  ASSERT_TRUE(nn_test::require_asset("models/lraspp_mobilenet_v3_large.onnx"));
  auto lraspp = nn::load_model(nn_test::asset("models/lraspp_mobilenet_v3_large.onnx"));
  NN_ASSERT_OK(lraspp.status());
  EXPECT_EQ(nn::image::default_sampling(lraspp.value()->metadata), Sampling::kArea);
  EXPECT_EQ(nn::image::parse_sampling("mediapipe"), Sampling::kMediaPipe);
  EXPECT_EQ(nn::image::parse_sampling("area"), Sampling::kArea);
  EXPECT_FALSE(nn::image::parse_sampling("bicubic").has_value());
}

TEST(ImagePreprocess, BadInputIsAnError) {
  nn::Model m = image_model(4, 4);
  nn::image::EncodingOverrides o;
  o.mean = {1.f, 2.f};
  o.mean_name = "input-mean";
  auto e = InputEncoding::for_input(m, 0, o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().code(), nn::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("input-mean"), std::string::npos) << e.status().to_string();
  m.metadata.input_std = {0.f};
  e = InputEncoding::for_input(m);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("metadata"), std::string::npos) << e.status().to_string();
  nn::Model not_image = image_model(4, 4);
  not_image.operands[not_image.inputs[0]].dims = {1, 4, 4, 1};
  EXPECT_EQ(InputEncoding::for_input(not_image).status().code(), nn::StatusCode::kInvalidModel);
  EXPECT_EQ(InputEncoding::for_input(m, 3).status().code(), nn::StatusCode::kInvalidArgument);
  uint8_t out[12];
  EXPECT_FALSE(nn::image::resample({}, Sampling::kMediaPipe, 2, 2, out, 6).is_ok());
  const cv::Mat rgb(4, 4, CV_8UC3, cv::Scalar(1, 2, 3));
  EXPECT_FALSE(nn::image::resample(view(rgb), Sampling::kArea, 2, 2, out, 2).is_ok());  // stride too small
  auto ok = InputEncoding::for_input(image_model(4, 4));
  NN_ASSERT_OK(ok.status());
  std::vector<float> t(48);
  EXPECT_FALSE(nn::image::encode(view(rgb), false, ok.value(), {1, 1, 4, 4}, t.data()).is_ok());  // outside
  // A missing image file names the file.
  nn::Model float_model = image_model(4, 4);
  const nn::Status s = nn::tools::image_to_input("/nonexistent/x.png", float_model, 0, t.data());
  EXPECT_EQ(s.code(), nn::StatusCode::kIoError);
  EXPECT_NE(s.message().find("/nonexistent/x.png"), std::string::npos);
}

}  // namespace
