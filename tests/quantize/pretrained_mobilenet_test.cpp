// A pretrained MobileNetV2 through the ONNX importer, the CPU delegate and the int8 quantizer:
// nsfwjs's Keras MobileNetV2 (ImageNet weights in its first 98 layers, fine-tuned to 5
// classes), which scripts/fetch-assets.sh fetches from npm and scripts/convert_tfjs_keras.py
// writes as ONNX. The goldens are the converter's PyTorch rebuild of the Keras graph, itself
// equal to TensorFlow.js within 1.1e-6. Skipped when the assets are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "nn/import/import.h"
#include "nn/quantize/quantize.h"
#include "nn/runtime/session.h"
#include "npy.h"
#include "tensor_io.h"
#include "test_support.h"

namespace nn {
namespace {

constexpr const char* kModel = "models/nsfw_mobilenet_v2.onnx";
constexpr const char* kGolden = "golden/nsfw_mobilenet_v2/";
enum Class { kDrawing, kHentai, kNeutral, kPorn, kSexy };
// The golden inputs (the converter's pre-processing of assets/media photos) and where each came from.
const char* const kPhotos[][2] = {{"messi5", "media/messi5.jpg"},
                                  {"grace_hopper", "media/people/grace_hopper.jpg"},
                                  {"astronaut", "media/people/astronaut.png"},
                                  {"camera", "media/people/camera.png"},
                                  {"basketball1", "media/people/basketball1.png"}};

bool have_assets() {
  if (!std::filesystem::exists(nn_test::asset(kModel))) return false;
  for (const auto& p : kPhotos)
    if (!std::filesystem::exists(nn_test::asset(std::string(kGolden) + p[0] + "_probabilities.npy"))) return false;
  return true;
}

// The ONNX file with the pre-processing bench/int8.py gives it: RGB / 255, as nsfwjs feeds it.
std::shared_ptr<Model> load_pretrained() {
  auto m = load_model(nn_test::asset(kModel));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return nullptr;
  auto model = std::make_shared<Model>(**m);
  model->metadata.task = "classification";
  model->metadata.input_color = "RGB";
  model->metadata.input_mean = {0, 0, 0};
  model->metadata.input_std = {255, 255, 255};
  return model;
}

std::vector<float> softmax_of_run(const std::shared_ptr<const Model>& m, const std::vector<float>& x) {
  SessionOptions so;
  so.delegates = {"cpu"};
  auto s = Session::open(m, so);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  if (!s.is_ok()) return {};
  EXPECT_TRUE((*s)->set_input(0, x.data(), x.size() * 4).is_ok());
  EXPECT_TRUE((*s)->run().is_ok());
  const float* y = (*s)->output_f32(0);
  std::vector<float> p(y, y + num_elements((*s)->output_desc(0).dims));
  const float top = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (float& v : p) sum += (v = std::exp(v - top));
  for (float& v : p) v = static_cast<float>(v / sum);
  return p;
}

size_t argmax(const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); }

std::vector<float> golden_input(const Model& model, const std::string& stem) {
  auto a = tools::read_npy(nn_test::asset(std::string(kGolden) + stem + ".npy"));
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  const Operand& in = model.operands[model.inputs[0]];
  std::vector<float> x(num_elements(in.dims));
  if (a.is_ok()) {
    Status s = tools::npy_to_input(*a, in, model.metadata.input_source_layouts[0], x.data());
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return x;
}

std::vector<float> golden_probabilities(const std::string& stem) {
  auto a = tools::read_npy(nn_test::asset(std::string(kGolden) + stem + "_probabilities.npy"));
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  return a.is_ok() ? a->to_f32() : std::vector<float>{};
}

TEST(PretrainedMobileNet, FloatEqualsTheKerasRebuildAndPeopleAreNeutral) {
  if (!have_assets()) GTEST_SKIP() << "no " << nn_test::asset(kModel) << " or its goldens: run scripts/fetch-assets.sh";
  auto model = load_pretrained();
  ASSERT_TRUE(model);
  for (const auto& photo : kPhotos) {
    const std::vector<float> p = softmax_of_run(model, golden_input(*model, photo[0]));
    const std::vector<float> want = golden_probabilities(photo[0]);
    ASSERT_EQ(p.size(), 5u);
    ASSERT_EQ(want.size(), 5u);
    for (size_t c = 0; c < 5; ++c) EXPECT_NEAR(p[c], want[c], 2e-5) << photo[0] << " class " << c;
  }
  // The tools' own pre-processing of the photos: four pictures of people, dressed, are
  // Neutral (measured: grace_hopper 0.999, astronaut 0.988, camera 0.925, basketball1 0.58).
  for (size_t i = 1; i < std::size(kPhotos); ++i) {
    std::vector<float> x(num_elements(model->operands[model->inputs[0]].dims));
    NN_ASSERT_OK(tools::image_to_input(nn_test::asset(kPhotos[i][1]), *model, 0, x.data()));
    const std::vector<float> p = softmax_of_run(model, x);
    EXPECT_EQ(argmax(p), static_cast<size_t>(kNeutral)) << kPhotos[i][1];
    if (i == 1) {
      EXPECT_GT(p[kNeutral], 0.95f) << kPhotos[i][1];
    }
  }
}

TEST(PretrainedMobileNet, Int8KeepsTheFloatClassOnPhotosOutsideItsCalibration) {
  if (!have_assets() || !std::filesystem::exists(nn_test::asset("media/Megamind.avi")))
    GTEST_SKIP() << "no " << nn_test::asset(kModel) << ", its goldens or Megamind.avi: run scripts/fetch-assets.sh";
  auto model = load_pretrained();
  ASSERT_TRUE(model);
  // Calibration: Megamind frames 0, 6, ..., 84 and basketball2.png; the test: the golden photos.
  const std::string dir = (std::filesystem::temp_directory_path() / "nn_pretrained_mobilenet_calib").string();
  std::filesystem::create_directories(dir);
  std::vector<std::string> calib;
  cv::VideoCapture cap(nn_test::asset("media/Megamind.avi"));
  ASSERT_TRUE(cap.isOpened());
  cv::Mat frame;
  for (int i = 0; i < 90 && cap.read(frame); ++i) {
    if (i % 6 != 0) continue;
    calib.push_back(dir + "/f" + std::to_string(i) + ".png");
    ASSERT_TRUE(cv::imwrite(calib.back(), frame));
  }
  calib.push_back(nn_test::asset("media/people/basketball2.png"));
  ASSERT_EQ(calib.size(), 16u);
  quantize::QuantizeOptions opt;  // nnconvert --quantize int8's defaults
  quantize::QuantizeReport report;
  auto provider = [&](size_t i, std::vector<Tensor>& in) {
    return tools::image_to_input(calib[i], *model, 0, in[0].data());
  };
  auto q = quantize::quantize_model(*model, calib.size(), provider, opt, &report);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(q.is_ok()) << q.status().to_string();
  // A trained network keeps most ops int8 at the default limits (61 of 67 calibrated on photos).
  EXPECT_GE(report.quantized_ops(), 50u) << report.to_string();
  auto qm = std::make_shared<Model>(std::move(*q));
  for (const auto& photo : kPhotos) {
    const std::vector<float> x = golden_input(*model, photo[0]);
    const std::vector<float> pf = softmax_of_run(model, x);
    const std::vector<float> pq = softmax_of_run(qm, x);
    ASSERT_EQ(pq.size(), 5u);
    EXPECT_EQ(argmax(pq), argmax(pf)) << photo[0];
    for (size_t c = 0; c < 5; ++c) EXPECT_NEAR(pq[c], pf[c], 0.06) << photo[0] << " class " << c;
  }
}

}  // namespace
}  // namespace nn
