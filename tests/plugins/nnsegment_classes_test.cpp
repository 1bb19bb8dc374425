// nnsegment with multi-class segmentation models: LR-ASPP (scripts/make_reference_models.py,
// torchvision's 21 Pascal VOC classes, NCHW). Which classes count as foreground, the input
// normalisation (mean, std, channel order), their defaults from the model's metadata, and
// model outputs that cannot be read as a mask.
#include <cmath>
#include <filesystem>

#include "nn/format/nnapi_file.h"
#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "plugin_test_util.h"

using namespace nn_gst_test;

namespace {

constexpr int kSide = 256;  // the model's input: the frame reaches it without resampling

std::string lraspp() {
  return nn_test::asset("models/lraspp_mobilenet_v3_large.onnx");
}

// ImageNet's normalisation (torchvision), in 0..255 pixel units.
const char* const kMean = "123.675,116.28,103.53";
const char* const kStd = "58.395,57.12,57.375";

// Starts "videotestsrc ! nnsegment name=seg <props> ! fakesink". Returns the error text
// (message and debug) nnsegment posted, or "" when the pipeline started.
std::string start_error(const std::string& props) {
  const std::string line = "videotestsrc num-buffers=2 ! video/x-raw,format=RGB,width=64,height=48 ! "
                           "nnsegment name=seg delegate=cpu " +
                           props + " ! fakesink";
  GError* err = nullptr;
  GstElement* pipe = gst_parse_launch(line.c_str(), &err);
  EXPECT_NE(pipe, nullptr) << (err ? err->message : "");
  if (!pipe) return "parse failed";
  GstBus* bus = gst_element_get_bus(pipe);
  std::string text;
  if (gst_element_set_state(pipe, GST_STATE_PAUSED) == GST_STATE_CHANGE_FAILURE) {
    GstMessage* msg = gst_bus_timed_pop_filtered(bus, 5 * GST_SECOND, GST_MESSAGE_ERROR);
    EXPECT_NE(msg, nullptr) << "state change failed without an error message";
    if (msg) {
      GError* e = nullptr;
      gchar* debug = nullptr;
      gst_message_parse_error(msg, &e, &debug);
      EXPECT_STREQ(GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), "seg");
      text = std::string(e->message) + "\n" + (debug ? debug : "");
      g_error_free(e);
      g_free(debug);
      gst_message_unref(msg);
    }
  }
  gst_element_set_state(pipe, GST_STATE_NULL);
  gst_object_unref(bus);
  gst_object_unref(pipe);
  return text;
}

// The mask (probabilities, threshold=0) nnsegment attaches to `rgb` given as `format`.
cv::Mat mask_for(const cv::Mat& rgb, const std::string& props, const char* format = "RGB",
                 const std::string& model = lraspp()) {
  const std::string line =
      "nnsegment model=" + model + " delegate=cpu latency-budget=10000 threshold=0 " + props;
  GstHarness* h = gst_harness_new_parse(line.c_str());
  EXPECT_NE(h, nullptr) << line;
  if (!h) return {};
  gst_harness_set_src_caps_str(h, caps_string(format, rgb.cols, rgb.rows).c_str());
  GstBuffer* out = gst_harness_push_and_pull(h, make_frame(format, rgb));
  cv::Mat mask;
  if (GstNnMaskMeta* m = out ? gst_buffer_get_nn_mask_meta(out) : nullptr) mask = mask_to_mat(m);
  EXPECT_FALSE(mask.empty()) << line << ": no mask";
  if (out) gst_buffer_unref(out);
  gst_harness_teardown(h);
  return mask;
}

double max_abs_diff(const cv::Mat& a, const cv::Mat& b) {
  if (a.empty() || b.empty() || a.size() != b.size()) return INFINITY;
  double hi = 0;
  cv::minMaxLoc(cv::abs(a - b), nullptr, &hi);
  return hi;
}

class NnSegmentClassesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(nn_test::require_asset("models/lraspp_mobilenet_v3_large.onnx"));
    picture_ = test_image_rgb(kSide, kSide);
  }
  cv::Mat picture_;
};

// 21 classes and nothing saying which are foreground: an error (no silent "person = 15"),
// naming the output's shape as the model itself has it (NCHW) and the property to set.
TEST_F(NnSegmentClassesTest, MultiClassModelNeedsItsForegroundClasses) {
  const std::string text = start_error("model=" + lraspp());
  ASSERT_FALSE(text.empty()) << "a 21-class model without foreground classes started";
  EXPECT_NE(text.find("21 classes"), std::string::npos) << text;
  EXPECT_NE(text.find("[1,21,256,256]"), std::string::npos) << text;
  EXPECT_NE(text.find("classes="), std::string::npos) << text;
}

TEST_F(NnSegmentClassesTest, BadClassesAreAnError) {
  std::string text = start_error("model=" + lraspp() + " classes=21");
  EXPECT_NE(text.find("21"), std::string::npos) << text;
  EXPECT_NE(text.find("0..20"), std::string::npos) << text;
  text = start_error("model=" + lraspp() + " classes=person");
  EXPECT_NE(text.find("\"person\""), std::string::npos) << text;
  text = start_error("model=" + lraspp() + " classes=15 input-std=0");
  EXPECT_NE(text.find("input-std"), std::string::npos) << text;
  text = start_error("model=" + lraspp() + " classes=15 input-mean=1,2");
  EXPECT_NE(text.find("input-mean"), std::string::npos) << text;
}

// The mask is the softmax probability of the chosen classes: several classes add up, and
// all of them together are certain.
TEST_F(NnSegmentClassesTest, ForegroundIsTheSumOfTheChosenClasses) {
  const std::string norm = std::string(" input-mean=") + kMean + " input-std=" + kStd;
  const cv::Mat m15 = mask_for(picture_, "classes=15" + norm);
  const cv::Mat m3 = mask_for(picture_, "classes=3" + norm);
  const cv::Mat both = mask_for(picture_, "classes=3,15" + norm);
  ASSERT_EQ(m15.size(), cv::Size(kSide, kSide));
  // (The reference model's weights are random, with batch-norm statistics measured on
  // photos: a class's probability is small and moves with the input by ~1e-3. Float rounding
  // is ~1e-7, so 1e-4 apart is a difference, and a mean of 1e-4 is not an empty mask.)
  EXPECT_GT(max_abs_diff(m15, m3), 1e-4) << "different classes, different masks";
  EXPECT_GT(cv::mean(m15)[0], 1e-4);
  EXPECT_LT(max_abs_diff(both, m15 + m3), 1e-5);
  std::string all = "classes=0";
  for (int c = 1; c < 21; ++c) all += "," + std::to_string(c);
  const cv::Mat every = mask_for(picture_, all + norm);
  EXPECT_LT(max_abs_diff(every, cv::Mat::ones(every.size(), CV_32F)), 1e-5);
}

// input-mean / input-std: a uniform frame becomes a constant input tensor
// (pixel - mean) / std; the mask equals the class-15 softmax of the engine's own output
// for that tensor.
TEST_F(NnSegmentClassesTest, NormalisationIsWhatTheModelSees) {
  const cv::Vec3b px(200, 100, 50);
  const cv::Mat uniform(kSide, kSide, CV_8UC3, cv::Scalar(px[0], px[1], px[2]));
  const cv::Mat mask = mask_for(uniform, std::string("classes=15 input-mean=") + kMean + " input-std=" + kStd);
  ASSERT_FALSE(mask.empty());

  auto model = nn::load_model(lraspp());
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  nn::SessionOptions so;
  so.delegates = {"cpu"};
  auto session = nn::Session::open(std::move(model).value(), so);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  nn::Session& s = *session.value();
  const float mean[3] = {123.675f, 116.28f, 103.53f}, sd[3] = {58.395f, 57.12f, 57.375f};
  float* in = s.input_f32(0);
  for (int i = 0; i < kSide * kSide; ++i)
    for (int c = 0; c < 3; ++c) in[i * 3 + c] = (px[c] - mean[c]) / sd[c];
  ASSERT_TRUE(s.run().is_ok());
  const float* out = s.output_f32(0);  // NHWC [1,256,256,21]
  cv::Mat want(kSide, kSide, CV_32F);
  for (int i = 0; i < kSide * kSide; ++i) {
    float mx = -INFINITY, sum = 0;
    for (int c = 0; c < 21; ++c) mx = std::max(mx, out[i * 21 + c]);
    for (int c = 0; c < 21; ++c) sum += std::exp(out[i * 21 + c] - mx);
    want.at<float>(i / kSide, i % kSide) = std::exp(out[i * 21 + 15] - mx) / sum;
  }
  EXPECT_LT(max_abs_diff(mask, want), 2e-5);
  // The [0,1] default is another input, so another mask: the properties are what counted.
  EXPECT_GT(max_abs_diff(mask_for(uniform, "classes=15"), want), 1e-4);
}

// channel-order=bgr feeds the model B,G,R: an RGB frame read as BGR is the swapped frame
// read as RGB.
TEST_F(NnSegmentClassesTest, ChannelOrderSwapsWhatTheModelSees) {
  const std::string norm = std::string(" classes=15 input-mean=") + kMean + " input-std=" + kStd;
  cv::Mat swapped;
  cv::cvtColor(picture_, swapped, cv::COLOR_RGB2BGR);
  const cv::Mat as_bgr = mask_for(picture_, "channel-order=bgr" + norm);
  const cv::Mat swapped_as_rgb = mask_for(swapped, "channel-order=rgb" + norm);
  const cv::Mat as_rgb = mask_for(picture_, "channel-order=rgb" + norm);
  EXPECT_LT(max_abs_diff(as_bgr, swapped_as_rgb), 1e-6);
  EXPECT_GT(max_abs_diff(as_bgr, as_rgb), 1e-4);
}

// Without properties, the model file's metadata decides: foreground classes, mean, std and
// channel order written into a .nnapi give the same mask as the properties.
TEST_F(NnSegmentClassesTest, DefaultsComeFromTheModelMetadata) {
  auto loaded = nn::load_model(lraspp());
  ASSERT_TRUE(loaded.is_ok());
  std::shared_ptr<nn::Model> model = std::move(loaded).value();
  model->metadata.extra["foreground_classes"] = "3,15";
  model->metadata.input_mean = {123.675f, 116.28f, 103.53f};
  model->metadata.input_std = {58.395f, 57.12f, 57.375f};
  model->metadata.input_color = "BGR";
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/lraspp_with_metadata.nnapi";
  ASSERT_TRUE(nn::save_nnapi_file(*model, path).is_ok());
  const cv::Mat from_metadata = mask_for(picture_, "", "RGB", path);
  const cv::Mat from_properties = mask_for(
      picture_, std::string("classes=3,15 channel-order=bgr input-mean=") + kMean + " input-std=" + kStd);
  EXPECT_LT(max_abs_diff(from_metadata, from_properties), 1e-6);
  // Properties override the metadata.
  const cv::Mat only15 = mask_for(picture_, "classes=15", "RGB", path);
  const cv::Mat only15_props = mask_for(
      picture_, std::string("classes=15 channel-order=bgr input-mean=") + kMean + " input-std=" + kStd);
  EXPECT_LT(max_abs_diff(only15, only15_props), 1e-6);
  // Class 3's probability (~5e-3 at most on this picture) is what the two differ by.
  EXPECT_GT(max_abs_diff(only15, from_metadata), 1e-3) << "class 3 no longer added";
}

// A model whose output is no per-pixel map (here a pooled [1,3,1,1] in the model's NCHW) is
// an error naming that shape, not a 1x1 "mask".
TEST(NnSegmentModelOutput, OutputThatIsNotAMaskIsAnErrorInTheModelsLayout) {
  auto model = std::make_shared<nn::Model>();
  const uint32_t in = model->add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 8, 8, 3}, "image");
  const int32_t axes[] = {1, 2};
  const uint32_t ax = model->add_constant_i32({2}, axes);
  const uint32_t keep = model->add_scalar_i32(1);
  const uint32_t out = model->add_tensor(nn::OperandType::TENSOR_FLOAT32, {1, 1, 1, 3}, "pooled");
  model->add_operation(nn::OperationType::MEAN, {in, ax, keep}, {out});
  model->inputs = {in};
  model->outputs = {out};
  model->metadata.input_source_layouts = {"NCHW"};
  model->metadata.output_source_layouts = {"NCHW"};
  const std::string path = std::string(NN_TEST_OUT_DIR) + "/pooled_output.nnapi";
  const nn::Status saved = nn::save_nnapi_file(*model, path);
  ASSERT_TRUE(saved.is_ok()) << saved.to_string();
  const std::string text = start_error("model=" + path);
  ASSERT_FALSE(text.empty()) << "a [1,3,1,1] output was taken as a mask";
  EXPECT_NE(text.find("[1,3,1,1]"), std::string::npos) << text;
  EXPECT_NE(text.find("NCHW"), std::string::npos) << text;
}

}  // namespace

NN_GST_TEST_MAIN()
