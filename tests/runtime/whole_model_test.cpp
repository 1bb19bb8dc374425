// Whole published models: the CPU delegate (1 and 2 threads, AVX-512 and AVX2 kernels) against the
// reference kernels on the same seeded input, relative error <= 1e-4 (floored at 1% of
// the output range, see runtime_test_util.h), or twice the model's own float32 sensitivity
// where that is larger (the reference models, whose batch-norm statistics come from photos:
// PyTorch float32 vs float64 in this measure, MobileNetV2 1.6e-4, LR-ASPP 3.5e-4). Also checks that every op of these models
// lowers to XNNPACK (none silently left on the slow reference kernels).
#include <gtest/gtest.h>

#include <cstdlib>

#include "nn/import/import.h"
#include "runtime_test_util.h"

namespace {

class WholeModel : public ::testing::TestWithParam<const char*> {};

double tolerance(const std::string& model) {
  if (model == "mobilenet_v2.onnx") return 3.2e-4;
  if (model == "lraspp_mobilenet_v3_large.onnx") return 7e-4;
  return 1e-4;
}

TEST_P(WholeModel, CpuMatchesReference) {
  const std::string rel = std::string("models/") + GetParam();
  if (!nn_test::require_asset(rel)) return;
  auto loaded = nn::load_model(nn_test::asset(rel));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  std::shared_ptr<nn::Model> model = std::move(loaded).value();

  nn::SessionOptions profiled;
  profiled.delegates = {"cpu"};
  profiled.profile = true;
  auto c = nn_test::compare_with_reference(model, profiled);
  const double tol = tolerance(GetParam());
  EXPECT_LE(c.max_rel_error, tol) << "max |expected| " << c.max_abs_expected;
  EXPECT_EQ(nn_test::count_steps(c, "[reference]"), 0) << nn_test::step_labels(c);

  nn::SessionOptions fast;
  fast.delegates = {"cpu"};
  fast.threads = 2;
  auto c2 = nn_test::compare_with_reference(model, fast);
  EXPECT_LE(c2.max_rel_error, tol) << "max |expected| " << c2.max_abs_expected;

  // The AVX2 micro-kernels as well, which CPUs without AVX-512 run (a no-op rerun there).
  fast.cpu.avx512 = false;
  auto c3 = nn_test::compare_with_reference(model, fast);
  EXPECT_LE(c3.max_rel_error, tol) << "AVX2 kernels, max |expected| " << c3.max_abs_expected;
}

INSTANTIATE_TEST_SUITE_P(Assets, WholeModel,
                         ::testing::Values("selfie_segmentation.tflite",
                                           "selfie_segmentation_landscape.tflite", "mobilenet_v2.onnx",
                                           "lraspp_mobilenet_v3_large.onnx"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// The denoiser's GRU is an extension op: it runs on the reference kernels inside the CPU
// delegate while its dense neighbours lower to XNNPACK; the result still matches.
TEST(WholeModelMixed, GruDenoiseMatchesReference) {
  const std::string rel = "models/gru_denoise.onnx";
  if (!nn_test::require_asset(rel)) return;
  auto loaded = nn::load_model(nn_test::asset(rel));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  nn::SessionOptions o;
  o.delegates = {"cpu"};
  o.profile = true;
  auto c = nn_test::compare_with_reference(std::move(loaded).value(), o);
  EXPECT_LE(c.max_rel_error, 1e-4) << "max |expected| " << c.max_abs_expected;
  EXPECT_GE(nn_test::count_steps(c, "NNPIPE_GRU [reference]"), 1) << nn_test::step_labels(c);
}

}  // namespace
