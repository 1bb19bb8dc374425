// The NNAPI delegate through the real dlopen path of nnpipe's reference driver
// (nnapi_driver/): feature level from the symbols, each failure kind falling back to the
// CPU (library missing, a symbol missing, compile fails, a run fails, a deadline missed,
// a device that takes half the ops), models and compilations freed on every path (the
// driver counts them), the compilation cache, and selfie / MobileNetV2 / LR-ASPP on
// -d nnapi equal to the CPU delegate.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "delegates/nnapi/nnapi_api.h"
#include "nn/import/import.h"
#include "nn/runtime/session.h"
#include "nnapi/NeuralNetworks.h"
#include "test_support.h"

namespace {

using nn::nnapi::load_api;
using nn::nnapi::set_api_for_testing;

const std::string kDriverDir = NN_NNAPI_DRIVER_DIR;

std::shared_ptr<nn::Model> load(const std::string& asset) {
  auto m = nn::load_model(nn_test::asset(asset));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

struct RunResult {
  std::vector<std::vector<float>> outputs;
  nn::PlanReport report;
  uint64_t fallbacks = 0;
};

// Opens a session, runs it `runs` times on one seeded input, keeps the last outputs.
RunResult run(const std::shared_ptr<nn::Model>& model, std::vector<std::string> delegates, int runs = 1,
        double budget_ms = 0) {
  nn::SessionOptions options;
  options.delegates = std::move(delegates);
  options.budget_ms = budget_ms;
  options.log = [](const std::string&) {};
  RunResult r;
  auto opened = nn::Session::open(model, options);
  EXPECT_TRUE(opened.is_ok()) << opened.status().to_string();
  if (!opened.is_ok()) return r;
  auto& session = *opened;
  for (size_t k = 0; k < session->num_inputs(); ++k) {
    std::vector<float> in =
        nn_test::random_floats(nn::num_elements(session->input_desc(k).dims), 11 + static_cast<uint32_t>(k), 0.f, 1.f);
    EXPECT_TRUE(session->set_input(k, in.data(), in.size() * 4).is_ok());
  }
  for (int i = 0; i < runs; ++i) {
    nn::Status s = session->run();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  for (size_t k = 0; k < session->num_outputs(); ++k) {
    const float* o = session->output_f32(k);
    r.outputs.emplace_back(o, o + nn::num_elements(session->output_desc(k).dims));
  }
  r.report = session->report();
  r.fallbacks = session->runtime_fallbacks();
  return r;
}

// Worst error relative to each output's largest magnitude.
double max_error(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(a.outputs.size(), b.outputs.size());
  double worst = 0;
  for (size_t k = 0; k < std::min(a.outputs.size(), b.outputs.size()); ++k) {
    double scale = 1e-6;
    for (float v : b.outputs[k]) scale = std::max(scale, double(std::fabs(v)));
    for (size_t i = 0; i < b.outputs[k].size(); ++i)
      worst = std::max(worst, std::fabs(double(a.outputs[k][i]) - b.outputs[k][i]) / scale);
  }
  return worst;
}

int ops_on(const RunResult& r, const std::string& delegate) {
  int n = 0;
  for (const auto& op : r.report.ops) n += op.delegate == delegate;
  return n;
}

class NnapiDriver : public ::testing::Test {
 protected:
  void SetUp() override { use_driver(30); }
  void TearDown() override {
    // Every session is gone: nothing the delegate made may be left in the driver.
    if (api_) {
      NnpipeDriverCounters c = counters();
      EXPECT_EQ(c.live_models, 0);
      EXPECT_EQ(c.live_compilations, 0);
      EXPECT_EQ(c.live_executions, 0);
      EXPECT_EQ(c.live_bursts, 0);
      EXPECT_EQ(c.live_events, 0);
    }
    set_api_for_testing(nullptr);
    for (const char* v : {"NNPIPE_NNAPI_ACCEL", "NN_NNAPI_DEVICES", "NN_NNAPI_CACHE_DIR"}) unsetenv(v);
  }
  void use_driver(int level) {
    std::string why;
    api_ = load_api(kDriverDir + "/fl" + std::to_string(level) + "/libneuralnetworks.so", &why);
    ASSERT_TRUE(api_) << why;
    set_api_for_testing(api_);
  }
  NnpipeDriverCounters counters() const {
    auto get = reinterpret_cast<void (*)(NnpipeDriverCounters*)>(dlsym(api_->library.get(), "NnpipeDriver_getCounters"));
    NnpipeDriverCounters c{};
    if (get) get(&c);
    return c;
  }
  std::shared_ptr<const nn::nnapi::Api> api_;
};

TEST_F(NnapiDriver, FeatureLevelFromTheSymbolsPresent) {
  for (int level : {27, 29, 30}) {
    std::string why;
    auto api = load_api(kDriverDir + "/fl" + std::to_string(level) + "/libneuralnetworks.so", &why);
    ASSERT_TRUE(api) << why;
    EXPECT_EQ(api->feature_level, level);
    EXPECT_EQ(api->ANeuralNetworksExecution_compute != nullptr, level >= 29);
    EXPECT_EQ(api->ANeuralNetworks_getRuntimeFeatureLevel != nullptr, level >= 30);
  }
}

TEST_F(NnapiDriver, LibraryMissingIsSaidAndStrictMakesItAnError) {
  std::string why;
  EXPECT_FALSE(load_api("/nonexistent/libneuralnetworks.so", &why));
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
  api_.reset();
  set_api_for_testing(nullptr);
  setenv("NN_NNAPI_LIBRARY", "/nonexistent/libneuralnetworks.so", 1);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult r = run(model, {"nnapi"});
  EXPECT_EQ(ops_on(r, "cpu"), static_cast<int>(model->operations.size()));
  ASSERT_EQ(r.report.missing_requested().size(), 1u);
  EXPECT_NE(r.report.missing_requested()[0].find("nnapi: /nonexistent/libneuralnetworks.so not found"), std::string::npos)
      << r.report.missing_requested()[0];
  nn::SessionOptions strict;
  strict.delegates = {"nnapi"};
  strict.strict_delegates = true;
  auto opened = nn::Session::open(model, strict);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(opened.status().code(), nn::StatusCode::kDelegateUnavailable);
  // "auto" passing over a missing NNAPI is no error, strict or not.
  strict.delegates = {"auto"};
  EXPECT_TRUE(nn::Session::open(model, strict).is_ok());
  unsetenv("NN_NNAPI_LIBRARY");
}

TEST_F(NnapiDriver, ALibraryMissingASymbolIsRefusedByName) {
  std::string why;
  EXPECT_FALSE(load_api(std::string(NN_TEST_LIB_DIR) + "/libnnapi_incomplete_driver.so", &why));
  EXPECT_NE(why.find("lacks required entry points"), std::string::npos) << why;
  EXPECT_NE(why.find("ANeuralNetworksModel_finish"), std::string::npos) << why;
}

TEST_F(NnapiDriver, WholeSelfieRunsOnTheAcceleratorDevice) {
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}), cpu = run(model, {"cpu"});
  EXPECT_EQ(ops_on(nnapi, "nnapi"), static_cast<int>(model->operations.size())) << nnapi.report.to_string();
  EXPECT_LE(max_error(nnapi, cpu), 1e-5);
  ASSERT_FALSE(nnapi.report.delegate_info.empty());
  EXPECT_NE(nnapi.report.delegate_info[0].find("feature level 30"), std::string::npos);
  EXPECT_NE(nnapi.report.delegate_info[0].find("nnpipe-accel (accelerator, level 30, used)"), std::string::npos)
      << nnapi.report.delegate_info[0];
}

TEST_F(NnapiDriver, OpsAboveTheLevelAreNeverSentAndLevel27UsesEvents) {
  use_driver(27);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}), cpu = run(model, {"cpu"});
  int hard_swish_on_cpu = 0;
  for (const auto& op : nnapi.report.ops)
    if (op.type == nn::OperationType::HARD_SWISH) {
      EXPECT_EQ(op.delegate, "cpu");
      EXPECT_NE(op.fallback_reason.find("HARD_SWISH needs feature level 30 (device has 27): not sent to the driver"),
                std::string::npos)
          << op.fallback_reason;
      ++hard_swish_on_cpu;
    }
  EXPECT_GT(hard_swish_on_cpu, 0);
  EXPECT_GT(ops_on(nnapi, "nnapi"), 0);
  EXPECT_LE(max_error(nnapi, cpu), 1e-5);
}

TEST_F(NnapiDriver, ADeviceWithHalfTheOpsSplitsTheModelWithReasons) {
  setenv("NNPIPE_NNAPI_ACCEL", "ops=CONV_2D,DEPTHWISE_CONV_2D,ADD,RELU", 1);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}), cpu = run(model, {"cpu"});
  const int on_nnapi = ops_on(nnapi, "nnapi"), total = static_cast<int>(model->operations.size());
  EXPECT_GT(on_nnapi, total / 4) << nnapi.report.to_string();
  EXPECT_LT(on_nnapi, total) << nnapi.report.to_string();
  for (const auto& op : nnapi.report.ops) {
    const bool listed = op.type == nn::OperationType::CONV_2D || op.type == nn::OperationType::DEPTHWISE_CONV_2D ||
                        op.type == nn::OperationType::ADD || op.type == nn::OperationType::RELU;
    EXPECT_EQ(op.delegate, listed ? "nnapi" : "cpu") << op.op_index;
    if (!listed) {
      EXPECT_NE(op.fallback_reason.find("not supported by device nnpipe-accel"), std::string::npos) << op.fallback_reason;
    }
  }
  EXPECT_LE(max_error(nnapi, cpu), 1e-5);
}

TEST_F(NnapiDriver, CompilationFailureFallsBackAndFreesEverything) {
  setenv("NNPIPE_NNAPI_ACCEL", "fail_compile=1", 1);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}), cpu = run(model, {"cpu"});
  EXPECT_EQ(ops_on(nnapi, "cpu"), static_cast<int>(model->operations.size()));
  EXPECT_NE(nnapi.report.ops[0].fallback_reason.find("compilation failed: ANeuralNetworksCompilation_finish: "
                                                     "ANEURALNETWORKS_OP_FAILED"),
            std::string::npos)
      << nnapi.report.ops[0].fallback_reason;
  EXPECT_LE(max_error(nnapi, cpu), 1e-6);
}

TEST_F(NnapiDriver, AFailedRunIsRedoneOnTheCpuAndCounted) {
  setenv("NNPIPE_NNAPI_ACCEL", "fail_run_every=2", 1);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}, 6), cpu = run(model, {"cpu"});
  EXPECT_EQ(nnapi.fallbacks, 3u);
  EXPECT_LE(max_error(nnapi, cpu), 1e-5);
}

TEST_F(NnapiDriver, TheBudgetBecomesADeadlineAndAMissedOneFallsBack) {
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  RunResult cpu = run(model, {"cpu"});
  // The driver misses every second deadline; without a budget there is no deadline to miss.
  setenv("NNPIPE_NNAPI_ACCEL", "miss_deadline_every=2", 1);
  const int64_t missed_before = counters().missed_deadlines;
  EXPECT_EQ(run(model, {"nnapi"}, 4).fallbacks, 0u);
  EXPECT_EQ(counters().missed_deadlines, missed_before);
  RunResult budgeted = run(model, {"nnapi"}, 4, /*budget_ms=*/1000);
  EXPECT_EQ(budgeted.fallbacks, 2u);
  EXPECT_EQ(counters().missed_deadlines, missed_before + 2);
  EXPECT_LE(max_error(budgeted, cpu), 1e-5);
  // A device truly slower than the budget misses every time.
  setenv("NNPIPE_NNAPI_ACCEL", "slow_ms=20", 1);
  EXPECT_EQ(run(model, {"nnapi"}, 3, /*budget_ms=*/5).fallbacks, 3u);
}

TEST_F(NnapiDriver, CompilationsAreCachedByTheModelsSha256) {
  const std::filesystem::path dir = std::filesystem::path(NN_TEST_LIB_DIR) / "nnapi_cache_test";
  std::filesystem::remove_all(dir);
  setenv("NN_NNAPI_CACHE_DIR", dir.c_str(), 1);
  auto model = load("models/selfie_segmentation.tflite");
  ASSERT_TRUE(model);
  const NnpipeDriverCounters before = counters();
  run(model, {"nnapi"});
  EXPECT_EQ(counters().cache_writes, before.cache_writes + 1);
  EXPECT_EQ(counters().cache_hits, before.cache_hits);
  run(model, {"nnapi"});
  EXPECT_EQ(counters().cache_hits, before.cache_hits + 1);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  // A different model is a different key.
  auto other = load("models/selfie_segmentation_landscape.tflite");
  ASSERT_TRUE(other);
  run(other, {"nnapi"});
  EXPECT_EQ(counters().cache_writes, before.cache_writes + 2);
}

// Equivalence on the reference device (the engine's reference kernels inside the driver)
// against the CPU delegate (XNNPACK and native kernels): two independent implementations.
class NnapiEquivalence : public NnapiDriver, public ::testing::WithParamInterface<const char*> {};

TEST_P(NnapiEquivalence, NnapiEqualsCpu) {
  setenv("NN_NNAPI_DEVICES", "nnpipe-reference", 1);
  auto model = load(GetParam());
  ASSERT_TRUE(model);
  RunResult nnapi = run(model, {"nnapi"}), cpu = run(model, {"cpu"});
  EXPECT_EQ(ops_on(nnapi, "nnapi"), static_cast<int>(model->operations.size())) << nnapi.report.to_string();
  EXPECT_LE(max_error(nnapi, cpu), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Models, NnapiEquivalence,
                         ::testing::Values("models/selfie_segmentation.tflite", "models/mobilenet_v2.onnx",
                                           "models/lraspp_mobilenet_v3_large.onnx"));

}  // namespace
