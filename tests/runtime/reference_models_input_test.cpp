// The reference models of scripts/make_reference_models.py answer to their input: the
// golden input, all zeros and another seeded input give clearly different outputs, on the
// reference kernels and on the CPU delegate. (With default batch-norm statistics they gave
// the same output within 1.2e-7, so a bug in input handling would have passed the golden
// check.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "npy.h"
#include "tensor_io.h"
#include "test_support.h"

namespace {

// max |a - b| / max |b|
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, peak = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    peak = std::max(peak, std::fabs(double(b[i])));
  }
  return peak > 0 ? diff / peak : diff;
}

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, OutputChangesWithInput) {
  const std::string name = GetParam();
  const std::string model_path = "models/" + name + ".onnx", in_path = "golden/" + name + "/input_0.npy";
  if (!nn_test::require_asset(model_path) || !nn_test::require_asset(in_path)) return;
  auto model = nn::import_onnx_file(nn_test::asset(model_path));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto golden_in = nn::tools::read_npy(nn_test::asset(in_path));
  ASSERT_TRUE(golden_in.is_ok()) << golden_in.status().to_string();
  const nn::Model& m = **model;
  const nn::Operand& in = m.operands[m.inputs[0]];
  const size_t n = nn::num_elements(in.dims);

  std::vector<std::vector<float>> inputs(3, std::vector<float>(n));
  NN_ASSERT_OK(nn::tools::npy_to_input(*golden_in, in, m.metadata.input_source_layouts[0], inputs[0].data()));
  // inputs[1]: zeros; inputs[2]: another input in the golden input's range
  float lo = inputs[0][0], hi = inputs[0][0];
  for (float v : inputs[0]) lo = std::min(lo, v), hi = std::max(hi, v);
  inputs[2] = nn_test::random_floats(n, 99, lo, hi);

  for (const char* delegate : {"reference", "cpu"}) {
    SCOPED_TRACE(std::string(delegate) + " " + name);
    nn::SessionOptions o;
    o.delegates = {delegate};
    auto s = nn::Session::open(*model, o);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    std::vector<std::vector<float>> outs;
    for (const auto& x : inputs) {
      NN_ASSERT_OK((*s)->set_input(0, x.data(), x.size() * sizeof(float)));
      NN_ASSERT_OK((*s)->run());
      const float* y = (*s)->output_f32(0);
      outs.emplace_back(y, y + nn::num_elements((*s)->output_desc(0).dims));
    }
    // A model that hardly depends on its input differs by float noise (1e-7); these by
    // percents of their range.
    EXPECT_GT(relative_difference(outs[1], outs[0]), 1e-2) << "zeros vs the golden input";
    EXPECT_GT(relative_difference(outs[2], outs[0]), 1e-2) << "another input vs the golden input";
    EXPECT_GT(relative_difference(outs[2], outs[1]), 1e-2) << "another input vs zeros";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceModel,
                         ::testing::Values("mobilenet_v2", "lraspp_mobilenet_v3_large", "gru_denoise"));

}  // namespace
