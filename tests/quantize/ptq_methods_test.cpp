// Post-training quantization's error-lowering methods (engine/quantize): the MSE activation
// range against the other calibration methods, adaptive weight rounding against rounding to
// nearest on each op of a small model, nnconvert's errors for bad values of their options.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "nn/ops/registry.h"
#include "nn/quantize/quantize.h"
#include "quantize/range_observer.h"
#include "quantize/rewrite.h"
#include "quantize/weight_rounding.h"
#include "test_support.h"

namespace nn {
namespace {

// The squared error of quantizing `v` to int8 over `r` (asymmetric, as rewrite_quantized does).
double int8_squared_error(const std::vector<float>& v, quantize::FloatRange r) {
  const quantize::QuantParams p = quantize::asymmetric_int8(r);
  double err = 0;
  for (float x : v) {
    const double q = std::clamp(std::round(static_cast<double>(x) / p.scale) + p.zero_point, -128.0, 127.0);
    const double d = (q - p.zero_point) * p.scale - x;
    err += d * d;
  }
  return err;
}

// Laplace-distributed values, skewed (positive side twice as wide): heavy tails whose
// extremes min/max keeps at the cost of every value's resolution.
std::vector<float> skewed_laplace(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> e(1.f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = sign(rng) ? 2.f * e(rng) : -e(rng);
  return v;
}

TEST(QuantizeMse, RangeHasTheLeastInt8ErrorOfTheMethodsAndOfAScanOfClips) {
  const std::vector<float> v = skewed_laplace(100000, 7);
  quantize::RangeObserver obs;
  for (size_t i = 0; i < v.size(); i += 25000) obs.observe(v.data() + i, 25000);
  using M = quantize::CalibrationMethod;
  const double mse = int8_squared_error(v, obs.range(M::kMse, 99.99));
  const double minmax = int8_squared_error(v, obs.range(M::kMinMax, 99.99));
  const double pct = int8_squared_error(v, obs.range(M::kPercentile, 99.99));
  const double entropy = int8_squared_error(v, obs.range(M::kEntropy, 99.99));
  const quantize::FloatRange r = obs.range(M::kMse, 99.99);
  std::printf("squared int8 error: mse [%.2f, %.2f] %.4g, minmax %.4g, percentile %.4g, entropy %.4g\n", r.lo, r.hi,
              mse, minmax, pct, entropy);
  EXPECT_LT(mse, 0.9 * minmax);
  EXPECT_LT(mse, pct);
  EXPECT_LT(mse, entropy);
  EXPECT_GT(r.hi, 1.5f * -r.lo);  // the wider side keeps a wider clip
  // A fine scan of both ends finds nothing better than 2% below it.
  double best = 1e300;
  for (float hi = 2.f; hi <= obs.max(); hi += 0.5f)
    for (float lo = 1.f; lo <= -obs.min(); lo += 0.5f) best = std::min(best, int8_squared_error(v, {-lo, hi}));
  EXPECT_LT(mse, best * 1.02) << best;
}

// conv 3x3 SAME (8 -> 12) -> depthwise 3x3 stride 2 -> FULLY_CONNECTED 5: input [1,9,7,8].
std::shared_ptr<Model> conv_dw_fc() {
  auto m = std::make_shared<Model>();
  const uint32_t x = m->add_tensor(OperandType::TENSOR_FLOAT32, {1, 9, 7, 8}, "x");
  const uint32_t f1 = m->add_constant_f32({12, 3, 3, 8}, nn_test::random_floats(12 * 72, 1, -0.5f, 0.5f), "w1");
  const uint32_t b1 = m->add_constant_f32({12}, nn_test::random_floats(12, 2, -0.2f, 0.2f), "b1");
  const uint32_t c1 = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "conv");
  m->add_operation(OperationType::CONV_2D,
                   {x, f1, b1, m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(1), m->add_scalar_i32(1)},
                   {c1});
  const uint32_t f2 = m->add_constant_f32({1, 3, 3, 12}, nn_test::random_floats(108, 3, -0.7f, 0.7f), "w2");
  const uint32_t b2 = m->add_constant_f32({12}, nn_test::random_floats(12, 4, -0.1f, 0.1f), "b2");
  const uint32_t d2 = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "dw");
  m->add_operation(OperationType::DEPTHWISE_CONV_2D,
                   {c1, f2, b2, m->add_scalar_i32(2), m->add_scalar_i32(2), m->add_scalar_i32(2),
                    m->add_scalar_i32(1), m->add_scalar_i32(0)},
                   {d2});
  const uint32_t w3 = m->add_constant_f32({5, 4 * 3 * 12}, nn_test::random_floats(5 * 144, 5, -0.1f, 0.1f), "w3");
  const uint32_t b3 = m->add_constant_f32({5}, nn_test::random_floats(5, 6), "b3");
  const uint32_t y = m->add_tensor(OperandType::TENSOR_FLOAT32, {}, "y");
  m->add_operation(OperationType::FULLY_CONNECTED, {d2, w3, b3, m->add_scalar_i32(0)}, {y});
  m->inputs = {x};
  m->outputs = {y};
  m->operands[x].lifetime = Lifetime::MODEL_INPUT;
  m->operands[y].lifetime = Lifetime::MODEL_OUTPUT;
  EXPECT_TRUE(m->validate_and_infer_shapes().is_ok());
  return m;
}

// Inputs with a mean and correlated neighbours (a smoothed image plus an offset), as a real
// layer sees: the directions rounding errors should avoid are not all alike.
std::vector<float> correlated_input(size_t n, uint32_t seed) {
  std::vector<float> v = nn_test::random_floats(n, seed, -1.f, 1.f);
  for (size_t i = n; i-- > 1;) v[i] = 0.6f * v[i] + 0.4f * v[i - 1] + 0.3f;
  return v;
}

// Op k of `m` alone, float, without activation, with `filter` (its int8 values in float,
// empty: the float filter) on `inputs`: all outputs one after another.
std::vector<float> op_outputs(const Model& m, uint32_t k, const std::vector<int8_t>& values, bool float_filter,
                              const std::vector<std::vector<float>>& inputs) {
  quantize::Ranges none, sub_ranges;
  std::vector<uint32_t> ins;
  const Model sub = quantize::extract_op(m, k, none, &sub_ranges, &ins);
  const Model one = float_filter ? quantize::without_activation(sub)
                                 : quantize::with_int8_filter_values(sub, /*per_channel=*/true, values);
  std::vector<float> all, out(num_elements(one.operands[one.outputs[0]].dims));
  for (const auto& in : inputs) {
    const void* i[] = {in.data()};
    void* o[] = {out.data()};
    EXPECT_TRUE(run_reference(one, i, o).is_ok());
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

double squared_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return s;
}

// Each op's filter rounded adaptively moves its output (on the inputs it was chosen on, and
// on others) less than rounding to nearest; each value stays within one step, at floor or
// ceil of w / scale; the result's own error figures agree with the outputs.
TEST(QuantizeAdaptiveRounding, LowersEachOpsOutputErrorAgainstRoundingToNearest) {
  const auto m = conv_dw_fc();
  for (uint32_t k = 0; k < 3; ++k) {
    SCOPED_TRACE("op " + std::to_string(k));
    const Operand& in = m->operands[m->operations[k].inputs[0]];
    std::vector<std::vector<float>> fit, held;
    for (uint32_t s = 0; s < 512; ++s) fit.push_back(correlated_input(num_elements(in.dims), 10 + s));
    for (uint32_t s = 0; s < 8; ++s) held.push_back(correlated_input(num_elements(in.dims), 50 + s));
    std::vector<const std::vector<float>*> ptrs;
    for (const auto& v : fit) ptrs.push_back(&v);
    auto r = quantize::adaptive_filter_rounding(*m, k, ptrs, /*per_channel=*/true, /*centered=*/false);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    ASSERT_FALSE(r->values.empty());
    const Operand& w = m->operands[m->operations[k].inputs[1]];
    const quantize::Int8Filter nearest =
        quantize::int8_filter(w, quantize::filter_channel_dim(m->operations[k].type, true));
    ASSERT_EQ(r->values.size(), nearest.values.size());
    size_t changed = 0;
    for (size_t i = 0; i < r->values.size(); ++i) {
      const size_t c = nearest.scales.size() > 1 ? (i / nearest.inner) % nearest.scales.size() : 0;
      const float x = w.as<float>()[i] / nearest.scales[c];
      EXPECT_TRUE(r->values[i] == std::floor(x) || r->values[i] == std::ceil(x)) << i << ": " << x;
      changed += r->values[i] != nearest.values[i];
    }
    EXPECT_EQ(changed, r->flipped);
    EXPECT_GT(changed, 0u);
    for (const auto* set : {&fit, &held}) {
      const std::vector<float> exact = op_outputs(*m, k, {}, true, *set);
      const double e_near = squared_distance(op_outputs(*m, k, nearest.values, false, *set), exact);
      const double e_adapt = squared_distance(op_outputs(*m, k, r->values, false, *set), exact);
      std::printf("op %u (%s): output squared error nearest %.4g, adaptive %.4g (x%.2f), %zu of %zu values flipped\n",
                  k, set == &fit ? "chosen on" : "held out", e_near, e_adapt, e_adapt / e_near, changed,
                  r->values.size());
      EXPECT_LT(e_adapt, (set == &fit ? 0.8 : 0.9) * e_near);
      if (set == &fit) {
        // The figures it reports (from a subsample of the patches): near the measured ratio.
        EXPECT_NEAR(r->adapted_error / r->nearest_error, e_adapt / e_near, 0.1);
      }
    }
  }
}

// An FC fitted on fewer rows than it has inputs (16 samples of an FC's 144 here, as
// MobileNetV2's classifier sees 16 of 1280): the form's shrinkage keeps the rounding from
// fitting those rows alone, so on other inputs it does no worse than rounding to nearest.
TEST(QuantizeAdaptiveRounding, FewerRowsThanInputsDoNotOverfit) {
  const auto m = conv_dw_fc();
  const uint32_t k = 2;
  const Operand& in = m->operands[m->operations[k].inputs[0]];
  std::vector<std::vector<float>> fit, held;
  for (uint32_t s = 0; s < 16; ++s) fit.push_back(correlated_input(num_elements(in.dims), 10 + s));
  for (uint32_t s = 0; s < 256; ++s) held.push_back(correlated_input(num_elements(in.dims), 500 + s));
  std::vector<const std::vector<float>*> ptrs;
  for (const auto& v : fit) ptrs.push_back(&v);
  auto r = quantize::adaptive_filter_rounding(*m, k, ptrs, /*per_channel=*/true, /*centered=*/false);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const quantize::Int8Filter nearest = quantize::int8_filter(m->operands[m->operations[k].inputs[1]], -1);
  const std::vector<float> exact = op_outputs(*m, k, {}, true, held);
  const double e_near = squared_distance(op_outputs(*m, k, nearest.values, false, held), exact);
  const double e_adapt = squared_distance(op_outputs(*m, k, r->values, false, held), exact);
  std::printf("FC fitted on 16 rows of 144 inputs, on 256 others: nearest %.4g, adaptive %.4g (x%.2f), %zu flipped\n",
              e_near, e_adapt, e_adapt / e_near, r->flipped);
  EXPECT_LE(e_adapt, 1.0 * e_near);
}

// quantize_model with adaptive rounding: the int8 model's filters hold the adapted values
// (some differ from nearest, none by more than one), the report says how many, and the
// whole model's output is no further from float than with rounding to nearest (activations'
// rounding dominates it: a few percent either way).
TEST(QuantizeAdaptiveRounding, QuantizedModelCarriesTheAdaptedFilters) {
  const auto m = conv_dw_fc();
  auto inputs = [](size_t i, std::vector<Tensor>& in) {
    const auto v = correlated_input(in[0].size(), 100 + static_cast<uint32_t>(i));
    std::copy(v.begin(), v.end(), in[0].f32());
    return Status::ok();
  };
  quantize::QuantizeOptions opt;
  opt.delegates = {"reference"};
  opt.max_op_output_error = 1;
  opt.error_samples = 256;  // rows enough for the FC's 144 inputs
  quantize::QuantizeReport near_report, adapt_report;
  auto near = quantize::quantize_model(*m, 256, inputs, opt, &near_report);
  opt.weight_rounding = quantize::WeightRounding::kAdaptive;
  auto adapt = quantize::quantize_model(*m, 256, inputs, opt, &adapt_report);
  ASSERT_TRUE(near.is_ok() && adapt.is_ok());
  ASSERT_EQ(adapt_report.quantized_ops(), 3u);
  std::printf("%s", adapt_report.to_string().c_str());
  size_t differ = 0, reported = 0;
  for (size_t i = 0; i < near->operands.size(); ++i) {
    const Operand& a = near->operands[i];
    if (a.type != OperandType::TENSOR_QUANT8_SYMM_PER_CHANNEL && !(a.is_constant() && a.name.ends_with("/int8")))
      continue;
    const Operand& b = adapt->operands[i];
    ASSERT_EQ(a.name, b.name);
    for (size_t j = 0; j < num_elements(a.dims); ++j) {
      const int d = static_cast<int>(a.as<int8_t>()[j]) - b.as<int8_t>()[j];
      EXPECT_LE(std::abs(d), 1);
      differ += d != 0;
    }
  }
  for (const auto& op : adapt_report.ops) {
    EXPECT_GT(op.rounding_error_nearest, 0);
    EXPECT_LT(op.rounding_error_adapted, op.rounding_error_nearest);
    reported += op.rounding_flipped;
  }
  EXPECT_EQ(differ, reported);
  EXPECT_NE(adapt_report.to_string().find("adaptive rounding"), std::string::npos);
  std::printf("model output error: nearest %.4f, adaptive %.4f\n", near_report.output_errors[0],
              adapt_report.output_errors[0]);
  EXPECT_LT(adapt_report.output_errors[0], 1.05 * near_report.output_errors[0]);
}

// nnconvert names a bad --weight-rounding or --calibration-method value and exits 2.
TEST(QuantizeCli, BadMethodValuesExitTwoNamingTheOption) {
  if (!nn_test::require_asset("models/selfie_segmentation.tflite")) return;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("nn_ptq_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& args, std::string* err) {
    const std::string cmd = "'" + std::string(NN_BINARY_DIR) + "/engine/nnconvert' '" +
                            nn_test::asset("models/selfie_segmentation.tflite") + "' -o '" + (dir / "q.nnapi").string() +
                            "' --quantize int8 --calibration '" + dir.string() + "' " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) err->append(buf, n);
    const int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string err;
  EXPECT_EQ(run("--weight-rounding upward", &err), 2) << err;
  EXPECT_NE(err.find("--weight-rounding upward: expected nearest or adaptive"), std::string::npos) << err;
  err.clear();
  EXPECT_EQ(run("--calibration-method mean", &err), 2) << err;
  EXPECT_NE(err.find("--calibration-method mean: expected minmax, percentile, entropy or mse"), std::string::npos)
      << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nn
